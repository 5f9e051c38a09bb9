"""An op whose inputs come from every global generator an op's code may draw from: Python's
`random`, numpy's and torch's. The first inputs an op process makes for a case are written to
$SEED_OPS_STATE/<case>.json, so two runs' draws can be compared."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import numpy
import torch

from harness.ops.base import OpSpec


def _inputs(shape, dtype, gen, device):
    x = torch.randn(shape, dtype=dtype, generator=gen, device=device)
    draws = {
        "random": [random.random() for _ in range(4)],
        "numpy": numpy.random.rand(4).tolist(),
        "torch": torch.rand(4).tolist(),
    }
    out = Path(os.environ["SEED_OPS_STATE"]) / f"{'x'.join(map(str, shape))}-{dtype}.json"
    if not out.exists():  # the case's first inputs, right after the case was seeded
        out.write_text(json.dumps(draws))
    return (x,)


HARNESS_OPS = [
    OpSpec(
        id="seed_draws",
        baseline=lambda x: x * 2,
        candidate=lambda x: x * 2,
        make_inputs=_inputs,
        bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
        flops=lambda shape: math.prod(shape),
        description="draws its inputs from random, numpy and torch's global generators",
        dtypes=("float32",),
    )
]
