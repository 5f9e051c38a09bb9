"""RMS normalisation over the last dimension of an (M, N) tensor, with weight."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from harness.ops._rows import launch_rows
from harness.ops.base import Shape
from harness.ops.registry import builtin_spec

EPS = 1e-6

# Warps of the looped kernel (best of those tried on an H200).
_LOOP_WARPS = 8


@triton.jit
def _rms_norm_block_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    M,
    N,
    stride_x,
    stride_y,
    eps,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    row0 = tl.program_id(0).to(tl.int64) * BLOCK_M
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    mask = (rows[:, None] < M) & col_ok[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(
        tl.float32
    )
    ms = tl.sum(x * x, axis=1) / N
    rstd = tl.math.rsqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    tl.store(
        y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask
    )


@triton.jit
def _rms_norm_looped_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    N,
    stride_x,
    stride_y,
    eps,
    BLOCK_N: tl.constexpr,
):
    # One row per program in BLOCK_N chunks: pass 1 sums squares per lane,
    # pass 2 scales.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    lanes = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], tl.float32)
    n_chunks = tl.cdiv(N, BLOCK_N)
    for i in range(0, n_chunks):
        cols = i * BLOCK_N + lanes
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.math.rsqrt(tl.sum(acc, axis=0) / N + eps)
    # Walk back from the last chunk: the most recently read chunks are still in L2.
    for i in range(0, n_chunks):
        cols = (n_chunks - 1 - i) * BLOCK_N + lanes
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def triton_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return launch_rows(x, (weight,), (EPS,), _rms_norm_block_kernel, _rms_norm_looped_kernel, _LOOP_WARPS)


def _torch_rms_norm_manual(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.to(xf.dtype)
    return y.to(x.dtype)


def torch_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    if hasattr(torch.nn.functional, "rms_norm"):
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, EPS)
    return _torch_rms_norm_manual(x, weight)


def make_inputs(shape: Shape, dtype: torch.dtype, gen: torch.Generator, device: str):
    _, n = shape
    x = torch.randn(shape, dtype=dtype, generator=gen, device=device)
    weight = torch.randn((n,), dtype=dtype, generator=gen, device=device)
    return (x, weight)


def _bytes(shape: Shape, itemsize: int) -> int:
    m, n = shape
    return (2 * m * n + n) * itemsize  # x read, y written, weight read


OP = builtin_spec(
    "rms_norm",
    baseline=torch_rms_norm,
    candidate=triton_rms_norm,
    make_inputs=make_inputs,
    bytes_moved=_bytes,
    # square, sum, scale, weight: about 4 operations an element
    flops=lambda shape: 4 * shape[0] * shape[1],
)
