"""Why a case or an op did not pass: a cause and its evidence in words, from what the records and
the op's row already hold (pure; nothing here reads a file or a log).

The causes:

- ``library``: the library's output is wrong, or its kernel raised;
- ``benchmark``: the benchmark's own code failed (its torch side returned None, its input
  generator raised, it declares what it cannot run, it timed one side only);
- ``harness``: the harness's own fault (a graph capture that poisoned the device context or
  during which the process died, the output check raising or running out of memory);
- ``environment``: the machine or its software (out of memory in the op, a driver error, a
  missing package or hardware, the op timeout, the run's time budget, a stop from outside);
- ``unknown``: the records do not say enough.

Every record that does not pass carries one (``Measurement.cause``, derived when the record is
made or read); every op row that does not pass gets one from its status, its notes and its
records (:func:`op_cause`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "BUDGET_NOTE",
    "CAPTURE_DIED",
    "CAPTURE_OFF",
    "CAUSES",
    "NO_TORCH_OUTPUT",
    "STOPPED_NOTE",
    "Cause",
    "case_cause",
    "cause_from_dict",
    "died_in_capture",
    "op_cause",
]

CAUSES = ("library", "benchmark", "harness", "environment", "unknown")
# The message of a row whose torch side returned None (harness/child/latency_seam.py writes it).
NO_TORCH_OUTPUT = "torch side returned None: nothing to compare"
# The note of an op the run's --budget left unstarted (harness/run/batch.py writes it).
BUDGET_NOTE = "not started: the run's --budget ran out"
# The note of an op a stop (SIGINT, SIGTERM) left unstarted (harness/run/batch.py writes it).
STOPPED_NOTE = "not started: the run was stopped"
# What harness/run/batch.py adds to the note of an attempt whose process died while the graph
# timer captured a graph (it left RunFiles.capture_mark behind), and to a later attempt's note
# when that attempt captured none.
CAPTURE_DIED = "while the harness captured a graph of the op's calls"
CAPTURE_OFF = "captured no graph"

_OOM = re.compile(r"out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|hipErrorOutOfMemory", re.IGNORECASE)
_DRIVER = re.compile(r"CUDA error|CUDA driver|driver error|hipError|HIP error|illegal memory access|"
                     r"unspecified launch failure|device-side assert|ECC error|Xid", re.IGNORECASE)
_MISSING = re.compile(r"ModuleNotFoundError|No module named|ImportError|not installed|cannot import name",
                      re.IGNORECASE)
_STALE = re.compile(r"version prior to|does not include|older than|too old|not found in (?!FlagGems)", re.IGNORECASE)
_NEEDS = re.compile(r"\brequires?\b|\bneeds?\b|not supported on|only supported|architecture|"
                    r"not available|unavailable|no .*device", re.IGNORECASE)
_NONE_REFERENCE = "vs reference 'NoneType'"


@dataclass(frozen=True)
class Cause:
    """Why a case or op did not pass: one of :data:`CAUSES` and the evidence, in words."""

    kind: str
    evidence: str

    def __post_init__(self) -> None:
        if self.kind not in CAUSES:
            raise ValueError(f"cause {self.kind!r} is not one of {CAUSES}")

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "evidence": self.evidence}

    def __str__(self) -> str:
        return f"{self.kind}: {self.evidence}"


def cause_from_dict(data: Any) -> Cause | None:
    """A cause as records keep it (``{"kind", "evidence"}``), None for null; ValueError when it is
    not one."""
    if data is None:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("kind"), str) \
            or not isinstance(data.get("evidence", ""), str):
        raise ValueError(f"cause is {data!r}, not an object of kind and evidence")
    return Cause(data["kind"], data.get("evidence", ""))


def _first_line(text: str, limit: int = 200) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _after_key(message: str) -> str:
    """A row's message without its leading ``case_id: ``."""
    head, sep, rest = message.partition("]: ")
    return rest if sep and "[" in head else message


def _raised(text: str, who: str) -> Cause:
    """A call that raised: out of memory, a driver error or a missing package is the
    environment's; otherwise ``who``'s."""
    said = _first_line(text)
    if _OOM.search(text):
        return Cause("environment", f"out of memory in the op: {said}")
    if _DRIVER.search(text):
        return Cause("environment", f"device driver error: {said}")
    if _MISSING.search(text):
        return Cause("environment", f"a package is missing: {said}")
    if who == "library":
        return Cause("library", f"the library's kernel raised: {said}")
    return Cause(who, said)


class _Checked(Protocol):
    @property
    def shape_mismatch(self) -> str: ...


