"""The catalogue of ops: built-in ones plus those from users' modules.

Built-in ops are described here (:data:`BUILTIN`) and imported only in the op process
(importing them imports torch and Triton, which must not happen before the CPU backend has set
TRITON_INTERPRET, and which the parent process never needs). User modules are loaded
from a file path or a dotted module name and expose ``HARNESS_OPS`` or
``harness_ops()``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.errors import UsageError
from harness.ops.base import OpInfo, OpSpec, op_problems

__all__ = ["BUILTIN", "builtin_spec", "catalog", "load_op", "load_ops", "load_user_ops"]

# The built-in ops, described without importing them (their modules import torch and Triton).
# Each module harness/ops/<id>.py builds its OpSpec from its entry here (builtin_spec).
BUILTIN: dict[str, OpInfo] = {
    op.id: op
    for op in (
        OpInfo(id="softmax", shape_rank=2, autotuned=False, aten="aten::_softmax",
               description="softmax over the last dim of (M, N), fp32 math; looped online softmax past N=32768"),
        OpInfo(id="layer_norm", shape_rank=2, autotuned=False, aten="aten::native_layer_norm",
               description="layer_norm over the last dim of (M, N) with weight and bias, eps=1e-5, fp32 math"),
        OpInfo(id="rms_norm", shape_rank=2, autotuned=False, aten="aten::rms_norm",
               description="rms_norm over the last dim of (M, N) with weight, eps=1e-6, fp32 math"),
        OpInfo(id="gelu", aten="aten::gelu", autotuned=False,
               description="exact (erf) gelu 0.5*x*(1+erf(x/sqrt(2))), fp32 math; fp16/bf16 use a "
                           "1.5e-7-accurate erf polynomial"),
        OpInfo(id="silu_and_mul", shape_rank=2, autotuned=False, aten="aten::silu",
               description="silu(x1) * x2 fused, x = [x1 | x2] of shape (M, 2N), output (M, N); shape is (M, N)"),
        OpInfo(id="add", aten="aten::add.Tensor", autotuned=False, description="a + b, elementwise"),
        OpInfo(id="sum", shape_rank=2, autotuned=False, aten="aten::sum.dim_IntList",
               description="sum over the last dim of (M, N), fp32 accumulation, output in the input dtype"),
        # H200, 2026-11-29 core run (benchmarks/results/h200-core-2026-11-29/ops_status.csv): mm took
        # 5.7 s per case (autotuning), the memory-bound ops 0.8-1.5 s.
        OpInfo(id="mm", shape_rank=3, aten="aten::mm", case_cost=4.5, autotuned=True,
               description="C = A @ B, A (M, K), B (K, N), fp32 accumulation, grouped tile order, autotuned on GPU"),
    )
}


def builtin_spec(op_id: str, **behaviour: Any) -> OpSpec:
    """The OpSpec of built-in op ``op_id``: its entry in :data:`BUILTIN` plus the callables (and
    tolerances) its module defines."""
    info = BUILTIN[op_id]
    return OpSpec(**{f.name: getattr(info, f.name) for f in fields(OpInfo)}, **behaviour)


def _builtin_op(op_id: str) -> OpSpec:
    spec: OpSpec = importlib.import_module(f"harness.ops.{op_id}").OP
    return spec


def _import_user_module(ref: str) -> ModuleType:
    path = Path(ref)
    if ref.endswith(".py") or path.exists():
        if not path.is_file():
            raise UsageError(
                f"--ops-module {ref!r}: no such file. Give the path of a Python file that defines "
                "HARNESS_OPS (a list of harness.ops.base.OpSpec), or a dotted module name."
            )
        name = f"harness_user_ops_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"--ops-module {ref!r}: Python cannot load this file as a module.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # a user's module: report whatever it raised
            sys.modules.pop(name, None)
            raise UsageError(f"--ops-module {ref!r} failed to import: {_raised(exc)}. "
                             "Fix the module (run `python FILE` to see the full traceback).") from None
        return module
    try:
        return importlib.import_module(ref)
    except ImportError as exc:
        raise UsageError(
            f"--ops-module {ref!r}: cannot import it ({exc}). Give a file path or a module "
            "importable from the current environment."
        ) from exc
    except (Exception, SystemExit) as exc:
        raise UsageError(f"--ops-module {ref!r} failed to import: {_raised(exc)}. "
                         f"Fix the module (run `python -c 'import {ref}'` to see the full traceback).") from None


def _raised(exc: BaseException) -> str:
    """What a user's code raised, on one line; a sys.exit() is named as such (it is not an error
    of its own, but an op module must not end the harness)."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) while being imported"
    return f"{type(exc).__name__}: {exc}"


