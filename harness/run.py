"""`harness run`: validate, plan, execute op by op, then render every output from the records."""

from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from harness import __version__
from harness.autotune import AutotuneMeta, check_replay_source, write_meta
from harness.backends import enumerate_devices, resolve_backend
from harness.batch import (
    INTERRUPTED,
    PENDING,
    OpOutcome,
    StopToken,
    read_markers,
    render_status,
    run_batch,
    stop_on_signals,
)
from harness.device_state import append_state, summarize_states
from harness.errors import UsageError
from harness.ops.base import Shape
from harness.ops.registry import build_catalog
from harness.ops.shapes import load_level, load_shapes_file
from harness.options import RunOptions
from harness.plan import OpPlan, RunPlan, assign_device, make_run_id, plan_run, resolve_level
from harness.plugins.planning import plan_plugins
from harness.progress import make_progress
from harness.providers import check_provider
from harness.providers.declarative import declared_shapes
from harness.results.render import Unreached, render_csv, render_junit, render_markdown
from harness.results.store import atomic_write_text, read_json, read_records, write_json
from harness.selection import select_run_ops

__all__ = ["RUN_SCHEMA_VERSION", "execute", "finalize", "prepare", "prepare_resume"]

RUN_SCHEMA_VERSION = 1


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def git_commit(where: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-c", "safe.directory=*", "rev-parse", "HEAD"],
            cwd=where, capture_output=True, text=True, timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def git_dirty(where: Path) -> bool | None:
    """Whether tracked files differ from the commit :func:`git_commit` names (None: not known).
    A copied working tree with a stale ``.git`` (as on a lent machine) is dirty, not that commit."""
    try:
        done = subprocess.run(
            ["git", "-c", "safe.directory=*", "status", "--porcelain", "--untracked-files=no"],
            cwd=where, capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(done.stdout.strip()) if done.returncode == 0 else None


def _check_out_dir(path: Path) -> None:
    """Fail before anything is written if the run directory cannot be used."""
    if path.exists() and (path / "run.json").exists():
        raise UsageError(
            f"Output directory {path} already holds a run. Use --resume {path} to finish it, "
            "or choose another --out."
        )
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK):
        raise UsageError(
            f"Output directory {path} is not writable ({probe} does not allow writing). "
            "Choose another --out or fix the permissions."
        )
    if probe.is_file():
        raise UsageError(f"Output path {probe} is a file, not a directory. Choose another --out.")


@dataclass(frozen=True)
class Prepared:
    plan: RunPlan
    run_dir: Path
    resumed: bool = False
    dismissed: Mapping[str, str] = field(default_factory=dict)  # op id -> reason (in plan.ops, never run)


def prepare(options: RunOptions, env: Mapping[str, str]) -> Prepared:
    """Validate everything the user gave and plan the run; nothing is written yet."""
    backend = resolve_backend(options.backend)
    options = _checked_replay(options, backend.name)
    check_provider(options.provider)
    plan_plugins(backend, options.timer)  # validates the timer for this backend
    catalog = build_catalog(options.ops_modules)
    selection = select_run_ops(catalog, options.ops, options.ops_file, options.dismiss)
    level = resolve_level(options.level, backend)
    # Shapes declared next to declarative ops apply where the level names none for them.
    level_shapes = {**declared_shapes(options.ops_modules), **load_level(level)}
    user_shapes = load_shapes_file(options.shapes_file, catalog.keys()) if options.shapes_file else None
    devices = enumerate_devices(backend, options.devices or None, env)
    run_id = options.run_id or make_run_id(backend.name)
    plan = plan_run(options, backend, selection.to_run, level, level_shapes, user_shapes, devices, run_id)
    runnable = {o.op: o for o in plan.ops}
    ops = tuple(
        runnable.get(op.id) or _dismissed_plan(op.id, options, level_shapes, user_shapes, plan.devices)
        for op in selection.ops
    )
    run_dir = Path(options.out) if options.out else Path(options.reports_dir) / run_id
    _check_out_dir(run_dir)
    return Prepared(plan=replace(plan, ops=ops), run_dir=run_dir, dismissed=dict(selection.dismissed))


def _checked_replay(options: RunOptions, backend: str) -> RunOptions:
    """Refuse an unusable --replay-from before anything runs; children get its absolute path."""
    if not options.replay_from:
        return options
    source = Path(options.replay_from).resolve()
    check_replay_source(source, backend)
    return replace(options, replay_from=str(source))


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


def prepare_resume(run_dir: Path, env: Mapping[str, str]) -> Prepared:
    """Rebuild the plan stored in an earlier run directory."""
    path = run_dir / "run.json"
    if not path.is_file():
        raise UsageError(f"--resume {run_dir}: no run.json there. Give the directory of an earlier run.")
    info = read_json(path)
    opts: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in info["options"].items()}
    options = RunOptions(**opts)
    backend = resolve_backend(info["backend"])
    options = _checked_replay(options, backend.name)
    ops = tuple(
        OpPlan(op=o["op"], device=o["device"], dtypes=tuple(o["dtypes"]),
               shapes=tuple(tuple(s) for s in o["shapes"]), provider=o["provider"])
        for o in info["plan"]
    )
    plan = RunPlan(
        run_id=info["run_id"], backend=backend, level=info["level"],
        plugins=plan_plugins(backend, options.timer), devices=tuple(info["devices"]),
        ops=ops, options=options,
    )
    return Prepared(plan=plan, run_dir=run_dir, resumed=True, dismissed=dict(info.get("dismissed", {})))


