"""The batch: every op of a plan on its device, one process per op and attempt.

Every device works through its share of ops serially in one thread and devices run in
parallel; a device's next op starts only after the previous op's whole process group is gone,
so two processes never time on one device at once. With pre-start, the next op's process is
started early but held before pytest, having only imported modules (no device opened), until
the previous op's group is gone. Records are written by the op processes as cases complete;
the batch decides what ran, how it ended (harness.run.decide) and what a resume still has to do.

What differs between sources of ops is an :class:`~harness.run.context.OpRunner`: the harness's own cases
(:class:`CaseRunner`) and a library's benchmark suite (harness.suite.runner.SuiteRunner) plug
into the same attempt loop, retries, timeouts, pre-start, markers and progress.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.contract import CASES_FILE, PYTEST_OFF, SPEC_OPTION, RunFiles
from harness.options import MAX_PRESTART_DEPTH, PRESTART_DEPTH
from harness.results.causes import BUDGET_NOTE, CAPTURE_DIED, CAPTURE_OFF, STOPPED_NOTE
from harness.results.schema import Measurement
from harness.results.store import atomic_write_text, read_records
from harness.run.caches import cache_env, run_cache_dir
from harness.run.context import BatchContext, BatchEvents, HeldProcess, OpRunner, TuneStep
from harness.run.decide import (
    INTERRUPTED,
    PENDING,
    RETRIED_STATUSES,
    RUNNING,
    AttemptExit,
    FailureKey,
    OpOutcome,
    StatusFacts,
    Verdict,
    classify_exit,
    failure_key,
    render_status,
    should_retry,
)
from harness.run.leftovers import describe, end_marked, find_marked, op_marks
from harness.run.plan import OpPlan, RunPlan
from harness.run.rundir import repair_records_tail, write_marker
from harness.run.spawn import (
    EXIT_LINGER_S,
    Launch,
    StopToken,
    cancel,
    child_env,
    end_group,
    read_exit,
    reap_group,
    release,
    start,
    wait_exit,
)

__all__ = [
    "BatchResult",
    "CaseRunner",
    "device_shares",
    "run_batch",
    "run_op",
]

class CaseRunner:
    """The harness's own cases: harness.child runs test_cases.py with the planned plugins."""

    def launch(self, ctx: BatchContext, op_plan: OpPlan, attempt: int, skip: Collection[str],
               capture_off: str = "") -> Launch:
        plan, files = ctx.plan, ctx.files
        spec_path = files.spec(op_plan.op)
        spec_path.parent.mkdir(exist_ok=True)
        ctx.child_spec(op_plan, op_plan.device, skip, capture_off=capture_off).dump(spec_path)
        args = (str(CASES_FILE), "-q", "-rN", *PYTEST_OFF, "--noconftest", "-c", os.devnull,
                "--rootdir", str(ctx.run_dir), *plan.plugins.pytest_args(), SPEC_OPTION, str(spec_path))
        return Launch(pytest_args=args, exit_path=files.exit_file(op_plan.op),
                      header=f"attempt {attempt} on device {op_plan.device}")

    def collect(self, ctx: BatchContext, op_plan: OpPlan, end: AttemptExit | None) -> tuple[str, ...]:
        return ()  # the op process appended its records itself

    def run_info(self, identity: Mapping[str, Any]) -> dict[str, Any]:
        return {}


def device_shares(ops: Sequence[OpPlan]) -> dict[str, list[OpPlan]]:
    """Each device's ops, in plan order."""
    shares: dict[str, list[OpPlan]] = {}
    for o in ops:
        shares.setdefault(o.device, []).append(o)
    return shares


@dataclass(frozen=True)
class _OpRecords:
    recorded: frozenset[str]
    statuses: tuple[str, ...]
    poisoned: bool
    compile_s: float | None = None  # what the records' ir summaries say was spent compiling