def _declared_ops(module: Any, ref: str) -> Any:
    """What a user's module offers as its ops: ``harness_ops()``'s result, else ``HARNESS_OPS``."""
    if hasattr(module, "harness_ops"):
        try:
            return module.harness_ops()
        except (Exception, SystemExit) as exc:
            raise UsageError(f"--ops-module {ref!r}: harness_ops() raised {_raised(exc)}. Fix the "
                             "function; it must return a list of harness.ops.base.OpSpec (docs/ops.md).") from None
    if hasattr(module, "HARNESS_OPS"):
        return module.HARNESS_OPS
    raise UsageError(
        f"--ops-module {ref!r} defines neither HARNESS_OPS nor harness_ops(). "
        "Expose a list of harness.ops.base.OpSpec under one of these names (docs/ops.md)."
    )


def load_user_ops(ref: str) -> list[OpSpec]:
    from harness.providers.declarative import is_declaration_file, load_declared

    if is_declaration_file(ref):  # a declarative ops YAML (docs/flaggems.md), no code
        return list(load_declared(ref).ops)
    found = _declared_ops(_import_user_module(ref), ref)
    try:
        if isinstance(found, str | bytes | OpSpec | Mapping):
            raise TypeError
        ops = list(found)
    except (Exception, SystemExit):
        raise UsageError(f"--ops-module {ref!r}: HARNESS_OPS / harness_ops() gave {type(found).__name__}, "
                         "not a list of harness.ops.base.OpSpec (docs/ops.md).") from None
    if not ops:
        raise UsageError(f"--ops-module {ref!r}: HARNESS_OPS / harness_ops() gave no op, so the module adds "
                         "nothing (a list left empty, or a filter that kept none?). Give at least one "
                         "harness.ops.base.OpSpec, or leave the module out (docs/ops.md).")
    for item in ops:
        if not isinstance(item, OpSpec):
            raise UsageError(
                f"--ops-module {ref!r}: {item!r} is not a harness.ops.base.OpSpec. "
                "Build each op with OpSpec(...) (docs/ops.md)."
            )
        problems = op_problems(item)
        if problems:
            raise UsageError(f"--ops-module {ref!r}: op {item.id!r}: {'; '.join(problems)}. Fix the OpSpec "
                             "(docs/ops.md).")
    return [
        op if op.source != "builtin" else _with_source(op, ref) for op in ops
    ]


def _with_source(op: OpSpec, ref: str) -> OpSpec:
    from dataclasses import replace

    return replace(op, source=ref)


def _add(found: dict[str, OpInfo], ref: str, op: OpInfo) -> None:
    if op.id in found:
        raise UsageError(
            f"Op id {op.id!r} from --ops-module {ref!r} is already defined by "
            f"{found[op.id].source!r}. Give your op another id (for example 'my_{op.id}')."
        )
    found[op.id] = op


def catalog(ops_modules: Sequence[str] = ()) -> dict[str, OpInfo]:
    """Every op a run can name: the built-in ones (described, not imported) and users' ops
    (their modules are imported); an id defined twice is an error naming both sources."""
    found: dict[str, OpInfo] = dict(BUILTIN)
    for ref in ops_modules:
        for op in load_user_ops(ref):
            _add(found, ref, op.info)
    return found


def load_ops(ops_modules: Sequence[str] = ()) -> dict[str, OpSpec]:
    """Every op as a whole OpSpec (imports the built-in modules, so torch and Triton)."""
    found = {op_id: _builtin_op(op_id) for op_id in BUILTIN}
    for ref in ops_modules:
        for op in load_user_ops(ref):
            _add(found, ref, op)  # type: ignore[arg-type]
    return found


def load_op(op_id: str, ops_modules: Sequence[str] = ()) -> OpSpec:
    """The whole OpSpec of ``op_id`` (in the op process): a built-in module, or a user's."""
    if op_id in BUILTIN:
        return _builtin_op(op_id)
    for ref in ops_modules:
        for op in load_user_ops(ref):
            if op.id == op_id:
                return op
    raise UsageError(f"Op {op_id!r} is neither built in nor defined by --ops-module {', '.join(ops_modules) or '(none)'}.")
