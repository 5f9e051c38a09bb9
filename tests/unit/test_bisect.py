"""The bisection's logic (harness.bisect.plan) and its driver (harness.bisect.session) over a
simulated runner whose timings wander from run to run as a real device's do (0.2-2%), judged
with the gate's statistics."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from harness.bisect.plan import (
    BAD,
    GOOD,
    NOISY,
    SKIP,
    Check,
    RowResult,
    bounds,
    judge_check,
    judge_step,
    midpoint_threshold,
    next_probes,
    outcome,
    repeats_for_try,
)
from harness.bisect.session import Commit, Settings, bisect, check_state
from harness.bisect.simulate import CASE, SimulatedRange, commits_of

SHAS = [f"c{i:02d}" for i in range(16)]
SLOWER = Check(True, "regression", (CASE,), 1.05, "1 case(s) slower")
BAD_REF = Commit("f" * 40, "bad ref", "tree-bad")


def row(ratio: float, low: float, high: float, verdict: str = "noisy") -> RowResult:
    return RowResult(case_id=CASE, verdict=verdict, reason="r", ratio=ratio, ci_low=low, ci_high=high,
                     head_status="pass", head_op_status="PASS")


# --- planning ---------------------------------------------------------------------------------

def test_one_probe_halves_the_candidates_and_k_probes_split_them_evenly() -> None:
    assert next_probes(SHAS, {}, 1) == [7]
    # 15 candidates + the bad end = 16 outcomes in 4 parts of 4.
    assert next_probes(SHAS, {}, 3) == [3, 7, 11]
    marks = {"c07": BAD}
    assert next_probes(SHAS, marks, 1) == [3]
    assert next_probes(SHAS, {"c07": GOOD}, 1) == [11]


def test_a_skipped_commit_is_not_probed_again_and_its_neighbour_is() -> None:
    probes = next_probes(SHAS, {"c07": SKIP}, 1)
    assert probes and probes[0] != 7 and abs(probes[0] - 7) <= 1


def test_the_bounds_ignore_a_good_mark_above_the_first_bad_one() -> None:
    assert bounds(SHAS, {"c03": GOOD, "c05": BAD, "c09": GOOD}) == (3, 5)
    assert bounds(SHAS, {}) == (-1, 15)


def test_the_culprit_is_named_when_the_bounds_meet_else_the_range_with_its_skips() -> None:
    assert outcome(SHAS, {"c03": GOOD, "c04": BAD}).culprit == "c04"
    left = outcome(SHAS, {"c03": GOOD, "c04": SKIP, "c05": SKIP, "c06": BAD})
    assert left.culprit is None
    assert (left.first, left.last, left.skipped) == (4, 6, ("c04", "c05"))
    assert left.remaining == 3
    assert next_probes(SHAS, {"c03": GOOD, "c04": SKIP, "c05": SKIP, "c06": BAD}, 2) == []
    # The first commit itself can be the culprit (the good ref is below it).
    assert outcome(SHAS, {"c00": BAD}).culprit == "c00"


def test_the_default_threshold_is_half_the_change_in_log_time() -> None:
    assert midpoint_threshold(1.05) == pytest.approx(math.sqrt(1.05) - 1)
    assert midpoint_threshold(1 / 1.21) == pytest.approx(0.1)
    assert midpoint_threshold(1.0001) == 0.005
    assert midpoint_threshold(900.0) == 9.0
    # A try adds as many runs as were judged before it: 2, then 2 more (4 pooled), 4 more (8), ...
    assert [repeats_for_try(2, a) for a in (1, 2, 3, 4)] == [2, 2, 4, 8]


def test_a_speed_step_is_judged_by_which_side_of_the_threshold_its_interval_lies() -> None:
    t = 0.025
    assert judge_step([row(1.05, 1.03, 1.07)], "speed", SLOWER, t).mark == BAD
    assert judge_step([row(1.00, 0.99, 1.01)], "speed", SLOWER, t).mark == GOOD
    assert judge_step([row(1.02, 0.99, 1.05)], "speed", SLOWER, t).mark == NOISY
    # An improvement is bisected the same way, mirrored.
    faster = Check(True, "improvement", (CASE,), 0.9, "")
    assert judge_step([row(0.90, 0.88, 0.92)], "speed", faster, t).mark == BAD
    assert judge_step([row(1.0, 0.99, 1.01)], "speed", faster, t).mark == GOOD


def test_a_step_whose_op_did_not_run_is_skipped_with_the_reason() -> None:
    untimed = RowResult(case_id=CASE, verdict="failing", reason="passed in base; in head no record: op ERROR",
                        head_status="absent", head_op_status="ERROR")
    judged = judge_step([untimed], "speed", SLOWER, 0.025)
    assert judged.mark == SKIP and "op ERROR" in judged.reason
    missing = judge_step([], "speed", SLOWER, 0.025)
    assert missing.mark == SKIP and CASE in missing.reason
    # Skip wins over bad: a commit where a tracked row cannot be timed cannot be named.
    other = RowResult(case_id="x", verdict="regression", reason="", ratio=2.0, ci_low=1.9, ci_high=2.1)
    check = Check(True, "regression", (CASE, "x"), 2.0, "")
    assert judge_step([untimed, other], "speed", check, 0.025).mark == SKIP


def test_the_verdict_metric_marks_fail_and_crash_bad_and_import_errors_skipped() -> None:
    check = Check(True, "failing", (CASE,), None, "")
    fail = RowResult(CASE, "failing", "passed in base, fail in head", head_status="fail", head_op_status="FAIL")
    crash = RowResult(CASE, "failing", "no record: op CRASH", head_status="absent", head_op_status="CRASH")
    passes = RowResult(CASE, "unchanged", "", 1.0, 0.9, 1.1, head_status="pass", head_op_status="PASS")
    error = RowResult(CASE, "failing", "no record: op ERROR", head_status="absent", head_op_status="ERROR")
    assert [judge_step([r], "verdict", check, 0.05).mark for r in (fail, crash, passes, error)] == \
        [BAD, BAD, GOOD, SKIP]
    found = judge_check([fail, passes], "verdict")
    assert found.changed and found.tracked == (CASE,)
    assert not judge_check([passes], "verdict").changed


def test_the_verdict_metric_finds_the_commit_that_fixed_a_case() -> None:
    # Failing at the good end and passing at the bad end: the culprit is the commit that fixed it,
    # so a tested commit where the case passes behaves as the bad end does.
    fixed = RowResult(CASE, "not compared", "fail in base, pass in head", head_status="pass",
                      head_op_status="PASS", base_status="fail")
    other = RowResult("y", "unchanged", "", 1.0, 0.9, 1.1, head_status="pass", head_op_status="PASS",
                      base_status="pass")
    found = judge_check([fixed, other], "verdict")
    assert (found.changed, found.direction, found.tracked) == (True, "passing", (CASE,))
    still = RowResult(CASE, "not compared", "fail in base, fail in head", head_status="fail",
                      head_op_status="FAIL", base_status="fail")
    absent = RowResult(CASE, "not compared", "fail in base, absent in head", head_status="absent",
                       head_op_status="ERROR", base_status="fail")
    assert [judge_step([r], "verdict", found, 0.05).mark for r in (fixed, still, absent)] == [BAD, GOOD, SKIP]
    # A breakage at the bad end is what is tracked when a case also broke there.
    broke = RowResult("z", "failing", "passed in base, fail in head", head_status="fail", head_op_status="FAIL",
                      base_status="pass")
    both = judge_check([fixed, broke], "verdict")
    assert (both.direction, both.tracked) == ("failing", ("z",))
    # The base status survives the step cache's JSON.
    assert RowResult.from_json(fixed.to_json()) == fixed


def test_the_check_tracks_the_rows_that_moved_and_their_direction() -> None:
    rows = [RowResult("a", "regression", "", 1.10, 1.08, 1.12), RowResult("b", "unchanged", "", 1.0, 0.99, 1.01),
            RowResult("c", "regression", "", 1.20, 1.18, 1.22), RowResult("d", "improvement", "", 0.8, 0.79, 0.81)]
    found = judge_check(rows, "speed")
    assert (found.changed, found.direction, found.tracked) == (True, "regression", ("a", "c"))
    assert found.ratio == pytest.approx(math.sqrt(1.10 * 1.20))
    quiet = judge_check([rows[1], RowResult("e", "noisy", "", 1.03, 0.97, 1.09)], "speed")
    assert not quiet.changed and "1 noisy" in quiet.reason
    assert Check.from_json(found.to_json()) == found


# --- the driver over a simulated device ---------------------------------------------------------

def _bisect(sim: SimulatedRange, settings: Settings | None = None, **kwargs: Any) -> Any:
    return bisect(sim.commits, BAD_REF, sim, settings or Settings(), key={"k": 1}, **kwargs)


@pytest.mark.parametrize(("n", "culprit", "sigma"), [(40, 17, 0.002), (100, 0, 0.005), (64, 63, 0.01),
                                                     (9, 4, 0.02)])
def test_the_injected_slowdown_is_named_within_log2_n_plus_2_rounds(n: int, culprit: int, sigma: float) -> None:
    sim = SimulatedRange(commits_of(n), culprit, slowdown=0.05, run_sigma=sigma, seed=n + 1)
    result = _bisect(sim)
    assert result.check.changed and result.check.direction == "regression"
    assert result.outcome.culprit == sim.commits[culprit].sha
    assert result.rounds <= math.log2(n) + 2
    # Every run a side counted: the check and each step, both sides.
    assert result.runs == sum(2 * r for _, r in sim.runs_made)


def test_a_commit_that_cannot_run_is_skipped_and_the_range_left_is_reported() -> None:
    commits = commits_of(30)
    sim = SimulatedRange(commits, 12, run_sigma=0.003, broken={12}, seed=3)
    result = _bisect(sim)
    assert result.outcome.culprit is None
    assert commits[12].sha in result.outcome.skipped
    left = commits[result.outcome.first:result.outcome.last + 1]
    assert [c.sha for c in left] == [commits[12].sha, commits[13].sha]
    skipped = [s for s in result.steps if s["mark"] == SKIP]
    assert len(skipped) == 1 and "op ERROR" in skipped[0]["reason"]
    assert len(skipped[0]["tries"]) == 1  # a commit that cannot run is not run again


def test_a_broken_commit_away_from_the_culprit_costs_a_step_not_the_answer() -> None:
    commits = commits_of(31)
    sim = SimulatedRange(commits, 20, run_sigma=0.003, broken={15}, seed=4)
    result = _bisect(sim)
    assert result.outcome.culprit == commits[20].sha
    assert [s["sha"] for s in result.steps if s["mark"] == SKIP] == [commits[15].sha]


def test_a_noisy_commit_is_run_again_and_judged_on_twice_the_runs() -> None:
    commits = commits_of(31)
    # Commit 15 (the first probe) wanders 10x more than the others: 2 runs a side cannot place it.
    sim = SimulatedRange(commits, 22, run_sigma=0.002, noisy={15}, noisy_factor=10.0, seed=9)
    result = _bisect(sim, Settings(repeats=2, max_tries=4))
    first = next(s for s in result.steps if s["sha"] == commits[15].sha)
    pooled = [a["pooled_repeats"] for a in first["tries"]]
    assert len(pooled) > 1 and pooled == [2 * 2 ** i for i in range(len(pooled))]
    assert first["mark"] == GOOD
    assert NOISY in judge_step([RowResult.from_json(r) for r in first["tries"][0]["rows"]], "speed",
                               result.check, result.threshold).mark
    assert result.outcome.culprit == commits[22].sha


def test_a_commit_still_noisy_after_the_tries_allowed_is_skipped() -> None:
    commits = commits_of(31)
    sim = SimulatedRange(commits, 22, run_sigma=0.002, noisy={15}, noisy_factor=40.0, seed=7)
    result = _bisect(sim, Settings(repeats=2, max_tries=2))
    step = next(s for s in result.steps if s["sha"] == commits[15].sha)
    assert step["mark"] == SKIP and step["reason"].startswith("still noisy after 2 tries")
    assert result.outcome.culprit == commits[22].sha


def test_k_devices_test_k_commits_a_round_in_fewer_rounds() -> None:
    commits = commits_of(80)
    one = _bisect(SimulatedRange(commits, 53, run_sigma=0.003, seed=7))
    sim = SimulatedRange(commits, 53, run_sigma=0.003, seed=7)
    three = _bisect(sim, Settings(devices=("0", "1", "2")))
    assert one.outcome.culprit == three.outcome.culprit == commits[53].sha
    assert three.rounds < one.rounds
    tested = [s for s in three.steps if not s.get("check")]
    first_round = tested[:3]
    assert sorted(s["device"] for s in first_round) == ["0", "1", "2"]
    assert [commits.index(next(c for c in commits if c.sha == s["sha"])) for s in first_round] == [19, 39, 59]


def test_no_change_between_good_and_bad_ends_after_the_check() -> None:
    sim = SimulatedRange(commits_of(20), None, run_sigma=0.003, seed=8)
    result = _bisect(sim)
    assert not result.check.changed and result.outcome is None
    assert [s["mark"] for s in result.steps] == ["unchanged"]


def test_an_interrupted_bisection_resumes_from_its_state_without_testing_a_commit_again() -> None:
    commits = commits_of(64)
    saved: list[dict[str, Any]] = []

    def save_then_stop(state: dict[str, Any]) -> None:
        saved.append(state)
        if len(saved) == 3:  # the check and two rounds are done
            raise KeyboardInterrupt

    sim = SimulatedRange(commits, 41, run_sigma=0.003, seed=9)
    with pytest.raises(KeyboardInterrupt):
        _bisect(sim, save=save_then_stop)
    before = {i for i, _ in sim.runs_made}
    again = SimulatedRange(commits, 41, run_sigma=0.003, seed=10)
    result = _bisect(again, state=saved[-1])
    assert result.outcome.culprit == commits[41].sha
    assert not before & {i for i, _ in again.runs_made}  # nothing tested twice, not even the check
    assert result.rounds == len([s for s in result.steps if not s.get("check")])
    assert check_state(saved[-1], {"k": 1}) is None
    assert "other k" in (check_state(saved[-1], {"k": 2}) or "")
    assert check_state({**saved[-1], "format_version": 99}, {"k": 1}) is not None


def test_two_commits_that_slowed_two_cases_are_both_named_each_for_its_case() -> None:
    """A range where commit 5 slowed one case and commit 23 another: the first search names 5 for
    the case that changed there; the other case, still as at good at 5, is followed alone over the
    commits after 5 (those already tested judged from their rows) and 23 is named for it."""
    commits = commits_of(32)
    sim = SimulatedRange(commits, None, cases={"a[1]": 5, "b[2]": 23}, slowdown=0.08, run_sigma=0.003, seed=21)
    result = _bisect(sim)
    assert sorted(result.check.tracked) == ["a[1]", "b[2]"]
    assert [(a.cases, a.outcome.culprit) for a in result.answers] == [(("a[1]",), commits[5].sha),
                                                                       (("b[2]",), commits[23].sha)]
    assert result.outcome is not None and result.outcome.culprit == commits[5].sha  # the first answer's
    searches = [s.get("search", 1) for s in result.steps if not s.get("check")]
    assert searches == sorted(searches) and set(searches) == {1, 2}
    assert all(result.commits.index(next(c for c in commits if c.sha == s["sha"])) > 5
               for s in result.steps if s.get("search") == 2)
    # each try run once is counted once, however many searches judged it
    assert result.runs == sum(2 * r for _, r in sim.runs_made)


def test_cases_slowed_by_one_commit_get_one_answer() -> None:
    commits = commits_of(20)
    sim = SimulatedRange(commits, None, cases={"a[1]": 9, "b[2]": 9}, slowdown=0.08, run_sigma=0.003, seed=22)
    result = _bisect(sim)
    assert [(sorted(a.cases), a.outcome.culprit) for a in result.answers] == [(["a[1]", "b[2]"], commits[9].sha)]


def test_a_bisection_of_two_culprits_interrupted_anywhere_resumes_to_the_same_answers_and_runs() -> None:
    """Stopped after each state it saved (the check, every round, a culprit's settling, in either
    search) and resumed with the runs kept (the simulator stands in for the cache), the answers,
    the runs and the rounds are the uninterrupted bisection's."""
    commits = commits_of(53)
    cases = {"first[1]": 7, "second[2]": 38}  # the settling range of the test below

    def sim() -> SimulatedRange:
        return SimulatedRange(commits, None, cases=cases, run_sigma=0.01694, seed=1200173322)

    whole = _bisect(sim())
    expected = ([(a.cases, a.outcome.culprit) for a in whole.answers], whole.runs, whole.rounds)
    counting: list[int] = []
    _bisect(sim(), save=lambda _state: counting.append(1))
    saves = len(counting)
    assert saves > 5 and any(s.get("settles") for s in whole.steps)
    def stopper(saved: list[dict[str, Any]], stop_at: int) -> Callable[[dict[str, Any]], None]:
        def save_then_stop(state: dict[str, Any]) -> None:
            saved.append(state)
            if len(saved) == stop_at:
                raise KeyboardInterrupt

        return save_then_stop

    for stop_at in range(1, saves + 1):
        saved: list[dict[str, Any]] = []
        kept = sim()
        with pytest.raises(KeyboardInterrupt):
            _bisect(kept, save=stopper(saved, stop_at))
        again = _bisect(kept, state=saved[-1])
        assert ([(a.cases, a.outcome.culprit) for a in again.answers], again.runs, again.rounds) == expected, stop_at


