"""The op map: how each harness op is run through FlagGems (data and small adapters; no imports
of torch or flag_gems here).

A binding names the FlagGems implementation of an op in one of two ways:

- ``aten``: the key FlagGems registers for the aten operator (the aten schema name with its
  overload, as in FlagGems' own ``_FULL_CONFIG``: "_softmax", "add.Tensor"). The function is
  looked up at run time in what ``flag_gems.enable()`` registers on this vendor, so vendor
  overrides, registration conditions and the vendor's unused-op list apply exactly as they
  do under ``flag_gems.use_gems()``.
- ``function``: a flag_gems attribute, for ops FlagGems does not register with aten (it
  benchmarks those by calling them directly, e.g. ``flag_gems.silu_and_mul``).

``call(fn, args)`` turns the op's inputs (what its ``make_inputs`` returns, the same tuple
the torch baseline gets) into the call FlagGems' function expects, aten's argument
convention for ``aten`` bindings, and returns the one output tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BUILTIN_BINDINGS",
    "LAYER_NORM_EPS",
    "RMS_NORM_EPS",
    "GemsBinding",
    "GemsCall",
]

GemsFn = Callable[..., Any]
Adapter = Callable[[GemsFn, Sequence[Any]], Any]

# The eps of the harness's own layer_norm and rms_norm (harness/ops/*.py, EPS); a unit test
# keeps them equal so both providers compute the same function.
LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-6


@dataclass(frozen=True)
class GemsBinding:
    op: str
    call: Adapter
    how: str  # the call as a reader would write it, for listings and docs
    aten: str | None = None
    function: str | None = None

    def __post_init__(self) -> None:
        if (self.aten is None) == (self.function is None):
            raise ValueError(f"binding for {self.op!r} needs exactly one of aten= or function=")

    @property
    def target(self) -> str:
        return f"aten::{self.aten}" if self.aten else f"flag_gems.{self.function}"


def _softmax(fn: GemsFn, args: Sequence[Any]) -> Any:
    (x,) = args
    return fn(x, -1, False)  # aten::_softmax(self, dim, half_to_float)


def _layer_norm(fn: GemsFn, args: Sequence[Any]) -> Any:
    x, weight, bias = args
    # aten::native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out, mean, rstd)
    return fn(x, [x.shape[-1]], weight, bias, LAYER_NORM_EPS)[0]


def _rms_norm(fn: GemsFn, args: Sequence[Any]) -> Any:
    x, weight = args
    return fn(x, [x.shape[-1]], weight, RMS_NORM_EPS)  # aten::rms_norm(input, normalized_shape, weight, eps)


def _unary(fn: GemsFn, args: Sequence[Any]) -> Any:
    (x,) = args
    return fn(x)


def _binary(fn: GemsFn, args: Sequence[Any]) -> Any:
    a, b = args
    return fn(a, b)


def _sum_last(fn: GemsFn, args: Sequence[Any]) -> Any:
    (x,) = args
    return fn(x, [-1])  # aten::sum.dim_IntList(self, dim, keepdim=False)


def _silu_and_mul(fn: GemsFn, args: Sequence[Any]) -> Any:
    (x,) = args
    n = x.shape[-1] // 2
    # The harness feeds one (M, 2N) tensor; FlagGems' fused op takes the two halves.
    return fn(x[..., :n], x[..., n:])


BUILTIN_BINDINGS: Mapping[str, GemsBinding] = {
    b.op: b
    for b in (
        GemsBinding("softmax", _softmax, "_softmax(x, -1, False)", aten="_softmax"),
        GemsBinding("layer_norm", _layer_norm, "native_layer_norm(x, [N], w, b, 1e-5)[0]",
                    aten="native_layer_norm"),
        GemsBinding("rms_norm", _rms_norm, "rms_norm(x, [N], w, 1e-6)", aten="rms_norm"),
        GemsBinding("gelu", _unary, "gelu(x)", aten="gelu"),
        GemsBinding("silu_and_mul", _silu_and_mul, "silu_and_mul(x[:, :N], x[:, N:])",
                    function="silu_and_mul"),
        GemsBinding("add", _binary, "add(a, b)", aten="add.Tensor"),
        GemsBinding("sum", _sum_last, "sum_dim(x, [-1])", aten="sum.dim_IntList"),
        GemsBinding("mm", _binary, "mm(a, b)", aten="mm"),
    )
}


@dataclass(frozen=True)
class GemsCall:
    """The candidate of an op declared for FlagGems only (docs/flaggems.md, declarative ops).

    Its inputs are already in the argument convention of the FlagGems function (the same as
    the torch baseline's), so the binding passes them through. Called directly (that is,
    under ``--provider builtin``) it skips the case: there is no harness kernel for it.
    """

    op: str
    source: str
    aten: str | None = None
    function: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    output: int | None = None

    def binding(self) -> GemsBinding:
        kwargs, index = dict(self.kwargs), self.output

        def call(fn: GemsFn, args: Sequence[Any]) -> Any:
            out = fn(*args, **kwargs)
            return out if index is None else out[index]

        return GemsBinding(self.op, call, "same arguments as the baseline", aten=self.aten,
                           function=self.function)

    def __call__(self, *args: Any) -> Any:
        import pytest

        pytest.skip(
            f"op {self.op!r} is declared for FlagGems only ({self.source}) and has no harness "
            "kernel; run it with --provider flaggems"
        )
