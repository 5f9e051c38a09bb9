"""How an op ended and whether to try it again: pure decisions, no I/O.

An op's status comes from how its process ended (:class:`AttemptExit`, as the parent saw
it) and the statuses of the records the op has; a crash or an error that left cases
unrecorded is retried, at most :data:`MAX_ATTEMPTS` times in all, and not when it repeats an
earlier failure.
"""

from __future__ import annotations

import signal
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.contract import POISONED_EXIT, UNRECORDED_EXIT
from harness.results.causes import op_cause
from harness.results.schema import Measurement
from harness.results.store import csv_text

__all__ = [
    "FAILED_STATUSES",
    "INTERRUPTED",
    "MAX_ATTEMPTS",
    "OP_STATUSES",
    "PENDING",
    "RETRIED_STATUSES",
    "RUNNING",
    "AttemptExit",
    "FailureKey",
    "OpOutcome",
    "Verdict",
    "classify_exit",
    "failure_key",
    "render_status",
    "should_retry",
    "signal_name",
    "with_causes",
]

def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


OP_STATUSES = ("PASS", "FAIL", "ERROR", "CRASH", "TIMEOUT", "SKIP")  # how an op ended
FAILED_STATUSES = ("FAIL", "ERROR", "CRASH", "TIMEOUT")  # any of these makes the run exit 1
# Not ended (yet): shown in ops_status.csv while the run goes on; such an op has no marker.
PENDING, RUNNING, INTERRUPTED = "PENDING", "RUNNING", "INTERRUPTED"
RETRIED_STATUSES = ("CRASH", "ERROR")
MAX_ATTEMPTS = 3  # one try and at most two retries
# compile_s, then cause and evidence, came last, so readers that go by column name or position
# read older files too.
STATUS_COLUMNS = ("op", "device", "status", "attempts", "elapsed_s", "rows", "notes", "compile_s", "cause",
                  "evidence", "backend", "timer", "returncode", "out_dir")
# Notes ops_status.csv adds up from an op's records: rows timed without the graph the timer asked
# for (a fallback), and rows whose autotune key the --replay-from source lacked.
NO_CAPTURE_NOTE = "{} row(s) timed without capture"
REPLAY_MISS_NOTE = "{} replay miss(es)"


@dataclass(frozen=True)
class OpOutcome:
    """One op's row in ops_status.csv."""

    op: str
    device: str
    status: str = PENDING
    attempts: int = 0
    elapsed_s: float = 0.0
    rows: int = 0
    notes: tuple[str, ...] = ()
    compile_s: float | None = None  # Triton compile time of the op's processes (IR plugin), if measured
    cause: str = ""  # why the op did not pass (harness/results/causes.py), "" while unknown or on a pass
    evidence: str = ""
    returncode: int | None = None  # how its last attempt's process ended (negative: a signal); None: none ran

    @property
    def done(self) -> bool:
        """Ended one way or another: it gets a completion marker and a resume leaves it alone."""
        return self.status in OP_STATUSES

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES

    def to_json(self) -> dict[str, Any]:
        """The row as run.json and the completion marker keep it: numbers as numbers."""
        return {"op": self.op, "device": self.device, "status": self.status, "attempts": self.attempts,
                "elapsed_s": round(self.elapsed_s, 2), "rows": self.rows, "notes": list(self.notes),
                "compile_s": None if self.compile_s is None else round(self.compile_s, 2),
                "cause": self.cause, "evidence": self.evidence, "returncode": self.returncode}

    @classmethod
    def from_json(cls, data: Any) -> OpOutcome:
        """An outcome from :meth:`to_json` (or an older row of strings); ValueError when damaged."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{data!r} is not an op's row")
        try:
            notes = data.get("notes", ())
            compile_s = data.get("compile_s")
            returncode = data.get("returncode")
            return cls(op=str(data["op"]), device=str(data["device"]), status=str(data["status"]),
                       attempts=int(data.get("attempts", 0)), elapsed_s=float(data.get("elapsed_s", 0.0)),
                       rows=int(data.get("rows", 0)),
                       notes=tuple(notes.split("; ") if isinstance(notes, str) and notes else
                                   [str(n) for n in notes] if isinstance(notes, list) else ()),
                       compile_s=None if compile_s in (None, "") else float(compile_s),
                       cause=str(data.get("cause") or ""), evidence=str(data.get("evidence") or ""),
                       returncode=None if returncode in (None, "") else int(returncode))
        except (KeyError, TypeError, ValueError) as exc:
            what = f"it has no {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"an op's row {dict(data)!r} cannot be read ({what})") from None

    def row(self) -> dict[str, str]:
        """The row of ops_status.csv."""
        return {
            "op": self.op,
            "device": self.device,
            "status": self.status,
            "attempts": str(self.attempts),
            "elapsed_s": f"{self.elapsed_s:.2f}",
            "rows": str(self.rows),
            "notes": "; ".join(self.notes),
            "compile_s": "" if self.compile_s is None else f"{self.compile_s:.2f}",
            "cause": self.cause,
            "evidence": self.evidence,
            "returncode": "" if self.returncode is None else str(self.returncode),
        }


@dataclass(frozen=True)
class AttemptExit:
    """How one attempt's process ended, as the parent saw it."""

    returncode: int
    timed_out: bool = False
    # pytest's own exit status, reported by the child wrapper once pytest returned; None when the
    # process ended before that (a signal, os._exit, a poisoned context, a fatal native error).
    pytest_exit: int | None = None
    # pytest had finished but the process did not exit (a hang at interpreter exit): its group was
    # ended after ``lingered_s`` seconds.
    lingered_s: float | None = None
    # processes the op left running outside its process group, ended by the parent (described)
    leftovers: str = ""


