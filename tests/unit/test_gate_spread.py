"""`harness gate A B` on two independent runs, with each case's run-to-run spread measured from a
history: synthetic runs whose spread is known (0.2% per run, as the H200 history of the corpus
cases shows). A/A pairs read unchanged, not noisy; a +10% slowdown is flagged. Without a
history the report says in one line what one run a side can resolve."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from harness.compare.compare import compare_records, resolution_line
from harness.compare.spread import (
    MIN_MEASURED_SIGMA,
    KnownSpread,
    history_series,
    load_spread,
    measured_spread,
    parse_spread,
)
from harness.compare.stats import Criteria, history_spread, resolvable_change
from harness.errors import UsageError
from harness.results.schema import Measurement, Timing

SIGMA = 0.002  # run-to-run spread of one run's median
CASES = 60
TRUE_MS = np.geomspace(0.02, 2.0, CASES)  # 20 us to 2 ms: the rows of 10 us or more


def _case(i: int) -> str:
    return f"op{i}[flaggems-suite-bfloat16-{i + 1}]"


def _run(rng: np.random.Generator, run_id: str, slower: float = 1.0) -> list[Measurement]:
    """One run: every case's median wanders by SIGMA; its 60 samples scatter 1% around it."""
    out = []
    for i, true in enumerate(TRUE_MS):
        level = true * slower * math.exp(rng.normal(0.0, SIGMA))
        samples = level * np.exp(rng.normal(0.0, 0.01, 60))
        base = true * math.exp(rng.normal(0.0, SIGMA)) * np.exp(rng.normal(0.0, 0.01, 60))
        cand, torch = Timing.of(samples.tolist()), Timing.of(base.tolist())
        out.append(Measurement(run_id=run_id, op=f"op{i}", provider="flaggems-suite", dtype="bfloat16",
                               shape=(i + 1,), backend="cuda", device="0", device_name="NVIDIA H200",
                               timer="graph", status="pass", baseline=torch, candidate=cand,
                               speedup=torch.summary.median / cand.summary.median))
    return out


def _history(rng: np.random.Generator, nights: int = 8) -> dict[str, KnownSpread]:
    """Each case's spread as measured from ``nights`` runs of the same code."""
    runs = [_run(rng, f"night{k}") for k in range(nights)]
    rows = [{"case_id": r.case_id, "median_ms": r.candidate.summary.median}
            for k in range(nights) for r in runs[k] if r.candidate is not None]
    rows.sort(key=lambda row: str(row["case_id"]))  # as the history's export orders them: by case, then time
    return measured_spread(history_series(rows), "measured in history.sqlite")


def _verdicts(base: list[Measurement], head: list[Measurement], cases: dict[str, KnownSpread] | None) -> list[str]:
    table = load_spread()
    if cases is not None:
        table = table.with_cases(cases, "synthetic history")
    return [r.verdict for r in compare_records(base, head, Criteria(), spread=table)]


