"""Ops whose process finds its own cases (a library's benchmark suite) in the one batch executor:
when they are done, when a crash is retried, what a resume skips, and what is reported unreached
(attempts scripted, no processes)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest

from harness.backends import get_backend
from harness.contract import POISONED_EXIT
from harness.options import RunOptions
from harness.results.causes import op_cause
from harness.results.schema import Measurement
from harness.results.store import append_record
from harness.run import batch
from harness.run.batch import capture_off_reason, run_op
from harness.run.context import BatchContext
from harness.run.decide import AttemptExit, OpOutcome
from harness.run.outputs import stored_ops, unreached_cases
from harness.run.plan import OpPlan, RunPlan, share_ops
from harness.run.plugins import plan_plugins
from harness.run.spawn import Launch, StopToken

OPEN = OpPlan("softmax", "0", (), (), "flaggems-suite", open_cases=6)


class Events:
    def attempt_started(self, device: str, op: str, attempt: int) -> None: ...

    def op_finished(self, outcome: OpOutcome) -> None: ...

    def note(self, text: str) -> None: ...


class Scripted:
    """An OpRunner whose attempts write the given rows and end the given way."""

    def __init__(self, attempts: list[tuple[list[str], AttemptExit]]) -> None:
        self.attempts = iter(attempts)
        self.skips: list[frozenset[str]] = []
        self.capture_offs: list[str] = []

    def launch(self, ctx: BatchContext, op_plan: OpPlan, attempt: int, skip: Collection[str],
               capture_off: str = "") -> Launch:
        self.skips.append(frozenset(skip))
        self.capture_offs.append(capture_off)
        return Launch(pytest_args=(), exit_path=ctx.run_dir / "x.exit")

    def collect(self, ctx: BatchContext, op_plan: OpPlan, end: AttemptExit | None) -> tuple[str, ...]:
        return ()

    def run_info(self, identity: Mapping[str, Any]) -> dict[str, Any]:
        return {}


class MakeContext(Protocol):
    """The ``scripted`` fixture's factory: a batch context whose attempts follow the script."""

    def __call__(self, attempts: list[tuple[list[str], AttemptExit]], backend: str = ...) -> BatchContext: ...


def record(dtype: str, status: str = "pass", notes: tuple[str, ...] = ()) -> Measurement:
    return Measurement(run_id="r", op="softmax", provider="flaggems-suite", dtype=dtype, shape=(4, 4),
                       backend="cuda", device="0", timer="graph", status=status, notes=notes)


@pytest.fixture
def scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MakeContext, dict[str, Any]]]:
    holder: dict[str, Any] = {}

    def attempt(ctx: BatchContext, op_plan: OpPlan, n: int, skip: Collection[str],
                capture_off: str = "") -> AttemptExit | None:
        ctx.runner.launch(ctx, op_plan, n, skip, capture_off)
        rows, end = next(holder["runner"].attempts)
        for dtype in rows:  # "error": a row that raised; "poisoned": one whose capture poisoned the context
            if dtype == "capturing":  # the process dies inside a capture: the graph timer's mark stays
                ctx.files.capture_mark(op_plan.op).parent.mkdir(exist_ok=True)
                ctx.files.capture_mark(op_plan.op).write_text("1\n")
                continue
            notes = ("poisoned",) if dtype == "poisoned" else ()
            append_record(ctx.records_path, record(dtype, "error" if dtype in ("error", "poisoned") else "pass", notes))
        return end

    monkeypatch.setattr(batch, "_attempt", attempt)

    def make(attempts: list[tuple[list[str], AttemptExit]], backend: str = "cpu") -> BatchContext:
        chosen = get_backend(backend)
        plan = RunPlan(run_id="r", backend=chosen, level="core", plugins=plan_plugins(chosen), devices=("0",),
                       ops=(OPEN,), options=RunOptions())
        runner = Scripted(attempts)
        holder["runner"] = runner
        return BatchContext(plan, tmp_path, {}, StopToken(), Events(), runner)

    yield make, holder


def test_an_open_op_runs_once_and_passes_with_the_rows_its_process_found(scripted: Any) -> None:
    make, _ = scripted
    outcome = run_op(make([(["float16", "bfloat16"], AttemptExit(0, pytest_exit=0))]), OPEN, lambda n: None)
    assert (outcome.status, outcome.attempts, outcome.rows) == ("PASS", 1, 2)


def test_a_crash_is_retried_without_the_rows_already_recorded_until_it_stops_progressing(scripted: Any) -> None:
    make, holder = scripted
    ctx = make([(["float16"], AttemptExit(-11)), (["bfloat16"], AttemptExit(-11)), ([], AttemptExit(-11))])
    outcome = run_op(ctx, OPEN, lambda n: None)
    assert outcome.status == "CRASH" and outcome.attempts == 3 and outcome.rows == 2
    assert [len(s) for s in holder["runner"].skips] == [0, 1, 2]  # each retry skips what is recorded


def test_after_a_poisoned_attempt_the_retry_captures_no_graph(scripted: Any) -> None:
    """linalg_lu_factor_ex_out on the H200 (2026-12-01): each attempt's capture poisoned the context one
    case further on, three attempts in all; a retry that captures no graph measures the rest."""
    make, holder = scripted
    ctx = make([(["float16", "poisoned"], AttemptExit(POISONED_EXIT)), (["bfloat16"], AttemptExit(0, pytest_exit=0))],
               backend="cuda")
    assert ctx.plan.timer == "graph"
    outcome = run_op(ctx, OPEN, lambda n: None)
    first, second = holder["runner"].capture_offs
    assert first == "" and "poisoned the device context" in second
    assert outcome.status == "CRASH" and outcome.attempts == 2 and outcome.rows == 3  # the poisoned row stays
    assert "attempt 2 captured no graph" in "; ".join(outcome.notes)
    assert capture_off_reason("cpu", True) == "" and capture_off_reason("graph", False) == ""


