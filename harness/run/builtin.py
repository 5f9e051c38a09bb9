"""The harness's own ops as a source (harness.run.source.Source): the built-in ops and those of
``--ops-module``, at a shape level or a ``--shapes-file``, each run as test_cases.py in an op
process (:class:`harness.run.batch.CaseRunner`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.backends.base import Backend
from harness.errors import UsageError
from harness.ops.base import Shape
from harness.ops.registry import catalog
from harness.ops.shapes import load_level, load_shapes_file
from harness.options import RunOptions
from harness.providers import check_provider
from harness.providers.declarative import declared_shapes
from harness.results.runinfo import RunInfo
from harness.run.batch import CaseRunner
from harness.run.plan import OpPlan, assign_device, plan_for, plan_ops, resolve_level
from harness.run.select import select_run_ops
from harness.run.source import Chosen

__all__ = ["BUILTIN", "BuiltinSource"]


def _absolute_modules(refs: Sequence[str]) -> tuple[str, ...]:
    """--ops-module files as absolute paths: the op processes (and a resume from another working
    directory) import them wherever they run; dotted module names stay as given."""
    return tuple(str(Path(r).absolute()) if r.endswith((".py", ".yaml", ".yml")) and Path(r).is_file() else r
                 for r in refs)


def _dismissed_plan(
    op: str,
    options: RunOptions,
    level_shapes: Mapping[str, Sequence[Shape]],
    user_shapes: Mapping[str, Sequence[Shape]] | None,
    devices: Sequence[str],
) -> OpPlan:
    """A dismissed op stays in the plan so its cases show as skipped; it may have no shapes."""
    shapes = (user_shapes or {}).get(op) or level_shapes.get(op) or ()
    return OpPlan(op=op, device=assign_device(op, devices), dtypes=tuple(options.dtypes),
                  shapes=tuple(tuple(s) for s in shapes), provider=options.provider)


@dataclass(frozen=True)
class BuiltinSource:
    """The harness's own cases: the source of every run not claimed by another."""

    name: str = "builtin"

    def claims(self, options: RunOptions) -> bool:
        return True

    def made(self, info: RunInfo) -> bool:
        return True

    def choose(self, options: RunOptions, backend: Backend, env: Mapping[str, str], all_ops: bool) -> Chosen:
        if options.nodes or options.allow_version_mismatch:
            raise UsageError("--node and --allow-version-mismatch apply to --suite runs only.")
        check_provider(options.provider)
        plugins = plan_for(backend, options)  # validates the timer for this backend, the toggles
        ops = catalog(options.ops_modules)
        selection = select_run_ops(ops, options.ops, options.ops_file, options.dismiss)
        level = resolve_level(options.level, backend)
        # Shapes declared next to declarative ops apply where the level names none for them.
        level_shapes = {**declared_shapes(options.ops_modules), **load_level(level)}
        user_shapes = load_shapes_file(options.shapes_file, ops.keys()) if options.shapes_file else None
        options = replace(options, ops_modules=_absolute_modules(options.ops_modules))  # for the op processes

        def planned(devices: Sequence[str]) -> tuple[OpPlan, ...]:
            runnable = {o.op: o for o in plan_ops(options, backend, selection.to_run, level, level_shapes,
                                                  user_shapes, devices)}
            return tuple(runnable.get(op.id) or _dismissed_plan(op.id, options, level_shapes, user_shapes, devices)
                         for op in selection.ops)

        return Chosen(options=options, level=level, plugins=plugins, runner=CaseRunner(), plan_ops=planned,
                      dismissed=dict(selection.dismissed))

    def reopen(self, info: RunInfo, options: RunOptions, backend: Backend) -> Chosen:
        return Chosen(options=options, level=info.level, plugins=plan_for(backend, options),
                      runner=CaseRunner())


BUILTIN = BuiltinSource()
