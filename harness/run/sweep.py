"""The parallel autotune sweep: a step before an autotuned op's attempts.

With ``--sweep-devices N|IDS``, before an autotuned op is measured (``run_op`` calls
:meth:`SweepStep.run` before its first attempt), its cases are dealt over the sweep devices;
one process per share (a *sweep process*, on its device) calls each case's candidate once, so its
autotuners tune that case's keys, and records what they chose. The sweep processes' records are merged
(harness.autotune.sweep.merge_processes: keys tuned twice with different choices are counted)
into RUN/sweep/<op>/configs.json, and every attempt of the op replays that file on the op's own
device. When a sweep process fails, the whole sweep is discarded (a merge with holes would replay
some keys and tune others live while saying it replays): the op's row says why, and its measuring
process tunes serially, live, as it would without --sweep-devices.

Sweep processes use the op processes of the executor (harness.run.spawn: their own process groups,
device pinning, the run's caches, --op-timeout, the stop token). A sweep process holds its device
exclusively: :class:`harness.run.context.DeviceLocks` makes a sweep wait until no op is being measured on any of
its devices, and no op starts on them while it runs. What a sweep process runs is a
:data:`SweepLauncher`; :func:`case_sweep_launch` runs the harness's own cases, and a library's
suite passes its own (harness.suite.runner.SuiteRunner.sweep_launch; docs/batch.md, "Sweep"). An
op whose cases are open (a suite's benchmark) is shared by call number instead of case id
(harness.autotune.sweep.open_shares).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.autotune.store import OpAutotune, read_op_autotune
from harness.autotune.sweep import (
    ProcessOutcome,
    SweepFiles,
    SweepSummary,
    merge_processes,
    open_shares,
    split_cases,
)
from harness.backends import enumerate_devices
from harness.backends.base import Backend
from harness.contract import (
    CHILD_PLUGINS,
    PYTEST_OFF,
    SPEC_OPTION,
    SWEEP_INDEX_ENV,
    TUNE_FILE,
    SweepResult,
    SweepTask,
    child_plugin,
)
from harness.errors import UsageError
from harness.results.store import read_json, write_json
from harness.run.caches import tune_cache_env
from harness.run.context import BatchContext
from harness.run.decide import AttemptExit, classify_exit
from harness.run.leftovers import op_marks
from harness.run.plan import OpPlan
from harness.run.spawn import Launch, child_env, end_group, read_exit, reap_group, start, wait_exit

__all__ = [
    "SweepLauncher",
    "SweepStep",
    "case_sweep_launch",
    "resolve_sweep_devices",
    "sweep_plugins",
    "sweep_task",
]



def resolve_sweep_devices(value: str, backend: Backend, run_devices: Sequence[str],
                          env: Mapping[str, str]) -> tuple[str, ...]:
    """The device of each sweep process: N sweep processes dealt over the run's devices, or the ids given (an id
    may repeat: two sweep processes on one device). Ids are read as ``--devices`` reads them (indices
    into an inherited visibility variable); on the cpu backend they are labels."""
    text = value.strip()
    if text.isdigit():
        count = int(text)
        if count < 1 or not run_devices:
            raise UsageError(f"--sweep-devices {value}: needs a count of at least 1.")
        return tuple(run_devices[i % len(run_devices)] for i in range(count))
    ids = tuple(p.strip() for p in text.split(",") if p.strip())
    if not ids:
        raise UsageError("--sweep-devices needs a count (2) or device ids (0,1).")
    if not backend.capabilities.accelerator:
        odd = [d for d in ids if d != "cpu" and not d.isdigit()]
        if odd:
            raise UsageError(f"--sweep-devices {value}: the {backend.name} backend has one device, 'cpu'; "
                             f"{', '.join(odd)} names none. Give a count (2), or labels cpu or 0,1 (one per "
                             "sweep process).")
        return ids
    return tuple(enumerate_devices(backend, ids, env))


def sweep_plugins(modules: Sequence[str]) -> list[str]:
    """A sweep process's pytest plugins: the run's, less timing, wall, IR and records, plus tune."""
    dropped = ("timing", "wall", "ir", "records")
    kept = [m for m in modules if m.rsplit(".", 1)[-1] not in dropped or not m.startswith(CHILD_PLUGINS + ".")]
    if child_plugin("autotune") not in kept:  # a sweep records configs, whatever the toggles say
        kept.append(child_plugin("autotune"))
    args: list[str] = []
    for module in [*kept, child_plugin("tune")]:
        args += ["-p", module]
    return args


SweepLauncher = Callable[[BatchContext, OpPlan, int, str, Sequence[str]], Launch]


def sweep_task(files: SweepFiles, index: int, count: int) -> SweepTask:
    """The spec section of the ``index``-th of ``count`` sweep processes of an op."""
    return SweepTask(configs_out=str(files.process_configs(index)), result=str(files.process_result(index)), index=index,
                     count=count)


def case_sweep_launch(ctx: BatchContext, op_plan: OpPlan, index: int, device: str, cases: Sequence[str]) -> Launch:
    """A sweep process of the harness's own cases: tune_cases.py over ``cases`` only."""
    plan = ctx.plan
    files = SweepFiles(ctx.run_dir, op_plan.op)
    files.folder.mkdir(parents=True, exist_ok=True)
    wanted = set(cases)
    skip = [c.case_id for c in op_plan.cases() if c.case_id not in wanted]
    count = len(ctx.sweep.devices) if ctx.sweep is not None else 1
    ctx.child_spec(op_plan, device, skip, sweep=sweep_task(files, index, count)).dump(files.process_spec(index))
    args = (str(TUNE_FILE), "-q", "-rN", *PYTEST_OFF, "--noconftest", "-c", os.devnull,
            "--rootdir", str(ctx.run_dir), *sweep_plugins(plan.plugins.modules),
            SPEC_OPTION, str(files.process_spec(index)))
    return Launch(pytest_args=args, exit_path=files.process_exit(index),
                  header=f"sweep shard {index} of {op_plan.op} on device {device}: {len(cases)} case(s)")