def _op_records(records: Sequence[Measurement], op_plan: OpPlan) -> _OpRecords:
    planned = {c.case_id for c in op_plan.cases()}
    mine = [r for r in records if r.op == op_plan.op and (op_plan.is_open or r.case_id in planned)]
    return _OpRecords(
        recorded=frozenset(r.case_id for r in mine),
        statuses=tuple(r.status for r in mine),
        poisoned=any("poisoned" in r.notes for r in mine),
        compile_s=compile_seconds(mine),
    )


def compile_seconds(records: Sequence[Measurement]) -> float | None:
    """Compile time of the records' cases (their ``ir`` summaries), None when none says."""
    times = [r.ir.get("compile_ms") for r in records if r.ir]
    numbers = [float(t) for t in times if isinstance(t, int | float)]
    return sum(numbers) / 1e3 if numbers else None


def _spawn(ctx: BatchContext, op_plan: OpPlan, attempt: int, skip: Collection[str], hold: bool,
           capture_off: str = "") -> HeldProcess:
    launch = ctx.runner.launch(ctx, op_plan, attempt, skip, capture_off)
    env = child_env(ctx.plan.backend, op_plan.device, ctx.parent_env, cache_env(ctx.cache_dir))
    env.update(op_marks(ctx.run_dir, op_plan.op))  # inherited by all it starts (harness.run.leftovers)
    child = start(launch, env, ctx.files.log(op_plan.op), hold, warm_profiler=hold and ctx.plan.warm_profiler)
    return HeldProcess(child, launch.exit_path, frozenset(skip))


def prestart_op(ctx: BatchContext, op_plan: OpPlan) -> None:
    """Start ``op_plan``'s first attempt now, held, so its imports overlap the op running before it."""
    skip = _op_records(read_records(ctx.records_path, on_corrupt="skip"), op_plan).recorded
    if not op_plan.is_open and not [c for c in op_plan.cases() if c.case_id not in skip]:
        return
    held = _spawn(ctx, op_plan, 1, skip, hold=True)
    with ctx.held_lock:
        stale = ctx.held.pop(op_plan.op, None)
        ctx.held[op_plan.op] = held
    if stale is not None:
        cancel(stale.child)


def cancel_held(ctx: BatchContext, ops: Collection[str]) -> None:
    for op in ops:
        held = ctx.take_held(op)
        if held is not None:
            cancel(held.child)


def _attempt(ctx: BatchContext, op_plan: OpPlan, attempt: int, skip: Collection[str],
             capture_off: str = "") -> AttemptExit | None:
    """One process for the op's cases not yet recorded (a pre-started one where there is one for
    exactly these cases and may capture); None when a stop ended it."""
    held = ctx.take_held(op_plan.op)
    if held is not None and (attempt != 1 or held.skip != frozenset(skip) or capture_off):
        cancel(held.child)
        held = None
    if held is not None:
        release(held.child)
    else:
        held = _spawn(ctx, op_plan, attempt, skip, hold=False, capture_off=capture_off)
    child, exit_path = held.child, held.exit_path
    state = wait_exit(child.pid, time.monotonic() + ctx.plan.options.op_timeout, ctx.stop,
                      finished=exit_path.exists, linger_s=EXIT_LINGER_S)
    if state == "stopped":
        # SIGINT first: Python finishes the record write in progress and pytest unwinds.
        end_group(child, signal.SIGINT, ctx.stop)
        left = _end_leftovers(ctx, op_plan.op)
        if left:
            ctx.events.note(f"{op_plan.op}: ended process(es) it left running: {left}")
        return None
    if state in ("timeout", "lingered"):
        end_group(child, signal.SIGTERM, ctx.stop)
    else:
        reap_group(child)
    # A process that finished pytest (its exit status is written) and then hung is not a TIMEOUT:
    # its records decide, and the note says it hung.
    return AttemptExit(child.returncode, timed_out=state == "timeout", pytest_exit=read_exit(exit_path),
                       lingered_s=EXIT_LINGER_S if state == "lingered" else None,
                       leftovers=_end_leftovers(ctx, op_plan.op))


def _end_leftovers(ctx: BatchContext, op: str) -> str:
    """End the processes ``op`` left running outside its process group (new sessions); which."""
    return describe(end_marked(find_marked(ctx.run_dir, op), ctx.run_dir))


