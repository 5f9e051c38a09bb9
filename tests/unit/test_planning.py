from __future__ import annotations

import pytest

from harness.backends import get_backend
from harness.errors import UsageError
from harness.plugins.planning import plan_plugins, resolve_timer


def test_cpu_backend_plans_interpreter_and_cpu_timer() -> None:
    plan = plan_plugins(get_backend("cpu"))
    assert plan.timer == "cpu"
    assert "harness.plugins.interpreter" in plan.modules
    assert "harness.plugins.device" not in plan.modules
    assert plan.modules[-1] == "harness.plugins.records"


@pytest.mark.parametrize("name", ["cuda", "musa", "rocm", "ascend"])
def test_accelerators_plan_device_plugin_and_direct_timer(name: str) -> None:
    plan = plan_plugins(get_backend(name))
    assert plan.timer == "direct"
    assert "harness.plugins.device" in plan.modules
    assert "harness.plugins.interpreter" not in plan.modules
    args = plan.pytest_args()
    assert args[0] == "-p" and len(args) == 2 * len(plan.modules)


def test_direct_timer_refused_on_cpu() -> None:
    with pytest.raises(UsageError, match="device events"):
        resolve_timer(get_backend("cpu"), "direct")
    with pytest.raises(UsageError, match="Unknown timer"):
        resolve_timer(get_backend("cuda"), "sundial")
