"""Process-per-op execution: isolation, device sharding, timeouts, retries, completion markers.

Each op runs as its own pytest process in its own session and process group,
pinned to one device through the backend's visibility variables (every other
vendor's are cleared). Every device works through its share of ops serially in
one thread and devices run in parallel; a device's next op starts only after
the previous op's whole process group is gone, so two processes never time on
one device at once. With pre-start, the next op's process is started early but
held before pytest, having only imported modules (no device opened), until the
previous op's group is gone. Records are written by the children as cases complete; this
module decides what ran, how it ended, and what a resume still has to do.

The decisions (classify_exit, should_retry, render_status) are pure
functions; the thin layer below them launches, waits and kills.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from harness.backends import isolated_env
from harness.child import GO, PARENT_PID_ENV
from harness.plan import OpPlan, RunPlan
from harness.plugins.records import POISONED_EXIT
from harness.plugins.spec import ChildSpec
from harness.procgroup import (
    StopToken,
    end_group,
    reap_group,
    signal_name,
    stop_on_signals,
    wait_exit,
)
from harness.providers.vendors import gems_vendor_env
from harness.results.schema import Measurement
from harness.results.store import atomic_write_text, csv_text, read_json, read_records, write_json

__all__ = [
    "FAILED_STATUSES",
    "MAX_ATTEMPTS",
    "OP_STATUSES",
    "POISONED_EXIT",
    "AttemptExit",
    "BatchEvents",
    "BatchResult",
    "OpOutcome",
    "StopToken",
    "Verdict",
    "classify_exit",
    "op_file_stem",
    "read_markers",
    "render_status",
    "repair_records_tail",
    "run_batch",
    "should_retry",
    "stop_on_signals",
]

OP_STATUSES = ("PASS", "FAIL", "ERROR", "CRASH", "TIMEOUT", "SKIP")  # how an op ended
FAILED_STATUSES = ("FAIL", "ERROR", "CRASH", "TIMEOUT")  # any of these makes the run exit 1
# Not ended (yet): shown in ops_status.csv while the run goes on; such an op has no marker.
PENDING, RUNNING, INTERRUPTED = "PENDING", "RUNNING", "INTERRUPTED"
RETRIED_STATUSES = ("CRASH", "ERROR")
MAX_ATTEMPTS = 3  # one try and at most two retries
STATUS_COLUMNS = ("op", "device", "status", "attempts", "elapsed_s", "rows", "notes")


# ---------------------------------------------------------------------------------------------
# Pure decisions


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

    @property
    def done(self) -> bool:
        """Ended one way or another: it gets a completion marker and a resume leaves it alone."""
        return self.status in OP_STATUSES

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES

    def row(self) -> dict[str, str]:
        return {
            "op": self.op,
            "device": self.device,
            "status": self.status,
            "attempts": str(self.attempts),
            "elapsed_s": f"{self.elapsed_s:.2f}",
            "rows": str(self.rows),
            "notes": "; ".join(self.notes),
        }


@dataclass(frozen=True)
class AttemptExit:
    """How one attempt's process ended, as the parent saw it."""

    returncode: int
    timed_out: bool = False
    # pytest's own exit status, reported by the child wrapper once pytest returned; None when the
    # process ended before that (a signal, os._exit, a poisoned context, a fatal native error).
    pytest_exit: int | None = None


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
    if end.timed_out:
        limit = f" {timeout_s:g}s" if timeout_s is not None else ""
        return Verdict("TIMEOUT", f"no exit within --op-timeout{limit}; process group ended (SIGTERM, then SIGKILL)")
    if end.pytest_exit is None:
        if end.returncode < 0:
            return Verdict("CRASH", f"killed by {signal_name(-end.returncode)}")
        if end.returncode == POISONED_EXIT:
            return Verdict("CRASH", "device context poisoned; op process stopped")
        return Verdict("CRASH", f"exited with code {end.returncode} before pytest finished (os._exit or a native fatal error)")
    after = ""
    if end.returncode != end.pytest_exit:
        after = (f"; then {'killed by ' + signal_name(-end.returncode) if end.returncode < 0 else f'exit code {end.returncode}'}"
                 " at interpreter exit")
    code = end.pytest_exit
    if code in (2, 3, 4):
        what = {2: "interrupted or a collection error", 3: "internal error", 4: "usage error"}[code]
        return Verdict("ERROR", f"pytest exited with code {code} ({what}); see the op log{after}")
    if poisoned:
        return Verdict("CRASH", f"device context poisoned; op process stopped{after}")
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


