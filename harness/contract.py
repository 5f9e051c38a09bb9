"""What the parent process and an op process share, and nothing else.

The parent (``harness.run``) plans a run and supervises one process per op; the op process
(``harness.child``) measures that op's cases. They meet only here and in the run directory:

- the child spec: everything an op's process needs, written by the parent as versioned JSON
  (the child reads this file and nothing else of the parent's options, so what a child did
  is always reproducible from the run directory), with typed sections for autotune replay
  (:class:`Replay`), a sweep process (:class:`SweepTask`) and a suite's op (:class:`SuiteFacts`);
- the op process's command line (:class:`ChildArgs`), the pytest options that name its spec
  and the files the parent starts pytest on;
- :class:`Case`, one (op, provider, dtype, shape) to measure;
- the exit codes and stdin words through which an op process tells how it ended;
- the environment variable names the parent sets for it;
- the names of the files and folders of a run directory.

Importing this module imports nothing beyond the standard library and the record schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.results.schema import case_id

__all__ = [
    "CANCELLED_EXIT",
    "CASES_FILE",
    "CHILD_MODULE",
    "CHILD_PLUGINS",
    "CHILD_SPEC_VERSION",
    "EXIT_ENVIRONMENT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "GO",
    "OP_MARK_ENV",
    "PARENT_PID_ENV",
    "RUN_MARK_ENV",
    "POISONED_EXIT",
    "UNRECORDED_EXIT",
    "PYTEST_OFF",
    "SPEC_OPTION",
    "SUITE_SPEC_OPTION",
    "SWEEP_INDEX_ENV",
    "TUNE_FILE",
    "times_path",
    "Case",
    "CaseProgress",
    "ChildArgs",
    "ChildSpec",
    "Replay",
    "RunFiles",
    "SuiteFacts",
    "SweepResult",
    "SweepTask",
    "child_plugin",
    "op_file_stem",
    "stem_clashes",
]

# -- exit codes of `harness` commands (each HarnessError carries one of these) ----------------
EXIT_OK = 0
EXIT_FAILED = 1  # a case failed, an op crashed or hung, or a gate found a regression
EXIT_USAGE = 2  # bad input: nothing was run
EXIT_ENVIRONMENT = 3  # something the machine lacks
EXIT_INTERRUPTED = 130  # SIGINT/SIGTERM; the run can be resumed

# -- how an op process ends, besides pytest's own exit status -------------------------------
POISONED_EXIT = 87  # the device context died (a graph capture broke it): the op is a CRASH
UNRECORDED_EXIT = 86  # a record could not be written whole (full disk, file size limit): the op is an ERROR
CANCELLED_EXIT = 3  # a pre-started (held) process that was told not to run
GO = "go"  # the line a held op process waits for on stdin before it runs pytest ("go TIME": when sent)
# pytest plugins every op process's pytest (the harness's and a suite's) leaves out: the cache
# (nothing to keep between runs); unraisableexception, whose end-of-session gc.collect() x5
# took 0.94 s with torch and Triton loaded on a 2-core CPU machine (the H200's ops spent 1.4-2.3 s
# between their session's end and pytest's return; an exception nothing can raise, one in a
# __del__, still goes to the op's log through Python's own hook); and Hypothesis' plugin, where
# Hypothesis is installed (it is, on the H200 machines): its terminal summary imports Hypothesis,
# nearly all of each op's 0.9-1.4 s between its session's end and pytest's return there (py-spy of
# four FlagGems ops, 2026-12-02); 1.2 s after a session on the CPU machine
# (benchmarks/op_exit_cost.py). Tests written with Hypothesis' @given still run without it: the
# plugin adds reporting, not the tests.
PYTEST_OFF = ("-p", "no:cacheprovider", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")
# The parent's pid: an op process ends its own process group once this process is gone.
PARENT_PID_ENV = "HARNESS_PARENT_PID"
# The mark every op process and whatever it starts inherits (harness.run.leftovers): the run
# directory (real path) and the op. Processes an op leaves behind are found by it and ended.
RUN_MARK_ENV = "HARNESS_RUN_MARK"
OP_MARK_ENV = "HARNESS_OP_MARK"
# Set in each sweep process's environment: its index among the sweep's processes (information for
# the op's code and tests; the spec's SweepTask says the same).
SWEEP_INDEX_ENV = "HARNESS_SWEEP_SHARD"

# -- how the parent starts an op process ------------------------------------------------------
CHILD_MODULE = "harness.child"  # ``python -m harness.child``: harness.child.process
CHILD_PLUGINS = "harness.child.plugins"  # the package of the op process's pytest plugins


def child_plugin(name: str) -> str:
    """The module of the op process's pytest plugin ``name`` (the parent puts it after ``-p``)."""
    return f"{CHILD_PLUGINS}.{name}"