def test_after_an_attempt_died_inside_a_capture_the_retry_captures_no_graph(scripted: Any) -> None:
    """cholesky_solve on the H200 (2026-12-04): MAGMA, torch's side, aborted the process inside the
    graph timer's capture ("operation not permitted when stream is capturing", then its own
    assertion), and the retry captured again and died the same way."""
    make, holder = scripted
    ctx = make([(["float16", "capturing"], AttemptExit(-6)), (["bfloat16"], AttemptExit(0, pytest_exit=0))],
               backend="cuda")
    outcome = run_op(ctx, OPEN, lambda n: None)
    first, second = holder["runner"].capture_offs
    assert first == "" and second.startswith("attempt 1 of this op died inside a graph capture")
    assert outcome.status == "PASS" and outcome.attempts == 2 and outcome.rows == 2
    said = "; ".join(outcome.notes)
    assert "attempt 1 CRASH: killed by SIGABRT while the harness captured a graph" in said
    assert "attempt 2 captured no graph: attempt 1 of this op died inside a graph capture" in said
    assert not ctx.files.capture_mark(OPEN.op).exists()  # the retry's process left none


def test_a_resumed_op_whose_last_attempt_died_inside_a_capture_captures_no_graph(scripted: Any) -> None:
    """--resume --retry-failed runs such an op again: the mark its last attempt left says why."""
    make, holder = scripted
    ctx = make([(["float16"], AttemptExit(0, pytest_exit=0))], backend="cuda")
    ctx.files.capture_mark(OPEN.op).parent.mkdir(exist_ok=True)
    ctx.files.capture_mark(OPEN.op).write_text("1\n")
    outcome = run_op(ctx, OPEN, lambda n: None)
    assert holder["runner"].capture_offs == ["an earlier run's last attempt of this op died inside a graph capture: "
                                             "this attempt captures no graph"]
    assert outcome.status == "PASS" and not ctx.files.capture_mark(OPEN.op).exists()


def test_a_last_attempt_that_died_inside_a_capture_is_the_harnesss_crash(scripted: Any) -> None:
    make, holder = scripted
    dies = [(["float16"], AttemptExit(-11)), (["bfloat16"], AttemptExit(-11)), (["capturing"], AttemptExit(-6))]
    outcome = run_op(make(dies, backend="cuda"), OPEN, lambda n: None)
    assert outcome.status == "CRASH" and outcome.attempts == 3 and holder["runner"].capture_offs == ["", "", ""]
    cause = op_cause(outcome.status, outcome.notes, [])
    assert cause is not None and cause.kind == "harness" and "inside the harness's graph capture" in cause.evidence
    assert capture_off_reason("cpu", False, "attempt 1") == ""  # no graph timer, nothing to leave off


def test_a_crash_that_repeats_at_the_same_place_is_not_retried(scripted: Any) -> None:
    make, _ = scripted
    outcome = run_op(make([(["float16"], AttemptExit(-11)), ([], AttemptExit(-11))]), OPEN, lambda n: None)
    assert outcome.status == "CRASH" and outcome.attempts == 2
    assert "the same failure again: not retried" in "; ".join(outcome.notes)


def test_an_op_pytest_found_nothing_in_is_a_skip_and_is_reported_unreached(scripted: Any) -> None:
    make, _ = scripted
    outcome = run_op(make([([], AttemptExit(5, pytest_exit=5))]), OPEN, lambda n: None)
    assert outcome.status == "SKIP" and outcome.attempts == 1
    (unreached,) = unreached_cases([OPEN], [], {"softmax": outcome})
    assert unreached.case_id == "softmax" and unreached.status == "skip"
    assert unreached_cases([OPEN], [record("float16")], {"softmax": outcome}) == []


def test_open_ops_shard_by_their_expected_rows_and_survive_run_json() -> None:
    heavy = OpPlan("a", "0", (), (), "s", open_cases=100)
    light = [OpPlan(f"b{i}", "0", (), (), "s", open_cases=10) for i in range(10)]
    sharded = {o.op: o.device for o in share_ops([heavy, *light], ["0", "1"])}
    assert sum(1 for o in light if sharded[o.op] != sharded["a"]) == 10  # the heavy one alone on its device
    stored = {"plan": [{"op": "a", "device": "1", "dtypes": [], "shapes": [], "provider": "s", "open_cases": 100}]}
    (back,) = stored_ops(stored)
    assert back.is_open and back.open_cases == 100 and back.cases() == []


def test_a_suite_op_is_pre_started_with_its_package_imported_too(tmp_path: Path) -> None:
    launch = Launch(pytest_args=("t.py",), exit_path=tmp_path / "x.exit", preload=("flag_gems",))
    held = launch.command(hold=True)
    assert held[held.index("--hold"):held.index("--") + 2] == ["--hold", "--preload", "flag_gems", "--", "t.py"]
    assert "--preload" not in launch.command(hold=False)


@pytest.mark.slow
def test_a_held_process_imports_the_modules_named_before_it_is_released(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from harness.contract import CANCELLED_EXIT

    marker = tmp_path / "imported"
    (tmp_path / "probe_module.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{tmp_path}")
    child = subprocess.Popen([sys.executable, "-m", "harness.child", str(tmp_path / "op.exit"), "--hold",
                              "--preload", "probe_module", "--", "--version"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out, _ = child.communicate(b"", timeout=120)  # cancelled: it never runs pytest
    assert child.returncode == CANCELLED_EXIT and marker.exists(), out.decode()
