"""``harness run --suite PATH``: FlagGems' own benchmarks, one op per process, under the harness.

Planning is the harness's: which benchmarks (harness.suite.select), FlagGems' own shapes or a
``--shapes-file`` override per op (harness.suite.shapefile), devices, sharding, timers. Each op
then runs FlagGems' pytest on its node(s) in a process of its own, through the same batch
executor as the harness's own ops (harness.run.batch: process per op, pre-start, timeouts,
retries, resume, progress, ops_status.csv, JUnit). In that process
harness.child.plugins.suite times every call with the harness's timers, checks FlagGems'
outputs against torch's and appends the records itself; rows carry provider ``flaggems-suite``.

The run's toolbox applies as to the harness's own ops: ``--replay-from`` and the parallel autotune
sweep (``--sweep-devices``: :meth:`SuiteRunner.sweep_launch` starts FlagGems' pytest for a sweep process's
share of the op's calls), the optional features ``autotune``, ``ir`` and ``wall`` (carried out by the
suite plugin, planned by :func:`suite_features`), compat plugins and ``--extra-plugin`` modules.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.autotune.sweep import SweepFiles
from harness.backends.base import Backend, capture_denied
from harness.contract import PYTEST_OFF, SUITE_SPEC_OPTION, SuiteFacts, child_plugin, op_file_stem
from harness.errors import EnvironmentProblem, UsageError, printable
from harness.options import RunOptions
from harness.results.runinfo import RunInfo
from harness.results.store import read_records
from harness.run.context import BatchContext
from harness.run.decide import AttemptExit
from harness.run.outputs import stored_ops
from harness.run.plan import OpPlan, share_ops
from harness.run.plugins import OPTIONAL_PLUGINS, PluginPlan, plan_plugins
from harness.run.select import read_dismiss_file, read_ops_file
from harness.run.source import Chosen
from harness.run.spawn import Launch
from harness.run.sweep import sweep_task
from harness.suite.inventory import Inventory, read_inventory
from harness.suite.layout import SuiteTree, locate_suite, major_minor
from harness.suite.replay import check_replay_version
from harness.suite.select import SuiteOp, all_ops, op_catalog, resolve_nodes, resolve_ops
from harness.suite.shapefile import (
    ShapePlan,
    check_override_keys,
    plan_op_shapes,
    read_shapes_override,
    read_suite_shapes,
    suite_shape_config,
    write_shape_file,
)

__all__ = ["SUITE", "SUITE_FEATURES", "SUITE_PROVIDER", "SuiteOpPlan", "SuiteRunner", "SuiteSource",
           "installed_version", "suite_command", "suite_digest_facts", "suite_features", "suite_plugins",
           "unchecked_reason"]

SUITE_PROVIDER = "flaggems-suite"  # rows measured through FlagGems' own benchmark code
SUITE_LEVELS = ("core", "comprehensive")  # FlagGems' --level choices
SHAPE_FILE = "shapes.yaml"  # in the op's working directory, when a --shapes-file entry applies
# Ops whose outputs are random or uninitialised: FlagGems' and torch's are not compared (the row
# says so). Matched as substrings of the op's names (id, function, marks, op_names).
UNCHECKED_NAMES: Mapping[str, str] = {
    "rand": "random output", "uniform": "random output", "normal": "random output",
    "bernoulli": "random output", "dropout": "random output", "multinomial": "random output",
    "exponential": "random output", "poisson": "random output", "geometric": "random output",
    "cauchy": "random output", "random": "random output", "empty": "uninitialised output",
    # rrelu_with_noise in training mode (FlagGems' benchmark) draws each negative input's slope; the
    # substring also matches an rrelu in eval mode (deterministic), left unchecked too
    "rrelu": "random output (in training mode each negative element's slope is drawn)",
    # scatter without a reduction, whose index FlagGems' benchmarks draw at random with repeats
    # (scatter_src: twice as many indices as places along the dim; scatter_src_: as many): torch
    # documents that one of the values is picked arbitrarily, so two correct implementations
    # differ where indices repeat
    "scatter_src": "undefined output (duplicate indices: which value lands is arbitrary)",
}
DEFAULT_SHAPE_COUNT = 5  # rows per dtype assumed for a benchmark whose shapes cannot be read statically
# Optional plugins of the harness's own op process whose work the suite plugin does in FlagGems'
# pytest (on or off as planned for the backend and toggled by --plugins).
SUITE_FEATURES = ("autotune", "ir", "wall")
# Optional plugins loaded into FlagGems' pytest themselves (PluginPlan.suite_modules).
_COMPAT_PLUGINS = tuple(p.name for p in OPTIONAL_PLUGINS.values() if "suite" in p.targets)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def unchecked_reason(op: SuiteOp) -> str:
    """Why this op's outputs are not compared (random or uninitialised), or ""."""
    for name in op.keys:
        for part, why in UNCHECKED_NAMES.items():
            if part in name.lower():
                return f"outputs not compared: {why} ({name!r})"
    return ""