_CHILD_DIR = Path(__file__).resolve().parent / "child"
CASES_FILE = _CHILD_DIR / "test_cases.py"  # the harness's own cases: one test, parametrised by case
TUNE_FILE = _CHILD_DIR / "tune_cases.py"  # a sweep process of the harness's own cases
SPEC_OPTION = "--harness-spec"  # pytest option of harness.child.plugins.session: the spec's path
SUITE_SPEC_OPTION = "--harness-suite-spec"  # the same, for harness.child.plugins.suite in a suite's pytest

# 2: cap_ms; 3: extra["capture_off"]; 4: typed sections (capture_off, ir_sass, replay, sweep,
# suite) in place of ``extra``
CHILD_SPEC_VERSION = 4


def op_file_stem(op: str) -> str:
    """A file name for an op's marker, spec and log (an id may carry a 'source:' prefix)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", op)


def stem_clashes(ops: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs of op ids that :func:`op_file_stem` maps to one file name (the id seen first, the
    other): their markers, specs and logs would overwrite each other in a run directory."""
    seen: dict[str, str] = {}
    clashes = []
    for op in ops:
        first = seen.setdefault(op_file_stem(op), op)
        if first != op:
            clashes.append((first, op))
    return clashes


def times_path(exit_path: Path) -> Path:
    """Where an op process writes its timeline, next to its exit file (``<op>.times.json``)."""
    return exit_path.with_name(f"{exit_path.stem}.times.json")


@dataclass(frozen=True)
class RunFiles:
    """The paths of one run directory (absolute when ``root`` is)."""

    root: Path

    @property
    def run_info(self) -> Path:
        return self.root / "run.json"

    @property
    def records(self) -> Path:
        return self.root / "records.jsonl"

    @property
    def lock(self) -> Path:
        return self.root / "run.lock"

    def marker(self, op: str) -> Path:
        """The completion marker of an op (done/<op>.json)."""
        return self.root / "done" / f"{op_file_stem(op)}.json"

    def log(self, op: str) -> Path:
        return self.root / "logs" / f"{op_file_stem(op)}.log"

    def spec(self, op: str) -> Path:
        return self.root / "specs" / f"{op_file_stem(op)}.json"

    def exit_file(self, op: str) -> Path:
        """Where an op process writes pytest's exit status once pytest returned."""
        return self.root / "specs" / f"{op_file_stem(op)}.exit"

    def capture_mark(self, op: str) -> Path:
        """Present while an op process captures a graph (harness.child.timing.graph): one that an
        ended process left behind says it died capturing, so the retry captures none."""
        return self.root / "specs" / f"{op_file_stem(op)}.capturing"

    def times_file(self, op: str) -> Path:
        """Where an op process writes its timeline, next to its exit file (harness.child.process)."""
        return times_path(self.exit_file(op))

    def identity(self, device: str) -> Path:
        return self.root / "identity" / f"{device}.json"

    def progress(self, op: str) -> Path:
        """Where an op process says which case it is on (:class:`CaseProgress`), rewritten per case."""
        return self.root / "progress" / f"{op_file_stem(op)}.json"


