"""The profiler timer: kernel-only device time from the torch profiler (CUPTI/roctracer).

Each iteration is a boundary kernel (the L2 flush when cold, a one-thread
marker when warm) followed by the call; a sample is the summed duration of the
call's kernels between two boundaries. Flush and marker kernels are excluded
by name. This is the ground truth the other timers are checked against.

A call that launches no device work at all (FlagGems' resize_ to its own size: metadata only)
leaves its boundaries in the profile with nothing between them. That is read as what it is, a
sample of 0 ms per call, after one batch (``NO_DEVICE_WORK``); before, the timer failed, and the
graph timer behind it sampled both sides to the time cap without settling (1-2 s a row). A
profile without the boundaries themselves still fails: the profiler recorded nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.child.timing.base import Budget, DeviceApi, Samples, adaptive_samples, reps_for
from harness.child.timing.direct import estimate_ms
from harness.child.timing.flush import FLUSH_KERNEL_NAME, MARKER_KERNEL_NAME, Flusher, Marker

__all__ = ["NO_DEVICE_WORK", "NoDeviceWork", "ProfilerTimer", "boundaries", "kernel_samples", "warm_up"]

# The note of a side whose calls launched no device work (the profiler saw only its boundaries).
NO_DEVICE_WORK = "no device work: the profiler recorded the boundaries of {n} calls and no kernel between them"


def kernel_samples(kernels: list[tuple[str, float, float]]) -> list[float]:
    """Per-iteration kernel time (ms) from (name, start_us, duration_us) device events.

    A flush or marker kernel opens an iteration; the iteration's sample is the
    sum of the other kernels' durations until the next boundary. Kernels before
    the first boundary are ignored; iterations without kernels are dropped.
    """
    samples: list[float] = []
    current: float | None = None
    for name, _start, duration in sorted(kernels, key=lambda k: k[1]):
        if FLUSH_KERNEL_NAME in name or MARKER_KERNEL_NAME in name:
            if current:
                samples.append(current / 1e3)
            current = 0.0
        elif current is not None:
            current += duration
    if current:
        samples.append(current / 1e3)
    return samples


def boundaries(kernels: list[tuple[str, float, float]]) -> int:
    """How many flush or marker kernels (iteration boundaries) the device events hold."""
    return sum(1 for name, _start, _duration in kernels if FLUSH_KERNEL_NAME in name or MARKER_KERNEL_NAME in name)


class NoDeviceWork(Exception):
    """Every boundary of a batch was recorded and no kernel between them: ``calls`` calls that
    launched nothing on the device."""

    def __init__(self, calls: int) -> None:
        super().__init__(NO_DEVICE_WORK.format(n=calls))
        self.calls = calls


def _device_kernels(prof: Any) -> list[tuple[str, float, float]]:
    from torch.autograd import DeviceType

    found: list[tuple[str, float, float]] = []
    results = getattr(prof.profiler, "kineto_results", None)
    if results is not None:
        for ev in results.events():
            if ev.device_type() == DeviceType.CPU:
                continue
            if hasattr(ev, "start_ns"):
                start, dur = ev.start_ns() / 1e3, ev.duration_ns() / 1e3
            else:
                start, dur = float(ev.start_us()), float(ev.duration_us())
            found.append((ev.name(), start, dur))
        return found
    for ev in prof.events():  # older torch: FunctionEvents carry device kernels too
        if ev.device_type != DeviceType.CPU:
            found.append((ev.name, float(ev.time_range.start), float(ev.time_range.elapsed_us())))
    return found


def warm_up() -> float:
    """Open and close one empty device-profiler session, the seconds it took. The opening session
    of a process pays the profiler's own start (5.2 s to enter on the H200 machine, 1-7 ms later:
    docs/timing.md, "The profiler's start"); a pre-started op process pays it here, while
    held, off the device's clock. On CUDA it opens the device's context (``profiler_cost.py
    --warm-up``, H200: torch 2.11), so a held process calls it only where its imports opened the
    device already; after it the profiler still records kernels, graph replays included, and
    after later captures. On ROCm an empty roctracer session is reported to leave collection dead
    for the process, so only a backend whose ``Capabilities.profiler_warm_up`` says so is warmed."""
    import time

    from torch.profiler import ProfilerActivity, profile

    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]):
        pass
    return time.perf_counter() - start


@dataclass
class ProfilerTimer:
    api: DeviceApi
    device: str
    flush: Flusher | None = None
    budget: Budget = field(default_factory=Budget)
    name: str = "profiler"

    def measure(self, fn: Callable[[], Any]) -> Samples:
        from torch.profiler import ProfilerActivity, profile

        api = self.api
        boundary: Callable[[], None] = self.flush if self.flush is not None else Marker(self.device)
        fn()
        est = estimate_ms(api, fn, self.flush)
        for _ in range(reps_for(self.budget.warmup_ms, est, 1, self.budget.max_reps)):
            fn()
        boundary()
        api.synchronize()

        worked = False  # a batch of this measurement had kernels: a later empty one is no reading

        def take(n: int) -> list[float]:
            nonlocal worked
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(n):
                    boundary()
                    fn()
                boundary()
                api.synchronize()
            kernels = _device_kernels(prof)
            samples = kernel_samples(kernels)
            if not samples and not worked and boundaries(kernels) >= n + 1:
                raise NoDeviceWork(n)
            worked = worked or bool(samples)
            if not samples:
                raise RuntimeError(
                    "the profiler recorded no kernels for this call (is CUPTI available?); "
                    "use --timer graph or direct"
                )
            return samples

        budget = Budget(self.budget.warmup_ms, self.budget.rep_ms, self.budget.min_reps,
                        min(self.budget.max_reps, 300), self.budget.target_spread, self.budget.cap_ms)
        try:
            values, noisy = adaptive_samples(take, est, budget)
        except NoDeviceWork as nothing:  # n calls, each 0 ms on the device: a reading, and a settled one
            return Samples((0.0,) * nothing.calls, self.name, False, str(nothing))
        return Samples(tuple(values), self.name, noisy)
