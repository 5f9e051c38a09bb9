"""Ops whose kernel goes through Triton's real Autotuner in the interpreter, for the sweep tests.

The kernel is keyed on ``bucket`` (the next power of two of n), so two shapes can share a key
(100 and 120 both tune key 128), as FlagGems' rounded LibTuner keys do. The made-up benchmarker
favours BLOCK $SWEEP_OPS_FAVOUR_<shard> in sweep shard <shard> ($HARNESS_SWEEP_SHARD), else
$SWEEP_OPS_FAVOUR (default 32): two shards tuning one key then choose differently.
``swept_fail`` raises while tuning a shape of n == $SWEEP_OPS_FAIL.
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


def _favour() -> int:
    shard = os.environ.get("HARNESS_SWEEP_SHARD")
    if shard is not None and os.environ.get(f"SWEEP_OPS_FAVOUR_{shard}"):
        return int(os.environ[f"SWEEP_OPS_FAVOUR_{shard}"])
    return int(os.environ.get("SWEEP_OPS_FAVOUR", "32"))


def _fake_bench(kernel_call: Any, quantiles: Any = None) -> list[float]:
    kernel_call()
    ms = 1.0 if _BENCHED["block"] == _favour() else 2.0
    return [ms, ms, ms]


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, bucket, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


_tuned = triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w, pre_hook=_note_block) for b, w in ((16, 1), (32, 2), (64, 4))],
    key=["bucket"],
    do_bench=_fake_bench,
)(_copy_kernel)


def swept_copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _tuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, triton.next_power_of_2(n))
    return out


def swept_fail(x: torch.Tensor) -> torch.Tensor:
    if x.numel() == int(os.environ.get("SWEEP_OPS_FAIL", "-1")):
        raise RuntimeError(f"no config fits n={x.numel()}")
    return swept_copy(x)


def make_inputs(shape, dtype, gen, device):
    return (torch.randn(shape, dtype=dtype, generator=gen, device=device),)


def _spec(op_id: str, candidate: Any) -> OpSpec:
    return OpSpec(id=op_id, baseline=lambda x: x.clone(), candidate=candidate, make_inputs=make_inputs,
                  bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize, flops=lambda shape: 0,
                  dtypes=("float32",), autotuned=True, description="a copy through Triton's autotuner (test op)")


HARNESS_OPS = [_spec("swept_copy", swept_copy), _spec("swept_fail", swept_fail)]