def device_shares(ops: Sequence[OpPlan]) -> dict[str, list[OpPlan]]:
    """Each device's ops, in plan order."""
    shares: dict[str, list[OpPlan]] = {}
    for o in ops:
        shares.setdefault(o.device, []).append(o)
    return shares


def render_status(outcomes: Sequence[OpOutcome]) -> str:
    return csv_text(STATUS_COLUMNS, (o.row() for o in outcomes))


def op_file_stem(op: str) -> str:
    """A file name for an op's marker, spec and log (an id may carry a 'source:' prefix)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", op)


# ---------------------------------------------------------------------------------------------
# Run directory state: markers, records


def write_marker(run_dir: Path, outcome: OpOutcome) -> None:
    """The completion marker: an op that has one is not run again by --resume."""
    write_json(run_dir / "done" / f"{op_file_stem(outcome.op)}.json", {**outcome.row(), "notes": list(outcome.notes)})


def read_markers(run_dir: Path) -> dict[str, OpOutcome]:
    found: dict[str, OpOutcome] = {}
    for path in sorted((run_dir / "done").glob("*.json")):
        data = read_json(path)
        if data.get("status") not in OP_STATUSES:
            continue
        found[data["op"]] = OpOutcome(
            op=data["op"],
            device=data["device"],
            status=data["status"],
            attempts=int(data["attempts"]),
            elapsed_s=float(data["elapsed_s"]),
            rows=int(data["rows"]),
            notes=tuple(data["notes"]),
        )
    return found


def repair_records_tail(path: Path) -> int:
    """Cut a torn last line (a process killed in the middle of writing a record) so the next
    append starts on a line of its own. Call only while no child is running. Returns the
    number of bytes dropped."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return 0
        fh.seek(0)
        data = fh.read()
        keep = data.rfind(b"\n") + 1
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return size - keep


@dataclass(frozen=True)
class _OpRecords:
    recorded: frozenset[str]
    statuses: tuple[str, ...]
    poisoned: bool


def _op_records(records: Sequence[Measurement], op_plan: OpPlan) -> _OpRecords:
    planned = {c.case_id for c in op_plan.cases()}
    mine = [r for r in records if r.op == op_plan.op and r.case_id in planned]
    return _OpRecords(
        recorded=frozenset(r.case_id for r in mine),
        statuses=tuple(r.status for r in mine),
        poisoned=any("poisoned" in r.notes for r in mine),
    )


def _child_env(plan: RunPlan, device: str, parent_env: Mapping[str, str]) -> dict[str, str]:
    env = isolated_env(plan.backend, parent_env, device)
    if plan.backend.capabilities.triton_interpreter:
        env["TRITON_INTERPRET"] = "1"  # must be set before the child imports triton
    # Before anything imports flag_gems: otherwise it probes every vendor's CLI (no timeout).
    env.update(gems_vendor_env(plan.backend, env))
    # Not resolved: where `harness ab` runs this harness through a directory that links to its
    # package alone, the op's process must import it the same way (and nothing else from there).
    src = str(Path(__file__).absolute().parent.parent)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env[PARENT_PID_ENV] = str(os.getpid())  # the op process ends with this one (harness.child)
    return env


def _child_command(plan: RunPlan, spec_path: Path, exit_path: Path, run_dir: Path, hold: bool = False) -> list[str]:
    return [
        sys.executable, "-m", "harness.child", str(exit_path), *(["--hold"] if hold else []), "--",
        str(Path(__file__).parent / "suite" / "test_ops.py"),
        "-q", "-rN", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull,
        "--rootdir", str(run_dir),
        *plan.plugins.pytest_args(),
        "--harness-spec", str(spec_path),
    ]


class BatchEvents(Protocol):
    """What a progress display hears; called from the device threads."""

    def attempt_started(self, device: str, op: str, attempt: int) -> None: ...

    def op_finished(self, outcome: OpOutcome) -> None: ...

    def note(self, text: str) -> None: ...


