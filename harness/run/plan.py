"""Planning a run: which ops, shapes, dtypes, devices and plugins (pure: no I/O, no torch)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import secrets
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from harness.backends.base import Backend, Capabilities
from harness.contract import Case
from harness.errors import UsageError
from harness.ops.base import OpInfo, Shape
from harness.options import RunOptions
from harness.run.plugins import PluginPlan, plan_plugins

__all__ = [
    "OpPlan",
    "RunPlan",
    "PartPlan",
    "assign_device",
    "assign_parts",
    "make_run_id",
    "plan_digest",
    "plan_for",
    "plan_ops",
    "plan_run",
    "plan_part",
    "resolve_level",
    "share_ops",
    "warm_profiler_for",
]


@dataclass(frozen=True)
class OpPlan:
    op: str
    device: str
    dtypes: tuple[str, ...]
    shapes: tuple[Shape, ...]
    provider: str
    case_cost: float = 1.0  # relative wall time of one case (OpSpec.case_cost), for dealing shares and parts only
    autotuned: bool | None = None  # OpInfo.autotuned: which ops a sweep tunes first
    # the dtypes the op supports (OpSpec.dtypes): a case of another dtype is a skip, also when the
    # op's process never reached it; None: not known (then every unreached case is an error)
    supported_dtypes: tuple[str, ...] | None = None
    # None: the cases are planned (shapes x dtypes). A number: the op's process finds its cases
    # itself (a library's benchmark suite chooses its inputs) and about this many are expected.
    open_cases: int | None = None

    @property
    def is_open(self) -> bool:
        return self.open_cases is not None

    def cases(self) -> list[Case]:
        """The planned cases; none for an op whose process finds its own (``is_open``)."""
        return [Case(self.op, self.provider, d, s) for s in self.shapes for d in self.dtypes]

    @property
    def expected_cases(self) -> int:
        return self.open_cases if self.open_cases is not None else len(self.cases())


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

    @property
    def warm_profiler(self) -> bool:
        return warm_profiler_for(self.backend.capabilities, self.timer)

    def total_cases(self) -> int:
        return sum(o.expected_cases for o in self.ops)


def warm_profiler_for(caps: Capabilities, timer: str) -> bool:
    """Whether a pre-started op process pays the profiler's start while held: where its timer may
    hand rows to the profiler (the graph timer's small rows, or the profiler timer) and the
    backend measured the warm-up safe (Capabilities.profiler_warm_up)."""
    return caps.profiler and caps.profiler_warm_up and timer in ("graph", "profiler")


def plan_for(backend: Backend, options: RunOptions) -> PluginPlan:
    """The plugin plan of a run with these options (toggles, extra plugins, --ir)."""
    return plan_plugins(backend, options.timer, options.plugins, options.extra_plugins, options.ir)


def make_run_id(backend: str, now: _dt.datetime | None = None, token: str | None = None) -> str:
    now = now or _dt.datetime.now(_dt.UTC)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{backend}-{token or secrets.token_hex(3)}"


def resolve_level(requested: str, backend: Backend) -> str:
    if requested != "auto":
        return requested
    return "core" if backend.capabilities.accelerator else "smoke"


def _rank(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def assign_device(op_id: str, devices: Sequence[str]) -> str:
    """The device an op ranks first (rendezvous hashing): independent of the order ops or devices
    were named in. :func:`share_ops` starts from this choice and balances the load."""
    return max(dict.fromkeys(devices), key=lambda d: _rank(f"{op_id}\x00{d}"))


OP_START_COST = 1.0  # an op process's start (interpreter, torch import), in units of one plain case


def share_ops(ops: Sequence[OpPlan], devices: Sequence[str]) -> tuple[OpPlan, ...]:
    """Give every op a device, stable and balanced.

    Each op ranks the devices by a hash of (op id, device) (rendezvous hashing), so its
    choice depends neither on the order ops were named in nor on the order of the device
    list. Ops are placed heaviest first, each on its best-ranked device still under an even
    share of the total weight, else on the least loaded one. An op's weight is its start
    (:data:`OP_START_COST`, one plain case's worth) plus its cases times its ``case_cost``, so
    an autotuned op with few cases weighs what it costs in wall time. The same
    selection on the same devices always gives the same assignment; the plan stored in
    run.json keeps it for a resume.
    """
    devices = list(dict.fromkeys(devices))
    if not devices:
        raise ValueError("share_ops needs at least one device")
    weight = {o.op: OP_START_COST + o.expected_cases * max(o.case_cost, 0.0) for o in ops}
    cap = sum(weight.values()) / len(devices) + 1e-9
    load = dict.fromkeys(devices, 0.0)
    chosen: dict[str, str] = {}
    for o in sorted(ops, key=lambda o: (-weight[o.op], _rank(o.op))):
        ranked = sorted(devices, key=lambda d: _rank(f"{o.op}\x00{d}"), reverse=True)
        fits = [d for d in ranked if load[d] + weight[o.op] <= cap]
        device = fits[0] if fits else min(ranked, key=lambda d: load[d])
        load[device] += weight[o.op]
        chosen[o.op] = device
    return tuple(replace(o, device=chosen[o.op]) for o in ops)


def plan_ops(
    options: RunOptions,
    backend: Backend,
    ops: Sequence[OpInfo],
    level: str,
    level_shapes: Mapping[str, Sequence[Shape]],
    user_shapes: Mapping[str, Sequence[Shape]] | None,
    devices: Sequence[str],
) -> tuple[OpPlan, ...]:
    """Each op's plan: its shapes (the shapes file's, else the level's), checked, on its device."""
    if not devices:
        raise UsageError(f"No {backend.name} device to run on. Run `harness doctor` to see what is detected.")
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
                case_cost=op.case_cost,
                autotuned=op.autotuned,
                supported_dtypes=tuple(op.dtypes),
            )
        )
    return share_ops(plans, devices)


