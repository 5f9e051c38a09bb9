"""`harness run`: validate and plan (nothing written), execute op by op, then render every
output from the records.

``prepare`` and ``prepare_resume`` give a :class:`Prepared` run: the plan, its directory and the
:class:`~harness.run.context.OpRunner` of its source (the harness's own cases, or a library's
benchmark suite); ``execute`` runs any of them the same way.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from harness import __version__
from harness.autotune.store import AutotuneMeta, check_replay_source, write_meta
from harness.backends import enumerate_devices, require_devices, resolve_backend
from harness.backends.base import Backend
from harness.backends.state import append_state, summarize_states
from harness.contract import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    RunFiles,
    op_file_stem,
    stem_clashes,
)
from harness.errors import UsageError
from harness.options import RunOptions, flagtune_env
from harness.results.runinfo import RunInfo, harness_commits
from harness.results.store import atomic_write_text, read_json, read_records_file
from harness.run.batch import CaseRunner, run_batch
from harness.run.caches import named_caches, remove_run_cache
from harness.run.context import OpRunner
from harness.run.decide import OpOutcome, with_causes
from harness.run.outputs import render_outputs, stored_ops, unreached_cases, write_html_report
from harness.run.plan import (
    OpPlan,
    RunPlan,
    make_run_id,
    plan_digest,
    plan_part,
)
from harness.run.plugins import check_extra_plugins
from harness.run.progress import make_progress
from harness.run.provenance import CommitState, code_digest, commit_state
from harness.run.rundir import (
    check_out_dir,
    read_markers,
    refuse_live_ops,
    reopen_failed,
    run_dir_for,
    run_lock,
    write_marker,
)
from harness.run.source import Chosen, Source
from harness.run.spawn import StopToken, stop_on_signals
from harness.run.sweep import SweepStep, resolve_sweep_devices

__all__ = ["Prepared", "check_file_stems", "checked_replay", "execute", "finalize", "prepare", "prepare_resume", "run_part",
           "sweep_step"]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Prepared:
    plan: RunPlan
    run_dir: Path
    resumed: bool = False
    dismissed: Mapping[str, str] = field(default_factory=dict)  # op id -> reason (in plan.ops, never run)
    runner: OpRunner = field(default_factory=CaseRunner)
    sweep: SweepStep | None = None  # --sweep-devices (harness.run.sweep)
    part: Mapping[str, Any] | None = None  # which part of a --shard K/N split (run.json's "shard"), else None
    retry_failed: bool = False  # --resume --retry-failed: ops that did not pass run again
    # a resumed run's earlier sessions' harness commits that differ from this one's (run.json
    # ``earlier_commits``): its ops are then measured by more than one version of the code
    earlier_commits: tuple[str, ...] = ()


def check_file_stems(ops: Sequence[str]) -> None:
    """Refuse ops whose ids map to one file name in the run directory, naming the first pair."""
    for first, other in stem_clashes(ops)[:1]:
        raise UsageError(f"ops {first!r} and {other!r} would share the file name {op_file_stem(first)!r} in the run "
                         "directory (their markers, logs and specs would overwrite each other): run them in "
                         "separate runs (--ops or --ops-file).")


def prepare(options: RunOptions, env: Mapping[str, str], source: Source, all_ops: bool = False) -> Prepared:
    """Validate everything the user gave and plan the run of ``source``'s ops; nothing is written
    yet (``all_ops``: ``--all``)."""
    backend = resolve_backend(options.backend)
    if options.shard_weights and options.shard is None:
        raise UsageError(f"--shard-weights {options.shard_weights} balances the parts of --shard K/N: give --shard too.")
    options = checked_replay(options, backend.name)
    check_extra_plugins(options.extra_plugins)
    chosen = source.choose(options, backend, env, all_ops)
    run_id = options.run_id or make_run_id(backend.name)
    run_dir, origin = run_dir_for(options, run_id)
    check_out_dir(run_dir, origin)
    require_devices(backend)
    devices = tuple(enumerate_devices(backend, options.devices or None, env))
    assert chosen.plan_ops is not None, f"{source.name}: a new run's choice plans its ops"
    plan = RunPlan(run_id=run_id, backend=backend, level=chosen.level, plugins=chosen.plugins, devices=devices,
                   ops=chosen.plan_ops(devices), options=chosen.options)
    check_file_stems([o.op for o in plan.ops])
    whole = Prepared(plan=plan, run_dir=run_dir.absolute(), dismissed=dict(chosen.dismissed), runner=chosen.runner,
                     sweep=_with_launcher(sweep_step(options, backend, devices, env), chosen))
    return run_part(whole, chosen.digest_facts) if options.shard is not None else whole


def _with_launcher(sweep: SweepStep | None, chosen: Chosen) -> SweepStep | None:
    """The run's sweep, its processes started as the source starts them."""
    if sweep is None or chosen.sweep_launcher is None:
        return sweep
    return replace(sweep, launcher=chosen.sweep_launcher)