def installed_version(package: str, env: Mapping[str, str]) -> str | None:
    """The version of ``package`` the op processes will import (their PYTHONPATH first, then this
    interpreter's path), from its metadata: nothing is imported. None when not installed."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + sys.path
    found = next(iter(importlib.metadata.distributions(name=package, path=paths)), None)
    return str(found.version) if found is not None else None


def _check_versions(tree: SuiteTree, installed: str | None, allow: bool) -> None:
    if installed is None:
        raise EnvironmentProblem(
            f"--suite {tree.suite_dir}: its benchmarks import {tree.package}, which is not installed here. "
            f"Install the {tree.package} of the tree's tag ({tree.ref or 'unknown'}); benchmarks/fetch_flaggems.sh "
            "builds a wheel of a tag (docs/flaggems.md).")
    mine, theirs = major_minor(installed), tree.version
    if allow or mine is None or theirs is None or mine == theirs:
        return
    raise UsageError(
        f"--suite {tree.suite_dir}: the tree is FlagGems {theirs[0]}.{theirs[1]} ({tree.ref}) but the installed "
        f"{tree.package} is {installed}; benchmarks of one version call functions of another. Install the "
        "matching wheel, export the matching tree, or pass --allow-version-mismatch.")


@dataclass(frozen=True)
class SuiteOpPlan:
    """What an op's process needs beyond the child spec: its pytest selection and row facts."""

    op: SuiteOp
    shapes: ShapePlan
    unchecked: str = ""
    capture_denied: str = ""
    expected_rows: int = 1


def _expected_rows(op: SuiteOp, shapes: ShapePlan, upstream: Mapping[str, Any], dtypes: Sequence[str]) -> int:
    """About how many rows the op writes (sharding weight, progress): dtypes x shapes per benchmark."""
    total = 0
    for build in (b for f in op.functions for b in f.builds):
        declared = [d for d in build.dtypes if d != "?"] or ["float16", "float32", "bfloat16"]
        n_dtypes = len([d for d in dtypes if d in declared]) or len(declared)
        entry = next((table.get(k) for table in (shapes.entries, shapes.inputs)
                      for k in (build.recorded_op_name, build.bench_class) if table.get(k)), None)
        if entry is None and build.reads_shape_file:
            found = next((upstream[k] for k in (build.recorded_op_name, *build.class_chain)
                          if k and isinstance(upstream.get(k), Mapping)), None)
            entry = found.get("shapes") if found else None
        total += n_dtypes * (len(entry) if isinstance(entry, list) and entry else DEFAULT_SHAPE_COUNT)
    return max(total, 1)