@dataclass(frozen=True)
class _SweepProcess:
    index: int
    device: str
    cases: tuple[str, ...]


@dataclass
class SweepStep:
    """The sweep of a run: its devices and how a sweep process is launched."""

    devices: tuple[str, ...]
    launcher: SweepLauncher = case_sweep_launch
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def applies(self, op_plan: OpPlan) -> bool:
        """Swept: an op whose candidate may be autotuned (not marked ``autotuned=False``), and
        every op of another provider (a library's kernels may have their own tuner)."""
        return op_plan.autotuned is not False or op_plan.provider != "builtin"

    def replay_file(self, run_dir: Path, op: str) -> Path:
        return SweepFiles(run_dir, op).configs

    def run(self, ctx: BatchContext, op_plan: OpPlan) -> SweepSummary | None:
        """Tune the op's cases over the sweep devices; None when a stop cut it short. A summary
        with ``failed`` set when a sweep process failed (no merged configs: the op tunes serially)."""
        files = SweepFiles(ctx.run_dir, op_plan.op)
        earlier = _earlier(files)
        if earlier is not None:
            return earlier
        shares = (open_shares(self.devices) if op_plan.is_open
                  else split_cases([c.case_id for c in op_plan.cases()], self.devices))
        procs = [_SweepProcess(i, d, c) for i, (d, c) in enumerate(shares)]
        files.folder.mkdir(parents=True, exist_ok=True)
        begin = time.monotonic()
        with ctx.locks.sweeping(op_plan.device, [s.device for s in procs]):
            ends = self._run_processes(ctx, op_plan, procs, files)
        if ends is None:
            return None
        summary = _summarise(op_plan.op, self.devices, procs, ends, files, ctx.plan.options.op_timeout)
        del begin
        write_json(files.summary, summary.to_json())
        return summary

    def _run_processes(self, ctx: BatchContext, op_plan: OpPlan, procs: Sequence[_SweepProcess],
                    files: SweepFiles) -> list[tuple[AttemptExit, float]] | None:
        plan = ctx.plan
        started = []
        for proc in procs:
            launch = self.launcher(ctx, op_plan, proc.index, proc.device, proc.cases)
            env = child_env(plan.backend, proc.device, ctx.parent_env, tune_cache_env(ctx.cache_dir, proc.index))
            env[SWEEP_INDEX_ENV] = str(proc.index)
            env.update(op_marks(ctx.run_dir, op_plan.op))  # what a sweep process leaves behind is found (run.leftovers)
            env.update(self.extra_env)
            started.append((start(launch, env, files.process_log(proc.index), hold=False), launch.exit_path,
                            time.monotonic()))
        deadline = time.monotonic() + plan.options.op_timeout
        ends: list[tuple[AttemptExit, float]] = []
        for child, exit_path, began in started:
            state = wait_exit(child.pid, deadline, ctx.stop)
            if state == "stopped":
                for other, _, _ in started:
                    end_group(other, signal.SIGINT, ctx.stop)
                return None
            if state == "timeout":
                end_group(child, signal.SIGTERM, ctx.stop)
                ends.append((AttemptExit(child.returncode, timed_out=True), time.monotonic() - began))
                continue
            reap_group(child)
            ends.append((AttemptExit(child.returncode, pytest_exit=read_exit(exit_path)), time.monotonic() - began))
        return ends