def _with_log(verdict: Verdict, files: RunFiles, op: str) -> Verdict:
    """A crash, timeout or error says where its output is (the records do not hold it)."""
    if verdict.status not in ("CRASH", "TIMEOUT", "ERROR"):
        return verdict
    log = files.log(op).relative_to(files.root)
    return replace(verdict, note=f"{verdict.note} (log: {log})" if verdict.note else f"log: {log}")


def _missing(op_plan: OpPlan, facts: _OpRecords, end: AttemptExit | None, attempts: int) -> list[str]:
    """The op's cases still to record. An open op's are unknown until its process ran to the end:
    before its first attempt, or after one that died early, the one entry says how far it got
    (so a retry that gets further is progress, not a repeat)."""
    if not op_plan.is_open:
        return [c.case_id for c in op_plan.cases() if c.case_id not in facts.recorded]
    if attempts and end is not None and end.pytest_exit is not None:
        return []  # pytest returned: the process found and ran every case it had
    return [f"{op_plan.op}: cases after the {len(facts.recorded)} recorded"]


def capture_off_reason(timer: str, poisoned: bool, died_capturing: str = "") -> str:
    """Why an attempt must capture no graph ("" to capture): an earlier attempt of the op (this
    run's, or the interrupted run's a resume continues) poisoned the device context, which on
    the H200 was a graph capture each time (a capture that failed left torch's generator or the
    context broken, linalg_lu_factor_ex_out); capturing again would end that attempt the same way
    one case later. Or ``died_capturing`` (which attempt) died inside a capture: on the H200 torch's
    cholesky_solve (MAGMA) got "operation not permitted when stream is capturing" and MAGMA's own
    assertion then aborted the process; a retry that captures again dies the same way. Its cases
    are then timed by the direct timer, each row saying why."""
    return _captures_none(capture_off_why(timer, poisoned, died_capturing))


def _captures_none(why: str) -> str:
    """The attempt's reason to capture no graph, from :func:`capture_off_why`'s ("" to capture)."""
    return f"{why}: this attempt captures no graph" if why else ""


def capture_off_why(timer: str, poisoned: bool, died_capturing: str = "") -> str:
    """The reason :func:`capture_off_reason` gives, alone (the op's notes repeat it)."""
    if timer != "graph":
        return ""
    if died_capturing:
        return f"{died_capturing} of this op died inside a graph capture"
    if poisoned:
        return "an earlier attempt of this op poisoned the device context (its row is marked poisoned)"
    return ""


def _attempt_notes(attempt: int, verdict: Verdict, end: AttemptExit, retry: bool, missing: Sequence[str],
                   earlier: Collection[FailureKey], why_off: str, found: Sequence[str]) -> list[str]:
    """What the op's row says about one attempt: its verdict (with why it is not retried), a
    capture left off, the runner's notes, processes it left behind."""
    notes: list[str] = []
    if retry or attempt > 1:
        tail = ""
        if not retry and verdict.status in RETRIED_STATUSES and missing:
            repeated = failure_key(verdict, missing) in earlier
            tail = " (the same failure again: not retried)" if repeated else " (no retries left)"
        notes.append(f"attempt {attempt} {verdict.status}" + (f": {verdict.note}" if verdict.note else "") + tail)
    elif verdict.note:
        notes.append(verdict.note)
    if why_off:
        notes.append(f"attempt {attempt} {CAPTURE_OFF}: {why_off}")
    notes.extend(n for n in found if n not in notes)
    if end.leftovers:
        notes.append(f"attempt {attempt} left processes running outside its process group; "
                     f"ended them: {end.leftovers}")
    return notes


