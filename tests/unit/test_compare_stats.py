"""The statistics behind compare and gate, on synthetic samples with fixed seeds.

Rows are built once per module (``scope="module"`` fixtures): the bootstrap dominates the cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from scipy import stats as sps

from harness.compare.stats import (
    Criteria,
    RowStats,
    adjust_pvalues,
    bootstrap_ratio_ci,
    decide,
    holm,
    mann_whitney_p,
    observed_run_spread,
    pooled_spread,
    row_stats,
)

LN = math.log


def _runs(rng: np.random.Generator, level: float, noise: float, runs: int, n: int,
          run_sigma: float = 0.0) -> list[np.ndarray]:
    """``runs`` runs of ``n`` samples: each run's level wanders by ``run_sigma`` (log scale)."""
    return [level * math.exp(rng.normal(0.0, run_sigma)) * rng.lognormal(0.0, noise, n) for _ in range(runs)]


def _judge(rows: Sequence[RowStats], criteria: Criteria, torch: Sequence[float | None] | None = None) -> list[str]:
    adjusted = adjust_pvalues([r.p for r in rows], criteria.correction)
    torch = torch or [None] * len(rows)
    return [decide(r, p, criteria, t)[0] for r, p, t in zip(rows, adjusted, torch, strict=True)]


# -- the building blocks, from scipy --------------------------------------------------------------


def test_rank_test_is_scipys_two_sided_asymptotic_test_and_symmetric() -> None:
    rng = np.random.default_rng(7)
    x = np.round(rng.normal(size=40), 1)  # rounding makes ties
    y = np.round(rng.normal(0.3, size=55), 1)
    expected = sps.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue
    assert mann_whitney_p(x, y) == pytest.approx(expected)
    assert mann_whitney_p(x, y) == pytest.approx(mann_whitney_p(y, x))
    assert mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(0.0122, abs=1e-4)


def test_rank_test_of_identical_constant_samples_is_not_significant() -> None:
    assert mann_whitney_p([2.0] * 10, [2.0] * 10) == 1.0


