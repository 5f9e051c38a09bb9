"""FlagGems ops declared in YAML instead of code.

Any aten operator FlagGems registers can be benchmarked with a few lines::

    log_softmax:                  # the harness op id
      aten: _log_softmax          # the key FlagGems registers (aten schema name[.overload])
      inputs: [randn]             # one named maker per tensor input
      args: [-1, false]           # constants after the tensors
      shapes: [[4096, 1024], [8192, 8192]]

The baseline is ``torch.ops.aten.<aten key>`` (``torch:`` names another callable taking the
same arguments, e.g. ``torch.nn.functional.gelu``); the candidate is the function FlagGems
registers for that key, called with the same arguments. ``function:`` instead of ``aten:``
calls a flag_gems function directly (ops FlagGems does not register with aten); ``torch:``
is then required. An input is a maker name, or a mapping::

    {maker: randn, dims: [0, 2], dtype: float32}   # dims pick case-shape dimensions
    {maker: randint, shape: [64], high: 10, dtype: int64}
    {sizes: [-1]}                                  # not a tensor: the list [N] from the case shape
    {value: 1.0e-5}                                # not a tensor: a constant in this position

Makers: randn, rand, ones, zeros, randint. Other keys: ``kwargs`` (passed to both sides),
``output`` (index into a tuple result), ``dtypes``, ``atol``/``rtol``, ``flops_per_element``,
``description``. The byte model counts every tensor input plus one output of the case shape.

:func:`parse_declarations` validates the data (pure); :func:`build_ops` turns declarations
into OpSpecs (imports torch); :func:`load_declared` does both for a file.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, UsageError
from harness.ops.base import DEFAULT_TOLERANCES, DTYPES, OpSpec, Shape, Tolerance
from harness.providers.bindings import GemsCall
from harness.yamlfile import read_yaml

__all__ = [
    "MAKERS",
    "Declared",
    "DeclaredInput",
    "DeclaredOp",
    "build_ops",
    "declared_shapes",
    "is_declaration_file",
    "load_declared",
    "parse_declarations",
    "resolve_callable",
]

MAKERS: tuple[str, ...] = ("randn", "rand", "ones", "zeros", "randint")
_INPUT_DTYPES: tuple[str, ...] = (*DTYPES, "float64", "int8", "int16", "int32", "int64", "bool")
_ENTRY_KEYS = frozenset({"aten", "function", "torch", "inputs", "args", "kwargs", "output", "shapes",
                         "dtypes", "atol", "rtol", "flops_per_element", "description"})
_INPUT_KEYS = frozenset({"maker", "dims", "shape", "dtype", "low", "high", "sizes", "value"})


@dataclass(frozen=True)
class DeclaredInput:
    """One positional argument: a tensor from a maker, or (maker None) ``sizes`` of the case
    shape as a list, or a constant ``value``."""

    maker: str | None
    dims: tuple[int, ...] | None = None  # indices into the case shape; None = the whole case shape
    shape: tuple[int, ...] | None = None  # a fixed shape instead
    dtype: str | None = None  # None = the case's dtype
    low: int = 0
    high: int | None = None
    sizes: tuple[int, ...] | None = None
    value: Any = None

    def shape_for(self, case: Shape) -> Shape:
        if self.shape is not None:
            return self.shape
        if self.dims is not None:
            return tuple(case[i] for i in self.dims)
        return tuple(case)


@dataclass(frozen=True)
class DeclaredOp:
    id: str
    source: str
    inputs: tuple[DeclaredInput, ...]
    aten: str | None = None
    function: str | None = None
    torch: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    output: int | None = None
    shapes: tuple[Shape, ...] = ()
    dtypes: tuple[str, ...] = DTYPES
    atol: float | None = None
    rtol: float | None = None
    flops_per_element: float = 0.0
    description: str = ""

    @property
    def baseline_path(self) -> str:
        if self.torch:
            return self.torch
        assert self.aten is not None
        name, _, overload = self.aten.partition(".")
        return f"torch.ops.aten.{name}.{overload or 'default'}"

    def shape_rank(self) -> int | None:
        """The rank every shape must have: the declared shapes' common rank, if they share one."""
        ranks = {len(s) for s in self.shapes}
        return ranks.pop() if len(ranks) == 1 else None


@dataclass(frozen=True)
class Declared:
    ops: tuple[OpSpec, ...]
    shapes: Mapping[str, tuple[Shape, ...]]  # op id -> declared shapes (used when no level has any)


def _fail(source: str, where: str, message: str) -> ConfigError:
    return ConfigError(f"{source}: {where}: {message}")


