"""Which plugins an op's pytest process loads, and which timer it uses: pure functions of the
backend's capabilities and the options."""

from __future__ import annotations

from dataclasses import dataclass

from harness.backends.base import Backend
from harness.errors import UsageError

__all__ = ["TIMER_CHOICES", "PluginPlan", "plan_plugins", "resolve_timer"]

TIMER_CHOICES = ("auto", "graph", "direct", "profiler", "cpu")


@dataclass(frozen=True)
class PluginPlan:
    modules: tuple[str, ...]
    timer: str
    reasons: tuple[str, ...]

    def pytest_args(self) -> list[str]:
        args: list[str] = []
        for module in self.modules:
            args += ["-p", module]
        return args


def resolve_timer(backend: Backend, requested: str) -> str:
    """auto = graph where the backend captures graphs, direct where it only has events, cpu elsewhere.

    ``HARNESS_TIMER=direct`` (read by the options layer) forces direct timing for a whole run.
    """
    if requested not in TIMER_CHOICES:
        raise UsageError(f"Unknown timer {requested!r}. Timers: {', '.join(TIMER_CHOICES)}.")
    caps = backend.capabilities
    if requested == "auto":
        if caps.graph_capture:
            return "graph"
        return "direct" if caps.device_events else "cpu"
    needs = {"direct": caps.device_events, "graph": caps.graph_capture, "profiler": caps.profiler, "cpu": True}
    if not needs[requested]:
        what = {"direct": "device events", "graph": "graph capture", "profiler": "a kernel profiler"}[requested]
        raise UsageError(
            f"--timer {requested} needs {what}, which backend {backend.name!r} does not have. "
            "Use --timer auto, or one of the timers the backend supports (`harness plugins --backend "
            f"{backend.name}` shows the plan)."
        )
    return requested


def plan_plugins(backend: Backend, requested_timer: str = "auto") -> PluginPlan:
    caps = backend.capabilities
    timer = resolve_timer(backend, requested_timer)
    modules = ["harness.child.plugins.session", "harness.child.plugins.cases", "harness.child.plugins.seeding"]
    reasons = [
        "session: loads the child spec and the op",
        "cases: one pytest item per (op, provider, dtype, shape)",
        "seeding: a deterministic seed per case",
    ]
    if caps.triton_interpreter:
        modules.append("harness.child.plugins.interpreter")
        reasons.append("interpreter: no accelerator; Triton kernels run in the Triton interpreter")
    if caps.accelerator:
        modules.append("harness.child.plugins.device")
        reasons.append(f"device: pins torch to the {backend.torch_namespace} device, probes identity and clocks")
    modules.append("harness.child.plugins.autotune")
    reasons.append("autotune: records the configs Triton's autotuners chose; seeds them with --replay-from")
    fallback = " (falls back to direct per row when a capture is refused)" if timer == "graph" else ""
    modules.append("harness.child.plugins.timing")
    reasons.append(f"timing: timer={timer}{fallback}")
    modules.append("harness.child.plugins.progress")
    reasons.append("progress: which case the op is on, for the live display and the CI heartbeat")
    modules.append("harness.child.plugins.records")
    reasons.append("records: one Measurement per case, appended to records.jsonl as it completes")
    return PluginPlan(modules=tuple(modules), timer=timer, reasons=tuple(reasons))