def plan_suite_ops(tree: SuiteTree, inventory: Inventory, ops: Sequence[SuiteOp], backend: Backend,
                   options: RunOptions) -> dict[str, SuiteOpPlan]:
    """Each op's shapes, checks and capture decision (pure but for reading the shapes files)."""
    upstream = read_suite_shapes(tree.shapes_yaml)
    override = read_shapes_override(options.shapes_file) if options.shapes_file else {}
    check_override_keys(override, inventory)
    plans: dict[str, SuiteOpPlan] = {}
    for op in ops:
        shapes = plan_op_shapes(op, override, upstream)
        denied = next((k for k in op.keys if capture_denied(backend, k)), "")
        plans[op.id] = SuiteOpPlan(
            op=op, shapes=shapes, unchecked=unchecked_reason(op),
            capture_denied=f"{denied!r} is on the {backend.name} capture deny list" if denied else "",
            expected_rows=_expected_rows(op, shapes, upstream, options.dtypes),
        )
    return plans


def _level(requested: str) -> str:
    if requested == "auto":
        return "core"
    if requested not in SUITE_LEVELS:
        raise UsageError(f"--level {requested}: FlagGems' suite has the levels {' and '.join(SUITE_LEVELS)} "
                         "(--level auto means core); smoke is the harness's own tiny level.")
    return requested


def suite_features(backend: Backend, options: RunOptions) -> dict[str, bool]:
    """Which of :data:`SUITE_FEATURES` the suite plugin carries out: as planned for the harness's
    own op process on this backend, with the run's toggles (``--plugins -autotune +wall``)."""
    planned = plan_plugins(backend, options.timer, options.plugins, (), options.ir)
    return {name: planned.has(name) for name in SUITE_FEATURES}


def suite_plugins(backend: Backend, options: RunOptions) -> PluginPlan:
    """FlagGems' pytest gets the suite plugin (which does the work of the autotune, ir and wall
    plugins there, as toggled), the compat plugins planned for a library's pytest
    (``suite_modules``: skipguards where the backend has stale CUDA guards, mm_cluster when turned
    on) and the run's ``--extra-plugin`` modules."""
    planned = plan_plugins(backend, options.timer, options.plugins, options.extra_plugins, options.ir)
    features = suite_features(backend, options)
    inside = [f"{name}: {'on' if features[name] else 'off'}, inside the suite plugin" for name in SUITE_FEATURES]
    return PluginPlan(
        modules=(child_plugin("suite"), *options.extra_plugins), timer=planned.timer,
        reasons=(f"suite: FlagGems' pytest nodes; Benchmark.get_latency answered by the harness ({planned.timer} "
                 f"timer, outputs checked against torch's, records written by the op process; {'; '.join(inside)})",
                 *(f"{module}: --extra-plugin" for module in options.extra_plugins)),
        suite_modules=planned.suite_modules, suite_reasons=planned.suite_reasons,
        off=tuple(r for r in planned.off if r.split(":", 1)[0] in (*SUITE_FEATURES, *_COMPAT_PLUGINS)),
    )


def _selected(inventory: Inventory, options: RunOptions, all_ops_flag: bool) -> list[SuiteOp]:
    if all_ops_flag and (options.ops or options.ops_file or options.nodes):
        raise UsageError("--all runs every benchmark of the suite; it cannot be combined with --ops, --ops-file "
                         "or --node.")
    if all_ops_flag:
        return all_ops(inventory)
    names = [(name, "--ops") for name in options.ops]
    if options.ops_file:
        names += [(ref.text, ref.origin) for ref in read_ops_file(options.ops_file)]
    ops = resolve_ops(inventory, names) if names else []
    ops += [o for o in resolve_nodes(inventory, options.nodes) if o.id not in {x.id for x in ops}]
    if not ops:
        raise UsageError("--suite needs --ops (FlagGems benchmark names, e.g. --ops softmax mm), --node "
                         "FILE::FUNC, --ops-file or --all; `harness list suite --suite PATH` lists them.")
    return ops