@dataclass(frozen=True)
class _Held:
    """A pre-started op process: imports done, waiting for ``go`` on its stdin (harness.child --hold)."""

    child: subprocess.Popen[bytes]
    exit_path: Path
    skip: frozenset[str]


@dataclass(frozen=True)
class _Batch:
    plan: RunPlan
    run_dir: Path
    parent_env: Mapping[str, str]
    stop: StopToken
    events: BatchEvents
    prestart: bool = False
    held: dict[str, _Held] = field(default_factory=dict)  # op -> its pre-started process
    held_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def records_path(self) -> Path:
        return self.run_dir / "records.jsonl"

    def take_held(self, op: str) -> _Held | None:
        with self.held_lock:
            return self.held.pop(op, None)


def _spawn(batch: _Batch, op_plan: OpPlan, attempt: int, skip: Collection[str], hold: bool) -> _Held:
    """Start the op's process for the cases not in ``skip``; with ``hold`` it waits for ``go``."""
    plan, run_dir = batch.plan, batch.run_dir
    stem = op_file_stem(op_plan.op)
    spec = ChildSpec(
        run_id=plan.run_id, run_dir=str(run_dir), backend=plan.backend.name, device=op_plan.device,
        op=op_plan.op, provider=op_plan.provider, dtypes=op_plan.dtypes, shapes=op_plan.shapes,
        seed=plan.options.seed, timer=plan.timer, cache=plan.options.cache,
        ops_modules=plan.options.ops_modules, warmup_ms=plan.options.warmup_ms,
        rep_ms=plan.options.rep_ms, skip_cases=tuple(sorted(skip)),
        extra={"replay_from": plan.options.replay_from} if plan.options.replay_from else {},
    )
    specs = run_dir / "specs"
    specs.mkdir(exist_ok=True)
    spec_path, exit_path = specs / f"{stem}.json", specs / f"{stem}.exit"
    spec.dump(spec_path)
    exit_path.unlink(missing_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    with open(run_dir / "logs" / f"{stem}.log", "ab") as log:
        header = f"\n=== attempt {attempt} on device {op_plan.device}{' (pre-started)' if hold else ''} ===\n"
        log.write(header.encode())
        log.flush()
        child = subprocess.Popen(
            _child_command(plan, spec_path, exit_path, run_dir, hold=hold),
            env=_child_env(plan, op_plan.device, batch.parent_env),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE if hold else subprocess.DEVNULL,
            start_new_session=True,  # its own session and process group: ended as a whole
        )
    return _Held(child, exit_path, frozenset(skip))


def _release(held: _Held) -> None:
    """Let a pre-started process run its op. One that already died is left to be classified by
    its exit like any other attempt (a fresh process would have hit the same failure)."""
    stdin = held.child.stdin
    if stdin is None:
        return
    try:
        stdin.write(f"{GO}\n".encode())
        stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _cancel(held: _Held) -> None:
    """End a pre-started process that will not run (its op ended otherwise, or the run stopped)."""
    if held.child.stdin is not None:
        try:
            held.child.stdin.close()
        except OSError:
            pass
    reap_group(held.child)


def prestart_op(batch: _Batch, op_plan: OpPlan) -> None:
    """Start ``op_plan``'s first attempt now, held, so its imports overlap the op running before it."""
    skip = _op_records(read_records(batch.records_path), op_plan).recorded
    if not [c for c in op_plan.cases() if c.case_id not in skip]:
        return
    held = _spawn(batch, op_plan, 1, skip, hold=True)
    with batch.held_lock:
        stale = batch.held.pop(op_plan.op, None)
        batch.held[op_plan.op] = held
    if stale is not None:
        _cancel(stale)


def cancel_held(batch: _Batch, ops: Collection[str]) -> None:
    for op in ops:
        held = batch.take_held(op)
        if held is not None:
            _cancel(held)


def _attempt(batch: _Batch, op_plan: OpPlan, attempt: int, skip: Collection[str]) -> AttemptExit | None:
    """One process for the op's cases not yet recorded (a pre-started one where there is one for
    exactly these cases); None when a stop ended it."""
    held = batch.take_held(op_plan.op)
    if held is not None and (attempt != 1 or held.skip != frozenset(skip)):
        _cancel(held)
        held = None
    if held is not None:
        _release(held)
    else:
        held = _spawn(batch, op_plan, attempt, skip, hold=False)
    child, exit_path = held.child, held.exit_path
    state = wait_exit(child.pid, time.monotonic() + batch.plan.options.op_timeout, batch.stop)
    if state == "timeout":
        end_group(child, signal.SIGTERM, batch.stop)
        return AttemptExit(child.returncode, timed_out=True)
    if state == "stopped":
        # SIGINT first: Python finishes the record write in progress and pytest unwinds.
        end_group(child, signal.SIGINT, batch.stop)
        return None
    reap_group(child)
    try:
        pytest_exit: int | None = int(exit_path.read_text())
    except (OSError, ValueError):
        pytest_exit = None
    return AttemptExit(child.returncode, pytest_exit=pytest_exit)


def run_op(batch: _Batch, op_plan: OpPlan, on_attempt: Callable[[int], None]) -> OpOutcome:
    """Attempts until the op ends or should not be retried; INTERRUPTED when a stop cut in."""
    start = time.monotonic()
    planned = [c.case_id for c in op_plan.cases()]
    facts = _op_records(read_records(batch.records_path), op_plan)
    notes: list[str] = []
    earlier: set[FailureKey] = set()
    attempts = 0
    verdict = Verdict("SKIP", "no cases to run")
    while True:
        missing = [c for c in planned if c not in facts.recorded]
        if not missing:
            if attempts == 0 and planned:  # every case recorded by a session whose marker was lost
                verdict = classify_exit(AttemptExit(0, pytest_exit=0), facts.statuses, facts.poisoned)
                notes.append("every case was already recorded")
            break
        if batch.stop.requested:
            return OpOutcome(op_plan.op, op_plan.device, INTERRUPTED if attempts else PENDING, attempts,
                             time.monotonic() - start, len(facts.recorded),
                             (*notes, "interrupted; resume with --resume"))
        attempts += 1
        on_attempt(attempts)
        end = _attempt(batch, op_plan, attempts, facts.recorded)
        facts = _op_records(read_records(batch.records_path), op_plan)
        if end is None:
            return OpOutcome(op_plan.op, op_plan.device, INTERRUPTED, attempts, time.monotonic() - start,
                             len(facts.recorded), (*notes, f"interrupted during attempt {attempts}; resume with --resume"))
        verdict = classify_exit(end, facts.statuses, facts.poisoned, batch.plan.options.op_timeout)
        missing = [c for c in planned if c not in facts.recorded]
        retry = should_retry(verdict, attempts, missing, earlier)
        if retry or attempts > 1:
            tail = ""
            if not retry and verdict.status in RETRIED_STATUSES and missing:
                repeated = failure_key(verdict, missing) in earlier
                tail = " (the same failure again: not retried)" if repeated else " (no retries left)"
            notes.append(f"attempt {attempts} {verdict.status}" + (f": {verdict.note}" if verdict.note else "") + tail)
        elif verdict.note:
            notes.append(verdict.note)
        if not retry:
            break
        earlier.add(failure_key(verdict, missing))
    return OpOutcome(op_plan.op, op_plan.device, verdict.status, attempts, time.monotonic() - start,
                     len(facts.recorded), tuple(notes))


class _Board:
    """Every op's current row; ops_status.csv is rewritten atomically on each change."""

    def __init__(self, path: Path, outcomes: Mapping[str, OpOutcome]) -> None:
        self.path = path
        self.outcomes = dict(outcomes)
        self.lock = threading.Lock()
        self.flush()

    def set(self, outcome: OpOutcome) -> None:
        with self.lock:
            self.outcomes[outcome.op] = outcome
            atomic_write_text(self.path, render_status(list(self.outcomes.values())))

    def flush(self) -> None:
        with self.lock:
            atomic_write_text(self.path, render_status(list(self.outcomes.values())))


@dataclass(frozen=True)
class BatchResult:
    outcomes: tuple[OpOutcome, ...]  # in plan order
    interrupted: str = ""  # why the run stopped before every op ended (a signal name), else ""


Runner = Callable[[_Batch, OpPlan, Callable[[int], None]], OpOutcome]


def _device_worker(batch: _Batch, share: Sequence[OpPlan], board: _Board, runner: Runner) -> None:
    todo = [o for o in share if not board.outcomes[o.op].done]
    try:
        for i, op_plan in enumerate(todo):
            if batch.stop.requested:
                return
            upcoming = todo[i + 1] if i + 1 < len(todo) else None

            def started(attempt: int, o: OpPlan = op_plan, following: OpPlan | None = upcoming) -> None:
                board.set(OpOutcome(o.op, o.device, RUNNING, attempt, notes=(f"attempt {attempt} running",)))
                batch.events.attempt_started(o.device, o.op, attempt)
                if batch.prestart and attempt == 1 and following is not None:
                    try:
                        prestart_op(batch, following)
                    except Exception as exc:  # noqa: BLE001 - the op then starts fresh when its turn comes
                        batch.events.note(f"could not pre-start {following.op}: {type(exc).__name__}: {exc}")

            try:
                result = runner(batch, op_plan, started)
                if result.done:
                    write_marker(batch.run_dir, result)
            except Exception as exc:  # a fault of the harness (disk full...): this op is lost, the run goes on
                result = _harness_fault(op_plan, exc)  # no marker: a resume runs it again
            cancel_held(batch, [op_plan.op])  # pre-started but not used (every case was already recorded)
            try:
                board.set(result)
            except Exception as exc:
                board.outcomes[op_plan.op] = _harness_fault(op_plan, exc)
            if result.done:
                batch.events.op_finished(result)
    finally:
        cancel_held(batch, [o.op for o in todo])


def _harness_fault(op_plan: OpPlan, exc: Exception) -> OpOutcome:
    return OpOutcome(op_plan.op, op_plan.device, "ERROR",
                     notes=(f"the harness failed while running this op: {type(exc).__name__}: {exc}",))


def run_batch(
    plan: RunPlan,
    run_dir: Path,
    parent_env: Mapping[str, str],
    events: BatchEvents,
    stop: StopToken | None = None,
    already_done: Mapping[str, OpOutcome] | None = None,
    runner: Runner = run_op,
    prestart: bool = False,
) -> BatchResult:
    """Run every op of the plan that has not ended yet, one thread per device.

    Returns when every op has ended or, after a stop was requested, when every child is gone;
    the records file is then left with no torn line. ``runner`` runs one op (tests replace it).
    With ``prestart``, each device's next op process is started (held) as soon as the current
    op's first attempt starts, so its imports overlap that op's run.
    """
    stop = stop or StopToken()
    records = run_dir / "records.jsonl"
    dropped = repair_records_tail(records)
    if dropped:
        events.note(f"records.jsonl: dropped a torn last line ({dropped} bytes) left by a killed process")
    initial = {o.op: OpOutcome(o.op, o.device) for o in plan.ops}
    initial.update({k: v for k, v in (already_done or {}).items() if k in initial})
    board = _Board(run_dir / "ops_status.csv", initial)
    batch = _Batch(plan, run_dir, parent_env, stop, events, prestart=prestart)
    todo = [o for o in plan.ops if not initial[o.op].done]
    threads = [
        threading.Thread(target=_device_worker, args=(batch, share, board, runner), name=f"device-{device}", daemon=True)
        for device, share in device_shares(todo).items()
    ]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():  # a timed join keeps the main thread free to run signal handlers
            t.join(timeout=0.2)
    if stop.requested:
        dropped = repair_records_tail(records)
        if dropped:
            events.note(f"records.jsonl: dropped a torn last line ({dropped} bytes) left by a stopped process")
    if not stop.requested:  # every op must have ended; one that did not was lost to a harness fault
        for o in plan.ops:
            if not board.outcomes[o.op].done:
                board.outcomes[o.op] = replace(board.outcomes[o.op], status="ERROR",
                                               notes=("never ended: its device worker stopped early",))
    board.flush()
    outcomes = tuple(board.outcomes[o.op] for o in plan.ops)
    interrupted = (stop.reason or "stopped") if stop.requested and not all(o.done for o in outcomes) else ""
    return BatchResult(outcomes=outcomes, interrupted=interrupted)
