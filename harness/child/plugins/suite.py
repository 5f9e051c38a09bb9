"""pytest plugin loaded into FlagGems' own benchmark run (``harness run --suite``).

FlagGems' pytest runs its own benchmark functions, its own conftest and its own input
generators. This plugin pins the device and records its identity like the harness's device
plugin, builds the harness's timers (``harness.child.plugins.timing.timers_for``), and, once
collection has imported FlagGems' ``Benchmark`` class, replaces two of its methods for the
length of the session (``harness.child.latency_seam``):

- ``get_latency``: every latency FlagGems asks for is measured by the harness's timer, the
  outputs of torch's and FlagGems' calls are compared, and one record per input is appended
  to records.jsonl from this process;
- ``set_dtypes``: the benchmark runs the dtypes the run asked for that it declares (skip rows
  for the others), or its own when it declares none of them (dtype rescue). A function
  parametrized by dtype (one node per dtype) runs only the nodes of the asked dtypes, where it
  has any (:func:`unasked_dtype_items`).

Why a patch: FlagGems offers no hook to time or check otherwise, and every benchmark of both
layouts (custom ``run()`` methods included) measures through ``Benchmark.get_latency``. The
originals are put back in pytest_unconfigure. Benchmark functions that fail or skip outside
those calls (an input generator that raises, a ``skipif`` mark, a module that does not
import) get a row with FlagGems' reason.

The run's optional features, as the spec's suite facts say (harness.suite.runner): ``autotune``
records the configs FlagGems' autotuners (LibTuner, Triton's) chose, per row, into
``autotune/<op>.json``, and seeds them from ``--replay-from`` or a sweep's merged configs before
the first benchmark runs (each row's ``autotune`` marker says what happened); ``ir`` keeps the
kernels compiled during each row (``ir/<op>/<case>/``, the row's ``ir``); ``wall`` times each
call a second time as a user makes it. In a sweep process (spec ``mode: tune``) the plugin answers
``get_latency`` with :class:`harness.child.suite_tune.TuneSeam` instead: the sweep process's share of
FlagGems' calls runs once, and ``process_result`` says how each went.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.autotune.tuners import AutotuneRecorder
from harness.backends import get_backend
from harness.backends.base import rng_left_capturing
from harness.backends.state import read_state
from harness.child.latency_seam import LatencySeam, RowContext, RowWriter, SuiteTimers
from harness.child.outputs import dtype_name
from harness.child.plugins.identity import probe_accelerator, probe_cpu, write_identity
from harness.child.plugins.seeding import seed_generators
from harness.child.plugins.timing import timers_for
from harness.child.result_table import folded_str
from harness.child.suite_tune import TuneSeam
from harness.child.timing.base import device_api
from harness.contract import SUITE_SPEC_OPTION, ChildSpec, SuiteFacts, SweepResult, op_file_stem
from harness.results.store import write_json

_PLUGIN_KEY = pytest.StashKey["SuitePlugin"]()
_BASE_MODULES = ("base", "performance_utils")  # where FlagGems defines Benchmark (v5.3+, v5.0.x)
IR_DIR = "ir"  # RUN/ir/<op>/<case>/, as the harness's own op processes keep it


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(SUITE_SPEC_OPTION, help="child spec JSON written by `harness run --suite`")


def _item_seed(seed: int, nodeid: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}\x00{nodeid}".encode()).digest()[:4], "big")


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    text = report.longreprtext or str(report.longrepr)
    lines = text.splitlines()
    errors = [ln[1:].strip() for ln in lines if ln.startswith("E ") and ln[1:].strip()]  # pytest's "E   ..." lines
    return (errors[-1] if errors else next((ln.strip() for ln in reversed(lines) if ln.strip()), "failed"))[-1000:]


def _param_dtypes(item: pytest.Item) -> frozenset[str]:
    """The dtypes among a node's parameters (FlagGems' ``parametrize("dtype", ...)``)."""
    import torch

    params = getattr(getattr(item, "callspec", None), "params", {})
    return frozenset(dtype_name(v) for v in params.values() if isinstance(v, torch.dtype))


def unasked_dtype_items(items: Sequence[tuple[str, frozenset[str]]], asked: Sequence[str]) -> set[int]:
    """Which of a run's nodes (function, the dtypes among its parameters) to leave out: those
    parametrized by a dtype the run did not ask for, of a function with a parametrization it did
    ask for. FlagGems' test_amin runs one node per dtype, each declaring only its own; with
    ``--dtypes bfloat16`` the float16 and float32 nodes would otherwise each declare none of the
    asked dtypes and run their own (the dtype rescue, meant for a benchmark that has none of them).
    A function none of whose nodes is asked keeps them all, and is rescued node by node."""
    wanted = set(asked)
    if not wanted:
        return set()
    answered = {function for function, dtypes in items if dtypes & wanted}
    return {k for k, (function, dtypes) in enumerate(items)
            if dtypes and not dtypes & wanted and function in answered}


def _packages(package: str) -> tuple[str, ...]:
    """Where the suite's autotuners live: its package, and flag_gems under a package built on it
    (FlagGems-vllm's kernels call flag_gems' LibTuner-tuned ones too)."""
    return (package,) if package == "flag_gems" else (package, "flag_gems")


def _library_modules(packages: tuple[str, ...]) -> list[str]:
    from harness.child.plugins.autotune import library_modules

    return [n for p in packages for n in library_modules(p)]


@dataclass
class AutotuneHook:
    """Each row's ``autotune`` marker and the op's ``autotune/<op>.json`` (a RowHook). Modules of
    the suite's package imported after the recorder was made (a benchmark that imports a kernel
    module itself) are searched when a row begins, and their autotuners watched too."""

    recorder: AutotuneRecorder
    packages: tuple[str, ...]
    seen: int = 0

    def __post_init__(self) -> None:
        self.seen = len(_library_modules(self.packages))

    def adopt_new(self) -> None:
        from harness.child.plugins.autotune import autotuners_in

        names = _library_modules(self.packages)
        if len(names) != self.seen:
            self.seen = len(names)
            self.recorder.adopt(autotuners_in(names))

    def begin(self) -> None:
        self.adopt_new()
        self.recorder.begin_case()

    def fields(self, case: str) -> dict[str, Any]:
        return {"autotune": self.recorder.marker()}

    def written(self) -> None:
        self.recorder.save()  # on disk before the next row: a crash keeps what was tuned


@dataclass
class IrHook:
    """The kernels compiled during each row, and those its untimed calls launched that an earlier
    row compiled (``reused``), kept under ir/<op>/<case>/ (a RowHook)."""

    capture: Any  # harness.ir.capture.IrCapture
    run_dir: Path
    op: str

    def begin(self) -> None:
        self.capture.begin_case()

    def fields(self, case: str) -> dict[str, Any]:
        rel = f"{IR_DIR}/{op_file_stem(self.op)}/{op_file_stem(case)}"
        summary = self.capture.end_case(self.run_dir / rel, rel)
        return {"ir": summary} if summary is not None else {}

    def written(self) -> None:
        return None


def build_suite_recorder(spec: ChildSpec, package: str) -> AutotuneRecorder:
    """The recorder over the autotuners of the suite's package, seeded from the spec's replay
    source (``--replay-from`` or a sweep's merged configs); recording where the spec says."""
    from harness.child.plugins.autotune import record_path, recorder_for, replay_for

    return recorder_for(spec.op, record_path(spec), replay_for(spec), _library_modules(_packages(package)))


def _ir_hook(spec: ChildSpec) -> IrHook | None:
    """IR capture for the rows of this process, or None where this Triton has no listener."""
    from harness.ir.capture import IrCapture

    capture = IrCapture.started(sass=spec.ir_sass)
    return None if capture is None else IrHook(capture, Path(spec.run_dir), spec.op)


@dataclass(eq=False)  # registered with pluggy, which hashes its plugins
class SuitePlugin:
    """The op process's state, registered as a plugin so its hooks reach it."""

    spec: ChildSpec
    package: str
    seam: LatencySeam
    identity: dict[str, Any]
    patched: list[tuple[type, str, Any]] = field(default_factory=list)
    module_skips: int = 0
    recorder: AutotuneRecorder | None = None
    ir: IrHook | None = None
    compile_ms: float | None = None  # a sweep process's compile time (its result file)

    @property
    def tuning(self) -> bool:
        return isinstance(self.seam, TuneSeam)

    @property
    def facts(self) -> SuiteFacts:
        assert self.spec.suite is not None  # pytest_configure refuses a spec without it
        return self.spec.suite

    # -- collection ---------------------------------------------------------------------------

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # a module that does not import: FlagGems' benchmark cannot run here
            self.seam.begin_item(report.nodeid)
            self.seam.item_outcome("error", f"collection of {report.nodeid} failed: {_reason(report)}")
        elif report.skipped:  # a module-level skip (pytest.importorskip, pytest.skip(allow_module_level=True))
            self.seam.begin_item(report.nodeid)
            self.seam.item_outcome("skip", _reason(report))
            self.module_skips += 1

    @pytest.hookimpl(trylast=True)  # after pytest's own -m: by mark (v5.0), only the op's nodes are left
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Keep the op's nodes: a function's every parametrization, or exactly a node given; then
        drop the dtype parametrizations the run did not ask for (:func:`unasked_dtype_items`);
        the seam learns which asked dtypes each function's kept nodes run."""
        nodes = set(self.facts.nodes)
        prefix = Path(self.facts.suite_dir).name + "/"
        kept: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item in items:
            node = item.nodeid.removeprefix(prefix)
            (kept if not nodes or node in nodes or node.split("[", 1)[0] in nodes else dropped).append(item)
        unasked = unasked_dtype_items([(i.nodeid.split("[", 1)[0], _param_dtypes(i)) for i in kept], self.spec.dtypes)
        dropped += [kept[k] for k in sorted(unasked)]
        kept = [item for k, item in enumerate(kept) if k not in unasked]
        for item in kept:
            self.seam.sibling_dtypes.setdefault(item.nodeid.split("[", 1)[0], set()).update(_param_dtypes(item))
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._write_identity()
        self._watch_autotuners()
        if session.items:
            benchmark = self._benchmark_class()
            if benchmark is None:
                raise pytest.UsageError(
                    f"no {'/'.join(_BASE_MODULES)} module defining Benchmark.get_latency was imported from "
                    f"{self.facts.suite_dir}; the harness cannot time this FlagGems tree")
            self._patch(benchmark)

    def _watch_autotuners(self) -> None:
        """After collection (the suite's package and its kernels are imported), before any
        benchmark runs: the autotuners are found, seeded when replaying, and watched per row."""
        if not (self.facts.autotune or self.tuning):
            return
        self.recorder = build_suite_recorder(self.spec, self.package)
        hook = AutotuneHook(self.recorder, _packages(self.package))
        if isinstance(self.seam, TuneSeam):
            self.seam.recorder = hook
        else:
            self.seam.writer.hooks.append(hook)

    def _benchmark_class(self) -> type | None:
        suite_dir = Path(self.facts.suite_dir).resolve()
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if name.rsplit(".", 1)[-1] not in _BASE_MODULES or not path or Path(path).resolve().parent != suite_dir:
                continue
            cls = getattr(module, "Benchmark", None)
            if isinstance(cls, type) and callable(getattr(cls, "get_latency", None)):
                return cls
        return None

    def _patch(self, benchmark: type) -> None:
        seam = self.seam
        original_set_dtypes = benchmark.set_dtypes  # type: ignore[attr-defined]

        def get_latency(bench: Any, op: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
            return seam.get_latency(bench, op, args, kwargs)

        def set_dtypes(bench: Any, user_dtypes: Any = None) -> None:
            seam.set_dtypes(bench, original_set_dtypes, user_dtypes)

        for name, replacement in (("get_latency", get_latency), ("set_dtypes", set_dtypes)):
            self.patched.append((benchmark, name, benchmark.__dict__[name]))
            setattr(benchmark, name, replacement)
        result = getattr(sys.modules.get(benchmark.__module__), "BenchmarkResult", None)
        if isinstance(result, type) and "__str__" in result.__dict__:  # the table FlagGems prints per benchmark
            self.patched.append((result, "__str__", result.__dict__["__str__"]))
            result.__str__ = folded_str(result.__dict__["__str__"], self.facts.table_colour)  # type: ignore[assignment]

    def restore(self) -> None:
        while self.patched:
            cls, name, original = self.patched.pop()
            setattr(cls, name, original)

    def _write_identity(self) -> None:
        module = sys.modules.get(self.package)
        if module is not None:
            self.identity["flag_gems"] = {
                "package": self.package,
                "version": str(getattr(module, "__version__", "unknown")),
                "vendor": str(getattr(module, "vendor_name", "unknown")),
                "device": str(getattr(module, "device", "unknown")),
            }
        write_identity(self.spec.run_dir, self.spec.device, self.identity)

    # -- items --------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        seed_generators(_item_seed(self.spec.seed, item.nodeid))  # FlagGems' inputs, the same every run
        self.seam.begin_item(item.nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, None]:
        yield
        self.seam.end_item()  # inside the item, before its report: pending rows are written first

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and report.when in ("setup", "call"):
            self.seam.item_outcome("skip", _reason(report))
        elif report.failed:
            message = f"{report.when}: {_reason(report)}" if report.when != "call" else _reason(report)
            # only where this process captured: elsewhere the wording cannot be a capture's doing
            if (isinstance(self.seam, LatencySeam) and self.seam.captured()
                    and rng_left_capturing(get_backend(self.spec.backend), message)):
                self.seam.item_poisoned(message)
            self.seam.item_outcome("error", message)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """A node selected in a module that skips itself is a usage error to pytest ("found no
        collectors"); here it is a skipped benchmark, whose row says why. Then the device's clocks,
        temperature and power right after the op, while it is warm."""
        import json

        if exitstatus == pytest.ExitCode.USAGE_ERROR and self.module_skips and not session.items:
            session.exitstatus = pytest.ExitCode.OK
        if self.recorder is not None:
            self.recorder.save()  # an op whose rows were all recorded earlier still says what it replayed
        if self.ir is not None:
            self.ir.capture.uninstall()
        if isinstance(self.seam, TuneSeam):
            self._write_process_result()
            return

        state = read_state(get_backend(self.spec.backend)).get(self.spec.device)
        if state:
            line = {"op": self.spec.op, "device": self.spec.device, **state}
            with open(Path(self.spec.run_dir) / "device_state.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, sort_keys=True) + "\n")


    def _write_process_result(self) -> None:
        """What harness.run.sweep reads to say why a sweep process failed: each call's outcome."""
        assert isinstance(self.seam, TuneSeam)
        compile_ms = None
        if self.ir is not None:
            summary = self.ir.capture.end_case(None)
            compile_ms = summary["compile_ms"] if summary else None
        assert self.spec.sweep is not None
        write_json(Path(self.spec.sweep.result),
                   SweepResult(cases=self.seam.outcomes, compile_ms=compile_ms, calls=self.seam.calls,
                               share=(self.seam.index, self.seam.count)).to_json())


def _device(spec: ChildSpec) -> tuple[str, dict[str, Any]]:
    """Pin torch to the one device this process sees; (torch device, identity)."""
    backend = get_backend(spec.backend)
    if backend.torch_namespace is None:
        return "cpu", probe_cpu()
    api = device_api(backend.torch_namespace, backend.torch_extension, backend.graph_class)
    if not api.namespace.is_available() or api.namespace.device_count() < 1:
        raise pytest.UsageError(f"backend {backend.name!r}: torch.{backend.torch_namespace} sees no device "
                                f"(device {spec.device} was selected); run `harness doctor`.")
    api.namespace.set_device(0)
    return f"{backend.device_type}:0", probe_accelerator(backend, api.namespace)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption(SUITE_SPEC_OPTION)
    if not path:
        return  # loaded without a spec: stay out of the way
    try:
        spec = ChildSpec.load(Path(path))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    facts = spec.suite
    if facts is None:
        raise pytest.UsageError(f"{path}: the spec has no suite section; it was not written by `harness run --suite`")
    backend = get_backend(spec.backend)
    torch_device, identity = _device(spec)
    write_identity(spec.run_dir, spec.device, identity)
    timers = timers_for(spec, backend, torch_device, identity.get("l2_bytes"))
    package = facts.package
    ctx = RowContext(
        run_id=spec.run_id, op=spec.op, provider=spec.provider, backend=spec.backend, device=spec.device,
        device_name=str(identity.get("device_name", "")), cache=spec.cache if spec.timer != "cpu" else "n/a",
        seed=spec.seed, records=spec.records_path, skip_cases=frozenset(spec.skip_cases),
        notes=facts.notes, unchecked=facts.unchecked, peaks=backend.peaks,
    )

    def under_gems() -> bool:
        return getattr(sys.modules.get(package), "current_work_registrar", None) is not None

    wall = None
    if facts.wall:
        from harness.child.timing.wall import WallTimer

        wall = WallTimer()
        if backend.torch_namespace:
            wall.synchronize = device_api(backend.torch_namespace, backend.torch_extension).synchronize
    suite_timers = SuiteTimers(timers.primary, timers.fallback, facts.capture_denied, wall=wall)
    seam: LatencySeam
    ir: IrHook | None = None
    if spec.sweep is not None:
        sync = (device_api(backend.torch_namespace, backend.torch_extension).synchronize
                if backend.torch_namespace else (lambda: None))
        seam = TuneSeam(ctx, suite_timers, spec.dtypes, index=spec.sweep.index,
                        count=spec.sweep.count, recorder=None, under_gems=under_gems,
                        synchronize=sync, level=facts.level)
        seam.input_shapes = facts.input_shapes  # a sweep tunes the shapes the rows will measure
        if not backend.capabilities.triton_interpreter:  # compile times only, for sweep.json
            ir = _ir_hook(spec)
            if ir is not None:
                ir.capture.keep_files = False
    else:
        seam = LatencySeam(RowWriter(ctx), suite_timers, spec.dtypes, under_gems=under_gems,
                           level=facts.level, input_shapes=facts.input_shapes)
        if facts.ir:
            ir = _ir_hook(spec)
            if ir is not None:
                seam.writer.hooks.append(ir)
                seam.watch_launches = ir.capture.watching
    plugin = SuitePlugin(spec=spec, package=package, seam=seam, identity=identity, ir=ir)
    config.stash[_PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "harness-suite")


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.stash.get(_PLUGIN_KEY, None)
    if plugin is not None:
        plugin.restore()
