"""Which kernels an op launches, and compiling each for a target without its hardware.

Tracing: the op's candidate is called on ``meta`` tensors (shapes and dtypes, no data) with
Triton's launch entry points (``JITFunction.run``, ``Autotuner.run``, ``Heuristics.run``)
replaced by a recorder, so the op's Python takes its GPU path (a meta tensor is not on the
cpu) and each launch is seen with its arguments, nothing run. Expanding: an autotuned launch
becomes one launch per config of the autotuner (meta-parameters, num_warps, num_stages), with
the heuristics under it evaluated for that config. Compiling: what ``JITFunction.run`` does
before a launch (the binder's specialisation of each argument for the target's backend, then
``triton.compile`` of an ``ASTSource``), for a ``GPUTarget`` instead of the current device.

Written against Triton 3.7.1's jit internals (``create_function_from_signature``,
``JITFunction._pack_args``); the worker says so when a Triton lacks them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from harness.compile.targets import Target
from harness.ir.meta import constexpr_values

__all__ = ["Traced", "Variant", "compile_variant", "expand", "intercept_launches", "trace_case"]


@dataclass(frozen=True)
class Traced:
    """One launch the op made: the outermost kernel object and its arguments."""

    obj: Any
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


@contextmanager
def intercept_launches() -> Iterator[list[Traced]]:
    """Record launches instead of running them (for this process: the worker's own)."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    seen: list[Traced] = []

    def record(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> None:
        seen.append(Traced(self, tuple(args), dict(kwargs)))

    classes = (JITFunction, Autotuner, Heuristics)
    saved = {cls: cls.__dict__["run"] for cls in classes}
    try:
        for cls in classes:
            cls.run = record  # type: ignore[method-assign]
        yield seen
    finally:
        for cls, run in saved.items():
            cls.run = run  # type: ignore[method-assign]


def _meta(value: Any) -> Any:
    import torch

    return value.to("meta") if isinstance(value, torch.Tensor) else value


def trace_case(op: Any, shape: Sequence[int], dtype: str) -> list[Traced]:
    """The launches of ``op``'s candidate for one case, on meta tensors."""
    import torch

    gen = torch.Generator(device="cpu")
    gen.manual_seed(0)
    try:  # straight onto the meta device: no data is made, whatever the shape
        args = tuple(op.make_inputs(tuple(shape), getattr(torch, dtype), gen, "meta"))
    except (RuntimeError, NotImplementedError, TypeError):
        args = tuple(_meta(a) for a in op.make_inputs(tuple(shape), getattr(torch, dtype), gen, "cpu"))
    with intercept_launches() as seen:
        op.candidate(*args)
    return seen


@dataclass(frozen=True)
class Variant:
    """One kernel launch to compile: a JITFunction and its arguments (constexprs included)."""

    kernel: str
    fn: Any
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    config: str = ""  # "config 3 of 9" for an autotuned launch
    notes: tuple[str, ...] = field(default_factory=tuple)


def _label(kwargs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in kwargs.items())


def _through_heuristics(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any], config: str) -> Variant:
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    notes: list[str] = []
    while not isinstance(obj, JITFunction):
        if isinstance(obj, Heuristics):
            named = {**dict(zip(obj.arg_names, args, strict=False)), **kwargs}
            for name, heuristic in obj.values.items():
                kwargs[name] = heuristic(named)
                named[name] = kwargs[name]
        elif isinstance(obj, Autotuner):
            notes.append("a nested autotuner: its first config")
            kwargs = {**kwargs, **obj.configs[0].all_kwargs()}
        obj = obj.fn
    return Variant(obj.__name__, obj, args, kwargs, config, tuple(notes))


def expand(traced: Traced) -> list[Variant]:
    """The launches a traced one stands for: one per autotune config."""
    from triton.runtime.autotuner import Autotuner

    obj, args, kwargs = traced.obj, traced.args, dict(traced.kwargs)
    if isinstance(obj, Autotuner):
        configs = list(obj.configs)
        return [_through_heuristics(obj.fn, args, {**kwargs, **config.all_kwargs()},
                                    f"config {i + 1} of {len(configs)}: {_label(config.all_kwargs())}")
                for i, config in enumerate(configs)]
    return [_through_heuristics(obj, args, kwargs, "")]


def _bind(variant: Variant, target: Target) -> tuple[Any, Any, dict[str, Any], dict[Any, Any], dict[Any, Any]]:
    """(GPUTarget, options, signature, constexprs, attrs) as JITFunction.run computes them."""
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    fn = variant.fn
    gpu = GPUTarget(target.backend, target.arch, target.warp_size)
    backend = make_backend(gpu)
    kwargs = dict(variant.kwargs)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*variant.args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    return gpu, options, signature, constexprs, attrs


def variant_id(kernel: str, signature: Mapping[str, Any], constexprs: Mapping[str, Any],
               options: Mapping[str, Any]) -> str:
    """A stable id of a compiled variant: its kernel, argument types, constexprs and launch options."""
    text = json.dumps({"k": kernel, "s": {k: str(v) for k, v in signature.items()},
                       "c": {k: str(v) for k, v in constexprs.items()}, "o": {k: str(v) for k, v in options.items()}},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Bound:
    variant: Variant
    target: Target
    vid: str
    label: str
    gpu: Any
    options: Any
    signature: Mapping[str, Any]
    constexprs: Mapping[Any, Any]
    attrs: Mapping[Any, Any]


def bind(variant: Variant, target: Target) -> Bound:
    gpu, options, signature, constexprs, attrs = _bind(variant, target)
    named = constexpr_values(constexprs, list(variant.fn.arg_names))
    launch = {k: getattr(options, k, None) for k in ("num_warps", "num_stages", "num_ctas", "maxnreg")}
    types = {k: v for k, v in signature.items() if v != "constexpr"}
    vid = variant_id(variant.kernel, types, named, launch)
    label = (f"{variant.kernel}[{', '.join(f'{k}:{v}' for k, v in types.items() if str(v).startswith('*'))}; "
             f"{_label(named)}; w{launch['num_warps']} s{launch['num_stages']}]")
    return Bound(variant, target, vid, label, gpu, options, signature, constexprs, attrs)


def compile_variant(bound: Bound) -> None:
    """``triton.compile`` for the bound target; raises what Triton raises."""
    import triton
    from triton.compiler import ASTSource

    src = ASTSource(bound.variant.fn, dict(bound.signature), dict(bound.constexprs), dict(bound.attrs))
    triton.compile(src, target=bound.gpu, options=bound.options.__dict__)