@dataclass(frozen=True)
class Verdict:
    status: str  # one of OP_STATUSES
    note: str = ""


def classify_exit(
    end: AttemptExit,
    statuses: Sequence[str],
    poisoned: bool = False,
    timeout_s: float | None = None,
) -> Verdict:
    """The op's status after an attempt: from how the process ended and the statuses of every
    record the op has (this attempt's and earlier ones')."""
    limit = f" {timeout_s:g}s" if timeout_s is not None else ""
    if end.timed_out and end.pytest_exit is None:
        return Verdict("TIMEOUT", f"no exit within --op-timeout{limit}; process group ended (SIGTERM, then SIGKILL)")
    if end.pytest_exit is None:
        return _before_pytest_ended(end)
    after = _after_pytest(end, limit)
    code = end.pytest_exit
    if code in (2, 3, 4):
        what = {2: "interrupted or a collection error", 3: "internal error", 4: "usage error"}[code]
        return Verdict("ERROR", f"pytest exited with code {code} ({what}); see the op log{after}")
    if poisoned:  # pytest finished, so the poisoned row is an earlier attempt's (or a resumed run's)
        return Verdict("CRASH", "a row an earlier attempt measured poisoned the device context (marked poisoned); "
                                f"this attempt ran to its end{after}")
    return _from_records(code, statuses, after)


def _before_pytest_ended(end: AttemptExit) -> Verdict:
    """An op process that ended before pytest returned: a signal, a poisoned context, a record
    not written whole, or an exit of its own."""
    if end.returncode < 0:
        return Verdict("CRASH", f"killed by {signal_name(-end.returncode)}")
    if end.returncode == POISONED_EXIT:
        return Verdict("CRASH", "device context poisoned; op process stopped")
    if end.returncode == UNRECORDED_EXIT:
        return Verdict("ERROR", "a record could not be written whole to records.jsonl (a full disk, a file "
                                "size limit or a quota; the op log names the cause); op process stopped")
    return Verdict("CRASH", f"exited with code {end.returncode} before pytest finished (os._exit or a native fatal error)")


def _after_pytest(end: AttemptExit, limit: str) -> str:
    """What the process did after pytest returned (hung, or ended otherwise), for the verdict's note."""
    if end.timed_out or end.lingered_s is not None:
        waited = f"--op-timeout{limit}" if end.timed_out else f"{end.lingered_s:g}s"
        return f"; then hung after pytest finished: process group ended after {waited}"
    if end.returncode != end.pytest_exit:
        return (f"; then {'killed by ' + signal_name(-end.returncode) if end.returncode < 0 else f'exit code {end.returncode}'}"
                " at interpreter exit")
    return ""


