"""Softmax over the last dimension of an (M, N) tensor."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from harness.ops._rows import launch_rows
from harness.ops.base import Shape
from harness.ops.registry import builtin_spec

# Warps of the looped kernel (best of those tried on an H200).
_LOOP_WARPS = 16


@triton.jit
def _softmax_block_kernel(
    x_ptr,
    y_ptr,
    M,
    N,
    stride_x,
    stride_y,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # BLOCK_M whole rows per program; each row fits in BLOCK_N.
    row0 = tl.program_id(0).to(tl.int64) * BLOCK_M
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(
        x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=-float("inf")
    ).to(tl.float32)
    row_max = tl.max(x, axis=1)
    num = tl.exp(x - row_max[:, None])
    num = tl.where(mask, num, 0.0)
    inv = 1.0 / tl.sum(num, axis=1)
    y = num * inv[:, None]
    tl.store(
        y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask
    )


@triton.jit
def _softmax_looped_kernel(
    x_ptr,
    y_ptr,
    N,
    stride_x,
    stride_y,
    BLOCK_N: tl.constexpr,
):
    # One row per program, streamed in BLOCK_N chunks. Pass 1 keeps a running
    # max and rescaled sum per lane (online softmax); pass 2 normalises.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    lanes = tl.arange(0, BLOCK_N)
    # Finite floor instead of -inf so that exp(m_old - m_new) never sees inf - inf.
    run_max = tl.full([BLOCK_N], -3.0e38, tl.float32)
    run_sum = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + lanes
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(run_max, x)
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.exp(x - new_max)
        run_max = new_max
    row_max = tl.max(run_max, axis=0)
    row_sum = tl.sum(run_sum * tl.exp(run_max - row_max), axis=0)
    inv = 1.0 / row_sum
    # Walk back from the last chunk: the most recently read chunks are still in L2.
    n_chunks = tl.cdiv(N, BLOCK_N)
    for i in range(0, n_chunks):
        cols = (n_chunks - 1 - i) * BLOCK_N + lanes
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) * inv
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    return launch_rows(x, (), (), _softmax_block_kernel, _softmax_looped_kernel, _LOOP_WARPS)


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def make_inputs(shape: Shape, dtype: torch.dtype, gen: torch.Generator, device: str):
    x = torch.randn(shape, dtype=dtype, generator=gen, device=device)
    return (x,)


def _elems(shape: Shape) -> int:
    m, n = shape
    return m * n


OP = builtin_spec(
    "softmax",
    baseline=torch_softmax,
    candidate=triton_softmax,
    make_inputs=make_inputs,
    bytes_moved=lambda shape, itemsize: 2 * _elems(shape) * itemsize,
    # max, subtract, exp, sum, scale: about 5 operations an element
    flops=lambda shape: 5 * _elems(shape),
)
