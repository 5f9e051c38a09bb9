"""Statistics of one row across two sides: pure functions over raw samples grouped by run.

The unit of evidence is the run. Each side of a row is one or more runs (a run's samples are
correlated: they share the run's clocks, memory placement and autotune choice), so:

- a side's level is the geometric mean of its runs' medians (the median, for one run); the
  change is head level / base level;
- the change is tested twice, and must pass both (an intersection-union test, whose p-value is
  the larger of the two): against the noise of the samples (Mann-Whitney U over the samples,
  scipy) and against the wander of the runs (a normal test of the log change against the
  run-to-run spread: the spread observed among a side's repeats, never less than the spread
  known for the device and kernel size, harness/compare/spread.py);
- the interval of the change is a percentile bootstrap over the samples (scipy), widened by the
  run-to-run spread (independent errors add in log-variance).

The p-values of all rows compared at once are adjusted together: Holm (default) or
Benjamini-Hochberg (scipy.stats.false_discovery_control). Every random draw is seeded, so a
report is reproduced exactly.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
from scipy import stats as sps

# The one measure of a history's spread, which the history site uses too.
from harness.results.trend import history_spread

__all__ = [
    "CORRECTIONS",
    "VERDICTS",
    "Criteria",
    "RowStats",
    "adjust_pvalues",
    "bootstrap_ratio_ci",
    "bootstrap_rng",
    "decide",
    "history_spread",
    "holm",
    "mann_whitney_p",
    "observed_run_spread",
    "pooled_spread",
    "resolvable_change",
    "row_stats",
]

CORRECTIONS = ("holm", "bh", "none")
VERDICTS = ("regression", "improvement", "drift", "unchanged", "noisy")
Samples: TypeAlias = "Sequence[float] | np.ndarray"
# Below this many samples a side, the rank test rarely survives a correction over many rows.
_FEW_SAMPLES = 20


@dataclass(frozen=True)
class Criteria:
    """What counts as a change.

    ``threshold`` is a fraction (0.05 = 5%): a regression is head/base above
    1 + threshold, an improvement below 1 / (1 + threshold), so the band is
    symmetric in log-time. ``alpha`` applies to the adjusted p-values.
    """

    threshold: float = 0.05
    alpha: float = 0.05
    correction: str = "holm"
    confidence: float = 0.95
    resamples: int = 1000
    min_samples: int = 3

    def __post_init__(self) -> None:
        if not (0 < self.threshold < 10):
            raise ValueError(f"threshold must be a positive fraction, got {self.threshold!r}")
        if not (0 < self.alpha < 1):
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {CORRECTIONS}, got {self.correction!r}")
        if not (0 < self.confidence < 1):
            raise ValueError(f"confidence must lie in (0, 1), got {self.confidence!r}")
        if self.resamples < 100:
            raise ValueError(f"resamples must be at least 100, got {self.resamples!r}")

    @property
    def upper(self) -> float:
        return 1.0 + self.threshold

    @property
    def lower(self) -> float:
        return 1.0 / (1.0 + self.threshold)


@dataclass(frozen=True)
class RowStats:
    """Everything measured about one row before the multiple-comparison adjustment.

    ``base_median``/``head_median`` are the sides' levels (the geometric mean of their runs'
    medians); ``p`` is the row's p-value, the larger of ``p_samples`` and ``p_runs``."""

    base_median: float
    head_median: float
    ratio: float
    ci_low: float
    ci_high: float
    p: float
    n_base: int
    n_head: int
    p_samples: float = 1.0
    p_runs: float = 1.0
    runs_base: int = 1
    runs_head: int = 1
    run_spread: float = 0.0  # sigma of one run's log median, as used
    spread_source: str = ""
    # Each side's run medians: with two or more runs a side, whether every run of head lies
    # beyond every run of base (a shift no single run's wander explains).
    base_run_medians: tuple[float, ...] = ()
    head_run_medians: tuple[float, ...] = ()


def _array(samples: Samples, name: str) -> np.ndarray:
    a = np.asarray(samples, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of numbers")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds a NaN or infinite sample")
    return a


