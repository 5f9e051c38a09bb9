"""Which plugins an op's pytest process loads: a pure function of the backend's capabilities."""

from __future__ import annotations

from dataclasses import dataclass

from harness.backends.base import Backend

__all__ = ["PluginPlan", "plan_plugins", "resolve_timer"]

TIMER_CHOICES = ("auto", "cpu", "direct")


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
    """The timer a run uses: auto means direct (device events) on accelerators, cpu elsewhere."""
    from harness.errors import UsageError

    if requested not in TIMER_CHOICES:
        raise UsageError(f"Unknown timer {requested!r}. Timers: {', '.join(TIMER_CHOICES)}.")
    caps = backend.capabilities
    if requested == "auto":
        return "direct" if caps.device_events else "cpu"
    if requested == "direct" and not caps.device_events:
        raise UsageError(
            f"--timer direct needs device events, which backend {backend.name!r} does not have. "
            "Use --timer cpu (or auto)."
        )
    return requested


def plan_plugins(backend: Backend, requested_timer: str = "auto") -> PluginPlan:
    caps = backend.capabilities
    timer = resolve_timer(backend, requested_timer)
    modules = ["harness.plugins.session", "harness.plugins.cases", "harness.plugins.seeding"]
    reasons = [
        "session: loads the child spec and the op",
        "cases: one pytest item per (op, provider, dtype, shape)",
        "seeding: a deterministic seed per case",
    ]
    if caps.triton_interpreter:
        modules.append("harness.plugins.interpreter")
        reasons.append("interpreter: no accelerator; Triton kernels run in the Triton interpreter")
    if caps.accelerator:
        modules.append("harness.plugins.device")
        reasons.append(f"device: pins torch to the {backend.torch_namespace} device and probes its identity")
    modules.append("harness.plugins.timing")
    reasons.append(f"timing: timer={timer}")
    modules.append("harness.plugins.records")
    reasons.append("records: one Measurement per case, appended to records.jsonl as it completes")
    return PluginPlan(modules=tuple(modules), timer=timer, reasons=tuple(reasons))
