"""The statistics behind compare and gate, on synthetic samples with a fixed seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.compare.stats import (
    Criteria,
    RowStats,
    adjust_pvalues,
    benjamini_hochberg,
    bootstrap_ratio_ci,
    decide,
    holm,
    mann_whitney_u,
    ratio_of_medians,
    row_stats,
)


def _brute_force_u(x: list[float], y: list[float]) -> float:
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def test_rank_test_of_fully_separated_samples_matches_the_normal_approximation() -> None:
    # U = 0, mean 12.5, sd sqrt(25 * 11 / 12); continuity moves |U - mean| to 12.
    result = mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert result.u == 0
    z = 12.0 / math.sqrt(25 * 11 / 12)
    assert result.p == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-12)
    assert result.p == pytest.approx(0.0122, abs=1e-4)


def test_rank_test_averages_ties_and_corrects_the_variance() -> None:
    x, y = [1.0, 1.0, 2.0], [1.0, 2.0, 2.0]
    result = mann_whitney_u(x, y)
    assert result.u == _brute_force_u(x, y) == 3.0
    variance = 9 / 12 * (7 - 48 / 30)  # two tie groups of three
    assert result.p == pytest.approx(math.erfc((1.0 / math.sqrt(variance)) / math.sqrt(2)))


def test_rank_test_counts_pairs_like_the_definition_on_random_data() -> None:
    rng = np.random.default_rng(7)
    x = list(np.round(rng.normal(size=40), 1))  # rounding makes ties
    y = list(np.round(rng.normal(0.3, size=55), 1))
    assert mann_whitney_u(x, y).u == pytest.approx(_brute_force_u(x, y))
    assert mann_whitney_u(x, y).p == pytest.approx(mann_whitney_u(y, x).p)


def test_rank_test_of_identical_constant_samples_is_not_significant() -> None:
    assert mann_whitney_u([2.0] * 10, [2.0] * 10).p == 1.0


def test_holm_and_benjamini_hochberg_adjust_like_their_definitions() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust_pvalues(p, "none") == p
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # never above 1


def test_bootstrap_interval_holds_the_ratio_and_is_reproducible() -> None:
    rng = np.random.default_rng(1)
    base = list(rng.lognormal(0.0, 0.03, 300))
    head = list(rng.lognormal(math.log(1.1), 0.03, 300))
    low, high = bootstrap_ratio_ci(base, head, seed=3)
    assert low < ratio_of_medians(base, head) < high
    assert 1.07 < low and high < 1.13
    assert bootstrap_ratio_ci(base, head, seed=3) == (low, high)


def _rows(
    rng: np.random.Generator, n_rows: int, shift: float, drift: float = 0.0, n: int = 200
) -> list[RowStats]:
    """Rows of samples with 2-5% spread; head is shifted by ``shift`` plus a per-row
    offset up to +-``drift`` (the run-to-run wander of a real machine)."""
    rows = []
    for i in range(n_rows):
        noise = 0.02 + 0.03 * (i % 4) / 3
        level = 10 ** rng.uniform(-2, 1)  # 10 us to 10 ms
        wander = rng.uniform(-drift, drift)
        base = level * rng.lognormal(0.0, noise, n)
        head = level * (1 + shift + wander) * rng.lognormal(0.0, noise, n)
        rows.append(row_stats(list(base), list(head), seed=i))
    return rows


def _verdicts(rows: list[RowStats], criteria: Criteria) -> list[str]:
    adjusted = adjust_pvalues([r.p for r in rows], criteria.correction)
    return [decide(r, p, criteria)[0] for r, p in zip(rows, adjusted, strict=True)]


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_same_distribution_on_both_sides_flags_nothing(correction: str) -> None:
    criteria = Criteria(correction=correction)
    verdicts = _verdicts(_rows(np.random.default_rng(2024), 300, shift=0.0), criteria)
    assert "regression" not in verdicts
    assert verdicts.count("improvement") == 0


def test_run_to_run_wander_below_the_threshold_is_significant_but_not_flagged() -> None:
    rows = _rows(np.random.default_rng(8), 200, shift=0.0, drift=0.03)
    verdicts = _verdicts(rows, Criteria())
    assert sum(r.p < 1e-6 for r in rows) > 50  # the wander is real and detectable...
    assert "regression" not in verdicts  # ...but smaller than the threshold
    assert "improvement" not in verdicts


def test_a_ten_percent_slowdown_is_caught_on_every_row() -> None:
    verdicts = _verdicts(_rows(np.random.default_rng(99), 100, shift=0.10, drift=0.02), Criteria())
    assert verdicts.count("regression") == len(verdicts)


def test_a_ten_percent_speedup_is_an_improvement() -> None:
    verdicts = _verdicts(_rows(np.random.default_rng(5), 20, shift=-0.10), Criteria())
    assert set(verdicts) == {"improvement"}


def test_a_significant_change_below_the_threshold_is_unchanged() -> None:
    rng = np.random.default_rng(11)
    stats = row_stats(list(rng.lognormal(0, 0.005, 1000)), list(rng.lognormal(math.log(1.02), 0.005, 1000)))
    assert stats.p < 1e-10
    verdict, reason = decide(stats, stats.p, Criteria())
    assert verdict == "unchanged"
    assert "+2.0%" in reason


def test_a_large_change_with_few_samples_is_noisy_not_a_regression() -> None:
    stats = row_stats([1.0, 1.3, 0.9, 1.1], [1.2, 1.0, 1.5, 1.4])
    verdict, reason = decide(stats, stats.p, Criteria())
    assert verdict == "noisy"
    assert "not significant" in reason and "--rep-ms" in reason


def test_a_change_that_survives_alone_but_not_the_correction_is_noisy() -> None:
    rng = np.random.default_rng(3)
    stats = row_stats(list(rng.lognormal(0, 0.02, 8)), list(rng.lognormal(math.log(1.2), 0.02, 8)))
    assert stats.p < 0.05
    verdict, reason = decide(stats, 0.5, Criteria())
    assert verdict == "noisy"
    assert "corrected" in reason


def test_too_few_samples_cannot_be_judged() -> None:
    stats = row_stats([1.0, 1.0], [2.0, 2.0])
    assert decide(stats, 0.0, Criteria())[0] == "noisy"


def test_criteria_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        Criteria(threshold=0)
    with pytest.raises(ValueError):
        Criteria(correction="bonferroni")
    with pytest.raises(ValueError, match="NaN"):
        mann_whitney_u([1.0, float("nan")], [1.0])
