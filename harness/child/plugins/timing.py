"""The timer fixture: built once per op process from the timer the parent planned.

Provides the primary timer and the fallback the row switches to when a graph
capture is refused (``harness_fallback_timer``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from harness.backends.base import Backend
from harness.child.plugins.session import HarnessSession, get_session
from harness.child.timing.base import Budget, Timer, device_api
from harness.child.timing.cpu import CpuTimer
from harness.child.timing.direct import DirectTimer
from harness.child.timing.flush import Flusher
from harness.child.timing.graph import GraphTimer
from harness.child.timing.profiler import ProfilerTimer
from harness.contract import ChildSpec


@dataclass(frozen=True)
class Timers:
    primary: Timer
    fallback: Timer | None  # used for a whole row when the primary refuses (graph capture)


def rng_probe(torch_device: str, device_type: str) -> Callable[[], None] | None:
    """One random draw on ``torch_device`` under a forked RNG state (the process's random stream
    is left as it was): what the graph timer checks after a failed capture. None where the
    device's torch module keeps no generator state to fork (the graph timer's capture does not
    fork one there either): a probe that fails for want of it would end every op whose capture
    failed."""
    import torch

    module = getattr(torch, device_type, None)
    if device_type != "cpu" and not (getattr(module, "default_generators", None) and hasattr(module, "get_rng_state")):
        return None

    def probe() -> None:
        index = torch.device(torch_device).index
        with torch.random.fork_rng(devices=[] if index is None else [index], device_type=device_type):
            torch.randn(1, device=torch_device)

    return probe


def rng_keep(torch_device: str, device_type: str) -> Callable[[], Callable[[], None]] | None:
    """What the graph timer calls before each capture: it copies the device's default generator's
    state (torch's ``Generator.clone_state``) and returns what puts the copy in the generator's
    place (``graphsafe_set_state``), for after a capture that failed. On the H200 (torch 2.11) a
    failed capture left the generator's own state registered as capturing, so every later draw
    raised; with the copy put back, draws and later captures worked and the random stream went on
    where it was (benchmarks/capture_rng.py; docs/timing.md). None where the device's torch module
    keeps no default generators; a generator without the two methods gets a no-op."""
    import torch

    module = getattr(torch, device_type, None)
    generators = getattr(module, "default_generators", None) if device_type != "cpu" else None
    if not generators:
        return None
    index = torch.device(torch_device).index

    def keep() -> Callable[[], None]:
        assert generators is not None and module is not None
        generator = generators[index if index is not None else module.current_device()]
        if not (hasattr(generator, "clone_state") and hasattr(generator, "graphsafe_set_state")):
            return lambda: None
        copy = generator.clone_state()
        return lambda: generator.graphsafe_set_state(copy)

    return keep


def build_timers(session: HarnessSession) -> Timers:
    return timers_for(session.spec, session.backend, session.torch_device, session.identity.get("l2_bytes"))


def timers_for(spec: ChildSpec, backend: Backend, torch_device: str, l2_bytes: int | None,
               op_id: str | None = None) -> Timers:
    """The timers of an op process: the harness's own cases and a library's suite (whose op
    process has no HarnessSession) build them here alike. ``op_id`` is the name the capture deny
    list is keyed by (default: the spec's op)."""
    budget = Budget(warmup_ms=spec.warmup_ms, rep_ms=spec.rep_ms, cap_ms=spec.cap_ms)
    if spec.timer == "cpu":
        timer = CpuTimer(budget=Budget(warmup_ms=spec.warmup_ms, rep_ms=min(spec.rep_ms, 50.0), min_reps=3,
                                       max_reps=50, target_spread=0.05,
                                       cap_ms=min(spec.cap_ms, 200.0)))
        if backend.torch_namespace:
            timer.synchronize = device_api(backend.torch_namespace, backend.torch_extension).synchronize
        return Timers(timer, None)
    assert backend.torch_namespace is not None
    api = device_api(backend.torch_namespace, backend.torch_extension, backend.graph_class)
    flush = Flusher(torch_device, l2_bytes) if spec.cache == "cold" else None
    direct = DirectTimer(api=api, flush=flush, budget=budget)
    if spec.timer == "direct":
        return Timers(direct, None)
    if spec.timer == "graph":
        # Rows of kernels of a few microseconds are timed by the profiler (timing/graph.py says why).
        small = (ProfilerTimer(api=api, device=torch_device, flush=flush, budget=budget)
                 if backend.capabilities.profiler else None)
        return Timers(GraphTimer(api=api, backend=backend, op_id=op_id or spec.op, flush=flush, budget=budget,
                                 small_timer=small, rng_probe=rng_probe(torch_device, backend.device_type),
                                 rng_keep=rng_keep(torch_device, backend.device_type),
                                 denied=spec.capture_off, mark=spec.files.capture_mark(spec.op)), direct)
    if spec.timer == "profiler":
        return Timers(ProfilerTimer(api=api, device=torch_device, flush=flush, budget=budget), None)
    raise pytest.UsageError(f"timer {spec.timer!r} is not available in this harness version")


@pytest.fixture(scope="session")
def harness_timers(request: pytest.FixtureRequest) -> Timers:
    return build_timers(get_session(request.config))