def test_the_spread_measured_from_a_history_is_the_runs_own() -> None:
    cases = _history(np.random.default_rng(7))
    assert len(cases) == CASES
    sigmas = np.array([c.sigma for c in cases.values()])
    assert 0.5 * SIGMA < float(np.median(sigmas)) < 2.0 * SIGMA
    assert all("8 runs" in c.source for c in cases.values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_over_a_with_history_reads_unchanged_and_flags_almost_nothing(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cases = _history(rng)
    verdicts = _verdicts(_run(rng, "a"), _run(rng, "b"), cases)
    assert verdicts.count("regression") + verdicts.count("improvement") <= max(1, CASES // 100)
    assert verdicts.count("unchanged") >= 0.9 * CASES


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_ten_percent_slowdown_with_history_is_flagged(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cases = _history(rng)
    verdicts = _verdicts(_run(rng, "a"), _run(rng, "b", slower=1.10), cases)
    assert verdicts.count("regression") >= 0.9 * CASES


def test_without_history_a_over_a_reads_noisy_and_the_report_says_what_one_run_resolves() -> None:
    rng = np.random.default_rng(4)
    base, head = _run(rng, "a"), _run(rng, "b")
    table = load_spread()
    rows = compare_records(base, head, Criteria(), spread=table)
    assert [r.verdict for r in rows].count("noisy") > CASES // 2  # the 2% default cannot call them unchanged
    line = resolution_line(rows, table, Criteria())
    assert line.startswith("One run a side resolves a change of about ") and "\n" not in line
    assert "gate-run" in line and "history check" in line and "--history" in line
    assert "an unchanged row may read noisy" in line
    # With each case's measured spread, nothing is assumed: no line.
    measured = table.with_cases(_history(rng), "synthetic history")
    assert resolution_line(compare_records(base, head, Criteria(), spread=measured), measured, Criteria()) == ""


def test_the_size_one_run_resolves_follows_the_spread_and_the_row_count() -> None:
    crit = Criteria()
    assert resolvable_change(0.002, crit, rows=60) == crit.threshold  # small spread: the threshold decides
    two = resolvable_change(0.02, crit, rows=20)
    assert 0.08 < two < 0.10  # the shipped default's "about 9%" for ~20 rows
    assert resolvable_change(0.02, crit, rows=200) > two
    assert resolvable_change(0.02, crit, rows=20, runs_base=4, runs_head=4) < two


def test_history_spread_is_robust_to_a_step_and_needs_enough_runs() -> None:
    rng = np.random.default_rng(5)
    quiet = (1.0 * np.exp(rng.normal(0, SIGMA, 12))).tolist()
    stepped = quiet[:6] + [m * 1.3 for m in quiet[6:]]  # an upgrade night: one step of 30%
    plain_std = float(np.std(np.diff(np.log(stepped)))) / math.sqrt(2)
    robust = history_spread(stepped)
    assert robust is not None and robust < 3 * SIGMA < plain_std
    assert history_spread(quiet[:3]) is None
    exact = measured_spread({"c": [1.0] * 6}, "h")["c"]
    assert exact.sigma == MIN_MEASURED_SIGMA  # identical medians never claim a zero spread


def test_a_table_of_measured_cases_parses_and_bad_ones_are_refused(tmp_path: Path) -> None:
    good = {"format_version": 1, "default": {"source": "d", "classes": [{"sigma_pct": 2.0}]},
            "cases": {"source": "history of 8 nights", "sigma_pct": {"add[x]": 0.2}}}
    table = parse_spread(good, "t.yaml")
    found = table.lookup("cuda", "NVIDIA H200", "graph", "add", 0.05, case_id="add[x]")
    assert found == KnownSpread(0.002, "history of 8 nights")
    assert table.lookup("cuda", "NVIDIA H200", "graph", "add", 0.05, case_id="other[x]").sigma == 0.02
    for bad in ({"source": "h", "sigma_pct": {"a": 0}}, {"sigma_pct": {"a": 1}}, {"source": "h", "sigma_pct": [1]}):
        with pytest.raises(ValueError):
            parse_spread({**good, "cases": bad}, "t.yaml")
    path = tmp_path / "spread.yaml"
    path.write_text("format_version: 1\ndefault: {source: d, classes: [{sigma_pct: 2}]}\ncases: {sigma_pct: {a: 1}}\n")
    with pytest.raises(UsageError) as err:
        load_spread(path)
    assert "source" in err.value.message and "\n" not in err.value.message


def test_gate_refuses_a_history_that_is_not_there_in_one_line(tmp_path: Path) -> None:
    from tests.harness_cli import run_harness

    done = run_harness("gate", str(tmp_path / "a"), str(tmp_path / "b"), "--history", str(tmp_path / "none.sqlite"),
                       cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--history" in done.stderr and "no such history" in done.stderr
