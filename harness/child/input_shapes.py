"""A user's ``--shapes-file`` at the seam where a FlagGems benchmark builds its inputs.

FlagGems' shape file reaches only the benchmarks whose ``set_shapes`` reads it and whose
``get_input_iter`` walks ``self.shapes``. Others set their shapes in the test file: a
``set_shapes`` of their own (a fixed list), or a ``get_input_iter`` that walks a list of its own
(conv2d_padding's ``DEFAULT_SHAPES``). Every benchmark's inputs come from ``get_input_iter(dtype)``,
called after ``set_shapes``; :func:`input_plan` decides, per benchmark, how the given shapes get
there:

- ``shapes``: its ``get_input_iter`` reads ``self.shapes``: that attribute is set to the given
  shapes before the inputs are built (what FlagGems' own file would have done);
- ``input_fn``: its ``get_input_iter`` walks a list of its own, and the benchmark has a per-shape
  input function (``GenericBenchmark.input_fn(shape, dtype, device)``): the inputs are built by
  that function from the given shapes instead;
- ``file``: FlagGems' shape file already gave them (``self.shapes`` holds them), nothing to do;
- ``kept``: none of these (inputs made in ``get_input_iter`` from numbers of its own), or the given
  shapes have a number of dimensions its own shapes never have: its shapes stay, and the reason
  goes on its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["InputPlan", "entry_for", "input_plan", "planned_inputs"]

Shape = tuple[Any, ...]


@dataclass(frozen=True)
class InputPlan:
    how: str  # "shapes", "input_fn", "file" or "kept"
    shapes: tuple[Shape, ...]
    note: str  # for the benchmark's rows


def entry_for(bench: Any, entries: Mapping[str, Sequence[Sequence[int]]]) -> tuple[str, tuple[Shape, ...]] | None:
    """The entry (key, shapes) for ``bench``: its op_name, else the first class of its chain named."""
    names = [str(getattr(bench, "op_name", "") or ""), *(c.__name__ for c in type(bench).__mro__)]
    key = next((n for n in names if n and n in entries), None)
    return None if key is None else (key, tuple(tuple(s) for s in entries[key]))


def _reads(function: Any, attribute: str) -> bool:
    """Whether ``function``'s code names ``attribute`` (``self.shapes`` -> ``shapes``)."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    return code is not None and attribute in code.co_names


def _dims(shapes: Any) -> set[int]:
    return {len(s) for s in shapes or () if isinstance(s, list | tuple)}


def input_plan(bench: Any, key: str, shapes: tuple[Shape, ...], input_iter: Callable[..., Any]) -> InputPlan:
    """How ``shapes`` (the --shapes-file entry ``key``) reach ``bench``, whose own input generator is
    ``input_iter`` (pure: reads attributes only; called after FlagGems' ``set_shapes``)."""
    label = str(getattr(bench, "op_name", "") or type(bench).__name__)
    own = list(getattr(bench, "shapes", None) or ())
    if _reads(input_iter, "shapes"):
        if own and all(s in [tuple(o) for o in own] for s in shapes):
            return InputPlan("file", shapes, "")
        reference = own
        how = "shapes"
    elif callable(getattr(bench, "input_fn", None)):
        reference = list(getattr(bench, "DEFAULT_SHAPES", None) or own)
        how = "input_fn"
    else:
        return InputPlan("kept", (), f"--shapes-file entry {key!r} not applied to {label}: its get_input_iter "
                                     "makes its inputs from sizes of its own (no shapes list, no per-shape "
                                     "input_fn to give them to); kept FlagGems' shapes")
    dims, given = _dims(reference), _dims(shapes)
    if dims and not given <= dims:
        return InputPlan("kept", (), f"--shapes-file entry {key!r} not applied to {label}: its shapes have "
                                     f"{sorted(given - dims)} dimension(s), its own have {sorted(dims)}; "
                                     "kept FlagGems' shapes")
    where = "self.shapes" if how == "shapes" else "its input_fn"
    return InputPlan(how, shapes, f"--shapes-file entry {key!r} given to {label} where it builds its inputs "
                                  f"({where}; the test file sets its own shapes)")


def planned_inputs(bench: Any, plan: InputPlan, input_iter: Callable[[Any], Iterator[Any]],
                   dtype: Any) -> Iterator[Any]:
    """The benchmark's inputs for ``dtype`` as ``plan`` says."""
    if plan.how == "shapes":
        bench.shapes = list(plan.shapes)
        yield from input_iter(dtype)
    elif plan.how == "input_fn":
        device = getattr(bench, "device", "cpu")
        for shape in plan.shapes:
            yield from bench.input_fn(shape, dtype, device)
    else:
        yield from input_iter(dtype)