def _int_list(value: Any, source: str, where: str, positive: bool) -> tuple[int, ...]:
    ok = isinstance(value, list) and value and all(isinstance(d, int) and not isinstance(d, bool) for d in value)
    if not ok or (positive and any(d <= 0 for d in value)):
        kind = "positive integers" if positive else "integers"
        raise _fail(source, where, f"expected a non-empty list of {kind}, got {value!r}")
    return tuple(value)


def _constant_input(raw: Mapping[str, Any], source: str, where: str) -> DeclaredInput:
    """``{sizes: [...]}`` (a list of the case shape's sizes) or ``{value: x}`` (a constant)."""
    if len(raw) != 1:
        raise _fail(source, where, "'sizes' and 'value' stand alone: {sizes: [-1]} or {value: 1.0e-5}")
    if "sizes" in raw:
        return DeclaredInput(maker=None, sizes=_int_list(raw["sizes"], source, f"{where}.sizes", positive=False))
    return DeclaredInput(maker=None, value=raw["value"])


def _bounds(raw: Mapping[str, Any], maker: str, dtype: str | None, source: str, where: str) -> tuple[int, int | None]:
    """(low, high) of a randint input; the other makers take neither."""
    high = raw.get("high")
    if maker == "randint":
        if not isinstance(high, int) or isinstance(high, bool):
            raise _fail(source, where, "randint needs an integer 'high' (exclusive upper bound)")
        if dtype is None or not dtype.startswith("int"):
            raise _fail(source, where, "randint needs an integer 'dtype' such as int64")
    elif high is not None or "low" in raw:
        raise _fail(source, where, "'low' and 'high' apply to the randint maker only")
    low = raw.get("low", 0)
    if not isinstance(low, int) or isinstance(low, bool) or (high is not None and low >= high):
        raise _fail(source, where, f"'low' must be an integer below 'high', got {low!r}")
    return low, high


def _parse_input(raw: Any, source: str, where: str) -> DeclaredInput:
    if isinstance(raw, str):
        raw = {"maker": raw}
    if not isinstance(raw, Mapping):
        raise _fail(source, where, f"an input is a maker name ({', '.join(MAKERS)}) or a mapping with "
                                   f"'maker', got {raw!r}")
    unknown = sorted(set(raw) - _INPUT_KEYS)
    if unknown:
        raise _fail(source, where, f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_INPUT_KEYS))}")
    if "sizes" in raw or "value" in raw:
        return _constant_input(raw, source, where)
    maker = raw.get("maker")
    if maker not in MAKERS:
        raise _fail(source, where, f"unknown maker {maker!r}; makers: {', '.join(MAKERS)}")
    if "dims" in raw and "shape" in raw:
        raise _fail(source, where, "give 'dims' (dimensions of the case shape) or 'shape' (fixed), not both")
    dims = _int_list(raw["dims"], source, f"{where}.dims", positive=False) if "dims" in raw else None
    shape = _int_list(raw["shape"], source, f"{where}.shape", positive=True) if "shape" in raw else None
    dtype = raw.get("dtype")
    if dtype is not None and dtype not in _INPUT_DTYPES:
        raise _fail(source, where, f"unknown dtype {dtype!r}; dtypes: {', '.join(_INPUT_DTYPES)} "
                                   "(leave it out to use the case's dtype)")
    low, high = _bounds(raw, maker, dtype, source, where)
    return DeclaredInput(maker=maker, dims=dims, shape=shape, dtype=dtype, low=low, high=high)