def fingerprint(backend: str, identity: Mapping[str, Any], plan: RunPlan) -> str:
    """What must match for two runs to be compared: backend, device model, timer, level, cache..."""
    key = {
        "backend": backend,
        "device_name": identity.get("device_name"),
        "device_arch": identity.get("device_arch"),
        "timer": plan.timer,
        "level": plan.level,
        "cache": plan.options.cache,
        "provider": plan.options.provider,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _run_info(
    plan: RunPlan, status: str, started: str, identity: dict[str, Any], dismissed: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "schema_version": RUN_SCHEMA_VERSION,
        "run_id": plan.run_id,
        "status": status,
        "backend": plan.backend.name,
        "backend_description": plan.backend.description,
        "devices": list(plan.devices),
        "level": plan.level,
        "timer": plan.timer,
        "plugins": list(plan.plugins.modules),
        "identity": identity,
        "harness_version": __version__,
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "git_dirty": git_dirty(Path(__file__).resolve().parent),
        "python": sys.version.split()[0],
        "container": {"image": plan.options.image, "digest": plan.options.image_digest},
        "options": plan.options.to_dict(),
        "plan": [
            {"op": o.op, "device": o.device, "dtypes": list(o.dtypes),
             "shapes": [list(s) for s in o.shapes], "provider": o.provider}
            for o in plan.ops
        ],
        "dismissed": dict(dismissed),
        "fingerprint": fingerprint(plan.backend.name, identity, plan),
        "started_at": started,
        "finished_at": None if status == "running" else _now(),
    }


def _identity(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    per_device: dict[str, Any] = {}
    for path in sorted((run_dir / "identity").glob("*.json")):
        per_device[path.stem] = read_json(path)
    first: dict[str, Any] = next(iter(per_device.values()), {})
    return dict(first), per_device


def _unreached_message(outcome: OpOutcome | None, first: bool) -> tuple[str, str]:
    """(JUnit status, message) for a planned case that has no record."""
    if outcome is None or outcome.status in (PENDING, INTERRUPTED):
        return "error", "not run: the run was interrupted first; finish it with `harness run --resume RUN_DIR`"
    why = "; ".join(outcome.notes) or outcome.status
    tries = f" after {outcome.attempts} attempts" if outcome.attempts > 1 else ""
    if outcome.status == "SKIP":
        return "skip", f"op skipped: {why}"
    if outcome.status in ("CRASH", "TIMEOUT"):
        where = "during this case" if first else "before reaching this case"
        return "error", f"op {outcome.status} {where}{tries}: {why}"
    return "error", f"not run: op {outcome.status}{tries}: {why}"


def unreached_cases(plan: RunPlan, records: list[Any], outcomes: Mapping[str, OpOutcome]) -> list[Unreached]:
    """Every planned case without a record, with why: cases are never silently missing."""
    seen = {r.case_id for r in records}
    missing: list[Unreached] = []
    for op_plan in plan.ops:
        outcome = outcomes.get(op_plan.op)
        cases = [c.case_id for c in op_plan.cases()] or [op_plan.op]  # a dismissed op may have no shapes
        for index, case_id in enumerate(c for c in cases if c not in seen):
            status, message = _unreached_message(outcome, first=index == 0)
            missing.append(Unreached(op=op_plan.op, case_id=case_id, status=status, message=message))
    return missing


def finalize(
    plan: RunPlan,
    run_dir: Path,
    outcomes: list[OpOutcome],
    status: str,
    started: str,
    dismissed: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Render every output from the records; each file replaced atomically."""
    records = read_records(run_dir / "records.jsonl")
    identity, per_device = _identity(run_dir)
    info = _run_info(plan, status, started, identity, dismissed or {})
    info["identity_per_device"] = per_device
    append_state(run_dir, plan.backend, "<run end>", plan.devices)
    info["device_state"] = summarize_states(run_dir)
    by_op = {o.op: o for o in outcomes}
    info["ops"] = [o.row() for o in outcomes]
    unreached = unreached_cases(plan, records, by_op)
    atomic_write_text(run_dir / "summary.csv", render_csv(records))
    atomic_write_text(
        run_dir / "junit.xml",
        render_junit(records, unreached, op_notes={o.op: f"{o.status} {'; '.join(o.notes)}".strip() for o in outcomes}),
    )
    atomic_write_text(run_dir / "report.md", render_markdown(records, info, unreached))
    atomic_write_text(run_dir / "ops_status.csv", render_status(outcomes))
    write_meta(run_dir, _autotune_meta(plan, identity))
    write_json(run_dir / "run.json", info)
    return info


def _autotune_meta(plan: RunPlan, identity: Mapping[str, Any]) -> AutotuneMeta:
    """The sidecar of autotune/: what a replay of this run must match."""
    triton_version = identity.get("triton")
    if not triton_version:
        import importlib.metadata

        try:
            triton_version = importlib.metadata.version("triton")
        except importlib.metadata.PackageNotFoundError:
            triton_version = "absent"
    return AutotuneMeta(backend=plan.backend.name, device_name=str(identity.get("device_name", "")),
                        device_arch=str(identity.get("device_arch", "")), triton_version=str(triton_version),
                        run_id=plan.run_id)


LOCK_FILE = "run.lock"


def _open_lock(path: Path) -> int:
    """An open descriptor of ``path`` (created if missing) holding an exclusive flock on it.

    flock belongs to the open file, so the kernel drops it when its holder ends, however it ends
    (a run killed with SIGKILL leaves a file that locks nothing), and the descriptor is never
    inherited by an op process, which would keep the lock after the harness died. The holder
    removes the file before it lets go (:func:`_run_lock`): a process that opened the file before
    that removal and locked it after holds a lock on a name that is gone, so it opens the path
    again until the file it locked is the one the path names.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise
        try:
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


@contextmanager
def _run_lock(run_dir: Path, fresh: bool = False) -> Iterator[None]:
    """One harness process per run directory: a resume must not race the run it finishes.

    ``run.lock`` exists only while a harness process works on the directory: it is removed
    when the run ends (complete, failed, interrupted or on an error of the harness); a SIGKILLed
    run leaves it behind, unlocked, and the next resume takes it. ``fresh`` (a new run, not a
    resume): refuse a directory that came to hold a run while this process was preparing.
    """
    path = run_dir / LOCK_FILE
    try:
        fd = _open_lock(path)
    except BlockingIOError:
        raise UsageError(
            f"Run directory {run_dir} is in use by another harness process. Wait for it to "
            "finish (or stop it), then run `harness run --resume` again."
        ) from None
    try:
        if fresh:
            _check_out_dir(run_dir)
        yield
    finally:
        try:
            path.unlink(missing_ok=True)  # still locked: no other process can be using it now
        except OSError:
            pass
        os.close(fd)


def execute(prepared: Prepared, env: Mapping[str, str], out: TextIO) -> int:
    """Run the plan (or what a resumed run still lacks) and render every output.

    Exit status: 0 every op passed or was skipped, 1 an op failed (FAIL, ERROR, CRASH, TIMEOUT),
    130 the run was interrupted (SIGINT or SIGTERM) and can be resumed.
    """
    run_dir = prepared.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    with _run_lock(run_dir, fresh=not prepared.resumed):
        return _execute_locked(prepared, env, out)


def _execute_locked(prepared: Prepared, env: Mapping[str, str], out: TextIO) -> int:
    plan, run_dir, dismissed = prepared.plan, prepared.run_dir, prepared.dismissed
    started = _now()
    already: dict[str, OpOutcome] = {}
    append_state(run_dir, plan.backend, "<run start>", plan.devices)
    if prepared.resumed:
        started = read_json(run_dir / "run.json").get("started_at", started)
        already = read_markers(run_dir)
    for op_plan in plan.ops:
        if op_plan.op in dismissed:
            already[op_plan.op] = OpOutcome(op_plan.op, op_plan.device, "SKIP",
                                            notes=(f"dismissed: {dismissed[op_plan.op]}",))
    write_json(run_dir / "run.json", _run_info(plan, "running", started, {}, dismissed))
    to_run = [o for o in plan.ops if o.op not in already]
    print(
        f"harness run {plan.run_id}: backend {plan.backend.name}, devices {','.join(plan.devices)}, "
        f"level {plan.level}, timer {plan.timer}, {len(plan.ops)} op(s), "
        f"{sum(len(o.cases()) for o in to_run)} case(s) to run"
        + (f", {len(dismissed)} dismissed" if dismissed else "")
        + (f", resuming ({len(already) - len(dismissed)} op(s) already complete)" if prepared.resumed else "")
        + (f", autotune configs replayed from {plan.options.replay_from}" if plan.options.replay_from else ""),
        file=out, flush=True,
    )
    stop = StopToken()
    progress = make_progress(plan.options.progress, out, len(plan.ops), plan.devices,
                             list(already.values()))

    def on_signal(name: str) -> None:
        if stop.forced:
            progress.note(f"{name} again: killing the op processes now")
        else:
            progress.note(f"{name}: stopping; ending the op processes (send it again to kill them at once)")

    # Signals stay caught until every output is written: a Ctrl-C now only asks the batch to stop.
    with stop_on_signals(stop, on_signal):
        with progress:
            result = run_batch(plan, run_dir, env, progress, stop=stop, already_done=already,
                               prestart=plan.options.prestart_for(plan.backend.capabilities.accelerator))
        outcomes = list(result.outcomes)
        if result.interrupted:
            finalize(plan, run_dir, outcomes, "interrupted", started, dismissed)
            print(f"interrupted ({result.interrupted}): partial results in {run_dir}; finish with "
                  f"`harness run --resume {run_dir}`", file=out, flush=True)
            return 130
        bad = [x for x in outcomes if x.failed]
        info = finalize(plan, run_dir, outcomes, "complete-with-failures" if bad else "complete", started, dismissed)
    records = read_records(run_dir / "records.jsonl")
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    by_status: dict[str, list[str]] = {}
    for outcome in outcomes:
        by_status.setdefault(outcome.status, []).append(outcome.op)
    print(
        f"done: {len(records)} case(s) " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + "; ops: " + "; ".join(f"{k} {', '.join(v)}" for k, v in by_status.items()),
        file=out,
    )
    print(f"device: {info['identity'].get('device_name', '?')}; reports: {run_dir}/ "
          "(run.json, records.jsonl, summary.csv, junit.xml, report.md, ops_status.csv)", file=out)
    return 1 if bad else 0