def run_op(ctx: BatchContext, op_plan: OpPlan, on_attempt: Callable[[int], None]) -> OpOutcome:
    """Attempts until the op ends or should not be retried; INTERRUPTED when a stop cut in."""
    begin = time.monotonic()
    planned = [c.case_id for c in op_plan.cases()]
    facts = _op_records(read_records(ctx.records_path, on_corrupt="skip"), op_plan)
    notes: list[str] = []
    earlier: set[FailureKey] = set()
    attempts = 0
    mark = ctx.files.capture_mark(op_plan.op)
    # which attempt's process died inside a graph capture ("": none); a mark an earlier run left
    # (its last attempt died so, and --resume --retry-failed runs the op again) counts too
    died_capturing = "an earlier run's last attempt" if mark.exists() else ""
    end: AttemptExit | None = None
    verdict = Verdict("SKIP", "no cases to run")
    sweep_compile: float | None = None
    if ctx.sweep is not None and ctx.sweep.applies(op_plan) and (
            op_plan.is_open or any(c not in facts.recorded for c in planned)):  # an open op: its cases are unknown
        on_attempt(0)
        swept = ctx.sweep.run(ctx, op_plan)
        if swept is None:
            return OpOutcome(op_plan.op, op_plan.device, PENDING, 0, time.monotonic() - begin,
                             len(facts.recorded), ("interrupted during its sweep; resume with --resume",))
        notes.append(swept.note())  # a failed sweep is discarded: the op tunes serially in its own process
        sweep_compile = swept.compile_s
    while True:
        missing = _missing(op_plan, facts, end, attempts)
        if not missing:
            if attempts == 0 and planned:  # every case recorded by a session whose marker was lost
                verdict = classify_exit(AttemptExit(0, pytest_exit=0), facts.statuses, facts.poisoned)
                notes.append("every case was already recorded")
            break
        if ctx.stop.requested:
            return OpOutcome(op_plan.op, op_plan.device, INTERRUPTED if attempts else PENDING, attempts,
                             time.monotonic() - begin, len(facts.recorded),
                             (*notes, "interrupted; resume with --resume"))
        attempts += 1
        on_attempt(attempts)
        why = capture_off_why(ctx.plan.timer, facts.poisoned, died_capturing)
        capture_off = _captures_none(why)
        mark.unlink(missing_ok=True)
        end = _attempt(ctx, op_plan, attempts, facts.recorded, capture_off)
        found = ctx.runner.collect(ctx, op_plan, end)
        facts = _op_records(read_records(ctx.records_path, on_corrupt="skip"), op_plan)
        if end is None:
            return OpOutcome(op_plan.op, op_plan.device, INTERRUPTED, attempts, time.monotonic() - begin,
                             len(facts.recorded),
                             (*notes, *found, f"interrupted during attempt {attempts}; resume with --resume"))
        verdict = classify_exit(end, facts.statuses, facts.poisoned, ctx.plan.options.op_timeout)
        if verdict.status == "CRASH" and end.pytest_exit is None and mark.exists():
            died_capturing = f"attempt {attempts}"  # it left the graph timer's mark: it died inside a capture
            verdict = replace(verdict, note=f"{verdict.note} {CAPTURE_DIED}".strip())
        verdict = _with_log(verdict, ctx.files, op_plan.op)
        missing = _missing(op_plan, facts, end, attempts)
        retry = should_retry(verdict, attempts, missing, earlier)
        notes += _attempt_notes(attempts, verdict, end, retry, missing, earlier, why,
                                [n for n in found if n not in notes])
        if not retry:
            break
        earlier.add(failure_key(verdict, missing))
    compile_s = (None if facts.compile_s is None and sweep_compile is None
                 else (facts.compile_s or 0.0) + (sweep_compile or 0.0))
    return OpOutcome(op_plan.op, op_plan.device, verdict.status, attempts, time.monotonic() - begin,
                     len(facts.recorded), tuple(notes), compile_s=compile_s,
                     returncode=None if end is None else end.returncode)