def _runs(runs: Sequence[Samples], name: str) -> list[np.ndarray]:
    if not runs:
        raise ValueError(f"{name} has no runs")
    return [_array(r, f"{name} run {i + 1}") for i, r in enumerate(runs)]


def _level(medians: Sequence[float]) -> float:
    """Geometric mean of run medians: each run weighs the same however many samples it took."""
    m = np.asarray(medians, dtype=np.float64)
    if np.any(m <= 0):
        return float(np.mean(m))
    return float(np.exp(np.mean(np.log(m))))


def mann_whitney_p(x: Samples, y: Samples) -> float:
    """Two-sided Mann-Whitney U p-value (scipy: normal approximation with tie and continuity
    corrections, the method that scales to thousands of samples). Identical constant samples
    give 1."""
    a, b = _array(x, "x"), _array(y, "y")
    p = float(sps.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue)
    return p if math.isfinite(p) else 1.0


def bootstrap_rng(seed: int) -> dict[str, Any]:
    # scipy 1.15 renamed random_state to rng; both are accepted where this runs (scipy >= 1.11).
    params = inspect.signature(sps.bootstrap).parameters
    generator = np.random.default_rng(seed)
    return {"rng": generator} if "rng" in params else {"random_state": generator}


def _median_ratio(b: np.ndarray, h: np.ndarray, axis: int = -1) -> np.ndarray:
    mb = np.median(b, axis=axis)
    mh = np.median(h, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mb > 0, mh / np.where(mb > 0, mb, 1.0), np.inf)


