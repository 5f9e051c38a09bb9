"""``harness run --suite PATH``: FlagGems' own benchmarks, one op per process, under the harness.

Planning (which ops, shapes, devices) is the harness's; each op then runs FlagGems' pytest
nodes for it (its mark, in its file) in a process of its own, pinned to one device, with
the harness's batch machinery (sharding, timeouts, completion markers, resume). In that
process harness.upstream.plugin swaps in the harness timer; the shapes come from a shape
file written in FlagGems' format; afterwards the process's ``--record log`` output is
converted into Measurement records, so compare, gate, history and reports read them like
any other run. Rows carry provider ``flaggems-suite``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from harness.backends import enumerate_devices, resolve_backend
from harness.batch import (
    INTERRUPTED,
    AttemptExit,
    OpOutcome,
    StopToken,
    _child_env,
    classify_exit,
    op_file_stem,
    read_markers,
    run_batch,
    stop_on_signals,
)
from harness.errors import UsageError
from harness.ops.base import OpSpec, Shape
from harness.ops.registry import build_catalog
from harness.ops.shapes import load_level, load_shapes_file
from harness.options import RunOptions
from harness.plan import OpPlan, RunPlan, assign_device, make_run_id, resolve_level, shard_ops
from harness.plugins.planning import PluginPlan
from harness.plugins.spec import ChildSpec
from harness.procgroup import end_group, reap_group, wait_exit
from harness.progress import make_progress
from harness.providers.declarative import declared_shapes
from harness.results.store import append_record, read_json, read_records, write_json
from harness.run import Prepared, finalize, prepare_resume
from harness.upstream.convert import (
    SUITE_PROVIDER,
    Conversion,
    RecordContext,
    convert_results,
    parse_record_log,
)
from harness.upstream.nodes import SuiteLayout, SuiteNode, locate_suite, node_for
from harness.upstream.plugin import SPEC_OPTION
from harness.upstream.shapefile import read_suite_shapes, suite_shape_config, write_shape_file
from harness.upstream.timings import parse_timings

__all__ = ["SuiteCommand", "SuitePrepared", "execute_suite", "is_suite_run", "prepare_suite", "prepare_suite_resume", "suite_command"]

SUITE_TIMERS = {"auto": "direct", "direct": "direct", "cpu": "cpu"}
SHAPE_FILE = "shapes.yaml"  # in the op's working directory


@dataclass(frozen=True)
class SuitePrepared:
    prepared: Prepared
    suite: SuiteLayout


@dataclass(frozen=True)
class SuiteCommand:
    """The op process's command line and the pytest options passed through PYTEST_ADDOPTS.

    FlagGems names its ``--record log`` file after the command-line arguments (all of them,
    "/" turned into "_"): with absolute paths and the harness's options that name passes the
    255-byte limit of a file name. So the command line holds only the selection and the
    shape file (relative to the op's working directory) and every other option travels in
    PYTEST_ADDOPTS, which pytest reads but does not count among the invocation arguments.
    """

    argv: list[str]
    addopts: list[str]

    def env(self) -> dict[str, str]:
        return {"PYTEST_ADDOPTS": shlex.join(self.addopts)}

    def describe(self) -> str:
        return f"PYTEST_ADDOPTS={shlex.quote(shlex.join(self.addopts))} {shlex.join(self.argv)}"


def suite_command(
    node: SuiteNode,
    suite: SuiteLayout,
    work: Path,
    spec_path: Path,
    exit_path: Path,
    dtypes: Sequence[str],
    python: str = sys.executable,
) -> SuiteCommand:
    """The op process (run in ``work``, where the shape file is): FlagGems' nodes for ``node``
    through harness.child, with the harness plugin."""
    selection = node.pytest_selection(suite.suite_dir)
    selection[0] = os.path.relpath(selection[0], work)
    return SuiteCommand(
        argv=[python, "-m", "harness.child", str(exit_path), "--", *selection, "--shape_file", SHAPE_FILE],
        addopts=[
            # FlagGems' options: core level (no extra shapes or metrics of its own), kernel mode
            # (the do_bench path the plugin replaces), JSON result lines.
            "--level", "core", "--mode", "kernel", "--record", "log",
            *[arg for dtype in dtypes for arg in ("--dtypes", dtype)],
            "-p", "harness.upstream.plugin", SPEC_OPTION, str(spec_path),
            # No ini file: a full checkout's pytest.ini would put src/ (not the installed flag_gems) first.
            "-c", os.devnull, "--rootdir", str(suite.root), "-p", "no:cacheprovider",
            "-q", "-rN", "-s", "-W", "ignore::pytest.PytestUnknownMarkWarning",
        ],
    )


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _suite_timer(requested: str) -> str:
    if requested not in SUITE_TIMERS:
        raise UsageError(
            f"--timer {requested}: the suite mode times FlagGems' benchmark closures with the direct "
            "timer (device events, as Triton's do_bench does) or the cpu timer; graph capture and the "
            "profiler are not available there. Use --timer auto, direct or cpu."
        )
    return SUITE_TIMERS[requested]


def _op_shapes(
    ops: Sequence[str],
    catalog: Mapping[str, OpSpec],
    level: str,
    user: Mapping[str, Sequence[Shape]],
    declared: Mapping[str, Sequence[Shape]],
) -> dict[str, tuple[Shape, ...]]:
    level_shapes = load_level(level)
    found: dict[str, tuple[Shape, ...]] = {}
    for op in ops:
        shapes = list(user.get(op) or level_shapes.get(op) or declared.get(op) or ())
        if not shapes:
            raise UsageError(
                f"--suite: no shapes for op {op!r} at level {level!r}. Give them in --shapes-file "
                f"(keyed by op id, in FlagGems' shape convention for its benchmark), e.g. '{op}: [[4096, 4096]]'."
            )
        if op in catalog:
            for shape in shapes:
                problem = catalog[op].check_shape(shape)
                if problem:
                    raise UsageError(f"{problem}. Fix the shapes file or the level's shapes.")
        found[op] = tuple(tuple(s) for s in shapes)
    return found


def prepare_suite(options: RunOptions, suite_path: str, env: Mapping[str, str]) -> SuitePrepared:
    """Validate and plan a suite run; nothing is written yet."""
    backend = resolve_backend(options.backend)
    if not backend.capabilities.accelerator or backend.gems_vendor is None:
        raise UsageError(
            f"--suite runs FlagGems' own benchmarks, which need a GPU FlagGems supports; backend "
            f"{backend.name!r} has none. Use --backend cuda, musa, rocm or ascend."
        )
    timer = _suite_timer(options.timer)
    suite = locate_suite(Path(suite_path))
    if not options.ops:
        raise UsageError("--suite needs --ops: the FlagGems ops to run, e.g. --ops softmax mm "
                         "(each is selected in FlagGems' suite by the pytest mark of that name).")
    catalog = build_catalog(options.ops_modules)
    level = resolve_level(options.level, backend)
    user = load_shapes_file(options.shapes_file, set(catalog) | set(options.ops)) if options.shapes_file else {}
    shapes = _op_shapes(options.ops, catalog, level, user, declared_shapes(options.ops_modules))
    devices = enumerate_devices(backend, options.devices or None, env)
    if not devices:
        raise UsageError(f"No {backend.name} device to run on. Run `harness doctor` to see what is detected.")
    run_id = options.run_id or make_run_id(backend.name)
    opts = replace(options, provider=SUITE_PROVIDER, timer=timer)
    plans = [OpPlan(op=op, device=assign_device(op, devices), dtypes=tuple(opts.dtypes), shapes=shapes[op],
                    provider=SUITE_PROVIDER) for op in dict.fromkeys(options.ops)]
    plugins = PluginPlan(
        modules=("harness.upstream.plugin",), timer=timer,
        reasons=(f"upstream suite: FlagGems' pytest nodes with triton.testing.do_bench replaced by the "
                 f"harness {timer} timer, shapes from a FlagGems-format shape file",),
    )
    plan = RunPlan(run_id=run_id, backend=backend, level=level, plugins=plugins, devices=tuple(devices),
                   ops=shard_ops(plans, devices), options=opts)
    run_dir = Path(options.out) if options.out else Path(options.reports_dir) / run_id
    if (run_dir / "run.json").exists():
        raise UsageError(f"Output directory {run_dir} already holds a run. Use --resume {run_dir} to finish "
                         "it, or choose another --out.")
    return SuitePrepared(Prepared(plan=plan, run_dir=run_dir), suite)


def is_suite_run(run_dir: Path) -> bool:
    path = run_dir / "run.json"
    return path.is_file() and "suite" in read_json(path)


def prepare_suite_resume(run_dir: Path, env: Mapping[str, str]) -> SuitePrepared:
    info = read_json(run_dir / "run.json")
    prepared = prepare_resume(run_dir, env)
    plugins = PluginPlan(modules=("harness.upstream.plugin",), timer=prepared.plan.options.timer,
                         reasons=("upstream suite (resumed)",))
    plan = replace(prepared.plan, plugins=plugins)
    return SuitePrepared(replace(prepared, plan=plan), locate_suite(Path(info["suite"]["path"])))


# ---------------------------------------------------------------------------------------------
# One op


@dataclass(frozen=True)
class _OpFiles:
    work: Path

    @property
    def shapes(self) -> Path:
        return self.work / SHAPE_FILE

    @property
    def spec(self) -> Path:
        return self.work / "spec.json"

    @property
    def exit(self) -> Path:
        return self.work / "pytest.exit"

    @property
    def timings(self) -> Path:
        return self.work / "timings.jsonl"

    @property
    def failures(self) -> Path:
        return self.work / "failures.jsonl"

    def logs(self) -> list[Path]:
        return sorted(self.work.glob("result_*.log"))

    def clear(self) -> None:
        """A rerun (resume) starts from nothing: FlagGems would append to an old log."""
        self.work.mkdir(parents=True, exist_ok=True)
        for stale in (self.exit, self.timings, self.failures, *self.logs()):
            stale.unlink(missing_ok=True)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []


def _convert(plan: RunPlan, op_plan: OpPlan, files: _OpFiles, run_dir: Path, started: str) -> Conversion:
    results = [r for p in files.logs() for r in parse_record_log(_lines(p)).results]
    identity_path = run_dir / "identity" / f"{op_plan.device}.json"
    identity = read_json(identity_path) if identity_path.exists() else {}
    ctx = RecordContext(run_id=plan.run_id, backend=plan.backend.name, device=op_plan.device,
                        device_name=str(identity.get("device_name", "")),
                        cache=plan.options.cache if plan.timer != "cpu" else "n/a", started_at=started)
    catalog = build_catalog(plan.options.ops_modules)
    spec = catalog.get(op_plan.op)
    return convert_results(results, parse_timings(_lines(files.timings)), node_for(op_plan.op), ctx,
                           bytes_moved=spec.bytes_moved if spec else None, flops=spec.flops if spec else None)


def _notes(node: SuiteNode, suite: SuiteLayout, end: AttemptExit, conversion: Conversion, failures: list[str]) -> list[str]:
    notes: list[str] = []
    if end.pytest_exit == 5:
        where = node.file or "the suite"
        notes.append(f"no benchmark in {where} (FlagGems {suite.ref}) was collected with mark {node.mark!r}"
                     + (f": {node.note}" if node.note else ""))
    elif end.pytest_exit == 0 and not conversion.records:
        notes.append(f"FlagGems logged no result with op_name {node.op_name!r}")
    notes.extend(failures[:3])
    if len(failures) > 3:
        notes.append(f"... {len(failures) - 3} more failed item(s); see the op log")
    if conversion.other_ops:
        notes.append(f"mark {node.mark!r} also ran {', '.join(conversion.other_ops)} (not recorded)")
    if conversion.unmatched:
        notes.append(f"{conversion.unmatched} row(s) without harness samples")
    return notes


def _log_error(log: Path) -> str | None:
    """The last ``E   <error>`` line pytest printed in this attempt (a conftest that failed to
    import, a usage error), for the op's note."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    attempt = text.rsplit("\n=== FlagGems suite", 1)[-1]
    errors = [line[1:].strip() for line in attempt.splitlines() if line.startswith("E ") and line[1:].strip()]
    return errors[-1][:300] if errors else None


def _failures(path: Path) -> list[str]:
    found = []
    for line in _lines(path):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        found.append(f"{data.get('nodeid', '?')} failed: {data.get('message', '')}")
    return found


def _suite_runner(suite: SuiteLayout, upstream_shapes: Mapping[str, Any]) -> Callable[..., OpOutcome]:
    def run(batch: Any, op_plan: OpPlan, on_attempt: Callable[[int], None]) -> OpOutcome:
        plan: RunPlan = batch.plan
        run_dir: Path = batch.run_dir
        begin = time.monotonic()
        started = _now()
        on_attempt(1)
        node = node_for(op_plan.op)
        files = _OpFiles(run_dir / "suite" / op_file_stem(op_plan.op))
        files.clear()
        write_shape_file(files.shapes, suite_shape_config(
            upstream_shapes, {node.op_name: [node.to_suite(s) for s in op_plan.shapes]},
            {node.op_name: node.shape_desc}))
        options = plan.options
        ChildSpec(
            run_id=plan.run_id, run_dir=str(run_dir), backend=plan.backend.name, device=op_plan.device,
            op=op_plan.op, provider=op_plan.provider, dtypes=op_plan.dtypes, shapes=op_plan.shapes,
            seed=options.seed, timer=plan.timer, cache=options.cache, ops_modules=options.ops_modules,
            warmup_ms=options.warmup_ms, rep_ms=options.rep_ms,
            extra={"timings": str(files.timings), "failures": str(files.failures)},
        ).dump(files.spec)
        command = suite_command(node, suite, files.work, files.spec, files.exit, op_plan.dtypes)
        env = {**_child_env(plan, op_plan.device, batch.parent_env), **command.env()}
        (run_dir / "logs").mkdir(exist_ok=True)
        log_path = run_dir / "logs" / f"{op_file_stem(op_plan.op)}.log"
        with open(log_path, "ab") as log:
            log.write(f"\n=== FlagGems suite ({suite.ref}) on device {op_plan.device}, in {files.work}: "
                      f"{command.describe()}\n".encode())
            log.flush()
            child = subprocess.Popen(command.argv, cwd=files.work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
            state = wait_exit(child.pid, time.monotonic() + options.op_timeout, batch.stop)
            if state == "timeout":
                end_group(child, signal.SIGTERM, batch.stop)
            elif state == "stopped":
                end_group(child, signal.SIGINT, batch.stop)
            else:
                reap_group(child)
        try:
            pytest_exit: int | None = int(files.exit.read_text())
        except (OSError, ValueError):
            pytest_exit = None
        end = AttemptExit(child.returncode, timed_out=state == "timeout", pytest_exit=pytest_exit)
        conversion = _convert(plan, op_plan, files, run_dir, started)
        known = {r.case_id for r in read_records(batch.records_path)}
        for record in conversion.records:
            if record.case_id not in known:  # a resumed op may have recorded some already
                append_record(batch.records_path, record)
        elapsed = time.monotonic() - begin
        if state == "stopped":
            return OpOutcome(op_plan.op, op_plan.device, INTERRUPTED, 1, elapsed, len(conversion.records),
                             ("interrupted; resume with --resume",))
        verdict = classify_exit(end, [r.status for r in conversion.records], False, options.op_timeout)
        failures = _failures(files.failures)
        if not failures and end.pytest_exit not in (0, 5):
            error = _log_error(log_path)
            failures = [f"pytest: {error}"] if error else []
        notes = _notes(node, suite, end, conversion, failures)
        if verdict.note and not (end.pytest_exit == 5 and not conversion.records):
            notes.insert(0, verdict.note)
        return OpOutcome(op_plan.op, op_plan.device, verdict.status, 1, elapsed, len(conversion.records),
                         tuple(notes))

    return run


# ---------------------------------------------------------------------------------------------
# The run


def _finalize(sp: SuitePrepared, outcomes: list[OpOutcome], status: str, started: str) -> dict[str, Any]:
    prepared = sp.prepared
    info = finalize(prepared.plan, prepared.run_dir, outcomes, status, started)
    identity = info.get("identity", {})
    info["suite"] = {"path": str(sp.suite.suite_dir), "ref": sp.suite.ref, "provider": SUITE_PROVIDER,
                     "flag_gems": identity.get("flag_gems", {})}
    write_json(prepared.run_dir / "run.json", info)
    return info


def execute_suite(sp: SuitePrepared, env: Mapping[str, str], out: TextIO) -> int:
    """Run every op of the plan through FlagGems' suite; exit status as `harness run`."""
    from harness.run import _run_lock  # one harness process per run directory

    prepared = sp.prepared
    plan, run_dir = prepared.plan, prepared.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    with _run_lock(run_dir, fresh=not prepared.resumed):
        started = _now()
        already: dict[str, OpOutcome] = {}
        if prepared.resumed:
            started = read_json(run_dir / "run.json").get("started_at", started)
            already = read_markers(run_dir)
        pending = [already.get(o.op) or OpOutcome(o.op, o.device) for o in plan.ops]
        _finalize(sp, pending, "running", started)
        upstream_shapes = read_suite_shapes(sp.suite.shapes_yaml)
        print(f"harness run --suite {sp.suite.suite_dir} (FlagGems {sp.suite.ref}) {plan.run_id}: backend "
              f"{plan.backend.name}, devices {','.join(plan.devices)}, timer {plan.timer}, {len(plan.ops)} op(s)"
              + (f", resuming ({len(already)} op(s) already complete)" if prepared.resumed else ""),
              file=out, flush=True)
        stop = StopToken()
        progress = make_progress(plan.options.progress, out, len(plan.ops), plan.devices, list(already.values()))
        with stop_on_signals(stop, lambda name: progress.note(f"{name}: stopping the op processes")), progress:
            result = run_batch(plan, run_dir, env, progress, stop=stop, already_done=already,
                               runner=_suite_runner(sp.suite, upstream_shapes))
        outcomes = list(result.outcomes)
        if result.interrupted:
            _finalize(sp, outcomes, "interrupted", started)
            print(f"interrupted ({result.interrupted}): finish with `harness run --resume {run_dir}`", file=out)
            return 130
        bad = [o for o in outcomes if o.failed]
        info = _finalize(sp, outcomes, "complete-with-failures" if bad else "complete", started)
        records = read_records(run_dir / "records.jsonl")
        print(f"done: {len(records)} row(s); ops: "
              + "; ".join(f"{o.op} {o.status}" + (f" ({'; '.join(o.notes)})" if o.notes else "") for o in outcomes),
              file=out)
        flag_gems = info["suite"]["flag_gems"]
        print(f"device: {info['identity'].get('device_name', '?')}; flag_gems {flag_gems.get('version', '?')} "
              f"(vendor {flag_gems.get('vendor', '?')}); reports: {run_dir}/", file=out)
        return 1 if bad else 0