class _Board:
    """Every op's current row; ops_status.csv is rewritten atomically on each change."""

    def __init__(self, path: Path, outcomes: Mapping[str, OpOutcome], deadline: float | None = None,
                 facts: StatusFacts | None = None) -> None:
        self.path = path
        self.facts = facts or StatusFacts()
        self.outcomes = dict(outcomes)
        self.lock = threading.Lock()
        self.deadline = deadline  # time.monotonic() after which no op starts (--budget), or None
        self.flush()

    def out_of_budget(self, ops: Sequence[OpPlan]) -> bool:
        """Past the run's --budget: ``ops`` (not started) end as not run, saying why; a resume runs them."""
        if self.deadline is None or time.monotonic() < self.deadline:
            return False
        for o in ops:
            self.set(OpOutcome(o.op, o.device, PENDING, notes=(BUDGET_NOTE,)))
        return True

    def set(self, outcome: OpOutcome) -> None:
        with self.lock:
            self.outcomes[outcome.op] = outcome
            atomic_write_text(self.path, render_status(list(self.outcomes.values()), self.facts))

    def flush(self) -> None:
        with self.lock:
            atomic_write_text(self.path, render_status(list(self.outcomes.values()), self.facts))


@dataclass(frozen=True)
class BatchResult:
    outcomes: tuple[OpOutcome, ...]  # in plan order
    interrupted: str = ""  # why the run stopped before every op ended (a signal name, --budget), else ""


OpFunction = Callable[[BatchContext, OpPlan, Callable[[int], None]], OpOutcome]


def _prestart_ahead(ctx: BatchContext, following: Sequence[OpPlan]) -> None:
    """Pre-start the device's next ops that are not held yet."""
    for ahead in following:
        if ctx.is_held(ahead.op):  # pre-started while an op before this one ran
            continue
        try:
            prestart_op(ctx, ahead)
        except Exception as exc:  # noqa: BLE001 - the op then starts fresh when its turn comes
            ctx.events.note(f"could not pre-start {ahead.op}: {type(exc).__name__}: {exc}")


def _device_worker(ctx: BatchContext, share: Sequence[OpPlan], board: _Board, run_one: OpFunction) -> None:
    todo = [o for o in share if not board.outcomes[o.op].done]
    try:
        for i, op_plan in enumerate(todo):
            if ctx.stop.requested or board.out_of_budget(todo[i:]):
                return
            upcoming = tuple(todo[i + 1:i + 1 + ctx.prestart_depth])

            def started(attempt: int, o: OpPlan = op_plan, following: tuple[OpPlan, ...] = upcoming) -> None:
                if attempt == 0:  # its sweep (harness.run.sweep), before the first attempt
                    board.set(OpOutcome(o.op, o.device, RUNNING, 0, notes=("sweeping its autotune keys",)))
                    return
                board.set(OpOutcome(o.op, o.device, RUNNING, attempt, notes=(f"attempt {attempt} running",)))
                ctx.events.attempt_started(o.device, o.op, attempt)
                if ctx.prestart and attempt == 1 and not ctx.stop.requested:
                    _prestart_ahead(ctx, following)

            try:
                with ctx.locks.measuring(op_plan.device):
                    result = run_one(ctx, op_plan, started)
                if result.done:
                    write_marker(ctx.run_dir, result)
            except Exception as exc:  # a fault of the harness (disk full...): this op is lost, the run goes on
                result = _harness_fault(op_plan, exc)  # no marker: a resume runs it again
            cancel_held(ctx, [op_plan.op])  # pre-started but not used (every case was already recorded)
            try:
                board.set(result)
            except Exception as exc:
                board.outcomes[op_plan.op] = _harness_fault(op_plan, exc)
            if result.done:
                ctx.events.op_finished(result)
    finally:
        cancel_held(ctx, [o.op for o in todo])


def _harness_fault(op_plan: OpPlan, exc: Exception) -> OpOutcome:
    return OpOutcome(op_plan.op, op_plan.device, "ERROR",
                     notes=(f"the harness failed while running this op: {type(exc).__name__}: {exc}",))