@dataclass(frozen=True)
class CaseProgress:
    """Which case an op process is on: written by the op process at each case's start, read by
    the parent's progress display. ``done`` counts this process's cases already finished."""

    op: str
    case_id: str
    done: int
    total: int
    pid: int

    def dump(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{self.pid}")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> CaseProgress | None:
        """The last progress written, or None (none yet, or a file this version cannot read)."""
        try:
            data = json.loads(path.read_text())
            return cls(op=str(data["op"]), case_id=str(data["case_id"]), done=int(data["done"]),
                       total=int(data["total"]), pid=int(data["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Case:
    """One (op, provider, dtype, shape) to measure: planned by the parent, measured by the child."""

    op: str
    provider: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def case_id(self) -> str:
        return case_id(self.op, self.provider, self.dtype, self.shape)


@dataclass(frozen=True)
class ChildArgs:
    """An op process's command line after the interpreter:
    ``-m harness.child EXIT_FILE [--hold [--preload M,...] [--warm-profiler]] -- PYTEST_ARGS``.

    ``exit_file`` is where the process writes pytest's exit status once pytest returned. With
    ``hold`` (a pre-started process) it imports first (``preload``: modules besides the usual,
    a suite's package) and waits for :data:`GO` on stdin; ``warm_profiler`` pays the profiler's
    start while held."""

    exit_file: str
    pytest_args: tuple[str, ...]
    hold: bool = False
    preload: tuple[str, ...] = ()
    warm_profiler: bool = False

    USAGE = ("usage: python -m harness.child EXIT_FILE [--hold [--preload MODULES] [--warm-profiler]] "
             "-- PYTEST_ARGS...")

    def argv(self) -> list[str]:
        held = ["--hold", *(["--preload", ",".join(self.preload)] if self.preload else []),
                *(["--warm-profiler"] if self.warm_profiler else [])] if self.hold else []
        return ["-m", CHILD_MODULE, self.exit_file, *held, "--", *self.pytest_args]

    @classmethod
    def parse(cls, args: Sequence[str]) -> ChildArgs | None:
        """The arguments after ``-m harness.child`` read back; None when they are not such a line."""
        rest = list(args)
        if not rest:
            return None
        exit_file, rest = rest[0], rest[1:]
        hold = rest[:1] == ["--hold"]
        rest = rest[1:] if hold else rest
        preload: tuple[str, ...] = ()
        if hold and len(rest) > 1 and rest[0] == "--preload":
            preload = tuple(m for m in rest[1].split(",") if m)
            rest = rest[2:]
        warm = hold and rest[:1] == ["--warm-profiler"]
        rest = rest[1:] if warm else rest
        if rest[:1] != ["--"]:
            return None
        return cls(exit_file=exit_file, pytest_args=tuple(rest[1:]), hold=hold, preload=preload,
                   warm_profiler=warm)


@dataclass(frozen=True)
class Replay:
    """Autotune configs an op process seeds its autotuners with instead of tuning: an earlier
    run's (``--replay-from``, its absolute path) or the merged configs of this run's sweep."""

    run_dir: str | None = None
    file: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Replay:
        return cls(run_dir=_opt_str(data.get("run_dir")), file=_opt_str(data.get("file")))


@dataclass(frozen=True)
class SweepTask:
    """A sweep process (harness.run.sweep): tune this process's share of the op's cases (or, for
    a suite's op, its calls numbered ``i`` with ``i % count == index``), record the configs the
    autotuners chose in ``configs_out`` and this process's outcome in ``result``; nothing is timed."""

    configs_out: str
    result: str
    index: int = 0
    count: int = 1

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepTask:
        return cls(configs_out=str(data["configs_out"]), result=str(data["result"]), index=int(data["index"]),
                   count=int(data["count"]))


@dataclass(frozen=True)
class SweepResult:
    """What a sweep process leaves at its SweepTask's ``result`` for the parent: each case's (or, for
    a suite's op, each call's) outcome ("ok", "skip: WHY", "error: WHY"), the time it spent
    compiling, and for a suite's op how many calls it saw and its share (index, count)."""

    cases: Mapping[str, str]
    compile_ms: float | None = None
    calls: int | None = None
    share: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"cases": dict(self.cases), "compile_ms": self.compile_ms}
        if self.calls is not None:
            data["calls"] = self.calls
        if self.share is not None:
            data["share"] = {"index": self.share[0], "count": self.share[1]}
        return data

    @classmethod
    def from_json(cls, data: Any) -> SweepResult | None:
        """The result read back; None when it is not one (the parent then says the process wrote none)."""
        if not isinstance(data, Mapping):
            return None
        cases = data.get("cases")
        compile_ms = data.get("compile_ms")
        share = data.get("share")
        return cls(cases={str(k): str(v) for k, v in cases.items()} if isinstance(cases, Mapping) else {},
                   compile_ms=float(compile_ms) if isinstance(compile_ms, int | float) else None,
                   calls=data.get("calls") if isinstance(data.get("calls"), int) else None,
                   share=(int(share["index"]), int(share["count"])) if isinstance(share, Mapping) else None)


@dataclass(frozen=True)
class SuiteFacts:
    """What a suite's op process (harness.child.plugins.suite in the library's pytest) needs
    beyond the spec's common fields; planned by harness.suite.runner."""

    suite_dir: str
    package: str
    level: str
    nodes: tuple[str, ...] = ()  # the pytest nodes this op keeps of the files collected
    notes: tuple[str, ...] = ()  # for every row (a --shapes-file entry that applied, ...)
    unchecked: str = ""  # why the outputs are not compared, or ""
    capture_denied: str = ""  # why no graph is captured for this op (a deny list), or ""
    started_at: str = ""
    autotune: bool = False  # the optional features the suite plugin carries out
    ir: bool = False
    wall: bool = False
    table_colour: bool = False  # FlagGems' printed table with SUCCESS green and FAILED red (--table-colour)
    # --shapes-file entries given where a benchmark builds its inputs (harness.child.input_shapes):
    # FlagGems op_name or Benchmark class -> shapes
    input_shapes: Mapping[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SuiteFacts:
        return cls(suite_dir=str(data["suite_dir"]), package=str(data["package"]), level=str(data["level"]),
                   nodes=tuple(str(n) for n in data.get("nodes", ())),
                   notes=tuple(str(n) for n in data.get("notes", ())), unchecked=str(data.get("unchecked", "")),
                   capture_denied=str(data.get("capture_denied", "")), started_at=str(data.get("started_at", "")),
                   autotune=bool(data.get("autotune")), ir=bool(data.get("ir")), wall=bool(data.get("wall")),
                   table_colour=bool(data.get("table_colour")),
                   input_shapes={str(k): tuple(tuple(int(d) for d in s) for s in v)
                                 for k, v in dict(data.get("input_shapes") or {}).items()})


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class ChildSpec:
    """Everything an op's process needs; written by the parent as ``specs/<op>.json``."""

    run_id: str
    run_dir: str  # absolute: an op that changes directory still writes into the run
    backend: str
    device: str
    op: str
    provider: str
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    seed: int
    timer: str
    cache: str = "cold"
    ops_modules: tuple[str, ...] = ()
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    cap_ms: float = 1000.0  # sampling stops here when the spread does not settle (the row is noisy)
    skip_cases: tuple[str, ...] = ()  # case ids already recorded (resume)
    # why this process must not capture graphs at all (an earlier attempt's capture poisoned the
    # device context, or its process died capturing); its rows fall back to the direct timer with
    # this reason. "" to capture.
    capture_off: str = ""
    ir_sass: bool = False  # --ir full: the IR kept includes SASS
    replay: Replay = field(default_factory=Replay)
    sweep: SweepTask | None = None  # set in a sweep process
    suite: SuiteFacts | None = None  # set in a suite's op process

    @property
    def files(self) -> RunFiles:
        return RunFiles(Path(self.run_dir))

    @property
    def records_path(self) -> Path:
        return self.files.records

    def cases(self) -> list[Case]:
        """The cases this process measures, in order, without those already recorded."""
        cases = [Case(self.op, self.provider, d, tuple(s)) for s in self.shapes for d in self.dtypes]
        return [c for c in cases if c.case_id not in self.skip_cases]

    def dump(self, path: Path) -> None:
        data = {"spec_version": CHILD_SPEC_VERSION, **asdict(self)}
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path) -> ChildSpec:
        """Read a spec; a spec of another version (a parent and child of different harness
        versions) is refused with ValueError naming both."""
        data = json.loads(Path(path).read_text())
        version = data.pop("spec_version", None)
        if version != CHILD_SPEC_VERSION:
            raise ValueError(f"{path}: child spec version {version!r}; this harness reads version "
                             f"{CHILD_SPEC_VERSION}. The parent and the op process come from different "
                             "harness versions: run both from one installation.")
        data["dtypes"] = tuple(data["dtypes"])
        data["shapes"] = tuple(tuple(s) for s in data["shapes"])
        data["ops_modules"] = tuple(data.get("ops_modules", ()))
        data["skip_cases"] = tuple(data.get("skip_cases", ()))
        data["replay"] = Replay.from_dict(data.get("replay") or {})
        data["sweep"] = SweepTask.from_dict(data["sweep"]) if data.get("sweep") else None
        data["suite"] = SuiteFacts.from_dict(data["suite"]) if data.get("suite") else None
        return cls(**data)