def sweep_step(options: RunOptions, backend: Backend, devices: Sequence[str],
               env: Mapping[str, str]) -> SweepStep | None:
    """The run's sweep (--sweep-devices), refused where it cannot apply."""
    if not options.sweep_devices:
        return None
    if options.replay_from:
        raise UsageError(
            f"--sweep-devices {options.sweep_devices} tunes the autotuned ops in this run, and --replay-from "
            f"{options.replay_from} replays configs tuned earlier: give one of them."
        )
    return SweepStep(resolve_sweep_devices(options.sweep_devices, backend, devices, env))


def run_part(whole: Prepared, digest_extra: Mapping[str, Any] | None = None) -> Prepared:
    """Only this machine's part of a prepared whole run (--shard K/N): the harness's own ops and a
    suite's alike. ``whole.plan.ops`` holds every selected op (dismissed ones too); the part keeps
    its runner and sweep, and run.json's ``shard`` says which part of which whole (``digest_extra``:
    see :func:`plan_digest`)."""
    plan, dismissed = whole.plan, whole.dismissed
    assert plan.options.shard is not None
    index, count = plan.options.shard
    digest = plan_digest(plan.ops, plan.options, plan.level, plan.timer, digest_extra)
    seconds = read_op_seconds(Path(plan.options.shard_weights)) if plan.options.shard_weights else None
    ops, part = plan_part(plan.ops, index, count, plan.devices, digest, weightless=dismissed, seconds=seconds)
    mine = {o.op: dismissed[o.op] for o in ops if o.op in dismissed}
    return replace(whole, plan=replace(plan, ops=ops), dismissed=mine, part=part.to_dict())


def read_op_seconds(path: Path) -> dict[str, float]:
    """op -> elapsed_s of an earlier run's ops_status.csv (--shard-weights); UsageError in one line
    when the file cannot be read or has no such columns."""
    import csv

    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            columns = set(reader.fieldnames or ())
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"--shard-weights {path}: cannot read it ({getattr(exc, 'strerror', None) or exc}).") from None
    if not {"op", "elapsed_s"} <= columns:
        raise UsageError(f"--shard-weights {path}: not an ops_status.csv (it needs the columns op and elapsed_s).")
    seconds: dict[str, float] = {}
    for row in rows:
        try:
            seconds[str(row["op"])] = max(float(row["elapsed_s"]), 0.0)
        except (TypeError, ValueError):
            raise UsageError(f"--shard-weights {path}: op {row.get('op')!r} has elapsed_s {row.get('elapsed_s')!r}, "
                             "not a number.") from None
    return seconds


def checked_replay(options: RunOptions, backend: str) -> RunOptions:
    """Refuse an unusable --replay-from before anything runs (another backend's configs, a directory
    without recorded configs); the op processes get its absolute path."""
    if not options.replay_from:
        return options
    source = Path(options.replay_from).resolve()
    check_replay_source(source, backend)
    return replace(options, replay_from=str(source))


