"""The direct timer: device events around each call, with triton.testing.do_bench semantics.

Before every timed call the L2 is flushed (cold cache, the default) outside the
event pair, so the flush is not in the sample.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.child.timing.base import Budget, DeviceApi, Samples, adaptive_samples, reps_for
from harness.child.timing.flush import Flusher

__all__ = ["DirectTimer", "estimate_ms"]


def estimate_ms(api: DeviceApi, fn: Callable[[], Any], flush: Flusher | None, calls: int = 5) -> float:
    """Mean time of a few calls (flushes included when cold), for sizing warm-up and repetitions."""
    start, end = api.event(), api.event()
    api.synchronize()
    start.record()
    for _ in range(calls):
        if flush is not None:
            flush()
        fn()
    end.record()
    api.synchronize()
    return start.elapsed_time(end) / calls


@dataclass
class DirectTimer:
    api: DeviceApi
    flush: Flusher | None = None
    budget: Budget = field(default_factory=Budget)
    name: str = "direct"

    def measure(self, fn: Callable[[], Any]) -> Samples:
        api, flush = self.api, self.flush
        fn()
        est = estimate_ms(api, fn, flush)
        for _ in range(reps_for(self.budget.warmup_ms, est, 1, self.budget.max_reps)):
            fn()

        def take(n: int) -> list[float]:
            starts = [api.event() for _ in range(n)]
            ends = [api.event() for _ in range(n)]
            for i in range(n):
                if flush is not None:
                    flush()
                starts[i].record()
                fn()
                ends[i].record()
            api.synchronize()
            return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]

        values, noisy = adaptive_samples(take, est, self.budget)
        return Samples(tuple(values), self.name, noisy)
