"""Ops that misbehave only under graph capture, to exercise the three capture-failure classes
on a real device (docs/timing.md). On the cpu backend nothing is captured and they behave.

- capture_refuser: a host sync (torch.nonzero) that the runtime refuses while capturing;
  recoverable, so its rows fall back to the direct timer and say so.
- capture_fatal: raises the CUDA runtime's illegal-memory-access wording while capturing
  (simulated; a real illegal access would need a broken kernel); fatal, so the case fails
  and reports no latency.
- capture_poison: raises harness.errors.ContextPoisoned while capturing (simulated); its op
  process stops under the poisoned marker and the rest of the run goes on.
"""

from __future__ import annotations

import math

import torch

from harness.errors import ContextPoisoned
from harness.ops.base import OpSpec


def _capturing() -> bool:
    probe = getattr(torch.cuda, "is_current_stream_capturing", None)
    return bool(probe and torch.cuda.is_available() and probe())


def refuser(x: torch.Tensor) -> torch.Tensor:
    keep = torch.nonzero(x > 0).numel()  # host sync: not allowed while a stream captures
    return x * 2.0 + 0 * keep


def fatal(x: torch.Tensor) -> torch.Tensor:
    if _capturing():
        raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                           "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    return x * 2.0


def poison(x: torch.Tensor) -> torch.Tensor:
    if _capturing():
        raise ContextPoisoned("simulated: the capture killed the device context")
    return x * 2.0


def _inputs(shape, dtype, gen, device):
    return (torch.randn(shape, dtype=dtype, generator=gen, device=device),)


def _spec(op_id: str, candidate) -> OpSpec:
    return OpSpec(
        id=op_id,
        baseline=lambda x: x * 2.0,
        candidate=candidate,
        make_inputs=_inputs,
        bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
        flops=lambda shape: math.prod(shape),
        description="misbehaves under graph capture (test data)",
    )


HARNESS_OPS = [
    _spec("capture_refuser", refuser),
    _spec("capture_fatal", fatal),
    _spec("capture_poison", poison),
]
