"""An op whose candidate is a library's function, imported when it runs: `harness bisect`'s
end-to-end test puts each commit's copy of the library (``slowlib``) first on PYTHONPATH."""

from __future__ import annotations

import importlib
import math

import torch

from harness.ops.base import OpSpec


def _candidate(x: torch.Tensor) -> torch.Tensor:
    return importlib.import_module("slowlib").work(x)


def _inputs(shape, dtype, gen, device):
    return (torch.randn(shape, dtype=dtype, generator=gen, device=device),)


HARNESS_OPS = [
    OpSpec(
        id="libwork",
        baseline=lambda x: x * 2.0,
        candidate=_candidate,
        make_inputs=_inputs,
        bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
        flops=lambda shape: math.prod(shape),
        dtypes=("float32",),
        description="x * 2 by slowlib.work (bisect's end-to-end test)",
    )
]
