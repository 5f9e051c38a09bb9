"""The operator contract: what a benchmarkable op provides.

An op is a frozen :class:`OpSpec`. Built-in ops live one module each in this
package and are listed explicitly in :mod:`harness.ops.registry`; users add
their own from a module of theirs (``--ops-module``), which exposes
``HARNESS_OPS`` (a sequence of OpSpec) or ``harness_ops()`` returning one.
See docs/ops.md for the contract.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "DTYPES",
    "DEFAULT_TOLERANCES",
    "InputMaker",
    "OpInfo",
    "OP_ID",
    "OpSpec",
    "Shape",
    "Tolerance",
    "op_problems",
]

Shape = tuple[int, ...]
# (shape, torch dtype, torch.Generator, device string) -> positional args for baseline/candidate
InputMaker = Callable[[Shape, Any, Any, str], tuple[Any, ...]]

# The dtypes the harness knows, by the name used on the command line and in records.
DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class Tolerance:
    """Elementwise check |candidate - reference| <= atol + rtol * |reference|."""

    atol: float
    rtol: float


DEFAULT_TOLERANCES: Mapping[str, Tolerance] = {
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "float16": Tolerance(atol=2e-3, rtol=2e-3),
    "bfloat16": Tolerance(atol=1.6e-2, rtol=1.6e-2),
}


@dataclass(frozen=True, kw_only=True)
class OpInfo:
    """What the parent process knows of an op: enough to select it, plan its shapes and weigh it.

    Built-in ops are described by these alone in :mod:`harness.ops.registry`, so planning a run
    (and refusing bad input) imports neither torch nor Triton; the op process loads the
    :class:`OpSpec`.
    """

    id: str
    dtypes: tuple[str, ...] = DTYPES
    shape_rank: int | None = None
    aten: str | None = None  # the torch op this corresponds to (for providers such as flaggems)
    description: str = ""
    source: str = "builtin"
    # Relative wall time of one case (compile, tune, time) against a plain memory-bound case; the
    # batch sharder weighs ops by cases x case_cost, so an autotuned op does not pile up on one device.
    case_cost: float = 1.0
    # Whether the candidate goes through an autotuner (True), does not (False), or nobody said
    # (None): `harness run --sweep-devices` tunes True and None ops first (docs/batch.md).
    autotuned: bool | None = None

    @property
    def info(self) -> OpInfo:
        """The parent's view of this op (the op itself, for an OpInfo)."""
        return OpInfo(**{f.name: getattr(self, f.name) for f in fields(OpInfo)})

    def check_shape(self, shape: Sequence[int]) -> str | None:
        """Why ``shape`` is unusable for this op, or None."""
        if self.shape_rank is not None and len(shape) != self.shape_rank:
            return f"op {self.id!r} takes shapes of {self.shape_rank} dimensions, got {list(shape)}"
        if any((not isinstance(d, int)) or isinstance(d, bool) or d <= 0 for d in shape):
            return f"shape {list(shape)} for op {self.id!r} must be positive integers"
        return None


@dataclass(frozen=True, kw_only=True)
class OpSpec(OpInfo):
    """One benchmarkable operator (all fields are keywords).

    ``baseline`` is the torch reference (also what the candidate is timed
    against); ``candidate`` is the implementation under test (for built-in ops,
    a Triton kernel written in this project). Both take the tuple produced by
    ``make_inputs`` and return one tensor. ``bytes_moved`` and ``flops`` model
    the minimum traffic and arithmetic for GB/s and TFLOP/s.
    """

    baseline: Callable[..., Any]
    candidate: Callable[..., Any]
    make_inputs: InputMaker
    bytes_moved: Callable[[Shape, int], int]
    flops: Callable[[Shape], int]
    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))

    def tolerance(self, dtype: str) -> Tolerance:
        return self.tolerances.get(dtype, DEFAULT_TOLERANCES[dtype])


# An op id names files (logs/<op>.log, done/<op>.json) and is written comma-separated in --ops and
# before a ':' source prefix: letters, digits, '_', '.', '-', so two ids never share a file.
OP_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def _dtype_problem(dtypes: Any) -> str | None:
    if isinstance(dtypes, str) or not isinstance(dtypes, tuple | list):
        return f"dtypes must be a tuple of dtype names such as ('float16', 'float32'), got {dtypes!r}"
    if not dtypes:
        return "dtypes is empty: name at least one of " + ", ".join(DTYPES)
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        return (f"dtypes {tuple(dtypes)!r}: {', '.join(map(repr, unknown))} is not a dtype the harness measures "
                f"({', '.join(DTYPES)})")
    return None


def op_problems(op: OpInfo) -> list[str]:
    """What is wrong with an op's fields (an OpSpec's callables included); [] when it is usable.
    User modules' ops are checked with this when they are loaded (harness.ops.registry)."""
    problems: list[str] = []
    if not isinstance(op.id, str) or not OP_ID.fullmatch(op.id):
        problems.append(f"id {op.id!r} must be 1-100 letters, digits, '_', '.' or '-' (not starting with "
                        "'.' or '-'): it names the op's files and is listed comma-separated in --ops")
    dtype_problem = _dtype_problem(op.dtypes)
    if dtype_problem:
        problems.append(dtype_problem)
    rank = op.shape_rank
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        problems.append(f"shape_rank must be None or a positive integer, got {rank!r}")
    cost = op.case_cost
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost) or cost <= 0:
        problems.append(f"case_cost must be a positive number, got {cost!r}")
    for name in ("aten", "description", "source"):
        value = getattr(op, name)
        if value is not None and not isinstance(value, str):
            problems.append(f"{name} must be a string, got {value!r}")
    if isinstance(op, OpSpec):
        problems += _spec_problems(op)
    return problems


def _spec_problems(op: OpSpec) -> list[str]:
    """What is wrong with an OpSpec's callables and tolerances."""
    problems = [f"{name} must be callable, got {getattr(op, name)!r}"
                for name in ("baseline", "candidate", "make_inputs", "bytes_moved", "flops")
                if not callable(getattr(op, name))]
    tolerances = op.tolerances
    if not isinstance(tolerances, Mapping) or not all(
            isinstance(k, str) and isinstance(v, Tolerance) for k, v in tolerances.items()):
        problems.append(f"tolerances must map dtype names to Tolerance(atol, rtol), got {tolerances!r}")
    return problems
