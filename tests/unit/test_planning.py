from __future__ import annotations

import pytest

from harness.backends import get_backend
from harness.errors import UsageError
from harness.run.plugins import plan_plugins, resolve_timer


def test_cpu_backend_plans_interpreter_and_cpu_timer() -> None:
    plan = plan_plugins(get_backend("cpu"))
    assert plan.timer == "cpu"
    assert "harness.child.plugins.interpreter" in plan.modules
    assert "harness.child.plugins.device" not in plan.modules
    assert plan.modules[-1] == "harness.child.plugins.records"


@pytest.mark.parametrize("name", ["cuda", "musa", "rocm", "ascend"])
def test_accelerators_plan_device_plugin_and_graph_timer(name: str) -> None:
    plan = plan_plugins(get_backend(name))
    assert plan.timer == "graph"  # every accelerator backend declares graph capture
    assert "harness.child.plugins.device" in plan.modules
    assert "harness.child.plugins.interpreter" not in plan.modules
    args = plan.pytest_args()
    assert args[0] == "-p" and len(args) == 2 * len(plan.modules)
    assert any("falls back to direct" in r for r in plan.reasons)


@pytest.mark.parametrize(
    "backend, requested, expected",
    [
        ("cuda", "auto", "graph"),
        ("cuda", "direct", "direct"),
        ("cuda", "profiler", "profiler"),
        ("rocm", "profiler", "profiler"),
        ("cpu", "auto", "cpu"),
        ("cpu", "cpu", "cpu"),
        ("musa", "graph", "graph"),
    ],
)
def test_timer_selection(backend: str, requested: str, expected: str) -> None:
    assert resolve_timer(get_backend(backend), requested) == expected


@pytest.mark.parametrize(
    "backend, requested, needle",
    [
        ("cpu", "direct", "device events"),
        ("cpu", "graph", "graph capture"),
        ("musa", "profiler", "kernel profiler"),
        ("cuda", "sundial", "Unknown timer"),
    ],
)
def test_timer_refusals(backend: str, requested: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        resolve_timer(get_backend(backend), requested)