def _settle(plan: RunPlan, run_dir: Path, board: _Board, events: BatchEvents, stop: StopToken) -> None:
    """After every device thread: the torn last line a stop left, ops no thread ended (a harness
    fault), processes of this run still alive; then ops_status.csv."""
    if stop.requested:
        dropped = repair_records_tail(RunFiles(run_dir).records)
        if dropped:
            events.note(f"records.jsonl: dropped a torn last line ({dropped} bytes) left by a stopped process")
        for o in plan.ops:  # the ops the stop left unstarted say so (their cause: harness.results.causes)
            row = board.outcomes[o.op]
            if row.status == PENDING and not row.notes:
                board.outcomes[o.op] = replace(row, notes=(f"{STOPPED_NOTE} ({stop.reason or 'stopped'})",))
    else:  # every op must have ended; one that did not was lost to a harness fault
        for o in plan.ops:
            if not board.outcomes[o.op].done and BUDGET_NOTE not in board.outcomes[o.op].notes:
                board.outcomes[o.op] = replace(board.outcomes[o.op], status="ERROR",
                                               notes=("never ended: its device worker stopped early",))
    stray = end_marked(find_marked(run_dir), run_dir)  # anything of this run still alive
    if stray:
        events.note(f"ended process(es) left running by this run's ops: {describe(stray)}")
    board.flush()


def run_batch(
    plan: RunPlan,
    run_dir: Path,
    parent_env: Mapping[str, str],
    events: BatchEvents,
    runner: OpRunner | None = None,
    stop: StopToken | None = None,
    already_done: Mapping[str, OpOutcome] | None = None,
    prestart: bool = False,
    prestart_depth: int = PRESTART_DEPTH,
    run_one: OpFunction = run_op,
    sweep: TuneStep | None = None,
) -> BatchResult:
    """Run every op of the plan that has not ended yet, one thread per device.

    Returns when every op has ended or, after a stop was requested, when every child is gone;
    the records file is then left with no torn line. ``runner`` is the source of the ops' processes
    (default: the harness's own cases); ``run_one`` runs one op (tests replace it). With
    ``prestart``, each device's next ``prestart_depth`` op processes are started (held) as soon as
    the current op's first attempt starts, so their imports overlap that op's run (and, deeper
    than 1, the runs of the ops between).
    """
    stop = stop or StopToken()
    run_dir = run_dir.absolute()  # every path an op process gets is absolute: an op may chdir
    records = RunFiles(run_dir).records
    dropped = repair_records_tail(records)
    if dropped:
        events.note(f"records.jsonl: dropped a torn last line ({dropped} bytes) left by a killed process")
    initial = {o.op: OpOutcome(o.op, o.device) for o in plan.ops}
    initial.update({k: v for k, v in (already_done or {}).items() if k in initial})
    budget = getattr(plan.options, "budget", None)
    board = _Board(run_dir / "ops_status.csv", initial, None if budget is None else time.monotonic() + budget,
                   StatusFacts.of_run(plan.backend.name, plan.timer, plan.options.out, plan.options.reports_dir,
                                      plan.run_id))
    cache_dir = run_cache_dir(plan.options, run_dir)
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
    ctx = BatchContext(plan, run_dir, parent_env, stop, events, runner or CaseRunner(), prestart=prestart,
                       prestart_depth=min(max(1, prestart_depth), MAX_PRESTART_DEPTH), cache_dir=cache_dir,
                       sweep=sweep)
    todo = [o for o in plan.ops if not initial[o.op].done]
    threads = [
        threading.Thread(target=_device_worker, args=(ctx, share, board, run_one), name=f"device-{device}",
                         daemon=True)
        for device, share in device_shares(todo).items()
    ]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():  # a timed join keeps the main thread free to run signal handlers
            t.join(timeout=0.2)
    _settle(plan, run_dir, board, events, stop)
    outcomes = tuple(board.outcomes[o.op] for o in plan.ops)
    interrupted = (stop.reason or "stopped") if stop.requested and not all(o.done for o in outcomes) else ""
    unstarted = [o.op for o in outcomes if BUDGET_NOTE in o.notes]
    if unstarted and not interrupted:
        interrupted = f"--budget {budget:g}s ran out with {len(unstarted)} op(s) not started"
    return BatchResult(outcomes=outcomes, interrupted=interrupted)
