"""Ops that do what an adversarial user's ops do (issue 17), loaded through --ops-module.

Each is correct or wrong in a way that once lost or falsified a result: changing directory,
messages holding control characters or lone surrogates, a float64 result, a None result, inputs
that are not a tuple, an all-NaN result (rb_mixed: one behaviour per shape), leaving a process in
a session of its own (rb_setsid), hanging after pytest finished (rb_hang_exit) and a crash in a
float32-only op (rb_crash_fp32). Tiny shapes, torch arithmetic.
"""

from __future__ import annotations

import math
import os
import subprocess
import threading
import time

import torch

from harness.ops.base import OpSpec

_started: list[subprocess.Popen[bytes]] = []


def _inputs(shape, dtype, gen, device):
    return (torch.randn(shape, dtype=dtype, generator=gen, device=device),)


def _chdir(x: torch.Tensor) -> torch.Tensor:
    os.chdir("/")  # the records must still land in the run directory
    return x * 2


def _setsid(x: torch.Tensor) -> torch.Tensor:
    if not _started:  # once per process: a daemon-like stray in a session of its own
        _started.append(subprocess.Popen(["setsid", "sleep", "600"]))
        state = os.environ.get("ROBUST_OPS_STATE")
        if state:
            with open(os.path.join(state, "setsid.pid"), "w") as fh:
                fh.write(str(_started[0].pid))
    return x * 2


def _hang_at_exit(x: torch.Tensor) -> torch.Tensor:
    # A non-daemon thread that never ends: pytest finishes (its exit status is written), then the
    # interpreter waits for the thread at exit, forever. The case itself fails its check.
    if not any(t.name == "robust-hang" for t in threading.enumerate()):
        threading.Thread(target=time.sleep, args=(3600,), name="robust-hang").start()
    return x * 3


def _control_chars(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("\x1b[31mcompiler error\x1b[0m: NUL \x00 BEL \x07 VT \x0b | pipe ]]> <tag> & amp")


def _surrogate(x: torch.Tensor) -> torch.Tensor:
    name = b"kernel-\xff\xfe.py".decode("utf-8", "surrogateescape")  # a non-UTF-8 file name
    raise RuntimeError(f"cannot open {name}")


def _float64(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).to(torch.float64)  # right values, wrong dtype


def _none(x: torch.Tensor) -> None:
    return None


def _all_nan(x: torch.Tensor) -> torch.Tensor:
    return torch.full_like(x, float("nan"))


def _segfault_fp32(x: torch.Tensor) -> torch.Tensor:
    import ctypes

    ctypes.string_at(0)
    return x * 2


# rb_mixed: one process, one behaviour per shape (the first dimension picks it), so one op start
# covers them all; the shapes file of the tests lists [k, 4] for k = 1..8.
_MIXED = {1: _chdir, 2: _control_chars, 3: _surrogate, 4: _float64, 5: _none, 6: _all_nan,
          7: lambda x: x * 2, 8: lambda x: x * 2}


def _mixed(x: torch.Tensor):
    return _MIXED[x.shape[0]](x)


def _mixed_inputs(shape, dtype, gen, device):
    x = torch.randn(shape, dtype=dtype, generator=gen, device=device)
    return x if shape[0] == 7 else (x,)  # 7: not a tuple


def _op(op_id: str, candidate, **kw) -> OpSpec:
    return OpSpec(
        id=op_id,
        baseline=lambda x: x * 2,
        candidate=candidate,
        make_inputs=kw.pop("make_inputs", _inputs),
        bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
        flops=lambda shape: math.prod(shape),
        **kw,
    )


HARNESS_OPS = [
    _op("rb_mixed", _mixed, make_inputs=_mixed_inputs),
    _op("rb_setsid", _setsid),
    _op("rb_hang_exit", _hang_at_exit),
    _op("rb_crash_fp32", _segfault_fp32, dtypes=("float32",)),
]
