"""Ops that fail on purpose, loaded through the public extension contract (--ops-module).

Each misbehaves inside its candidate, the way a broken kernel would: in the op's own
process, in the middle of a case. Tiny shapes and torch arithmetic keep them cheap.
Ops that keep state between attempts (flaky, gate) use the directory named by the
FAULT_OPS_STATE environment variable, which the parent passes through to the children.
"""

from __future__ import annotations

import ctypes
import math
import os
import subprocess
import time
from pathlib import Path

import torch

from harness.errors import ContextPoisoned
from harness.ops.base import DTYPES, OpSpec


def _state() -> Path:
    where = os.environ.get("FAULT_OPS_STATE")
    if not where:
        raise RuntimeError("fault ops that keep state need FAULT_OPS_STATE=<a writable directory>")
    return Path(where)


def _segfault(x: torch.Tensor) -> torch.Tensor:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    return x * 2


def _hang(x: torch.Tensor) -> torch.Tensor:
    # A stray process in the op's group: ending the op must end it too.
    stray = subprocess.Popen(["sleep", "3600"])
    if os.environ.get("FAULT_OPS_STATE"):
        (_state() / "hang-stray.pid").write_text(str(stray.pid))
    time.sleep(3600)
    return x * 2


def _raise(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("injected failure in the candidate")


def _nan(x: torch.Tensor) -> torch.Tensor:
    return torch.full_like(x, float("nan"))


def _exit(x: torch.Tensor) -> torch.Tensor:
    os._exit(3)


def _poison(x: torch.Tensor) -> torch.Tensor:
    raise ContextPoisoned("simulated: a graph capture invalidated the device context")


def _flaky(x: torch.Tensor) -> torch.Tensor:
    """Crashes the first time it runs in a state directory, works afterwards."""
    mark = _state() / "flaky-crashed"
    if not mark.exists():
        mark.write_text("1")
        os.kill(os.getpid(), 11)  # SIGSEGV, as a driver bug would
    return x * 2


def _gate(x: torch.Tensor) -> torch.Tensor:
    """Shapes of one element pass at once; larger ones wait until the test opens the gate."""
    if x.numel() > 1:
        (_state() / f"gate-{os.getpid()}.pid").write_text(str(os.getpid()))
        deadline = time.monotonic() + 300
        while not (_state() / "gate-open").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the gate was never opened")
            time.sleep(0.05)
    return x * 2


def _inputs(shape, dtype, gen, device):
    return (torch.randn(shape, dtype=dtype, generator=gen, device=device),)


def _op(op_id: str, candidate, description: str, dtypes: tuple[str, ...] | None = None) -> OpSpec:
    return OpSpec(
        id=op_id,
        baseline=lambda x: x * 2,
        candidate=candidate,
        make_inputs=_inputs,
        bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
        flops=lambda shape: math.prod(shape),
        description=description,
        dtypes=dtypes or DTYPES,  # None (or empty): the OpSpec default, every dtype
    )


HARNESS_OPS = [
    _op("fault_segv", _segfault, "segfaults (reads address 0)"),
    _op("fault_hang", _hang, "hangs, with a stray child process"),
    _op("fault_raise", _raise, "raises an exception"),
    _op("fault_nan", _nan, "returns NaN"),
    _op("fault_exit", _exit, "exits the interpreter with os._exit(3)"),
    _op("fault_poison", _poison, "raises ContextPoisoned (a simulated poisoned capture)"),
    _op("fault_flaky", _flaky, "segfaults on its first attempt only"),
    _op("fault_gate", _gate, "waits for the test to open a gate (interruption tests)"),
    _op("fault_fp32_only", lambda x: x * 2, "correct, but supports float32 only", dtypes=("float32",)),
]