def _number(entry: Mapping[str, Any], key: str, source: str, where: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise _fail(source, f"{where}.{key}", f"expected a non-negative number, got {value!r}")
    return float(value)


def _targets(entry: Mapping[str, Any], source: str, where: str) -> tuple[str | None, str | None, str | None]:
    """(aten key, flag_gems function, torch baseline) of an entry: exactly one of the first two."""
    aten, function, torch_path = entry.get("aten"), entry.get("function"), entry.get("torch")
    if (aten is None) == (function is None):
        raise _fail(source, where, "give exactly one of 'aten' (the key FlagGems registers, e.g. "
                                   "_log_softmax or add.Tensor) or 'function' (a flag_gems function)")
    for key, value in (("aten", aten), ("function", function), ("torch", torch_path)):
        if value is not None and (not isinstance(value, str) or not value.strip() or " " in value):
            raise _fail(source, f"{where}.{key}", f"expected a name without spaces, got {value!r}")
    if isinstance(aten, str) and aten.startswith("aten::"):
        aten = aten.removeprefix("aten::")
    if function is not None and torch_path is None:
        raise _fail(source, where, "'function' entries need 'torch': the baseline callable taking the "
                                   "same arguments (e.g. torch.nn.functional.silu)")
    return aten, function, torch_path


def _check_dims(inputs: Sequence[DeclaredInput], shapes: Sequence[tuple[int, ...]], source: str, where: str) -> None:
    """At least one tensor input, and no input's dims or sizes index past a case shape."""
    if all(item.maker is None for item in inputs):
        raise _fail(source, where, "'inputs' needs at least one tensor (a maker such as randn)")
    for i, item in enumerate(inputs):
        for key, dims in (("dims", item.dims), ("sizes", item.sizes)):
            for shape in shapes:
                if dims is not None and any(not -len(shape) <= d < len(shape) for d in dims):
                    raise _fail(source, f"{where}.inputs[{i}].{key}",
                                f"{list(dims)} indexes past the case shape {list(shape)}")


def _parse_entry(op_id: str, entry: Any, source: str) -> DeclaredOp:
    where = op_id
    if not isinstance(entry, Mapping):
        raise _fail(source, where, f"an entry is a mapping with 'aten' (or 'function') and 'inputs', got {entry!r}")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise _fail(source, where, f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_ENTRY_KEYS))}")
    aten, function, torch_path = _targets(entry, source, where)
    raw_inputs = entry.get("inputs")
    if not isinstance(raw_inputs, list) or not raw_inputs:
        raise _fail(source, where, "'inputs' must be a non-empty list of makers, e.g. [randn, randn]")
    inputs = tuple(_parse_input(raw, source, f"{where}.inputs[{i}]") for i, raw in enumerate(raw_inputs))
    args = entry.get("args", [])
    if not isinstance(args, list):
        raise _fail(source, f"{where}.args", f"expected a list of constants, got {args!r}")
    kwargs = entry.get("kwargs", {})
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise _fail(source, f"{where}.kwargs", f"expected a mapping of keyword arguments, got {kwargs!r}")
    output = entry.get("output")
    if output is not None and (not isinstance(output, int) or isinstance(output, bool) or output < 0):
        raise _fail(source, f"{where}.output", f"expected the index of the tensor to compare, got {output!r}")
    raw_shapes = entry.get("shapes", [])
    if not isinstance(raw_shapes, list):
        raise _fail(source, f"{where}.shapes", f"expected a list of shapes such as [[1024, 1024]], got {raw_shapes!r}")
    shapes = tuple(_int_list(s, source, f"{where}.shapes[{i}]", positive=True) for i, s in enumerate(raw_shapes))
    _check_dims(inputs, shapes, source, where)
    raw_dtypes = entry.get("dtypes", list(DTYPES))
    if not isinstance(raw_dtypes, list) or not raw_dtypes or any(d not in DTYPES for d in raw_dtypes):
        raise _fail(source, f"{where}.dtypes", f"expected a list drawn from {', '.join(DTYPES)}, got {raw_dtypes!r}")
    description = entry.get("description", "")
    return DeclaredOp(
        id=op_id, source=source, inputs=inputs, aten=aten, function=function, torch=torch_path,
        args=tuple(args), kwargs=dict(kwargs), output=output, shapes=shapes, dtypes=tuple(raw_dtypes),
        atol=_number(entry, "atol", source, where), rtol=_number(entry, "rtol", source, where),
        flops_per_element=_number(entry, "flops_per_element", source, where) or 0.0,
        description=str(description),
    )


def parse_declarations(data: Any, source: str) -> tuple[DeclaredOp, ...]:
    """Validate a loaded YAML document (op id -> entry); every problem names the file and entry."""
    if not isinstance(data, Mapping) or not data:
        raise ConfigError(
            f"{source}: the top level must map op ids to entries, for example "
            "'log_softmax: {aten: _log_softmax, inputs: [randn], args: [-1, false]}'."
        )
    ops = []
    for op_id, entry in data.items():
        if not isinstance(op_id, str) or not op_id.replace("_", "").isalnum():
            raise ConfigError(f"{source}: op id {op_id!r} must be a name of letters, digits and '_'.")
        ops.append(_parse_entry(op_id, entry, source))
    return tuple(ops)