def _earlier(files: SweepFiles) -> SweepSummary | None:
    """The summary of a sweep that already completed for this op (a retry, a resume)."""
    if not files.configs.is_file() or not files.summary.is_file():
        return None
    try:
        data = read_json(files.summary)
        return SweepSummary(op=str(data["op"]), devices=tuple(data["devices"]), processes=(),
                            keys=int(data.get("keys", 0)), elapsed_s=float(data.get("elapsed_s", 0.0)),
                            extra={"reused": True})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _process_reason(proc: _SweepProcess, end: AttemptExit, result: SweepResult | None, timeout: float) -> str:
    """Why a sweep process failed, or "" when it did not."""
    errors = [f"{case}: {text.removeprefix('error: ')}" for case, text in (result.cases if result else {}).items()
              if text.startswith("error")]
    if end.timed_out or end.pytest_exit is None:
        return f"shard {proc.index} on device {proc.device}: {classify_exit(end, [], timeout_s=timeout).note}"
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"shard {proc.index} on device {proc.device}: {errors[0]}{more}"
    if end.pytest_exit not in (0, 5):
        return f"shard {proc.index} on device {proc.device}: pytest exited with code {end.pytest_exit}"
    if result is None:
        return f"shard {proc.index} on device {proc.device}: it wrote no result"
    return ""


def _summarise(op: str, devices: Sequence[str], procs: Sequence[_SweepProcess], ends: Sequence[tuple[AttemptExit, float]],
               files: SweepFiles, timeout: float = 0.0) -> SweepSummary:
    outcomes: list[ProcessOutcome] = []
    records: list[OpAutotune] = []
    failed = ""
    for proc, (end, elapsed) in zip(procs, ends, strict=True):
        try:
            result = SweepResult.from_json(read_json(files.process_result(proc.index)))
        except (OSError, ValueError):
            result = None
        reason = _process_reason(proc, end, result, timeout)
        record = OpAutotune(op=op)
        if not reason and files.process_configs(proc.index).is_file():
            try:
                record = read_op_autotune(files.process_configs(proc.index))
            except ValueError as exc:
                reason = f"shard {proc.index} on device {proc.device}: its configs cannot be read ({exc})"
        failed = failed or reason
        compile_ms = result.compile_ms if result is not None else None
        outcomes.append(ProcessOutcome(proc.index, proc.device, proc.cases, ok=not reason, reason=reason,
                                     configs=len(record.configs), elapsed_s=round(elapsed, 3),
                                     compile_s=compile_ms / 1e3 if isinstance(compile_ms, int | float) else None))
        records.append(record)
    merged, conflicts = merge_processes(op, records)
    if not failed:
        write_json(files.configs, merged.to_json())
    return SweepSummary(op=op, devices=tuple(devices), processes=tuple(outcomes),
                        keys=len({(c.kernel, c.key) for c in merged.configs}), conflicts=conflicts,
                        elapsed_s=max((e for _, e in ends), default=0.0), failed=failed)
