"""The cpu timer: wall clock around each call (the CPU backend has nothing to synchronise)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.timing.base import Budget, reps_for

__all__ = ["CpuTimer"]


@dataclass
class CpuTimer:
    budget: Budget = field(default_factory=lambda: Budget(warmup_ms=0.0, rep_ms=50.0, min_reps=3, max_reps=50))
    synchronize: Callable[[], None] = lambda: None
    name: str = "cpu"

    def measure(self, fn: Callable[[], Any]) -> list[float]:
        self.synchronize()
        t0 = time.perf_counter()
        fn()
        self.synchronize()
        estimate_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(reps_for(self.budget.warmup_ms, estimate_ms, 0, self.budget.max_reps)):
            fn()
        n = reps_for(self.budget.rep_ms, estimate_ms, self.budget.min_reps, self.budget.max_reps)
        samples = []
        for _ in range(n):
            self.synchronize()
            t = time.perf_counter()
            fn()
            self.synchronize()
            samples.append((time.perf_counter() - t) * 1e3)
        return samples