def _dismissed(inventory: Inventory, path: str | None, selected: Collection[str]) -> dict[str, str]:
    if not path:
        return {}
    entries = read_dismiss_file(path)
    ops = resolve_ops(inventory, [(k, f"--dismiss {path}") for k in entries])
    reasons = dict(zip((o.id for o in ops), entries.values(), strict=True))
    return {k: v for k, v in reasons.items() if k in selected}


def suite_digest_facts(tree: SuiteTree, plans: Mapping[str, SuiteOpPlan]) -> dict[str, Any]:
    """What decides a suite run's measurements beyond its op plans (which hold no shapes), for the
    plan digest that `harness merge` compares: the tree (layout, package, ref; not its path, which
    may differ between machines), each op's pytest selection, its --shapes-file entries and its
    expected rows."""
    return {
        "tree": {"layout": tree.layout, "package": tree.package, "ref": tree.ref},
        "ops": {op: {"select": p.op.mark or list(p.op.selected_nodes()), "rows": p.expected_rows,
                     "shapes": {k: [list(x) for x in v] for k, v in sorted(p.shapes.entries.items())}}
                for op, p in plans.items()},
    }


@dataclass(frozen=True)
class SuiteSource:
    """A library's benchmark suite as a source of ops (``--suite PATH``; harness.run.source.Source)."""

    name: str = "suite"

    def claims(self, options: RunOptions) -> bool:
        return bool(options.suite)

    def made(self, info: RunInfo) -> bool:
        return "suite" in info.sections

    def choose(self, options: RunOptions, backend: Backend, env: Mapping[str, str], all_ops: bool) -> Chosen:
        assert options.suite is not None
        tree = locate_suite(Path(options.suite))
        inventory = read_inventory(tree)
        if not (options.ops or options.ops_file or options.nodes):
            # the whole tree is the selection (--all, or none given yet): name what it cannot hold; a
            # name that is not found says the same in its own one-line refusal (harness.suite.select)
            for line in inventory.unreadable_warnings():
                print(f"harness: warning: {printable(line)}", file=sys.stderr)
        level = _level(options.level)
        plugins = suite_plugins(backend, options)
        ops = _selected(inventory, options, all_ops)
        plans = plan_suite_ops(tree, inventory, ops, backend, options)
        dismissed = _dismissed(inventory, options.dismiss, plans)
        installed = installed_version(tree.package, env)
        _check_versions(tree, installed, options.allow_version_mismatch)
        check_replay_version(options.replay_from, tree.package, installed, options.allow_version_mismatch)
        opts = replace(options, provider=SUITE_PROVIDER, timer=plugins.timer, level=level)
        runner = SuiteRunner(tree, plans, installed=installed, features=suite_features(backend, options),
                             unreadable=inventory.unreadable)

        def planned(devices: Sequence[str]) -> tuple[OpPlan, ...]:
            return share_ops([OpPlan(op=p.op.id, device=devices[0], dtypes=tuple(opts.dtypes), shapes=(),
                                     provider=SUITE_PROVIDER, open_cases=p.expected_rows) for p in plans.values()],
                             devices)

        # --shard K/N: the harness's own split (harness.run.plan.assign_parts), each op weighed as over
        # --devices (its start plus its expected rows); the digest adds what the op plans cannot say.
        return Chosen(options=opts, level=level, plugins=plugins, runner=runner, plan_ops=planned,
                      dismissed=dismissed, digest_facts=suite_digest_facts(tree, plans),
                      sweep_launcher=runner.sweep_launch)

    def reopen(self, info: RunInfo, options: RunOptions, backend: Backend) -> Chosen:
        facts = info.sections["suite"]
        tree = locate_suite(Path(facts["path"]))
        inventory = read_inventory(tree)
        catalog = op_catalog(inventory)
        ops = [catalog.get(o.op) or resolve_nodes(inventory, [o.op])[0] for o in stored_ops(info)]
        plans = plan_suite_ops(tree, inventory, ops, backend, options)
        runner = SuiteRunner(tree, plans, installed=facts.get("installed"),
                             features=suite_features(backend, options))
        return Chosen(options=options, level=info.level, plugins=suite_plugins(backend, options),
                      runner=runner, sweep_launcher=runner.sweep_launch)