def resolve_callable(path: str) -> Callable[..., Any]:
    """``pkg.module.attr`` or ``pkg.module:attr.attr`` -> the object; UsageError naming the path."""
    module_name, _, attrs = path.partition(":")
    parts = path.split(".") if not attrs else [module_name, *attrs.split(".")]
    obj: Any = None
    for cut in (range(len(parts), 0, -1) if not attrs else [1]):
        name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(name)
        except ImportError:
            continue
        for attr in parts[cut:]:
            try:
                obj = getattr(obj, attr)
            except (AttributeError, RuntimeError):  # torch.ops raises RuntimeError for unknown ops
                raise UsageError(f"{path!r}: {name} has no attribute {attr!r}. Check the name.") from None
            name = f"{name}.{attr}"
        break
    if obj is None or not callable(obj):
        raise UsageError(f"{path!r} is not an importable callable. Give a dotted path such as "
                         "torch.nn.functional.gelu or torch.ops.aten.gelu.default.")
    return obj


def _argument(item: DeclaredInput, case: Shape, dtype: Any, gen: Any, device: str) -> Any:
    import torch

    if item.maker is None:
        return [case[i] for i in item.sizes] if item.sizes is not None else item.value
    shape = item.shape_for(case)
    kind = getattr(torch, item.dtype) if item.dtype else dtype
    if item.maker == "randn":
        return torch.randn(shape, dtype=kind, generator=gen, device=device)
    if item.maker == "rand":
        return torch.rand(shape, dtype=kind, generator=gen, device=device)
    if item.maker == "ones":
        return torch.ones(shape, dtype=kind, device=device)
    if item.maker == "zeros":
        return torch.zeros(shape, dtype=kind, device=device)
    assert item.high is not None
    return torch.randint(item.low, item.high, shape, dtype=kind, generator=gen, device=device)


_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2,
             "int32": 4, "int64": 8, "bool": 1}


def _bytes_model(decl: DeclaredOp) -> Callable[[Shape, int], int]:
    def bytes_moved(shape: Shape, itemsize: int) -> int:
        total = math.prod(shape) * itemsize  # one output of the case shape
        for item in decl.inputs:
            if item.maker is None:
                continue
            size = _ITEMSIZE[item.dtype] if item.dtype else itemsize
            total += math.prod(item.shape_for(shape)) * size
        return total

    return bytes_moved


def _build_one(decl: DeclaredOp) -> OpSpec:
    torch_fn = resolve_callable(decl.baseline_path)
    kwargs = dict(decl.kwargs)
    output = decl.output

    def baseline(*args: Any) -> Any:
        out = torch_fn(*args, **kwargs)
        return out if output is None else out[output]

    constants = decl.args

    def make_inputs(shape: Shape, dtype: Any, gen: Any, device: str) -> tuple[Any, ...]:
        return (*(_argument(item, shape, dtype, gen, device) for item in decl.inputs), *constants)

    tolerances = {
        name: Tolerance(atol=decl.atol if decl.atol is not None else tol.atol,
                        rtol=decl.rtol if decl.rtol is not None else tol.rtol)
        for name, tol in DEFAULT_TOLERANCES.items()
    }
    per_element = decl.flops_per_element
    return OpSpec(
        id=decl.id,
        baseline=baseline,
        candidate=GemsCall(op=decl.id, source=decl.source, aten=decl.aten, function=decl.function,
                           kwargs=kwargs, output=output),
        make_inputs=make_inputs,
        bytes_moved=_bytes_model(decl),
        flops=lambda shape: int(per_element * math.prod(shape)),
        dtypes=decl.dtypes,
        tolerances=tolerances,
        shape_rank=decl.shape_rank(),
        aten=f"aten::{decl.aten}" if decl.aten else None,
        description=decl.description or f"FlagGems {decl.aten or decl.function} vs {decl.baseline_path}",
        source=decl.source,
    )


def build_ops(decls: Sequence[DeclaredOp]) -> Declared:
    return Declared(
        ops=tuple(_build_one(d) for d in decls),
        shapes={d.id: d.shapes for d in decls if d.shapes},
    )


def load_declared(path: str | Path) -> Declared:
    """Read a FlagGems ops YAML file into OpSpecs and their declared shapes."""
    source = str(path)
    data = read_yaml(Path(path), f"FlagGems ops file {source}")
    return build_ops(parse_declarations(data, source))


def is_declaration_file(ref: str) -> bool:
    """Whether an ``--ops-module`` reference is a FlagGems ops YAML rather than Python."""
    return ref.endswith((".yaml", ".yml"))


def declared_shapes(refs: Sequence[str]) -> dict[str, list[Shape]]:
    """The shapes declared in the YAML files among ``refs`` (op id -> shapes), for ops no level
    lists: what a run uses when neither --shapes-file nor the level names the op."""
    shapes: dict[str, list[Shape]] = {}
    for ref in refs:
        if is_declaration_file(ref):
            for op_id, found in load_declared(ref).shapes.items():
                shapes[op_id] = list(found)
    return shapes