def plan_run(
    options: RunOptions,
    backend: Backend,
    ops: Sequence[OpInfo],
    level: str,
    level_shapes: Mapping[str, Sequence[Shape]],
    user_shapes: Mapping[str, Sequence[Shape]] | None,
    devices: Sequence[str],
    run_id: str,
) -> RunPlan:
    """The run's plan: :func:`plan_ops` with the plugins planned for the backend."""
    ops_planned = plan_ops(options, backend, ops, level, level_shapes, user_shapes, devices)
    return RunPlan(run_id=run_id, backend=backend, level=level, plugins=plan_for(backend, options),
                   devices=tuple(devices), ops=ops_planned, options=options)


# -- shards: parts of one run for several machines (--shard K/N, joined by `harness merge`) ------


def _part_name(index: int) -> str:
    return f"part {index}"


def assign_parts(ops: Sequence[OpPlan], count: int, weightless: Collection[str] = ()) -> dict[str, int]:
    """op id -> part (1..count): :func:`share_ops` with the parts as the "devices".

    The same selection gives the same parts on every machine (nothing here depends on the
    machine, the order ops were named in, or the devices). Ops in ``weightless`` (dismissed:
    never run) weigh only their start, so they do not unbalance the parts.
    """
    if count < 1:
        raise ValueError("assign_parts needs at least one part")
    weighed = [replace(o, case_cost=0.0) if o.op in weightless else o for o in ops]
    placed = share_ops(weighed, [_part_name(k) for k in range(1, count + 1)])
    return {o.op: int(o.device.rsplit(" ", 1)[1]) for o in placed}


def plan_digest(ops: Sequence[OpPlan], options: RunOptions, level: str, timer: str,
                extra: Mapping[str, object] | None = None) -> str:
    """A hash of what the whole run measures: every op's cases and the options that change a
    measurement (plugin toggles included). Shards of one run carry the same digest; `harness merge`
    checks it. ``extra``: what else decides a measurement for ops whose cases are not planned here
    (a suite's tree and shape entries, JSON-able); left out of the hash when None, so the digest of
    the harness's own runs does not change with it."""
    what: dict[str, object] = {
        "ops": [[o.op, o.provider, list(o.dtypes), [list(s) for s in o.shapes]] for o in ops],
        "level": level,
        "timer": timer,
        "options": [options.cache, options.seed, options.warmup_ms, options.rep_ms, options.cap_ms, options.provider,
                    list(options.plugins), list(options.extra_plugins)],
    }
    if extra is not None:
        what["extra"] = extra
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PartPlan:
    """One part of a run: which ops it runs, and what identifies the whole it is part of."""

    index: int  # 1-based
    count: int
    ops: tuple[str, ...]  # this part's ops, in selection order
    all_ops: tuple[str, ...]  # every op of the whole run, in selection order
    digest: str  # plan_digest of the whole run

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def to_dict(self) -> dict[str, object]:
        """run.json's ``shard`` entry."""
        return {"index": self.index, "count": self.count, "ops": list(self.ops),
                "all_ops": list(self.all_ops), "plan_digest": self.digest}


def weigh_by_seconds(ops: Sequence[OpPlan], seconds: Mapping[str, float]) -> tuple[OpPlan, ...]:
    """The ops with their weights set to their measured wall time (``seconds``: op -> seconds, an
    earlier run's ops_status.csv), so that share_ops balances time. An op without a measured time
    gets its planned weight converted to seconds at the rate the measured ops show (their seconds
    over their planned weights); with no op measured, the ops are returned as they are (pure)."""
    def planned(o: OpPlan) -> float:
        return OP_START_COST + o.expected_cases * max(o.case_cost, 0.0)

    measured = [o for o in ops if seconds.get(o.op, 0.0) > 0]
    if not measured:
        return tuple(ops)
    rate = sum(seconds[o.op] for o in measured) / sum(planned(o) for o in measured)
    weighed = []
    for o in ops:
        total = seconds[o.op] if seconds.get(o.op, 0.0) > 0 else planned(o) * rate
        # weight = OP_START_COST + cases * case_cost: choose case_cost so the weight is the time
        weighed.append(replace(o, case_cost=max(total - OP_START_COST, 0.0) / max(o.expected_cases, 1)))
    return tuple(weighed)


def plan_part(
    ops: Sequence[OpPlan],
    index: int,
    count: int,
    devices: Sequence[str],
    digest: str,
    weightless: Collection[str] = (),
    seconds: Mapping[str, float] | None = None,
) -> tuple[tuple[OpPlan, ...], PartPlan]:
    """The ops of part ``index`` of ``count``, spread again over this machine's ``devices``;
    parts balanced by ``seconds`` (an earlier run's time per op, :func:`weigh_by_seconds`) when
    given, else by the planned cost."""
    if not 1 <= index <= count:
        raise UsageError(f"shard {index}/{count}: K must be between 1 and N.")
    parts = assign_parts(weigh_by_seconds(ops, seconds) if seconds else ops, count, weightless)
    mine = [o for o in ops if parts[o.op] == index]
    placed = share_ops(mine, devices) if mine else ()
    part = PartPlan(index=index, count=count, ops=tuple(o.op for o in mine),
                      all_ops=tuple(o.op for o in ops), digest=digest)
    return tuple(placed), part
