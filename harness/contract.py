"""What the parent process and an op process share, and nothing else.

The parent (``harness.run``) plans a run and supervises one process per op; the op process
(``harness.child``) measures that op's cases. They meet only here and in the run directory:

- the child spec: everything an op's process needs, written by the parent as versioned JSON
  (the child reads this file and nothing else of the parent's options, so what a child did
  is always reproducible from the run directory);
- :class:`Case`, one (op, provider, dtype, shape) to measure;
- the exit codes and stdin words through which an op process tells how it ended;
- the environment variable names the parent sets for it;
- the names of the files and folders of a run directory.

Importing this module imports nothing beyond the standard library and the record schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.results.schema import case_id

__all__ = [
    "CANCELLED_EXIT",
    "CAPTURE_OFF",
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
    "Case",
    "CaseProgress",
    "ChildSpec",
    "RunFiles",
    "op_file_stem",
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
# ChildSpec.extra key: why this op process must not capture graphs at all (an earlier attempt's
# capture poisoned the device context); its rows fall back to the direct timer with this reason.
CAPTURE_OFF = "capture_off"
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

CHILD_SPEC_VERSION = 3  # 2: cap_ms; 3: extra[CAPTURE_OFF]


def op_file_stem(op: str) -> str:
    """A file name for an op's marker, spec and log (an id may carry a 'source:' prefix)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", op)


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
    extra: dict[str, Any] = field(default_factory=dict)

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
        return cls(**data)