class CaseFacts(Protocol):
    """What a cause is read from: these fields of a record (harness.results.schema.Measurement,
    which carries a Cause: this module sits below the schema)."""

    @property
    def status(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def notes(self) -> tuple[str, ...]: ...
    @property
    def correctness(self) -> _Checked | None: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def cause(self) -> Cause | None: ...


def case_cause(record: CaseFacts) -> Cause | None:
    """The cause of one record that did not pass; None for a passing one (pure)."""
    if record.status == "pass":
        return None
    message, notes = record.message, record.notes
    text = _after_key(message)
    c = record.correctness
    if NO_TORCH_OUTPUT in message or _NONE_REFERENCE in message or (c is not None and _NONE_REFERENCE in c.shape_mismatch):
        return Cause("benchmark", NO_TORCH_OUTPUT)
    if "poisoned" in notes or message.startswith("poisoned:"):
        return Cause("harness", f"a graph capture left the device context unusable: {_first_line(message)}")
    if record.status == "fail":
        if c is not None and c.shape_mismatch:
            return Cause("library", f"output shape differs from torch's: {c.shape_mismatch}")
        if "dtype_mismatch" in notes:
            return Cause("library", _first_line(text))
        return Cause("library", f"output wrong: {_first_line(text)}")
    if record.status == "error":
        if text.startswith("comparing FlagGems' outputs with torch's raised"):
            if _OOM.search(text):
                return Cause("harness", f"the output check ran out of memory: {_first_line(text)}")
            return Cause("harness", f"the output check raised: {_first_line(text)}")
        if "fatal" in notes or "fatal device error" in text:
            return Cause("environment", f"device driver error: {_first_line(text)}")
        if text.startswith("FlagGems' call raised") or text.startswith("candidate raised"):
            return _raised(text, "library")
        if text.startswith("torch's call raised"):
            cause = _raised(text, "benchmark")
            return cause if cause.kind != "benchmark" else Cause("benchmark", f"the benchmark's torch side raised: "
                                                                              f"{_first_line(text)}")
        if not record.shape:  # a benchmark function that failed outside its timed calls
            cause = _raised(text, "benchmark")
            return cause if cause.kind != "benchmark" else Cause("benchmark", f"the benchmark's own code raised: "
                                                                              f"{_first_line(text)}")
        cause = _raised(text, "unknown")
        return cause if cause.kind != "unknown" else Cause("unknown", f"the case raised: {_first_line(text)}")
    # skip
    if "timed only FlagGems" in text or "timed only torch" in text:
        return Cause("benchmark", f"the benchmark timed one side only: {_first_line(text)}")
    if "does not support dtype" in text or "declares" in text:
        return Cause("benchmark", f"the benchmark declares what the op cannot run: {_first_line(text)}")
    if "not found in FlagGems" in text:
        return Cause("library", f"the library lacks what the benchmark calls: {_first_line(text)}")
    if _MISSING.search(text):
        return Cause("environment", f"a package is missing: {_first_line(text)}")
    if _STALE.search(text):
        return Cause("environment", f"an installed package lacks what the benchmark needs: {_first_line(text)}")
    if _NEEDS.search(text):
        return Cause("environment", f"this machine lacks what the benchmark needs: {_first_line(text)}")
    return Cause("unknown", f"skipped: {_first_line(text) or 'no reason given'}")


_FAULT = "Fatal Python error"
_IN_CAPTURE = re.compile(r'File "[^"]*harness[/\\]child[/\\]timing[/\\]graph\.py", line \d+ in _capture')


def died_in_capture(log: str) -> bool:
    """Whether an op's log (every attempt's output, appended) ends in a fatal error of the process
    (faulthandler's dump: "Fatal Python error", then each thread's frames, the current one's under
    "Current thread") raised inside the graph timer's capture. A log of a run made before the
    graph timer kept its capture mark (RunFiles.capture_mark) says so this way only."""
    last = log.rfind(_FAULT)
    if last < 0:
        return False
    dump = log[last:]
    current = dump.find("Current thread")
    frames = dump[current:] if current >= 0 else dump
    return bool(_IN_CAPTURE.search(frames.split("\n\n", 1)[0]))


def _most_common(causes: Sequence[Cause]) -> tuple[Cause, int]:
    """The most frequent kind among ``causes`` (ties: in the order of CAUSES) with its first
    evidence, and how many have it."""
    counts = Counter(c.kind for c in causes)
    kind = min(counts, key=lambda k: (-counts[k], CAUSES.index(k)))
    return next(c for c in causes if c.kind == kind), counts[kind]


def _crash_cause(said: str, failing: Sequence[Cause]) -> Cause:
    """The cause of an op whose process crashed: a poisoned capture, a process that died inside a
    capture (and no later attempt ran without capturing), memory, or unknown."""
    if "poisoned" in said or any(c.kind == "harness" and "capture" in c.evidence for c in failing):
        return Cause("harness", f"a graph capture poisoned the device context: {said}")
    if _OOM.search(said):  # memory ran out, inside a capture or not
        return Cause("environment", f"out of memory: {said}")
    if CAPTURE_DIED in said and CAPTURE_OFF not in said:
        return Cause("harness", f"the op's process died inside the harness's graph capture: {said}")
    return Cause("unknown", f"the op's process ended early: {said or 'no note'}")


def op_cause(status: str, notes: Sequence[str], records: Sequence[CaseFacts]) -> Cause | None:
    """The cause of an op that did not pass, from its status (ops_status.csv), its row's notes
    and its records; None for a passing op (pure)."""
    said = "; ".join(n for n in notes if n)
    if status == "PASS":
        return None
    if any(BUDGET_NOTE in n for n in notes):
        return Cause("environment", "budget: the run's --budget ran out before the op started")
    if status in ("PENDING", "INTERRUPTED") and any(n.startswith((STOPPED_NOTE, "interrupted")) for n in notes):
        return Cause("environment", f"stopped from outside (a signal): {said}")
    if "could not be written whole" in said:
        return Cause("environment", f"the disk refused a record: {said}")
    if status == "TIMEOUT":
        return Cause("environment", f"op timeout: {said or 'no exit within --op-timeout'}")
    failing = [c for r in records if r.status != "pass" for c in [r.cause or case_cause(r)] if c is not None]
    if status == "CRASH":
        return _crash_cause(said, failing)
    if failing:
        first, count = _most_common(failing)
        of = f"{count} of {len(failing)} case(s) not passing" if len(failing) > 1 else "its one case"
        return Cause(first.kind, f"{of}: {first.evidence}")
    if "not a benchmark" in said:
        return Cause("benchmark", said)
    if status in ("PENDING", "INTERRUPTED", "RUNNING"):
        return Cause("unknown", f"not run: {said or 'the run ended before this op'}")
    if status == "SKIP" and not records:
        return Cause("unknown", f"skipped: {said or 'no cases to run'}")
    return Cause("unknown", said or f"{status} with no record saying why")
