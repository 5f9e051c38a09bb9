"""Inputs and outputs of calls the harness did not write (a library's benchmarks): copies taken
before anything runs, shapes for records, and a tolerant comparison of whole output structures.

A benchmark may return a tensor, a tuple of tensors (values and indices), a number, a bool or
None, and may mutate its inputs (in-place ops, ``out=``). Everything here walks those
structures generically; nothing knows an op.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.child.measure import check_close
from harness.results.schema import Correctness

__all__ = [
    "SUITE_TOLERANCES",
    "Comparison",
    "clone_tree",
    "compare_outputs",
    "describe_args",
    "dtype_name",
    "first_tensor_shape",
    "tolerance_for",
]

# (atol, rtol) by output dtype, both sides computed in that dtype (the torch call is the reference):
# the harness's own tolerances for 16/32-bit floats (harness.ops.base.DEFAULT_TOLERANCES), fp64
# tighter, fp8 at its resolution; integers and bool must match exactly.
SUITE_TOLERANCES: Mapping[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
    "complex128": (1e-7, 1e-7),
    "complex64": (1e-4, 1e-4),
    "complex32": (2e-3, 2e-3),
    "float8_e4m3fn": (0.125, 0.125),
    "float8_e4m3fnuz": (0.125, 0.125),
    "float8_e5m2": (0.25, 0.25),
    "float8_e5m2fnuz": (0.25, 0.25),
    "float8_e8m0fnu": (0.5, 0.5),
}


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` -> "bfloat16"."""
    return str(dtype).removeprefix("torch.")


