"""The cpu timer: wall clock around each call (synchronising first where there is a device)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.child.timing.base import Budget, Samples, adaptive_samples, reps_for

__all__ = ["CpuTimer"]


def _no_sync() -> None:
    return None


@dataclass
class CpuTimer:
    budget: Budget = field(
        default_factory=lambda: Budget(warmup_ms=0.0, rep_ms=50.0, min_reps=3, max_reps=50,
                                       target_spread=0.05, cap_ms=200.0)
    )
    synchronize: Callable[[], None] = _no_sync
    name: str = "cpu"

    def measure(self, fn: Callable[[], Any]) -> Samples:
        self.synchronize()
        t0 = time.perf_counter()
        fn()
        self.synchronize()
        estimate_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(reps_for(self.budget.warmup_ms, estimate_ms, 0, self.budget.max_reps)):
            fn()

        def take(n: int) -> list[float]:
            out = []
            for _ in range(n):
                self.synchronize()
                t = time.perf_counter()
                fn()
                self.synchronize()
                out.append((time.perf_counter() - t) * 1e3)
            return out

        values, noisy = adaptive_samples(take, estimate_ms, self.budget)
        return Samples(tuple(values), self.name, noisy)
