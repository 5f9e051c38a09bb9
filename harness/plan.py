"""Planning a run: which ops, shapes, dtypes, devices and plugins (pure: no I/O, no torch)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.backends.base import Backend
from harness.errors import UsageError
from harness.measure import Case
from harness.ops.base import OpSpec, Shape
from harness.options import RunOptions
from harness.plugins.planning import PluginPlan, plan_plugins

__all__ = ["OpPlan", "RunPlan", "assign_device", "make_run_id", "plan_run", "resolve_level"]


@dataclass(frozen=True)
class OpPlan:
    op: str
    device: str
    dtypes: tuple[str, ...]
    shapes: tuple[Shape, ...]
    provider: str

    def cases(self) -> list[Case]:
        return [Case(self.op, self.provider, d, s) for s in self.shapes for d in self.dtypes]


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    backend: Backend
    level: str
    plugins: PluginPlan
    devices: tuple[str, ...]
    ops: tuple[OpPlan, ...]
    options: RunOptions

    @property
    def timer(self) -> str:
        return self.plugins.timer

    def total_cases(self) -> int:
        return sum(len(o.cases()) for o in self.ops)


def make_run_id(backend: str, now: _dt.datetime | None = None, token: str | None = None) -> str:
    now = now or _dt.datetime.now(_dt.UTC)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{backend}-{token or secrets.token_hex(3)}"


def resolve_level(requested: str, backend: Backend) -> str:
    if requested != "auto":
        return requested
    return "core" if backend.capabilities.accelerator else "smoke"


def assign_device(op_id: str, devices: Sequence[str]) -> str:
    """A stable device for an op: independent of the order ops were named in, so a resume lands
    on the same device."""
    digest = hashlib.sha256(op_id.encode()).digest()
    return devices[int.from_bytes(digest[:8], "big") % len(devices)]


def plan_run(
    options: RunOptions,
    backend: Backend,
    ops: Sequence[OpSpec],
    level: str,
    level_shapes: Mapping[str, Sequence[Shape]],
    user_shapes: Mapping[str, Sequence[Shape]] | None,
    devices: Sequence[str],
    run_id: str,
) -> RunPlan:
    if not devices:
        raise UsageError(f"No {backend.name} device to run on. Run `harness doctor` to see what is detected.")
    plugins = plan_plugins(backend, options.timer)
    plans: list[OpPlan] = []
    for op in ops:
        shapes = list((user_shapes or {}).get(op.id) or level_shapes.get(op.id) or ())
        if not shapes:
            raise UsageError(
                f"Op {op.id!r} has no shapes at level {level!r}. Give them in a shapes file "
                f"(--shapes-file, keyed by op id), for example '{op.id}: [[1024, 1024]]'."
            )
        for shape in shapes:
            problem = op.check_shape(shape)
            if problem:
                raise UsageError(f"{problem}. Fix the shapes file or the level's shapes.")
        plans.append(
            OpPlan(
                op=op.id,
                device=assign_device(op.id, devices),
                dtypes=tuple(options.dtypes),
                shapes=tuple(tuple(s) for s in shapes),
                provider=options.provider,
            )
        )
    return RunPlan(
        run_id=run_id,
        backend=backend,
        level=level,
        plugins=plugins,
        devices=tuple(devices),
        ops=tuple(plans),
        options=options,
    )
