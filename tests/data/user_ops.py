"""An op defined outside the harness, through the public extension contract (docs/ops.md)."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from harness.ops.base import OpSpec


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x * factor).to(out_ptr.dtype.element_ty), mask=mask)


def triton_scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 256),)](x, out, n, 3.0, BLOCK=256)
    return out


def make_inputs(shape, dtype, gen, device):
    return (torch.randn(shape, dtype=dtype, generator=gen, device=device),)


HARNESS_OPS = [
    OpSpec(
        id="scale3",
        baseline=lambda x: x * 3.0,
        candidate=triton_scale,
        make_inputs=make_inputs,
        bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
        flops=lambda shape: math.prod(shape),
        dtypes=("float16", "float32"),
        description="x * 3 (a user op)",
    )
]
