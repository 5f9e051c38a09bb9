"""``harness run --suite PATH``: FlagGems' own benchmarks, one op per process, under the harness.

Planning (which ops, shapes, devices) is the harness's; each op then runs FlagGems' pytest
nodes for it (its mark, in its file) in a process of its own, pinned to one device, with
the harness's batch machinery (sharding, timeouts, completion markers, resume). In that
process harness.child.plugins.suite swaps in the harness timer; the shapes come from a shape
file written in FlagGems' format; afterwards the process's ``--record log`` output is
converted into Measurement records, so compare, gate, history and reports read them like
any other run. Rows carry provider ``flaggems-suite``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.backends import enumerate_devices, require_devices, resolve_backend
from harness.contract import ChildSpec, op_file_stem
from harness.errors import UsageError
from harness.ops.base import OpInfo, Shape
from harness.ops.registry import catalog, load_op
from harness.ops.shapes import load_level, load_shapes_file
from harness.options import RunOptions
from harness.providers.declarative import declared_shapes
from harness.results.store import append_record, read_json, read_records
from harness.run.batch import BatchContext
from harness.run.decide import AttemptExit
from harness.run.execute import Prepared, stored_ops
from harness.run.plan import OpPlan, RunPlan, assign_device, make_run_id, resolve_level, shard_ops
from harness.run.plugins import PluginPlan
from harness.run.rundir import check_out_dir
from harness.run.spawn import Launch
from harness.suite.convert import (
    SUITE_PROVIDER,
    Conversion,
    RecordContext,
    convert_results,
    parse_record_log,
)
from harness.suite.nodes import SuiteLayout, SuiteNode, locate_suite, node_for
from harness.suite.shapefile import read_suite_shapes, suite_shape_config, write_shape_file
from harness.suite.timings import parse_timings

SPEC_OPTION = "--harness-suite-spec"  # the option harness.child.plugins.suite adds to pytest
__all__ = ["SuiteCommand", "SuiteRunner", "prepare_suite", "prepare_suite_resume", "suite_command"]

SUITE_TIMERS = {"auto": "direct", "direct": "direct", "cpu": "cpu"}
SHAPE_FILE = "shapes.yaml"  # in the op's working directory


@dataclass(frozen=True)
class SuiteCommand:
    """The op process's command line and the pytest options passed through PYTEST_ADDOPTS.

    FlagGems names its ``--record log`` file after the command-line arguments (all of them,
    "/" turned into "_"): with absolute paths and the harness's options that name passes the
    255-byte limit of a file name. So the command line holds only the selection and the
    shape file (relative to the op's working directory) and every other option travels in
    PYTEST_ADDOPTS, which pytest reads but does not count among the invocation arguments.
    """

    args: list[str]  # pytest's command-line arguments (after `python -m harness.child EXIT --`)
    addopts: list[str]

    def env(self) -> dict[str, str]:
        return {"PYTEST_ADDOPTS": shlex.join(self.addopts)}

    def describe(self) -> str:
        return f"PYTEST_ADDOPTS={shlex.quote(shlex.join(self.addopts))} pytest {shlex.join(self.args)}"


def suite_command(
    node: SuiteNode,
    suite: SuiteLayout,
    work: Path,
    spec_path: Path,
    dtypes: Sequence[str],
) -> SuiteCommand:
    """The op process (run in ``work``, where the shape file is): FlagGems' nodes for ``node``
    through harness.child, with the harness plugin."""
    selection = node.pytest_selection(suite.suite_dir)
    selection[0] = os.path.relpath(selection[0], work)
    return SuiteCommand(
        args=[*selection, "--shape_file", SHAPE_FILE],
        addopts=[
            # FlagGems' options: core level (no extra shapes or metrics of its own), kernel mode
            # (the do_bench path the plugin replaces), JSON result lines.
            "--level", "core", "--mode", "kernel", "--record", "log",
            *[arg for dtype in dtypes for arg in ("--dtypes", dtype)],
            "-p", "harness.child.plugins.suite", SPEC_OPTION, str(spec_path),
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
    catalog: Mapping[str, OpInfo],
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


def prepare_suite(options: RunOptions, suite_path: str, env: Mapping[str, str]) -> Prepared:
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
    ops = catalog(options.ops_modules)
    level = resolve_level(options.level, backend)
    user = load_shapes_file(options.shapes_file, set(ops) | set(options.ops)) if options.shapes_file else {}
    shapes = _op_shapes(options.ops, ops, level, user, declared_shapes(options.ops_modules))
    run_id = options.run_id or make_run_id(backend.name)
    run_dir = Path(options.out) if options.out else Path(options.reports_dir) / run_id
    check_out_dir(run_dir)
    require_devices(backend)
    devices = enumerate_devices(backend, options.devices or None, env)
    opts = replace(options, provider=SUITE_PROVIDER, timer=timer)
    plans = [OpPlan(op=op, device=assign_device(op, devices), dtypes=tuple(opts.dtypes), shapes=shapes[op],
                    provider=SUITE_PROVIDER) for op in dict.fromkeys(options.ops)]
    plan = RunPlan(run_id=run_id, backend=backend, level=level, plugins=_plugins(timer), devices=tuple(devices),
                   ops=shard_ops(plans, devices), options=opts)
    return Prepared(plan=plan, run_dir=run_dir.absolute(), runner=SuiteRunner(suite))


def _plugins(timer: str) -> PluginPlan:
    return PluginPlan(
        modules=("harness.child.plugins.suite",), timer=timer,
        reasons=(f"suite: FlagGems' pytest nodes with triton.testing.do_bench replaced by the "
                 f"harness {timer} timer, shapes from a FlagGems-format shape file",),
    )


def prepare_suite_resume(run_dir: Path, info: Mapping[str, Any], options: RunOptions) -> Prepared:
    """The suite run stored in ``run_dir`` (its run.json already read into ``info``)."""
    backend = resolve_backend(info["backend"])
    plan = RunPlan(run_id=info["run_id"], backend=backend, level=info["level"], plugins=_plugins(options.timer),
                   devices=tuple(info["devices"]), ops=stored_ops(info), options=options)
    return Prepared(plan=plan, run_dir=run_dir, resumed=True,
                    runner=SuiteRunner(locate_suite(Path(info["suite"]["path"]))))


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
    try:  # the harness op of the same name gives the bytes and FLOPs models (its module imports torch)
        spec = load_op(op_plan.op, plan.options.ops_modules)
    except UsageError:
        spec = None
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


class SuiteRunner:
    """FlagGems' pytest nodes for one op, in a process of the harness's batch (an OpRunner)."""

    def __init__(self, suite: SuiteLayout) -> None:
        self.suite = suite
        self._upstream_shapes: dict[str, Any] | None = None

    def _shapes(self) -> dict[str, Any]:
        if self._upstream_shapes is None:
            self._upstream_shapes = read_suite_shapes(self.suite.shapes_yaml)
        return self._upstream_shapes

    def launch(self, ctx: BatchContext, op_plan: OpPlan, attempt: int, skip: Collection[str]) -> Launch:
        plan, options = ctx.plan, ctx.plan.options
        node = node_for(op_plan.op)
        files = _OpFiles(ctx.run_dir / "suite" / op_file_stem(op_plan.op))
        files.clear()
        write_shape_file(files.shapes, suite_shape_config(
            self._shapes(), {node.op_name: [node.to_suite(s) for s in op_plan.shapes]},
            {node.op_name: node.shape_desc}))
        ChildSpec(
            run_id=plan.run_id, run_dir=str(ctx.run_dir), backend=plan.backend.name, device=op_plan.device,
            op=op_plan.op, provider=op_plan.provider, dtypes=op_plan.dtypes, shapes=op_plan.shapes,
            seed=options.seed, timer=plan.timer, cache=options.cache, ops_modules=options.ops_modules,
            warmup_ms=options.warmup_ms, rep_ms=options.rep_ms,
            extra={"timings": str(files.timings), "failures": str(files.failures), "started_at": _now()},
        ).dump(files.spec)
        command = suite_command(node, self.suite, files.work, files.spec, op_plan.dtypes)
        return Launch(pytest_args=tuple(command.args), exit_path=files.exit, env=command.env(), cwd=files.work,
                      header=f"FlagGems suite ({self.suite.ref}), attempt {attempt} on device {op_plan.device}, "
                             f"in {files.work}: {command.describe()}")

    def collect(self, ctx: BatchContext, op_plan: OpPlan, end: AttemptExit | None) -> tuple[str, ...]:
        """FlagGems' logged results become records (those not recorded by an earlier attempt)."""
        files = _OpFiles(ctx.run_dir / "suite" / op_file_stem(op_plan.op))
        started = str(ChildSpec.load(files.spec).extra.get("started_at", "")) if files.spec.exists() else ""
        conversion = _convert(ctx.plan, op_plan, files, ctx.run_dir, started)
        known = {r.case_id for r in read_records(ctx.records_path, on_corrupt="skip")}
        for record in conversion.records:
            if record.case_id not in known:
                append_record(ctx.records_path, record)
        if end is None:
            return ()
        node = node_for(op_plan.op)
        failures = _failures(files.failures)
        if not failures and end.pytest_exit not in (0, 5):
            error = _log_error(ctx.files.log(op_plan.op))
            failures = [f"pytest: {error}"] if error else []
        return tuple(_notes(node, self.suite, end, conversion, failures))

    def run_info(self, identity: Mapping[str, Any]) -> dict[str, Any]:
        return {"suite": {"path": str(self.suite.suite_dir), "ref": self.suite.ref, "provider": SUITE_PROVIDER,
                          "flag_gems": identity.get("flag_gems", {})}}