def bootstrap_ratio_ci(
    base: Samples,
    head: Samples,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of head median / base median over the samples
    (scipy.stats.bootstrap, each side resampled on its own). The same ``seed`` gives the same
    interval."""
    b, h = _array(base, "base"), _array(head, "head")
    if b.size < 2 or h.size < 2 or (np.ptp(b) == 0 and np.ptp(h) == 0):
        r = float(_median_ratio(b, h))
        return r, r
    result = sps.bootstrap(
        (b, h), _median_ratio, n_resamples=resamples, confidence_level=confidence, method="percentile",
        vectorized=True, paired=False, batch=200, **bootstrap_rng(seed),
    )
    low, high = result.confidence_interval
    return float(low), float(high)


def pooled_spread(groups: Iterable[Sequence[float]], confidence: float = 0.95) -> tuple[float, float, int] | None:
    """(sigma, its upper ``confidence`` bound, degrees of freedom) of values that should be equal
    within each group (a case's log medians over independent runs of the same code): the pooled
    standard deviation about each group's mean, and the chi-square bound on its degrees of
    freedom (one fewer than each group's size, summed); groups of fewer than two values add
    nothing; None when no group has two. The one estimator of a run-to-run spread from repeated
    runs: across repeats (:func:`observed_run_spread`), from pairs of runs
    (harness.compare.spread.pair_spread) and per size class (benchmarks/gate_calibration.py)."""
    squares, dof = 0.0, 0
    for group in groups:
        values = np.asarray(group, dtype=np.float64)
        if values.size < 2:
            continue
        squares += float(np.sum((values - values.mean()) ** 2))
        dof += values.size - 1
    if dof == 0:
        return None
    sigma = math.sqrt(squares / dof)
    return sigma, sigma * math.sqrt(dof / float(sps.chi2.ppf(1 - confidence, dof))), dof


def observed_run_spread(*sides: Sequence[float]) -> tuple[float, int] | None:
    """(sigma, degrees of freedom) of the log run medians, pooled over the sides that have two
    runs or more (:func:`pooled_spread`); None when no side has."""
    found = pooled_spread([math.log(x) for x in m] for m in sides if len(m) >= 2 and min(m) > 0)
    return None if found is None else (found[0], found[2])


def resolvable_change(sigma: float, criteria: Criteria, rows: int = 1, runs_base: int = 1,
                      runs_head: int = 1) -> float:
    """The smallest change (a fraction) that the run-to-run test can flag with this spread:
    beyond the threshold, and beyond the two-sided critical value of ``alpha`` spread over
    ``rows`` (the Bonferroni bound of Holm's first step) times the spread of the log change."""
    scale = sigma * math.sqrt(1.0 / runs_base + 1.0 / runs_head)
    z = float(sps.norm.isf(criteria.alpha / (2.0 * max(rows, 1))))
    return max(criteria.threshold, math.expm1(z * scale))


def row_stats(
    base_runs: Sequence[Samples],
    head_runs: Sequence[Samples],
    known_spread: float = 0.0,
    criteria: Criteria | None = None,
    seed: int = 0,
    spread_source: str = "",
) -> RowStats:
    """The numbers of one row. ``base_runs``/``head_runs``: each side's samples, one sequence per
    run. ``known_spread``: sigma of one run's log median known for this device and kernel size."""
    criteria = criteria or Criteria()
    b_runs, h_runs = _runs(base_runs, "base"), _runs(head_runs, "head")
    b_all, h_all = np.concatenate(b_runs), np.concatenate(h_runs)
    b_med = tuple(float(np.median(r)) for r in b_runs)
    h_med = tuple(float(np.median(r)) for r in h_runs)
    base_level, head_level = _level(b_med), _level(h_med)
    if base_level <= 0:
        ratio = math.inf if head_level > 0 else 1.0
    else:
        ratio = head_level / base_level

    observed = observed_run_spread(b_med, h_med)
    sigma, source = known_spread, spread_source
    if observed is not None and observed[0] > sigma:
        sigma, source = observed[0], f"observed across repeats ({observed[1]} degree(s) of freedom)"
    scale = sigma * math.sqrt(1.0 / len(b_runs) + 1.0 / len(h_runs))
    log_change = math.log(ratio) if 0 < ratio < math.inf else math.inf
    if scale > 0:
        p_runs = float(2.0 * sps.norm.sf(abs(log_change) / scale))
    else:
        p_runs = 0.0 if log_change != 0 else 1.0
    p_samples = mann_whitney_p(b_all, h_all)

    low_w, high_w = bootstrap_ratio_ci(b_all, h_all, criteria.confidence, criteria.resamples, seed)
    pooled = float(_median_ratio(b_all, h_all))
    if 0 < ratio < math.inf and pooled > 0 and low_w > 0 and math.isfinite(high_w):
        z = float(sps.norm.ppf(0.5 + criteria.confidence / 2.0))
        below, above = math.log(pooled / low_w), math.log(high_w / pooled)
        ci_low = ratio * math.exp(-math.hypot(below, z * scale))
        ci_high = ratio * math.exp(math.hypot(above, z * scale))
    else:
        ci_low, ci_high = low_w, high_w
    return RowStats(
        base_median=base_level, head_median=head_level, ratio=ratio, ci_low=ci_low, ci_high=ci_high,
        p=max(p_samples, p_runs), n_base=int(b_all.size), n_head=int(h_all.size),
        p_samples=p_samples, p_runs=p_runs, runs_base=len(b_runs), runs_head=len(h_runs),
        run_spread=sigma, spread_source=source, base_run_medians=b_med, head_run_medians=h_med,
    )


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (controls the family-wise error rate).

    Written here because scipy has no Holm (scipy.stats.false_discovery_control offers only
    Benjamini-Hochberg and Benjamini-Yekutieli) and statsmodels, which has it, is a heavy
    dependency the device machines lack; the test suite checks it against the definition."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def adjust_pvalues(pvalues: Sequence[float], correction: str) -> list[float]:
    if correction == "holm":
        return holm(pvalues)
    if correction == "bh":
        if not pvalues:
            return []
        return [float(p) for p in sps.false_discovery_control(np.asarray(pvalues, dtype=np.float64), method="bh")]
    if correction == "none":
        return [float(p) for p in pvalues]
    raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")


def _consistent_shift(stats: RowStats, criteria: Criteria, up: bool) -> bool:
    """Two or more runs a side, and every head run beyond every base run by the threshold."""
    b, h = stats.base_run_medians, stats.head_run_medians
    if len(b) < 2 or len(h) < 2 or min(b) <= 0:
        return False
    if up:
        return min(h) / max(b) > criteria.upper
    return max(h) / min(b) < criteria.lower


def _drift(stats: RowStats, torch_ratio: float | None, criteria: Criteria) -> str | None:
    """Why the change is the machine's rather than the code's: the torch baseline, timed in the
    same runs, moved the same way by about as much (the ratio of ratios is inside the threshold)."""
    if torch_ratio is None or torch_ratio <= 0 or not (0 < stats.ratio < math.inf):
        return None
    cand, torch = math.log(stats.ratio), math.log(torch_ratio)
    if cand * torch <= 0 or abs(torch) < 0.5 * abs(cand):
        return None
    relative = stats.ratio / torch_ratio
    if not criteria.lower <= relative <= criteria.upper:
        return None
    return (f"{(stats.ratio - 1) * 100:+.1f}%, but torch's own time moved {(torch_ratio - 1) * 100:+.1f}% "
            f"in the same runs (relative to torch {(relative - 1) * 100:+.1f}%, inside the "
            f"{criteria.threshold:.0%} threshold): suspect the machine, not the code")


def decide(stats: RowStats, p_adjusted: float, criteria: Criteria, torch_ratio: float | None = None,
           unsettled: Sequence[str] = ()) -> tuple[str, str]:
    """The verdict of one row and a short reason a reader can act on.

    ``torch_ratio``: the torch baseline's own change in the same runs (None when not timed).
    ``unsettled``: the sides ("base", "head") whose candidate samples did not settle."""
    change = f"{(stats.ratio - 1) * 100:+.1f}%"
    if min(stats.n_base, stats.n_head) < criteria.min_samples:
        return "noisy", (
            f"{change}, too few samples ({stats.n_base} vs {stats.n_head}) to test; "
            "raise --rep-ms for this op"
        )
    up, down = stats.ratio > criteria.upper, stats.ratio < criteria.lower
    if not (up or down):
        if stats.ci_low < criteria.lower or stats.ci_high > criteria.upper:
            return "noisy", (
                f"{change}, but the {criteria.confidence:.0%} interval "
                f"[{stats.ci_low:.3f}, {stats.ci_high:.3f}] reaches past the threshold"
                + (f" (one run a side: the run-to-run spread, {stats.run_spread:.1%} per run"
                   + (f", {stats.spread_source}" if stats.spread_source else "") + ", widens it)"
                   if stats.runs_base == stats.runs_head == 1 and stats.run_spread > 0 else "")
            )
        return "unchanged", f"{change}, within the {criteria.threshold:.0%} threshold"
    drift = _drift(stats, torch_ratio, criteria)
    if drift:
        return "drift", drift
    if unsettled and not _consistent_shift(stats, criteria, up):
        return "noisy", (
            f"{change}, but the candidate's samples did not settle in {' and '.join(unsettled)} "
            "(noisy): not evidence of a change on its own. Re-run, or compare several runs a side "
            "(gate-run --repeats)"
        )
    size = f"{abs(stats.ratio - 1) * 100:.1f}%"
    if p_adjusted < criteria.alpha:
        word, verdict = ("slower", "regression") if up else ("faster", "improvement")
        return verdict, (f"{size} {word}: beyond the {criteria.threshold:.0%} threshold, the samples' "
                         f"noise and the run-to-run spread (adjusted p={p_adjusted:.2g})")
    if stats.p_samples >= criteria.alpha:
        why = f"the samples do not show it (Mann-Whitney p={stats.p_samples:.2g})"
        if min(stats.n_base, stats.n_head) < _FEW_SAMPLES:
            why += f"; only {stats.n_base} vs {stats.n_head} samples: raise --rep-ms for this op"
    elif stats.p_runs >= criteria.alpha:
        runs = f"{stats.runs_base} vs {stats.runs_head} run(s)"
        why = (f"within the run-to-run spread ({stats.run_spread:.1%} per run, {stats.spread_source}; "
               f"{runs}, p={stats.p_runs:.2g}): compare more runs a side (gate-run --repeats)")
    else:
        why = (f"significant alone (p={stats.p:.2g}) but not once corrected for every row "
               f"compared (adjusted p={p_adjusted:.2g})")
    return "noisy", f"{change} beyond the threshold, but {why}"
