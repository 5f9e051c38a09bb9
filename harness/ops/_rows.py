"""Launch configuration shared by the row-wise kernels (softmax, layer_norm, rms_norm)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import triton

__all__ = ["LOOP_BLOCK", "MAX_SINGLE_BLOCK", "launch_rows", "row_block_config"]

# Rows up to this length are held whole in registers (one pass over memory); longer rows use
# each op's looped kernel, which reads each row twice (the second time partly from L2), so it
# tops out near 2/3 of copy bandwidth (H200, 2026-11-29).
MAX_SINGLE_BLOCK = 32768
# Chunk length of the looped kernels (best of those tried on an H200).
LOOP_BLOCK = 8192


def row_block_config(m: int, n: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps) for a single-block row kernel over an (m, n) input."""
    block_n = triton.next_power_of_2(n)
    # Short rows: several rows per program so each program moves a useful amount.
    block_m = max(1, min(2048 // block_n, triton.next_power_of_2(m)))
    elems = block_m * block_n
    # About 16-32 elements a thread; 32 warps for the longest rows keep each
    # thread's share of the row in registers without spilling.
    num_warps = 32 if elems >= 32768 else max(4, min(16, elems // 512))
    return block_m, block_n, num_warps


def launch_rows(
    x: Any,
    params: Sequence[Any],
    consts: Sequence[Any],
    block_kernel: Any,
    looped_kernel: Any,
    loop_warps: int,
) -> Any:
    """Run a row-wise op over the last dimension of ``x`` and return its output.

    Both kernels take (x, *params, y, [m,] n, stride_x, stride_y, *consts): the single-block
    kernel with the row count, for rows up to MAX_SINGLE_BLOCK; the looped one, one program a
    row, beyond.
    """
    import torch

    x = x.contiguous()
    params = [p.contiguous() for p in params]
    n = x.shape[-1]
    x2 = x.view(-1, n)
    m = x2.shape[0]
    y = torch.empty_like(x2)
    if n <= MAX_SINGLE_BLOCK:
        block_m, block_n, num_warps = row_block_config(m, n)
        block_kernel[(triton.cdiv(m, block_m),)](
            x2, *params, y, m, n, x2.stride(0), y.stride(0), *consts,
            BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
        )
    else:
        looped_kernel[(m,)](
            x2, *params, y, n, x2.stride(0), y.stride(0), *consts,
            BLOCK_N=LOOP_BLOCK, num_warps=loop_warps,
        )
    return y.view(x.shape)