def _from_records(code: int, statuses: Sequence[str], after: str) -> Verdict:
    """pytest returned ``code`` and the op's records have ``statuses``."""
    counts = {s: statuses.count(s) for s in ("pass", "fail", "error", "skip")}
    if counts["error"]:
        return Verdict("ERROR", f"{counts['error']} case(s) raised{after}")
    if counts["fail"]:
        return Verdict("FAIL", f"{counts['fail']} case(s) failed the correctness check{after}")
    if code == 1:
        return Verdict("ERROR", f"pytest reported a failure outside the cases; see the op log{after}")
    if code not in (0, 5):
        return Verdict("ERROR", f"pytest exited with code {code}; see the op log{after}")
    if not statuses:
        return Verdict("SKIP", f"no cases to run{after}")
    if counts["skip"] == len(statuses):
        return Verdict("SKIP", f"every case skipped (reasons on the rows){after}")
    if counts["skip"]:
        return Verdict("PASS", f"{counts['skip']} case(s) skipped (reasons on the rows){after}")
    return Verdict("PASS", after.removeprefix("; "))


FailureKey = tuple[str, str, str]


def failure_key(verdict: Verdict, missing: Sequence[str]) -> FailureKey:
    """Two attempts failed "the same way" when status, note and the first case left unrecorded
    agree; an attempt that got further before failing again is progress, not a repeat."""
    return (verdict.status, verdict.note, missing[0] if missing else "")


def should_retry(verdict: Verdict, attempts: int, missing: Sequence[str], earlier: Collection[FailureKey]) -> bool:
    """Retry a crash or error that left cases without a record, at most MAX_ATTEMPTS in all,
    never after a timeout, and not when this attempt repeated an earlier failure."""
    if verdict.status not in RETRIED_STATUSES or attempts >= MAX_ATTEMPTS or not missing:
        return False
    return failure_key(verdict, missing) not in earlier


def with_causes(outcomes: Sequence[OpOutcome], records: Sequence[Measurement]) -> list[OpOutcome]:
    """The op rows, each that did not pass and has no cause given one from its status, notes and
    records (harness/results/causes.py); ops still running are left as they are."""
    by_op: dict[str, list[Measurement]] = {}
    for r in records:
        by_op.setdefault(r.op, []).append(r)
    found = []
    for o in outcomes:
        cause = None if o.cause or o.status == RUNNING else op_cause(o.status, o.notes, by_op.get(o.op, ()))
        found.append(o if cause is None else replace(o, cause=cause.kind, evidence=cause.evidence))
    return found


@dataclass(frozen=True)
class StatusFacts:
    """What every row of ops_status.csv repeats about the run: its backend, its timer and its run
    directory as the run named it (the folder --resume and --replay-from take)."""

    backend: str = ""
    timer: str = ""
    out_dir: str = ""

    @classmethod
    def of_run(cls, backend: str, timer: str, out: str | None, reports_dir: str, run_id: str) -> StatusFacts:
        """The facts of a run whose directory is ``out``, else REPORTS_DIR/RUN_ID."""
        return cls(backend, timer, out or f"{reports_dir.rstrip('/')}/{run_id}")


def record_counts(records: Sequence[Measurement]) -> dict[str, tuple[str, ...]]:
    """op -> the notes its records add up to (rows timed without capture, replay misses)."""
    no_capture: dict[str, int] = {}
    misses: dict[str, int] = {}
    for r in records:
        if r.fallback is not None:
            no_capture[r.op] = no_capture.get(r.op, 0) + 1
        if r.autotune == "replay-miss":
            misses[r.op] = misses.get(r.op, 0) + 1
    return {op: tuple(note for n, note in ((no_capture.get(op, 0), NO_CAPTURE_NOTE.format(no_capture.get(op, 0))),
                                           (misses.get(op, 0), REPLAY_MISS_NOTE.format(misses.get(op, 0)))) if n)
            for op in no_capture.keys() | misses.keys()}


def render_status(outcomes: Sequence[OpOutcome], facts: StatusFacts | None = None,
                  counts: Mapping[str, Sequence[str]] | None = None) -> str:
    """ops_status.csv: one row per op; ``counts`` (:func:`record_counts`) are added to its notes."""
    facts = facts or StatusFacts()
    counts = counts or {}
    rows = []
    for o in outcomes:
        row = o.row()
        extra = [n for n in counts.get(o.op, ()) if n not in o.notes]
        if extra:
            row["notes"] = "; ".join([*o.notes, *extra])
        rows.append({**row, "backend": facts.backend, "timer": facts.timer, "out_dir": facts.out_dir})
    return csv_text(STATUS_COLUMNS, rows)
