"""Layer normalisation over the last dimension of an (M, N) tensor, with weight and bias."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from harness.ops._rows import launch_rows
from harness.ops.base import Shape
from harness.ops.registry import builtin_spec

EPS = 1e-5

# Warps of the looped kernel (best of those tried on an H200).
_LOOP_WARPS = 8


@triton.jit
def _layer_norm_block_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    M,
    N,
    stride_x,
    stride_y,
    eps,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # BLOCK_M whole rows per program, each row held in registers.
    row0 = tl.program_id(0).to(tl.int64) * BLOCK_M
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    mask = (rows[:, None] < M) & col_ok[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(
        tl.float32
    )
    mean = tl.sum(x, axis=1) / N
    xc = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(xc * xc, axis=1) / N
    rstd = tl.math.rsqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(
        y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask
    )


@triton.jit
def _layer_norm_looped_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    N,
    stride_x,
    stride_y,
    eps,
    BLOCK_N: tl.constexpr,
):
    # One row per program in BLOCK_N chunks. Pass 1: a Welford update per lane
    # (every valid lane of chunk i has seen i + 1 values), merged across lanes
    # at the end; pass 2 normalises.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    lanes = tl.arange(0, BLOCK_N)
    lane_mean = tl.zeros([BLOCK_N], tl.float32)
    lane_m2 = tl.zeros([BLOCK_N], tl.float32)
    lane_cnt = tl.zeros([BLOCK_N], tl.float32)
    n_chunks = tl.cdiv(N, BLOCK_N)
    for i in range(0, n_chunks):
        cols = i * BLOCK_N + lanes
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        inv_cnt = 1.0 / (i + 1.0)
        delta = x - lane_mean
        new_mean = lane_mean + delta * inv_cnt
        lane_m2 = tl.where(mask, lane_m2 + delta * (x - new_mean), lane_m2)
        lane_mean = tl.where(mask, new_mean, lane_mean)
        lane_cnt = tl.where(mask, lane_cnt + 1.0, lane_cnt)
    mean = tl.sum(lane_cnt * lane_mean, axis=0) / N
    dev = lane_mean - mean
    var = (tl.sum(lane_m2, axis=0) + tl.sum(lane_cnt * dev * dev, axis=0)) / N
    rstd = tl.math.rsqrt(var + eps)
    # Walk back from the last chunk: the most recently read chunks are still in L2.
    for i in range(0, n_chunks):
        cols = (n_chunks - 1 - i) * BLOCK_N + lanes
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def triton_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return launch_rows(x, (weight, bias), (EPS,), _layer_norm_block_kernel, _layer_norm_looped_kernel, _LOOP_WARPS)


def torch_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, EPS)


def make_inputs(shape: Shape, dtype: torch.dtype, gen: torch.Generator, device: str):
    _, n = shape
    x = torch.randn(shape, dtype=dtype, generator=gen, device=device)
    weight = torch.randn((n,), dtype=dtype, generator=gen, device=device)
    bias = torch.randn((n,), dtype=dtype, generator=gen, device=device)
    return (x, weight, bias)


def _bytes(shape: Shape, itemsize: int) -> int:
    m, n = shape
    return (2 * m * n + 2 * n) * itemsize  # x read, y written, weight and bias read


OP = builtin_spec(
    "layer_norm",
    baseline=torch_layer_norm,
    candidate=triton_layer_norm,
    make_inputs=make_inputs,
    bytes_moved=_bytes,
    # sum, subtract, square, sum, scale, weight, bias: about 7 operations an element
    flops=lambda shape: 7 * shape[0] * shape[1],
)