def test_holm_and_benjamini_hochberg_adjust_like_their_definitions() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust_pvalues(p, "holm") == holm(p)
    assert adjust_pvalues(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust_pvalues(p, "none") == p
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # never above 1
    assert adjust_pvalues([], "bh") == []


def test_bootstrap_interval_holds_the_ratio_and_is_reproducible() -> None:
    rng = np.random.default_rng(1)
    base = rng.lognormal(0.0, 0.03, 300)
    head = rng.lognormal(LN(1.1), 0.03, 300)
    low, high = bootstrap_ratio_ci(base, head, seed=3)
    assert low < float(np.median(head) / np.median(base)) < high
    assert 1.07 < low and high < 1.13
    assert bootstrap_ratio_ci(base, head, seed=3) == (low, high)


def test_the_spread_of_repeats_is_pooled_over_the_sides_that_have_several() -> None:
    spread = observed_run_spread([1.0, math.exp(0.02)], [2.0], [3.0, 3.0 * math.exp(-0.02)])
    assert spread is not None
    sigma, dof = spread
    assert dof == 2
    assert sigma == pytest.approx(math.sqrt((2 * 0.01**2 + 2 * 0.01**2) / 2))
    assert observed_run_spread([1.0], [2.0]) is None


def test_one_pooled_estimator_gives_the_spread_of_groups_of_repeats_and_of_pairs() -> None:
    """Deviations about each group's mean, pooled on the summed degrees of freedom, with the
    chi-square upper bound; a pair's change d is the group (0, d): the RMS of d over sqrt(2)."""
    from scipy import stats

    from harness.compare.spread import pair_spread

    found = pooled_spread([[0.0, 0.02, 0.04], [1.0], [5.0, 5.03]])
    assert found is not None
    sigma, upper, dof = found
    assert dof == 3  # 2 + 0 + 1: a group of one adds nothing
    assert sigma == pytest.approx(math.sqrt((0.02**2 + 0 + 0.02**2 + 2 * 0.015**2) / 3))
    assert upper == pytest.approx(sigma * math.sqrt(3 / stats.chi2.ppf(0.05, 3))) and upper > sigma
    assert pooled_spread([[1.0], []]) is None
    changes = [0.01, -0.03, 0.02]
    as_pairs = pooled_spread([(0.0, d) for d in changes])
    assert as_pairs is not None and pair_spread(changes) == pytest.approx(as_pairs[:2])
    assert pair_spread(changes)[0] == pytest.approx(math.sqrt(sum(d * d for d in changes) / (2 * len(changes))))


# -- the unit of evidence is the run ------------------------------------------------------------


@pytest.fixture(scope="module")
def wandering_runs() -> list[RowStats]:
    """200 A/A rows, one run a side, where each run's level wanders 3% (log sd) around the truth:
    the samples of a run are correlated, as on a real machine."""
    rng = np.random.default_rng(8)
    rows = []
    for i in range(200):
        level = 10 ** rng.uniform(-2, 0)
        base = _runs(rng, level, 0.01, 1, 100, run_sigma=0.03)
        head = _runs(rng, level, 0.01, 1, 100, run_sigma=0.03)
        rows.append(row_stats(base, head, known_spread=0.03, seed=i, criteria=Criteria(resamples=200)))
    return rows


def test_correlated_samples_of_one_run_are_not_counted_as_independent_evidence(
    wandering_runs: list[RowStats],
) -> None:
    beyond = [r for r in wandering_runs if abs(LN(r.ratio)) > LN(1.05)]
    assert len(beyond) >= 10  # the runs really wander past the threshold...
    assert all(r.p_samples < 1e-6 for r in beyond)  # ...and the samples alone call it certain
    verdicts = _judge(wandering_runs, Criteria())
    assert verdicts.count("regression") == 0  # the run-level test does not
    assert verdicts.count("improvement") == 0
    assert all(v == "noisy" for r, v in zip(wandering_runs, verdicts, strict=True) if r in beyond)


def test_one_run_a_side_a_change_within_the_known_spread_is_noisy_with_the_reason() -> None:
    rng = np.random.default_rng(4)
    base, head = _runs(rng, 1.0, 0.005, 1, 200), _runs(rng, 1.07, 0.005, 1, 200)
    stats = row_stats(base, head, known_spread=0.03, spread_source="conservative default (not measured)")
    assert stats.p_samples < 1e-20 and stats.p_runs > 0.05
    verdict, reason = decide(stats, stats.p, Criteria())
    assert verdict == "noisy"
    assert "run-to-run spread" in reason and "3.0% per run" in reason and "conservative default" in reason


@pytest.fixture(scope="module")
def slowed_rows() -> dict[str, list[RowStats]]:
    """A 10% slowdown on 40 rows with 2% per-run wander, judged with one run a side (known
    spread 1%) and with three runs a side (known spread 2%)."""
    rng = np.random.default_rng(99)
    out: dict[str, list[RowStats]] = {"single": [], "repeats": []}
    for i in range(40):
        level = 10 ** rng.uniform(-2, 0)
        for key, runs, known, wander in (("single", 1, 0.01, 0.005), ("repeats", 3, 0.02, 0.02)):
            base = _runs(rng, level, 0.02, runs, 80, run_sigma=wander)
            head = _runs(rng, level * 1.10, 0.02, runs, 80, run_sigma=wander)
            out[key].append(row_stats(base, head, known_spread=known, seed=i, criteria=Criteria(resamples=200)))
    return out


@pytest.mark.parametrize("mode", ["single", "repeats"])
def test_a_ten_percent_slowdown_is_caught_on_every_row(slowed_rows: dict[str, list[RowStats]], mode: str) -> None:
    assert set(_judge(slowed_rows[mode], Criteria())) == {"regression"}


def test_the_spread_seen_among_repeats_is_used_when_larger_than_the_known_one() -> None:
    rng = np.random.default_rng(12)
    base = [rng.lognormal(LN(m), 0.005, 100) for m in (1.0, 1.12, 0.92)]
    head = [rng.lognormal(LN(m), 0.005, 100) for m in (1.15, 1.02, 1.25)]
    stats = row_stats(base, head, known_spread=0.01, spread_source="known")
    assert stats.runs_base == stats.runs_head == 3
    assert stats.run_spread > 0.05 and stats.spread_source.startswith("observed across repeats")
    assert decide(stats, stats.p, Criteria())[0] == "noisy"


def test_a_significant_change_below_the_threshold_is_unchanged() -> None:
    rng = np.random.default_rng(11)
    stats = row_stats([rng.lognormal(0, 0.005, 1000)], [rng.lognormal(LN(1.02), 0.005, 1000)], known_spread=0.002)
    assert stats.p < 1e-6
    verdict, reason = decide(stats, stats.p, Criteria())
    assert verdict == "unchanged"
    assert "+2.0%" in reason


def test_a_ten_percent_speedup_is_an_improvement() -> None:
    rng = np.random.default_rng(5)
    stats = row_stats([rng.lognormal(0, 0.01, 200)], [rng.lognormal(LN(0.9), 0.01, 200)], known_spread=0.01)
    assert decide(stats, stats.p, Criteria())[0] == "improvement"


# -- drift, unsettled samples, few samples ---------------------------------------------------------


@pytest.fixture(scope="module")
def twelve_percent() -> RowStats:
    rng = np.random.default_rng(21)
    return row_stats([rng.lognormal(0, 0.01, 200)], [rng.lognormal(LN(1.12), 0.01, 200)], known_spread=0.01)


def test_a_change_torch_made_too_is_drift_not_a_regression(twelve_percent: RowStats) -> None:
    verdict, reason = decide(twelve_percent, twelve_percent.p, Criteria(), torch_ratio=1.10)
    assert verdict == "drift"
    assert "torch's own time moved +10.0%" in reason and "suspect the machine" in reason


@pytest.mark.parametrize("torch_ratio", [None, 1.0, 1.02, 0.95])
def test_a_change_torch_did_not_make_stays_a_regression(twelve_percent: RowStats, torch_ratio: float | None) -> None:
    assert decide(twelve_percent, twelve_percent.p, Criteria(), torch_ratio=torch_ratio)[0] == "regression"


def test_unsettled_samples_alone_cannot_make_a_regression(twelve_percent: RowStats) -> None:
    verdict, reason = decide(twelve_percent, twelve_percent.p, Criteria(), unsettled=["head"])
    assert verdict == "noisy"
    assert "did not settle in head" in reason


def test_unsettled_samples_count_when_every_repeat_agrees() -> None:
    rng = np.random.default_rng(30)
    base = [rng.lognormal(LN(m), 0.02, 60) for m in (1.0, 1.01)]
    head = [rng.lognormal(LN(m), 0.02, 60) for m in (1.13, 1.14)]
    stats = row_stats(base, head, known_spread=0.01)
    assert decide(stats, stats.p, Criteria(), unsettled=["base"])[0] == "regression"


def test_the_mm_case_a_drifting_noisy_run_is_not_a_regression() -> None:
    """Issue 14's H200 case: mm bf16 4096^3, one run a side, head's samples drifting upward within
    its run (clocks under tensor-core load), 16% change, torch +5.6%, noisy note in head."""
    rng = np.random.default_rng(3)
    base = [0.1866 * rng.lognormal(0, 0.004, 50)]
    head = [0.1866 * np.linspace(1.05, 1.28, 50) * rng.lognormal(0, 0.004, 50)]
    stats = row_stats(base, head, known_spread=0.02)
    assert stats.p_samples < 1e-10
    verdict, _ = decide(stats, stats.p, Criteria(), torch_ratio=1.056, unsettled=["head"])
    assert verdict == "noisy"


def test_too_few_samples_cannot_be_judged() -> None:
    stats = row_stats([[1.0, 1.0]], [[2.0, 2.0]])
    assert decide(stats, 0.0, Criteria())[0] == "noisy"


def test_statistics_are_reproducible() -> None:
    rng = np.random.default_rng(2)
    base, head = _runs(rng, 1.0, 0.03, 2, 100, 0.01), _runs(rng, 1.05, 0.03, 2, 100, 0.01)
    assert row_stats(base, head, 0.01, seed=5) == row_stats(base, head, 0.01, seed=5)