def tolerance_for(dtype: str) -> tuple[float, float]:
    return SUITE_TOLERANCES.get(dtype, (0.0, 0.0))


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def clone_tree(value: Any) -> Any:
    """A deep copy of every tensor in ``value`` (lists, tuples, dicts walked), detached, keeping
    ``requires_grad``; anything else is shared."""
    if _is_tensor(value):
        copy = value.detach().clone()
        return copy.requires_grad_(True) if value.requires_grad else copy
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(clone_tree(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(clone_tree(v) for v in value)
    if isinstance(value, dict):
        return {k: clone_tree(v) for k, v in value.items()}
    return value


def first_tensor_shape(args: Any, kwargs: Mapping[str, Any] | None = None) -> tuple[int, ...]:
    """The shape of the first tensor, depth first through args then kwargs; () when none."""
    stack: list[Any] = [args, list((kwargs or {}).values())]
    while stack:
        item = stack.pop(0)
        if _is_tensor(item):
            return tuple(int(d) for d in item.shape)
        if isinstance(item, (list, tuple)):
            stack[:0] = list(item)
        elif isinstance(item, dict):
            stack[:0] = list(item.values())
    return ()


def describe_args(args: Any, kwargs: Mapping[str, Any] | None = None) -> Any:
    """A JSON-safe picture of a call's arguments (FlagGems' ``shape_detail``): tensors as their
    sizes, numbers, strings and dtypes kept, anything else by type name."""

    def one(item: Any) -> Any:
        if _is_tensor(item):
            return [int(d) for d in item.shape]
        if isinstance(item, (bool, int, str)) or item is None:
            return item
        if isinstance(item, float):
            return item if math.isfinite(item) else str(item)
        if isinstance(item, (list, tuple)):
            return [one(v) for v in item]
        if isinstance(item, dict):
            return {str(k): one(v) for k, v in item.items()}
        if type(item).__module__ == "torch" and type(item).__name__ == "dtype":
            return dtype_name(item)
        return type(item).__name__

    described = [one(a) for a in args]
    return [described, {str(k): one(v) for k, v in kwargs.items()}] if kwargs else described


@dataclass(frozen=True)
class _Leaf:
    path: str
    value: Any


def _leaves(value: Any, path: str = "out") -> list[_Leaf]:
    if isinstance(value, (list, tuple)):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{path}[{k!r}]")]
    return [_Leaf(path, value)]


def _merge(parts: list[Correctness], atol: float, rtol: float) -> Correctness:
    if not parts:
        return Correctness(passed=True, max_abs=0.0, max_rel=0.0, atol=atol, rtol=rtol)
    abs_values = [p.max_abs for p in parts if p.max_abs is not None]
    rel_values = [p.max_rel for p in parts if p.max_rel is not None]
    mismatch = next((p.shape_mismatch for p in parts if p.shape_mismatch), "")
    return Correctness(
        passed=all(p.passed for p in parts),
        max_abs=max(abs_values) if abs_values and not mismatch else None,
        max_rel=max(rel_values) if rel_values and not mismatch else None,
        atol=max(p.atol for p in parts), rtol=max(p.rtol for p in parts),
        nan=any(p.nan for p in parts), mismatched=sum(p.mismatched for p in parts),
        numel=sum(p.numel for p in parts), nonfinite=sum(p.nonfinite for p in parts),
        shape_mismatch=mismatch,
    )


def _tensor_leaf(candidate: Any, reference: Any, row_dtype: str | None = None) -> Correctness:
    import torch

    name = dtype_name(reference.dtype)
    atol, rtol = tolerance_for(name)
    if row_dtype and (reference.is_floating_point() or reference.is_complex()):
        # A floating output computed from lower-precision inputs (bf16 in, fp32 out: a GEMM that
        # accumulates and returns fp32) carries the inputs' rounding: the looser tolerance holds.
        row_atol, row_rtol = tolerance_for(row_dtype)
        atol, rtol = max(atol, row_atol), max(rtol, row_rtol)
    cand, ref = candidate.detach(), reference.detach()
    if cand.is_sparse or ref.is_sparse:
        cand, ref = cand.to_dense(), ref.to_dense()
    if cand.is_complex() or ref.is_complex():
        cand, ref = torch.view_as_real(cand.to(torch.complex128)), torch.view_as_real(ref.to(torch.complex128))
    return check_close(cand, ref, atol, rtol)


def _scalar_leaf(candidate: Any, reference: Any) -> Correctness:
    numbers = (int, float)
    if (isinstance(candidate, numbers) and isinstance(reference, numbers)
            and not isinstance(candidate, bool) and not isinstance(reference, bool)):
        diff = abs(float(candidate) - float(reference))
        close = math.isclose(float(candidate), float(reference), rel_tol=1e-6, abs_tol=1e-9) or (
            math.isnan(float(candidate)) and math.isnan(float(reference)))
        rel = diff / abs(float(reference)) if float(reference) else diff
        return Correctness(passed=close, max_abs=diff if math.isfinite(diff) else None,
                           max_rel=rel if math.isfinite(rel) else None, atol=1e-9, rtol=1e-6,
                           mismatched=0 if close else 1, numel=1)
    same = candidate == reference
    return Correctness(passed=bool(same), max_abs=0.0 if same else None, max_rel=0.0 if same else None,
                       atol=0.0, rtol=0.0, mismatched=0 if same else 1, numel=1,
                       shape_mismatch="" if same else f"candidate {candidate!r} vs reference {reference!r}")


@dataclass(frozen=True)
class Comparison:
    correctness: Correctness
    notes: tuple[str, ...] = ()


def compare_outputs(candidate: Any, reference: Any, row_dtype: str | None = None) -> Comparison:
    """The candidate's outputs against the reference's, leaf by leaf: tensors within the
    tolerance of their dtype (exact for integers and bool), numbers within 1e-6, anything else
    equal. A different structure (number of outputs) fails as a shape mismatch. Integer
    tensors next to floating ones (the indices beside the values of sort, topk, max(dim)) are
    not compared: ties make them implementation-defined; the note says so."""
    cand_leaves, ref_leaves = _leaves(candidate), _leaves(reference)
    if len(cand_leaves) != len(ref_leaves):
        return Comparison(Correctness(passed=False, max_abs=None, max_rel=None, atol=0.0, rtol=0.0, mismatched=1,
                                      shape_mismatch=f"{len(cand_leaves)} outputs vs {len(ref_leaves)} from torch"))
    has_float = any(_is_tensor(r.value) and (r.value.is_floating_point() or r.value.is_complex()) for r in ref_leaves)
    parts: list[Correctness] = []
    notes: list[str] = []
    for cand, ref in zip(cand_leaves, ref_leaves, strict=True):
        if _is_tensor(ref.value) != _is_tensor(cand.value):
            parts.append(_scalar_leaf(type(cand.value).__name__, type(ref.value).__name__))
            continue
        if _is_tensor(ref.value):
            if has_float and not (ref.value.is_floating_point() or ref.value.is_complex()) and ref.value.dtype.is_signed:
                notes.append(f"{ref.path} (integer, beside floating outputs) not compared: ties make indices "
                             "implementation-defined")
                continue
            parts.append(_tensor_leaf(cand.value, ref.value, row_dtype))
        else:
            parts.append(_scalar_leaf(cand.value, ref.value))
    atol = max((p.atol for p in parts), default=0.0)
    rtol = max((p.rtol for p in parts), default=0.0)
    return Comparison(_merge(parts, atol, rtol), tuple(notes))