def test_a_case_the_culprits_rows_cannot_tell_apart_is_settled_there_before_it_is_given_to_it() -> None:
    """Two runs a side at 1.7% wander: at commit 7 (the first culprit) the other case's rows are
    noisy. The culprit is tried again for that case alone, its runs pooled; it reads unchanged
    there, and the search after 7 names 38 for it (without the settling it stayed with 7)."""
    commits = commits_of(53)
    sim = SimulatedRange(commits, None, cases={"first[1]": 7, "second[2]": 38}, run_sigma=0.01694, seed=1200173322)
    result = _bisect(sim)
    assert [(a.cases, a.outcome.culprit) for a in result.answers] == [(("first[1]",), commits[7].sha),
                                                                       (("second[2]",), commits[38].sha)]
    (settled,) = [s for s in result.steps if s.get("settles")]
    assert settled["sha"] == commits[7].sha and settled["settles"] == ["second[2]"]
    assert len(settled["tries"]) > settled["continued"] >= 1  # tries added to the culprit's, pooled
    assert result.runs == sum(2 * r for _, r in sim.runs_made)


def test_a_culprit_that_no_case_reads_changed_at_once_settled_is_good_and_the_search_goes_on() -> None:
    """Commit 11 (it wanders 6x more) reads bad on its first try, for a case that changed at 19;
    settled on its pooled tries no case reads changed there: it is marked good, the search goes
    on, and each case gets its own commit (never a culprit that answers for no case)."""
    commits = commits_of(30)
    sim = SimulatedRange(commits, None, cases={"a[1]": 24, "b[2]": 10, "c[3]": 19}, run_sigma=0.008, noisy={11, 20, 25},
                         seed=650659135)
    result = _bisect(sim)
    assert [(a.cases, a.outcome.culprit) for a in result.answers] == [
        (("b[2]",), commits[10].sha), (("c[3]",), commits[19].sha), (("a[1]",), commits[24].sha)]
    flipped = [s for s in result.steps if s.get("settles") and s["sha"] == commits[11].sha]
    assert flipped and flipped[-1]["mark"] == GOOD
    assert all(a.cases for a in result.answers)