def prepare_resume(run_dir: Path, env: Mapping[str, str], sources: Sequence[Source]) -> Prepared:
    """Rebuild the plan stored in an earlier run directory, with the source that made it; a
    run.json that cannot give it (damaged, edited) is refused by name."""
    path = RunFiles(run_dir).run_info
    info = RunInfo.load(path)
    options = RunOptions.from_stored(info.options, f"{run_dir}/run.json")

    def build() -> Prepared:
        for name in ("devices", "level"):  # a plan needs them: a run.json without them is damaged
            if not getattr(info, name):
                raise KeyError(name)
        source = next(s for s in sources if s.made(info))
        backend = resolve_backend(info.backend)
        stored = checked_replay(options, backend.name)
        chosen = source.reopen(info, stored, backend)
        devices = tuple(str(d) for d in info.devices)
        plan = RunPlan(run_id=info.run_id, backend=backend, level=info.level, plugins=chosen.plugins,
                       devices=devices, ops=stored_ops(info), options=stored)
        if not isinstance(info.dismissed, Mapping):
            raise TypeError("dismissed is not a table")
        return Prepared(plan=plan, run_dir=run_dir.absolute(), resumed=True, dismissed=dict(info.dismissed),
                        runner=chosen.runner,
                        sweep=_with_launcher(sweep_step(stored, backend, devices, env), chosen), part=info.shard,
                        earlier_commits=_earlier_commits(info))

    return _stored(path, build)


def _stored(path: Path, build: Any) -> Prepared:
    """``build()``, with a run.json whose plan cannot be read refused by name."""
    try:
        prepared: Prepared = build()
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"it lacks {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UsageError(f"{path}: the run's plan cannot be read ({what}); the file is damaged. Restore "
                         "it, or start a new run.") from None
    return prepared


def _stored_plan(o: OpPlan) -> dict[str, Any]:
    """One op's entry of run.json's plan (read back by harness.run.outputs.stored_ops)."""
    return {"op": o.op, "device": o.device, "dtypes": list(o.dtypes), "shapes": [list(s) for s in o.shapes],
            "provider": o.provider, "autotuned": o.autotuned,
            **({"supported_dtypes": list(o.supported_dtypes)} if o.supported_dtypes is not None else {}),
            **({"open_cases": o.open_cases} if o.is_open else {})}


@functools.cache
def _source() -> CommitState:
    """This harness's commit and whether its tracked files differ from it, asked of git once per
    process: the code this process loaded, which an edit of the tree while a run goes on does
    not change (the run's start, a resume and its end record the same answer)."""
    return commit_state(Path(__file__).resolve().parent)


@functools.cache
def _digest() -> str:
    """This harness's code by content (harness.run.provenance.code_digest), once per process as
    :func:`_source`."""
    return code_digest(Path(__file__).resolve().parents[1])


def _earlier_commits(info: RunInfo) -> tuple[str, ...]:
    """What a resume of the run ``info`` describes records as ``earlier_commits``: the commits of
    its sessions so far, less this harness's own (harness_commits); none added where the earlier
    session ran the same code (equal digests) under another label."""
    if info.harness_digest and info.harness_digest == _digest():
        return tuple(info.earlier_commits or ())
    source = _source()
    now = {"git_commit": source.commit, "git_dirty": source.dirty}
    mine = harness_commits(now)
    return tuple(c for c in harness_commits(info.to_dict()) if c not in mine)


def _run_info(prepared: Prepared, status: str, started: str, identity: dict[str, Any]) -> RunInfo:
    plan = prepared.plan
    source = _source()
    return RunInfo(
        run_id=plan.run_id, status=status, backend=plan.backend.name,
        backend_description=plan.backend.description, devices=plan.devices, level=plan.level,
        timer=plan.timer, plugins=plan.plugins.modules, identity=identity, harness_version=__version__,
        git_commit=source.commit, git_dirty=source.dirty, earlier_commits=prepared.earlier_commits or None,
        harness_digest=_digest(),
        python=sys.version.split()[0],
        container={"image": plan.options.image, "digest": plan.options.image_digest},
        options=plan.options.to_dict(), caches=named_caches(plan.options, os.environ),
        plan=tuple(_stored_plan(o) for o in plan.ops),
        dismissed=dict(prepared.dismissed), started_at=started,
        finished_at=None if status == "running" else _now(),
        shard=None if prepared.part is None else dict(prepared.part),
        sections=prepared.runner.run_info(identity),
    ).with_fingerprint()


