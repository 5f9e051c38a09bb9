"""The direct timer: device events around each call, with triton.testing.do_bench semantics.

Before every timed call a flush buffer is zeroed so the call starts with a cold
L2; the flush lies outside the event pair, so it is not in the sample.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.timing.base import Budget, DeviceApi, reps_for

__all__ = ["DirectTimer", "flush_bytes"]

_MIN_FLUSH = 256 * 1024 * 1024


def flush_bytes(l2_bytes: int | None) -> int:
    """Flush buffer size: at least twice the L2, and never under 256 MiB (do_bench's size)."""
    return max(_MIN_FLUSH, 2 * (l2_bytes or 0))


@dataclass
class DirectTimer:
    api: DeviceApi
    device: str
    l2_bytes: int | None = None
    flush: bool = True
    budget: Budget = field(default_factory=Budget)
    name: str = "direct"
    _buffer: Any = None

    def _flush_buffer(self) -> Any:
        if self._buffer is None:
            import torch

            self._buffer = torch.empty(flush_bytes(self.l2_bytes), dtype=torch.int8, device=self.device)
        return self._buffer

    def measure(self, fn: Callable[[], Any]) -> list[float]:
        buf = self._flush_buffer() if self.flush else None
        api = self.api
        fn()
        api.synchronize()
        start, end = api.event(), api.event()
        start.record()
        for _ in range(5):
            if buf is not None:
                buf.zero_()
            fn()
        end.record()
        api.synchronize()
        estimate_ms = start.elapsed_time(end) / 5
        for _ in range(reps_for(self.budget.warmup_ms, estimate_ms, 1, self.budget.max_reps)):
            fn()
        n = reps_for(self.budget.rep_ms, estimate_ms, self.budget.min_reps, self.budget.max_reps)
        starts = [api.event() for _ in range(n)]
        ends = [api.event() for _ in range(n)]
        for i in range(n):
            if buf is not None:
                buf.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        api.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]