SUITE = SuiteSource()


# ---------------------------------------------------------------------------------------------
# One op


def suite_command(tree: SuiteTree, op: SuiteOp, level: str, shape_file: Path, spec_path: Path,
                  compat: Sequence[str] = ()) -> list[str]:
    """pytest's arguments for the op's process: FlagGems' node(s) with its options and the plugin
    (``compat``: ``-p`` arguments of the compat and ``--extra-plugin`` modules).

    The files are collected whole and the plugin keeps the op's nodes (``selected_nodes``, in the
    spec): a node id on the command line in a module that skips itself at import (a missing vLLM)
    would be a usage error to pytest, where it is a skipped benchmark here. No ini file: a full
    checkout's pytest.ini would put src/ (not the installed flag_gems) first. FlagGems' ``--mode``
    is left at its default: its timer is not used (and kunlunxin names the option ``--fg_mode``);
    nor is ``--dtypes`` passed (it refuses a dtype a benchmark lacks: the plugin narrows each
    benchmark's dtypes itself)."""
    mark = ["-m", op.mark] if op.mark else []
    return [*(str(tree.suite_dir / f) for f in op.files), *mark, "--level", level, "--shape_file", str(shape_file),
            "-p", child_plugin("suite"), SUITE_SPEC_OPTION, str(spec_path), *compat,
            "-c", os.devnull, "--rootdir", str(tree.root), *PYTEST_OFF,
            "-q", "-rN", "-s", "-W", "ignore::pytest.PytestUnknownMarkWarning"]


