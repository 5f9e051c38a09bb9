"""The wall timer: a call as the user makes it, Python dispatch and launch included.

A device timer sees the kernels only. A user calling an op in a loop waits for the slower of
two things: the host (Python, the library's dispatch, the launch) and the device. This timer
issues ``k`` calls back to back and synchronizes once, so each sample is the time of one call
in such a loop: the device time when the device is the bottleneck, the host time when the
host is (a dispatch-bound op). The cache is warm (no flush between calls), as in a user's loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.child.timing.base import Budget, Samples, adaptive_samples, reps_for

__all__ = ["WALL_BUDGET", "WallTimer", "calls_per_sample"]

# Small: the wall time sits beside the device time and must not double the run.
WALL_BUDGET = Budget(warmup_ms=10.0, rep_ms=20.0, min_reps=10, max_reps=200, target_spread=0.05, cap_ms=200.0)
SAMPLE_MS = 1.0  # a sample spans about this long, so the one synchronize per sample is amortised
MAX_CALLS = 100


def _no_sync() -> None:
    return None


def calls_per_sample(estimate_ms: float, sample_ms: float = SAMPLE_MS, cap: int = MAX_CALLS) -> int:
    """Back-to-back calls per sample: enough to span ``sample_ms``, at least 1, at most ``cap``."""
    if estimate_ms <= 0:
        return cap
    return max(1, min(cap, math.ceil(sample_ms / estimate_ms)))


@dataclass
class WallTimer:
    synchronize: Callable[[], None] = _no_sync
    budget: Budget = field(default_factory=lambda: WALL_BUDGET)
    clock: Callable[[], float] = time.perf_counter
    name: str = "wall"

    def measure(self, fn: Callable[[], Any]) -> Samples:
        sync, clock = self.synchronize, self.clock
        sync()
        t0 = clock()
        fn()
        sync()
        estimate_ms = (clock() - t0) * 1e3
        for _ in range(reps_for(self.budget.warmup_ms, estimate_ms, 1, self.budget.max_reps)):
            fn()
        k = calls_per_sample(estimate_ms)

        def take(n: int) -> list[float]:
            out = []
            for _ in range(n):
                sync()
                t = clock()
                for _ in range(k):
                    fn()
                sync()
                out.append((clock() - t) * 1e3 / k)
            return out

        values, noisy = adaptive_samples(take, estimate_ms * k, self.budget)
        return Samples(tuple(values), self.name, noisy)
