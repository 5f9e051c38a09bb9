"""Process-per-op execution: isolation, device sharding, timeouts, retries, status.

Each op runs as its own pytest process in its own process group, pinned to one
device through the backend's visibility variables. Devices work in parallel,
each through its share of ops serially, so two processes never time on the
same device at once. Records are written by the children as cases complete;
this module only decides what ran and how it ended.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.backends import isolated_env
from harness.plan import OpPlan, RunPlan
from harness.plugins.records import POISONED_EXIT
from harness.plugins.spec import ChildSpec
from harness.results.store import atomic_write_text, read_json, read_records, write_json

__all__ = ["OP_STATUSES", "OpOutcome", "POISONED_EXIT", "classify_exit", "read_markers", "run_batch"]

OP_STATUSES = ("PASS", "FAIL", "ERROR", "CRASH", "TIMEOUT", "SKIP")
MAX_ATTEMPTS = 3  # one try and at most two retries
_SUITE = Path(__file__).parent / "suite" / "test_ops.py"
STATUS_COLUMNS = ("op", "device", "status", "attempts", "elapsed_s", "rows", "notes")


@dataclass
class OpOutcome:
    op: str
    device: str
    status: str = "SKIP"
    attempts: int = 0
    elapsed_s: float = 0.0
    rows: int = 0
    notes: list[str] = field(default_factory=list)
    done: bool = False  # completion marker: this op needs no more work on resume

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


def classify_exit(returncode: int, timed_out: bool, statuses: Sequence[str]) -> tuple[str, str]:
    """(op status, note) from how a child ended and the statuses of the records it wrote."""
    if timed_out:
        return "TIMEOUT", "op timeout reached; process group killed"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return "CRASH", f"killed by {name}"
    if returncode == POISONED_EXIT:
        return "CRASH", "device context poisoned (graph capture); op process stopped"
    if returncode == 0:
        return "PASS", ""
    if returncode == 1:
        if "error" in statuses:
            return "ERROR", "a case raised"
        if "fail" in statuses:
            return "FAIL", "correctness check failed"
        return "ERROR", "pytest reported failures without records"
    if returncode == 5:
        return "SKIP", "no cases to run"
    if returncode in (2, 3, 4):
        return "ERROR", f"pytest exited with code {returncode} (interrupted, internal or usage error); see the op log"
    return "ERROR", f"process exited with code {returncode}"


class _Stopping:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.children: set[subprocess.Popen[bytes]] = set()
        self.lock = threading.Lock()

    def kill_all(self) -> None:
        with self.lock:
            children = list(self.children)
        for child in children:
            _kill_group(child)


def _kill_group(child: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the child's whole process group, then SIGKILL what is left."""
    try:
        os.killpg(child.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        child.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def _child_env(plan: RunPlan, device: str, parent_env: Mapping[str, str]) -> dict[str, str]:
    env = isolated_env(plan.backend, parent_env, device)
    if plan.backend.capabilities.triton_interpreter:
        env["TRITON_INTERPRET"] = "1"  # must be set before the child imports triton
    src = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _child_command(plan: RunPlan, spec_path: Path, run_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        str(_SUITE),
        "-q",
        "-rN",
        "-p",
        "no:cacheprovider",
        "--noconftest",
        "-c",
        os.devnull,
        "--rootdir",
        str(run_dir),
        *plan.plugins.pytest_args(),
        "--harness-spec",
        str(spec_path),
    ]


def _op_records(run_dir: Path, op: str) -> list[str]:
    return [r.case_id for r in read_records(run_dir / "records.jsonl") if r.op == op]


def _statuses(run_dir: Path, op: str) -> list[str]:
    return [r.status for r in read_records(run_dir / "records.jsonl") if r.op == op]


def run_op(
    plan: RunPlan,
    op_plan: OpPlan,
    run_dir: Path,
    parent_env: Mapping[str, str],
    stopping: _Stopping,
) -> OpOutcome:
    outcome = OpOutcome(op=op_plan.op, device=op_plan.device)
    start = time.monotonic()
    last_signature: str | None = None
    logs = run_dir / "logs"
    logs.mkdir(exist_ok=True)
    planned = {c.case_id for c in op_plan.cases()}
    while outcome.attempts < MAX_ATTEMPTS and not stopping.event.is_set():
        outcome.attempts += 1
        done_cases = set(_op_records(run_dir, op_plan.op)) & planned
        spec = ChildSpec(
            run_id=plan.run_id,
            run_dir=str(run_dir),
            backend=plan.backend.name,
            device=op_plan.device,
            op=op_plan.op,
            provider=op_plan.provider,
            dtypes=op_plan.dtypes,
            shapes=op_plan.shapes,
            seed=plan.options.seed,
            timer=plan.timer,
            cache=plan.options.cache,
            ops_modules=plan.options.ops_modules,
            warmup_ms=plan.options.warmup_ms,
            rep_ms=plan.options.rep_ms,
            skip_cases=tuple(sorted(done_cases)),
        )
        spec_path = run_dir / "specs" / f"{op_plan.op}.json"
        spec_path.parent.mkdir(exist_ok=True)
        spec.dump(spec_path)
        with open(logs / f"{op_plan.op}.log", "ab") as log:
            log.write(f"\n=== attempt {outcome.attempts} ===\n".encode())
            log.flush()
            child = subprocess.Popen(
                _child_command(plan, spec_path, run_dir),
                env=_child_env(plan, op_plan.device, parent_env),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, killed as a whole
            )
            with stopping.lock:
                stopping.children.add(child)
            timed_out = False
            try:
                child.wait(timeout=plan.options.op_timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(child)
            finally:
                with stopping.lock:
                    stopping.children.discard(child)
        if stopping.event.is_set() and not timed_out:
            outcome.notes.append("run interrupted")
            outcome.status = "ERROR"
            break
        status, note = classify_exit(child.returncode, timed_out, _statuses(run_dir, op_plan.op))
        outcome.status = status
        if status in ("PASS", "FAIL", "SKIP", "TIMEOUT"):
            if note:
                outcome.notes.append(note)
            outcome.done = status != "TIMEOUT"
            break
        # CRASH or ERROR: retry, unless the same failure repeats or nothing is left to do.
        signature = f"{status}:{note}"
        outcome.notes.append(f"attempt {outcome.attempts}: {note}")
        remaining = planned - set(_op_records(run_dir, op_plan.op))
        if signature == last_signature or not remaining:
            break
        last_signature = signature
    outcome.rows = len(set(_op_records(run_dir, op_plan.op)) & planned)
    outcome.elapsed_s = time.monotonic() - start
    return outcome


def write_marker(run_dir: Path, outcome: OpOutcome) -> None:
    """The completion marker: an op with one is not run again by --resume."""
    write_json(run_dir / "done" / f"{outcome.op}.json", {**outcome.row(), "notes": outcome.notes})


def read_markers(run_dir: Path) -> dict[str, OpOutcome]:
    found: dict[str, OpOutcome] = {}
    for path in sorted((run_dir / "done").glob("*.json")):
        data = read_json(path)
        found[data["op"]] = OpOutcome(
            op=data["op"],
            device=data["device"],
            status=data["status"],
            attempts=int(data["attempts"]),
            elapsed_s=float(data["elapsed_s"]),
            rows=int(data["rows"]),
            notes=list(data["notes"]),
            done=True,
        )
    return found


def render_status(outcomes: Sequence[OpOutcome]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(STATUS_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for o in outcomes:
        writer.writerow(o.row())
    return buf.getvalue()


def run_batch(
    plan: RunPlan,
    run_dir: Path,
    parent_env: Mapping[str, str],
    on_start: Callable[[str, str], None] = lambda device, op: None,
    on_done: Callable[[OpOutcome], None] = lambda outcome: None,
    already_done: Mapping[str, OpOutcome] | None = None,
) -> list[OpOutcome]:
    """Run every op of the plan; ops_status.csv is rewritten atomically after each op ends."""
    stopping = _Stopping()
    outcomes: dict[str, OpOutcome] = {o.op: OpOutcome(op=o.op, device=o.device, notes=["not started"]) for o in plan.ops}
    if already_done:
        outcomes.update({k: v for k, v in already_done.items() if k in outcomes})
    lock = threading.Lock()
    status_path = run_dir / "ops_status.csv"

    def flush_status() -> None:
        with lock:
            atomic_write_text(status_path, render_status(list(outcomes.values())))

    def worker(device: str, share: Sequence[OpPlan]) -> None:
        for op_plan in share:
            if stopping.event.is_set():
                return
            if outcomes[op_plan.op].done:
                continue
            on_start(device, op_plan.op)
            result = run_op(plan, op_plan, run_dir, parent_env, stopping)
            with lock:
                outcomes[op_plan.op] = result
            if result.done:
                write_marker(run_dir, result)
            flush_status()
            on_done(result)

    flush_status()
    shares: dict[str, list[OpPlan]] = {}
    for op_plan in plan.ops:
        shares.setdefault(op_plan.device, []).append(op_plan)
    threads = [threading.Thread(target=worker, args=(d, s), daemon=True) for d, s in shares.items()]

    previous = {}
    def _stop(signum: int, _frame: object) -> None:
        stopping.event.set()
        stopping.kill_all()
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, _stop)
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        stopping.event.set()
        stopping.kill_all()
        for t in threads:
            t.join(timeout=30)
        for key, o in outcomes.items():
            if not o.done and o.status not in ("PASS", "FAIL"):
                outcomes[key] = replace(o, notes=o.notes + ["interrupted; resume with --resume"])
        flush_status()
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    flush_status()
    return list(outcomes.values())