def _identity(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    per_device: dict[str, Any] = {}
    for path in sorted((run_dir / "identity").glob("*.json")):
        per_device[path.stem] = read_json(path)
    first: dict[str, Any] = next(iter(per_device.values()), {})
    return dict(first), per_device


def finalize(prepared: Prepared, outcomes: list[OpOutcome], status: str, started: str) -> RunInfo:
    """Render every output from the records; each file replaced atomically."""
    plan, run_dir = prepared.plan, prepared.run_dir
    found = read_records_file(RunFiles(run_dir).records)
    outcomes = with_causes(outcomes, found.records)  # a cause for every op that did not pass
    identity, per_device = _identity(run_dir)
    append_state(run_dir, plan.backend, "<run end>", plan.devices)
    info = replace(
        _run_info(prepared, status, started, identity), identity_per_device=per_device,
        device_state=summarize_states(run_dir),
        ops=tuple({**o.to_json(), "notes": "; ".join(o.notes)} for o in outcomes),  # numbers as numbers
        # never dropped silently: listed here and in report.md
        records_problems=tuple({"line": p.line, "kind": p.kind, "reason": p.reason} for p in found.problems)
        or None,
    )
    for name, text in render_outputs(plan.ops, info.to_dict(), found, outcomes).items():
        atomic_write_text(run_dir / name, text)
    write_meta(run_dir, _autotune_meta(plan, identity))
    if status != "running":
        records = list(found.records)
        problem = write_html_report(run_dir, info.to_dict(), records,
                                    unreached_cases(plan.ops, records, {o.op: o for o in outcomes}))
        if problem:
            info = replace(info, report_html=problem)
    info.dump(RunFiles(run_dir).run_info)
    remove_run_cache(plan.options, run_dir)
    return info


def _autotune_meta(plan: RunPlan, identity: Mapping[str, Any]) -> AutotuneMeta:
    """The sidecar of autotune/: what a replay of this run must match."""
    triton_version = identity.get("triton")
    if not triton_version:
        try:
            triton_version = importlib.metadata.version("triton")
        except importlib.metadata.PackageNotFoundError:
            triton_version = "absent"
    return AutotuneMeta(backend=plan.backend.name, device_name=str(identity.get("device_name", "")),
                        device_arch=str(identity.get("device_arch", "")), triton_version=str(triton_version),
                        run_id=plan.run_id)


def execute(prepared: Prepared, env: Mapping[str, str], out: TextIO) -> int:
    """Run the plan (or what a resumed run still lacks) and render every output.

    Exit status: 0 every op passed or was skipped, 1 an op failed (FAIL, ERROR, CRASH, TIMEOUT),
    130 the run was interrupted (SIGINT or SIGTERM) and can be resumed.
    """
    run_dir = prepared.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    with run_lock(run_dir, fresh=not prepared.resumed):
        if prepared.resumed:
            refuse_live_ops(run_dir)  # an op process that outlived a killed harness
        return _execute_locked(prepared, env, out)


def _start_line(prepared: Prepared, already: Mapping[str, OpOutcome], to_run: Sequence[OpPlan]) -> str:
    plan, dismissed = prepared.plan, prepared.dismissed
    return (
        f"harness run {plan.run_id}: backend {plan.backend.name}, devices {','.join(plan.devices)}, "
        f"level {plan.level}, timer {plan.timer}, "
        + (f"part {prepared.part.get('index')}/{prepared.part.get('count')} of a split: "
           f"{len(plan.ops)} of its {len(prepared.part.get('all_ops') or ())} op(s), " if prepared.part
           else f"{len(plan.ops)} op(s), ")
        + f"{sum(o.expected_cases for o in to_run)} case(s) to run"
        + (" (about: a suite's benchmarks choose their own inputs)" if any(o.is_open for o in to_run) else "")
        + (f", {len(dismissed)} dismissed" if dismissed else "")
        + (f", resuming ({len(already) - len(dismissed)} op(s) already complete)" if prepared.resumed else "")
        + (f", autotune configs replayed from {plan.options.replay_from}" if plan.options.replay_from else "")
    )


def _execute_locked(prepared: Prepared, env: Mapping[str, str], out: TextIO) -> int:
    plan, run_dir, dismissed = prepared.plan, prepared.run_dir, prepared.dismissed
    started = _now()
    already: dict[str, OpOutcome] = {}
    append_state(run_dir, plan.backend, "<run start>", plan.devices)
    RunFiles(run_dir).records.touch()  # always there, even when no case gets a record
    if prepared.resumed:
        started = RunInfo.load(RunFiles(run_dir).run_info).started_at or started
        already = read_markers(run_dir)
        if prepared.retry_failed:
            again = sorted(op for op, o in already.items() if o.failed)
            already = reopen_failed(run_dir, already)
            print(f"--retry-failed: running again {len(again)} op(s) that did not pass"
                  + (f": {', '.join(again)}" if again else ""), file=out, flush=True)
    for op_plan in plan.ops:
        if op_plan.op in dismissed and op_plan.op not in already:
            already[op_plan.op] = OpOutcome(op_plan.op, op_plan.device, "SKIP",
                                            notes=(f"dismissed: {dismissed[op_plan.op]}",))
            write_marker(run_dir, already[op_plan.op])  # every ended op has one, dismissed ones too
    _run_info(prepared, "running", started, {}).dump(RunFiles(run_dir).run_info)
    to_run = [o for o in plan.ops if o.op not in already]
    print(_start_line(prepared, already, to_run), file=out, flush=True)
    stop = StopToken()
    progress = make_progress(plan.options.progress, out, len(plan.ops), plan.devices,
                             list(already.values()), run_dir=run_dir)

    def on_signal(name: str) -> None:
        if stop.forced:
            progress.note(f"{name} again: killing the op processes now")
        else:
            progress.note(f"{name}: stopping; ending the op processes (send it again to kill them at once)")

    # Signals stay caught until every output is written: a Ctrl-C now only asks the batch to stop.
    with stop_on_signals(stop, on_signal):
        with progress:
            op_env = {**env, **flagtune_env(plan.options)}  # every op process, sweep processes too
            result = run_batch(plan, run_dir, op_env, progress, runner=prepared.runner, stop=stop,
                               already_done=already,
                               prestart=plan.options.prestart_for(plan.backend.capabilities.accelerator),
                               prestart_depth=plan.options.prestart_depth,
                               sweep=prepared.sweep)
        outcomes = list(result.outcomes)
        if result.interrupted:
            finalize(prepared, outcomes, "interrupted", started)
            print(f"interrupted ({result.interrupted}): partial results in {run_dir}; finish with "
                  f"`harness run --resume {run_dir}`", file=out, flush=True)
            return EXIT_INTERRUPTED
        bad = [x for x in outcomes if x.failed]
        info = finalize(prepared, outcomes, "complete-with-failures" if bad else "complete", started)
    return _print_end(outcomes, info, run_dir, out, failed=bool(bad))


def _print_end(outcomes: Sequence[OpOutcome], info: RunInfo, run_dir: Path, out: TextIO, failed: bool) -> int:
    """The run's closing lines (cases and ops by status, where the reports are) and its exit status."""
    found = read_records_file(RunFiles(run_dir).records)
    records = found.records
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
    written = "run.json, records.jsonl, summary.csv, junit.xml, report.md, report.html, ops_status.csv"
    if info.report_html:
        print(info.report_html, file=out)
        written = written.replace(" report.html,", "")
    print(f"device: {info.identity.get('device_name', '?')}; reports: {run_dir}/ ({written})", file=out)
    if found.corrupt:  # something other than the op processes wrote into records.jsonl
        print(f"error: {found.corrupt_message()}", file=out)
    return EXIT_FAILED if failed or found.corrupt else EXIT_OK
