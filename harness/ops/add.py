"""Elementwise add of two tensors of the same shape."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from harness.ops.base import Shape
from harness.ops.registry import builtin_spec


@triton.jit
def _add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # Add in fp32: exact for fp16/bf16 inputs up to one rounding, and the
    # Triton interpreter has no native bf16 arithmetic.
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (a + b).to(out_ptr.dtype.element_ty), mask=mask)


def triton_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a = a.contiguous()
    b = b.contiguous()
    out = torch.empty_like(a)
    n = a.numel()
    block = 4096
    _add_kernel[(triton.cdiv(n, block),)](a, b, out, n, BLOCK=block, num_warps=8)
    return out


def torch_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.add(a, b)


def make_inputs(shape: Shape, dtype: torch.dtype, gen: torch.Generator, device: str):
    a = torch.randn(shape, dtype=dtype, generator=gen, device=device)
    b = torch.randn(shape, dtype=dtype, generator=gen, device=device)
    return (a, b)


OP = builtin_spec(
    "add",
    baseline=torch_add,
    candidate=triton_add,
    make_inputs=make_inputs,
    bytes_moved=lambda shape, itemsize: 3 * math.prod(shape) * itemsize,
    flops=lambda shape: math.prod(shape),
)
