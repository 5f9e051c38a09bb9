"""The catalogue of ops: built-in ones plus those from users' modules.

Built-in ops are listed here by module name, imported on first use (importing
them imports triton, which must not happen before the CPU backend has set
TRITON_INTERPRET in the process that runs kernels). User modules are loaded
from a file path or a dotted module name and expose ``HARNESS_OPS`` or
``harness_ops()``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType

from harness.errors import UsageError
from harness.ops.base import OpSpec

__all__ = ["BUILTIN_OP_IDS", "builtin_ops", "build_catalog", "load_user_ops", "select_ops"]

BUILTIN_OP_IDS: tuple[str, ...] = (
    "softmax",
    "layer_norm",
    "rms_norm",
    "gelu",
    "silu_and_mul",
    "add",
    "sum",
    "mm",
)


def builtin_ops() -> dict[str, OpSpec]:
    ops: dict[str, OpSpec] = {}
    for op_id in BUILTIN_OP_IDS:
        module = importlib.import_module(f"harness.ops.{op_id}")
        spec: OpSpec = module.OP
        ops[spec.id] = spec
    return ops


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
        except Exception as exc:  # a user's module: report whatever it raised
            raise UsageError(
                f"--ops-module {ref!r} failed to import: {type(exc).__name__}: {exc}. "
                "Fix the module (run `python FILE` to see the full traceback)."
            ) from exc
        return module
    try:
        return importlib.import_module(ref)
    except ImportError as exc:
        raise UsageError(
            f"--ops-module {ref!r}: cannot import it ({exc}). Give a file path or a module "
            "importable from the current environment."
        ) from exc


def load_user_ops(ref: str) -> list[OpSpec]:
    from harness.providers.declarative import is_declaration_file, load_declared

    if is_declaration_file(ref):  # a declarative ops YAML (docs/flaggems.md), no code
        return list(load_declared(ref).ops)
    module = _import_user_module(ref)
    if hasattr(module, "harness_ops"):
        found = module.harness_ops()
    elif hasattr(module, "HARNESS_OPS"):
        found = module.HARNESS_OPS
    else:
        raise UsageError(
            f"--ops-module {ref!r} defines neither HARNESS_OPS nor harness_ops(). "
            "Expose a list of harness.ops.base.OpSpec under one of these names (docs/ops.md)."
        )
    ops = list(found)
    for item in ops:
        if not isinstance(item, OpSpec):
            raise UsageError(
                f"--ops-module {ref!r}: {item!r} is not a harness.ops.base.OpSpec. "
                "Build each op with OpSpec(...) (docs/ops.md)."
            )
    return [
        op if op.source != "builtin" else _with_source(op, ref) for op in ops
    ]


def _with_source(op: OpSpec, ref: str) -> OpSpec:
    from dataclasses import replace

    return replace(op, source=ref)


def build_catalog(ops_modules: Sequence[str] = ()) -> dict[str, OpSpec]:
    """Built-in ops plus users' ops; an id defined twice is an error naming both sources."""
    catalog = builtin_ops()
    for ref in ops_modules:
        for op in load_user_ops(ref):
            if op.id in catalog:
                raise UsageError(
                    f"Op id {op.id!r} from --ops-module {ref!r} is already defined by "
                    f"{catalog[op.id].source!r}. Give your op another id (for example "
                    f"'my_{op.id}')."
                )
            catalog[op.id] = op
    return catalog


def select_ops(catalog: Mapping[str, OpSpec], wanted: Iterable[str]) -> list[OpSpec]:
    """The ops named (all of them when none is named), in the order given; unknown names fail."""
    names = list(wanted)
    if not names:
        return list(catalog.values())
    unknown = [n for n in names if n not in catalog]
    if unknown:
        raise UsageError(
            f"Unknown op(s): {', '.join(unknown)}. Known ops: {', '.join(catalog)}. "
            "Check the spelling, or load your own ops with --ops-module."
        )
    seen: dict[str, OpSpec] = {}
    for n in names:
        seen.setdefault(n, catalog[n])
    return list(seen.values())
