"""Fused SwiGLU gate: silu(x[:, :N]) * x[:, N:] for an input of shape (M, 2N)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from harness.ops.base import Shape, Tolerance
from harness.ops.registry import builtin_spec


@triton.jit
def _silu_and_mul_kernel(
    x_ptr,
    y_ptr,
    M,
    N,
    stride_x,
    stride_y,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    gate_ptrs = x_ptr + rows[:, None] * stride_x + cols[None, :]
    g = tl.load(gate_ptrs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(gate_ptrs + N, mask=mask, other=0.0).to(tl.float32)
    # silu(g) = g * sigmoid(g) = g / (1 + exp(-g))
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(
        y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask
    )


def triton_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    two_n = x.shape[-1]
    n = two_n // 2
    x2 = x.view(-1, two_n)
    m = x2.shape[0]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block_n = min(triton.next_power_of_2(n), 2048)
    block_m = max(1, min(4096 // block_n, triton.next_power_of_2(m)))
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _silu_and_mul_kernel[grid](
        x2,
        y,
        m,
        n,
        x2.stride(0),
        y.stride(0),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=8,
    )
    return y.view(*x.shape[:-1], n)


def torch_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :n]) * x[..., n:]


def make_inputs(shape: Shape, dtype: torch.dtype, gen: torch.Generator, device: str):
    m, n = shape
    x = torch.randn((m, 2 * n), dtype=dtype, generator=gen, device=device)
    return (x,)


def _bytes(shape: Shape, itemsize: int) -> int:
    m, n = shape
    return 3 * m * n * itemsize  # read (M, 2N), write (M, N)


OP = builtin_spec(
    "silu_and_mul",
    baseline=torch_silu_and_mul,
    candidate=triton_silu_and_mul,
    make_inputs=make_inputs,
    bytes_moved=_bytes,
    # negate, exp, add, divide, multiply: about 5 operations an output element
    flops=lambda shape: 5 * shape[0] * shape[1],
    # The eager baseline rounds silu(x1) to the input dtype before the multiply.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "float16": Tolerance(atol=3e-3, rtol=3e-3),
        "bfloat16": Tolerance(atol=2.5e-2, rtol=2.5e-2),
    },
)