@dataclass
class SuiteRunner:
    """FlagGems' pytest nodes for one op, in a process of the harness's batch (an OpRunner)."""

    tree: SuiteTree
    plans: Mapping[str, SuiteOpPlan]
    installed: str | None = None
    features: Mapping[str, bool] = field(default_factory=dict)  # suite_features: autotune, ir, wall
    unreadable: tuple[tuple[str, int, str], ...] = ()  # the tree's test files not read (Inventory.unreadable)
    _upstream: dict[str, Any] | None = field(default=None, repr=False)

    def _upstream_shapes(self) -> dict[str, Any]:
        if self._upstream is None:
            self._upstream = read_suite_shapes(self.tree.shapes_yaml)
        return self._upstream

    def _work(self, ctx: BatchContext, op: str) -> Path:
        return ctx.run_dir / "suite" / op_file_stem(op)

    def _shape_file(self, ctx: BatchContext, op: str) -> Path:
        """FlagGems' core_shapes.yaml, or the op's own copy with its --shapes-file entries."""
        suite_op = self.plans[op]
        if not suite_op.shapes.overrides:
            return self.tree.shapes_yaml
        shape_file = self._work(ctx, op) / SHAPE_FILE
        write_shape_file(shape_file, suite_shape_config(self._upstream_shapes(), suite_op.shapes.entries))
        return shape_file

    def _facts(self, ctx: BatchContext, op: str) -> SuiteFacts:
        """The spec's suite section for ``op``'s process."""
        suite_op = self.plans[op]
        return SuiteFacts(suite_dir=str(self.tree.suite_dir), package=self.tree.package, level=ctx.plan.level,
                          nodes=tuple(suite_op.op.selected_nodes()), notes=tuple(suite_op.shapes.notes),
                          unchecked=suite_op.unchecked, capture_denied=suite_op.capture_denied, started_at=_now(),
                          input_shapes={k: tuple(v) for k, v in suite_op.shapes.inputs.items()},
                          table_colour=ctx.plan.options.table_colour == "on",
                          **{name: bool(self.features.get(name)) for name in SUITE_FEATURES})

    def _command(self, ctx: BatchContext, op: str, spec_path: Path) -> list[str]:
        plan = ctx.plan
        extra = [arg for module in plan.options.extra_plugins for arg in ("-p", module)]
        return suite_command(self.tree, self.plans[op].op, plan.level, self._shape_file(ctx, op), spec_path,
                             [*plan.plugins.suite_pytest_args(), *extra])

    def launch(self, ctx: BatchContext, op_plan: OpPlan, attempt: int, skip: Collection[str],
               capture_off: str = "") -> Launch:
        suite_op = self.plans[op_plan.op]
        work = self._work(ctx, op_plan.op)
        work.mkdir(parents=True, exist_ok=True)
        spec_path = ctx.files.spec(op_plan.op)
        spec_path.parent.mkdir(exist_ok=True)
        ctx.child_spec(op_plan, op_plan.device, skip, capture_off=capture_off,
                       suite=self._facts(ctx, op_plan.op)).dump(spec_path)
        args = self._command(ctx, op_plan.op, spec_path)
        # Pre-started, the process also imports the suite's package (3 s and more a process on the H200
        # machine), so that import overlaps the op before it too; docs/flaggems.md "Selection".
        return Launch(pytest_args=tuple(args), exit_path=ctx.files.exit_file(op_plan.op), cwd=work,
                      preload=(self.tree.package,),
                      header=f"FlagGems suite ({self.tree.ref or self.tree.layout}) {suite_op.op.id}, attempt "
                             f"{attempt} on device {op_plan.device}")

    def sweep_launch(self, ctx: BatchContext, op_plan: OpPlan, index: int, device: str,
                     cases: Sequence[str]) -> Launch:
        """A sweep process of a suite op (a harness.run.sweep.SweepLauncher): FlagGems' pytest on the
        op's nodes, the suite plugin in tune mode running FlagGems' calls numbered ``i`` with
        ``i % N == index`` once each (N: the sweep's process count; harness.child.suite_tune), recording
        what the autotuners chose into ``shard-<index>.json`` and each call's outcome into
        ``shard-<index>.result.json``. ``cases`` is the share in words (the op's cases are open)."""
        files = SweepFiles(ctx.run_dir, op_plan.op)
        files.folder.mkdir(parents=True, exist_ok=True)
        self._work(ctx, op_plan.op).mkdir(parents=True, exist_ok=True)  # a --shapes-file copy goes there
        count = len(ctx.sweep.devices) if ctx.sweep is not None else 1
        ctx.child_spec(op_plan, device, sweep=sweep_task(files, index, count),
                       suite=self._facts(ctx, op_plan.op)).dump(files.process_spec(index))
        args = self._command(ctx, op_plan.op, files.process_spec(index))
        return Launch(pytest_args=tuple(args), exit_path=files.process_exit(index), cwd=files.folder,
                      preload=(self.tree.package,),
                      header=f"sweep shard {index} of {op_plan.op} (FlagGems suite) on device {device}: "
                             f"{'; '.join(cases)}")

    def collect(self, ctx: BatchContext, op_plan: OpPlan, end: AttemptExit | None) -> tuple[str, ...]:
        """The op process wrote its records itself; what it cannot say is said here: a selection
        pytest found nothing in, or a function that ran without timing anything."""
        if end is None:
            return ()
        if end.pytest_exit == 5:
            selection = self.plans[op_plan.op].op.describe()
            return (f"pytest collected no benchmark for {selection} (FlagGems {self.tree.ref or self.tree.layout})",)
        if end.pytest_exit == 0 and not any(r.op == op_plan.op for r in read_records(ctx.records_path, on_corrupt="skip")):
            return ("FlagGems' function ran and timed nothing (no Benchmark.get_latency call: not a benchmark)",)
        return ()

    def run_info(self, identity: Mapping[str, Any]) -> dict[str, Any]:
        return {"suite": {**self.tree.to_dict(), "provider": SUITE_PROVIDER, "installed": self.installed,
                          "flag_gems": identity.get("flag_gems", {}),
                          "unreadable": [f"{name} line {line}: {why}" for name, line, why in self.unreadable]}}
