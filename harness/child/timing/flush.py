"""L2 flushing between timed calls, by a Triton kernel with a name of its own.

A dedicated kernel (rather than ``tensor.zero_()``) lets the profiler timer
tell flush kernels from the op's kernels by name, and marks iteration
boundaries in a profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FLUSH_KERNEL_NAME", "MARKER_KERNEL_NAME", "Flusher", "Marker", "flush_bytes"]

FLUSH_KERNEL_NAME = "harness_l2_flush"
_MIN_FLUSH = 256 * 1024 * 1024
_BLOCK = 4096


def flush_bytes(l2_bytes: int | None) -> int:
    """Flush buffer size: at least twice the L2, and never under 256 MiB."""
    return max(_MIN_FLUSH, 2 * (l2_bytes or 0))


_kernel: Any = None


def _flush_kernel() -> Any:
    # Defined on first use: importing triton here at module import would happen before the
    # cpu backend has set TRITON_INTERPRET in some callers.
    global _kernel
    if _kernel is None:
        import triton
        import triton.language as tl

        @triton.jit
        def harness_l2_flush(ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.int32), mask=offs < n)

        _kernel = harness_l2_flush
    return _kernel


@dataclass
class Flusher:
    device: str
    l2_bytes: int | None
    _buffer: Any = None

    def __call__(self) -> None:
        import torch

        if self._buffer is None:
            self._buffer = torch.empty(flush_bytes(self.l2_bytes) // 4, dtype=torch.int32, device=self.device)
        n = self._buffer.numel()
        _flush_kernel()[((n + _BLOCK - 1) // _BLOCK,)](self._buffer, n, BLOCK=_BLOCK, num_warps=8)


MARKER_KERNEL_NAME = "harness_iter_marker"
_marker_kernel: Any = None


def _marker() -> Any:
    global _marker_kernel
    if _marker_kernel is None:
        import triton
        import triton.language as tl

        @triton.jit
        def harness_iter_marker(ptr):
            tl.store(ptr, 1)

        _marker_kernel = harness_iter_marker
    return _marker_kernel


@dataclass
class Marker:
    """A one-thread kernel that only marks an iteration boundary in a profile (warm cache)."""

    device: str
    _buffer: Any = None

    def __call__(self) -> None:
        import torch

        if self._buffer is None:
            self._buffer = torch.zeros(1, dtype=torch.int32, device=self.device)
        _marker()[(1,)](self._buffer, num_warps=1)
