"""`harness run --budget SECONDS`: no op starts after it; the ops left end as not run with the
cause environment/budget, the run is resumable and a resume runs exactly those ops (a clock
made here, no waiting)."""

from __future__ import annotations

import csv
import types
from dataclasses import replace
from pathlib import Path

import pytest

from harness.backends import get_backend
from harness.options import RunOptions, resolve_run_options
from harness.results.causes import BUDGET_NOTE
from harness.run import batch
from harness.run.batch import run_batch
from harness.run.decide import OpOutcome, with_causes
from harness.run.plan import OpPlan, RunPlan
from harness.run.plugins import plan_plugins
from harness.run.rundir import read_markers


class _Events:
    def attempt_started(self, device: str, op: str, attempt: int) -> None:
        pass

    def op_finished(self, outcome: OpOutcome) -> None:
        pass

    def note(self, text: str) -> None:
        pass


def _plan(names: tuple[str, ...], budget: float | None) -> RunPlan:
    cpu = get_backend("cpu")
    ops = tuple(OpPlan(name, "0", ("float32",), ((1,),), "builtin") for name in names)
    return RunPlan(run_id="r", backend=cpu, level="smoke", plugins=plan_plugins(cpu), devices=("0",), ops=ops,
                   options=replace(RunOptions(), budget=budget))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The batch's clock: each op it runs advances it by 10 s."""
    now = [1000.0]
    monkeypatch.setattr(batch, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    return now


def test_ops_not_started_within_the_budget_end_not_run_and_a_resume_runs_them(tmp_path: Path,
                                                                             clock: list[float]) -> None:
    ran: list[str] = []

    def runner(ctx, op_plan, on_attempt):  # type: ignore[no-untyped-def]
        ran.append(op_plan.op)
        clock[0] += 10.0
        return OpOutcome(op_plan.op, op_plan.device, "PASS", 1, 10.0, 1)

    # 25 s: a starts at 0, b at 10, c at 20; d would start at 30.
    result = run_batch(_plan(("a", "b", "c", "d", "e"), 25.0), tmp_path, {}, _Events(), run_one=runner)
    assert ran == ["a", "b", "c"]
    assert [o.status for o in result.outcomes] == ["PASS", "PASS", "PASS", "PENDING", "PENDING"]
    assert result.interrupted == "--budget 25s ran out with 2 op(s) not started"
    assert set(read_markers(tmp_path)) == {"a", "b", "c"}  # no marker: a resume runs d and e
    rows = {r["op"]: r for r in csv.DictReader((tmp_path / "ops_status.csv").open())}
    assert rows["d"]["notes"] == BUDGET_NOTE
    caused = {o.op: o for o in with_causes(result.outcomes, [])}
    assert caused["d"].cause == "environment" and "budget" in caused["d"].evidence
    assert caused["a"].cause == ""

    resumed = run_batch(_plan(("a", "b", "c", "d", "e"), 25.0), tmp_path, {}, _Events(),
                        already_done=read_markers(tmp_path), run_one=runner)
    assert ran == ["a", "b", "c", "d", "e"]
    assert [o.status for o in resumed.outcomes] == ["PASS"] * 5 and resumed.interrupted == ""


def test_without_a_budget_every_op_runs(tmp_path: Path, clock: list[float]) -> None:
    def runner(ctx, op_plan, on_attempt):  # type: ignore[no-untyped-def]
        clock[0] += 1e6
        return OpOutcome(op_plan.op, op_plan.device, "PASS", 1, 1.0, 1)

    result = run_batch(_plan(("a", "b", "c"), None), tmp_path, {}, _Events(), run_one=runner)
    assert [o.status for o in result.outcomes] == ["PASS"] * 3 and result.interrupted == ""


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "soon"])
def test_a_budget_of_zero_or_below_is_refused(bad: str) -> None:
    from harness.errors import UsageError

    with pytest.raises(UsageError) as err:
        resolve_run_options({"budget": bad}, {})
    assert err.value.message.startswith("--budget: budget (s) must be")
    assert resolve_run_options({}, {"HARNESS_BUDGET": "3600"}).budget == 3600.0
