"""A user op whose kernel goes through Triton's real Autotuner, even in the interpreter.

The autotuner cannot time anything on the CPU, so it is given a benchmarker that reports a
made-up time per config: the config whose BLOCK equals $AUTOTUNED_OPS_FAVOUR (default 32)
is the fastest. So which config a run picks is decided by its environment, and a replayed
run can be told apart from one that tuned: it keeps the recorded BLOCK whatever the
environment says. The autotuner is kept in a dict, out of sight of a scan of this module's
globals, and offered through ``harness_autotuners()``.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch
import triton
import triton.language as tl

from harness.ops.base import OpSpec

_BENCHED: dict[str, int] = {}


def _note_block(nargs: dict[str, Any]) -> None:
    _BENCHED["block"] = nargs["BLOCK"]


def _fake_bench(kernel_call: Any, quantiles: Any = None) -> list[float]:
    kernel_call()  # runs the config's pre_hook, which notes its BLOCK
    favour = int(os.environ.get("AUTOTUNED_OPS_FAVOUR", "32"))
    ms = 1.0 if _BENCHED["block"] == favour else 2.0
    return [ms, ms, ms]


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


_KERNELS = {
    "copy": triton.autotune(
        configs=[triton.Config({"BLOCK": b}, num_warps=w, pre_hook=_note_block) for b, w in ((16, 1), (32, 2), (64, 4))],
        key=["n"],
        do_bench=_fake_bench,
    )(_copy_kernel)
}


def harness_autotuners() -> list[Any]:
    return list(_KERNELS.values())


def tuned_copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _KERNELS["copy"][lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out


def make_inputs(shape, dtype, gen, device):
    return (torch.randn(shape, dtype=dtype, generator=gen, device=device),)


HARNESS_OPS = [
    OpSpec(
        id="tuned_copy",
        baseline=lambda x: x.clone(),
        candidate=tuned_copy,
        make_inputs=make_inputs,
        bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
        flops=lambda shape: 0,
        dtypes=("float32",),
        description="a copy through Triton's autotuner (test op)",
    )
]
