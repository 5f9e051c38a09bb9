"""Statistics over raw timing samples: pure functions, no I/O.

A row's change is the ratio of medians (head / base), with a percentile
bootstrap confidence interval and a two-sided Mann-Whitney U test. The
p-values of all rows compared at once are adjusted together (Holm by default,
Benjamini-Hochberg on request). A row is a regression only when its ratio
exceeds the threshold *and* its adjusted p-value is below alpha: a large
change that is not significant is ``noisy``, a significant change smaller
than the threshold is ``unchanged``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CORRECTIONS",
    "VERDICTS",
    "Criteria",
    "RankTest",
    "RowStats",
    "adjust_pvalues",
    "benjamini_hochberg",
    "bootstrap_ratio_ci",
    "decide",
    "holm",
    "mann_whitney_u",
    "ratio_of_medians",
    "row_stats",
]

CORRECTIONS = ("holm", "bh", "none")
VERDICTS = ("regression", "improvement", "unchanged", "noisy")
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
class RankTest:
    """Two-sided Mann-Whitney U test, normal approximation with tie and continuity corrections.

    ``u`` is the statistic of the first sample: the number of (x, y) pairs with
    x > y, ties counting one half.
    """

    u: float
    z: float
    p: float


@dataclass(frozen=True)
class RowStats:
    """Everything measured about one row before the multiple-comparison adjustment."""

    base_median: float
    head_median: float
    ratio: float
    ci_low: float
    ci_high: float
    p: float
    n_base: int
    n_head: int


def _array(samples: Sequence[float], name: str) -> np.ndarray:
    a = np.asarray(samples, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of numbers")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds a NaN or infinite sample")
    return a


def ratio_of_medians(base: Sequence[float], head: Sequence[float]) -> float:
    """head median / base median: above 1 means head is slower."""
    b = float(np.median(_array(base, "base")))
    h = float(np.median(_array(head, "head")))
    if b <= 0:
        return math.inf if h > 0 else 1.0
    return h / b


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> RankTest:
    """Mann-Whitney U of ``x`` against ``y`` (two-sided).

    Ranks are averaged over ties; the variance carries the tie correction
    ``sum(t^3 - t) / (N (N - 1))``; the continuity correction moves ``|U - mean|``
    half a unit towards zero. Identical samples on both sides give p = 1.
    """
    a, b = _array(x, "x"), _array(y, "y")
    n1, n2 = a.size, b.size
    n = n1 + n2
    values = np.concatenate([a, b])
    order = np.argsort(values, kind="mergesort")
    _, starts, counts = np.unique(values[order], return_index=True, return_counts=True)
    average_rank = starts + (counts + 1) / 2.0  # 1-based mean rank of each tie group
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat(average_rank, counts)
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    mean = n1 * n2 / 2.0
    ties = float(np.sum(counts.astype(np.float64) ** 3 - counts))
    variance = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0:
        return RankTest(u=u, z=0.0, p=1.0)
    excess = max(abs(u - mean) - 0.5, 0.0)
    z = math.copysign(excess, u - mean) / math.sqrt(variance)
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return RankTest(u=u, z=z, p=min(1.0, p))


def bootstrap_ratio_ci(
    base: Sequence[float],
    head: Sequence[float],
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of head median / base median.

    Each side is resampled independently; the same ``seed`` gives the same
    interval, so reports are reproducible.
    """
    b, h = _array(base, "base"), _array(head, "head")
    rng = np.random.default_rng(seed)
    b_med = np.median(rng.choice(b, size=(resamples, b.size), replace=True), axis=1)
    h_med = np.median(rng.choice(h, size=(resamples, h.size), replace=True), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(b_med > 0, h_med / np.where(b_med > 0, b_med, 1.0), np.inf)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


def row_stats(
    base: Sequence[float],
    head: Sequence[float],
    criteria: Criteria | None = None,
    seed: int = 0,
) -> RowStats:
    criteria = criteria or Criteria()
    low, high = bootstrap_ratio_ci(base, head, criteria.confidence, criteria.resamples, seed)
    return RowStats(
        base_median=float(np.median(_array(base, "base"))),
        head_median=float(np.median(_array(head, "head"))),
        ratio=ratio_of_medians(base, head),
        ci_low=low,
        ci_high=high,
        p=mann_whitney_u(base, head).p,
        n_base=len(base),
        n_head=len(head),
    )


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (controls the family-wise error rate)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg step-up adjusted p-values (controls the false discovery rate)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i], reverse=True)
    adjusted = [0.0] * m
    running = 1.0
    for k, i in enumerate(order):
        rank = m - k  # 1-based rank in ascending order
        running = min(running, min(1.0, pvalues[i] * m / rank))
        adjusted[i] = running
    return adjusted


def adjust_pvalues(pvalues: Sequence[float], correction: str) -> list[float]:
    if correction == "holm":
        return holm(pvalues)
    if correction == "bh":
        return benjamini_hochberg(pvalues)
    if correction == "none":
        return [float(p) for p in pvalues]
    raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")


def decide(stats: RowStats, p_adjusted: float, criteria: Criteria) -> tuple[str, str]:
    """The verdict of one row and a short reason a reader can act on."""
    change = f"{(stats.ratio - 1) * 100:+.1f}%"
    if min(stats.n_base, stats.n_head) < criteria.min_samples:
        return "noisy", (
            f"{change}, too few samples ({stats.n_base} vs {stats.n_head}) to test; "
            "raise --rep-ms for this op"
        )
    significant = p_adjusted < criteria.alpha
    beyond_up = stats.ratio > criteria.upper
    beyond_down = stats.ratio < criteria.lower
    size = f"{abs(stats.ratio - 1) * 100:.1f}%"
    if significant and beyond_up:
        return "regression", f"{size} slower: beyond the {criteria.threshold:.0%} threshold and significant"
    if significant and beyond_down:
        return "improvement", f"{size} faster: beyond the {criteria.threshold:.0%} threshold and significant"
    if beyond_up or beyond_down:
        if stats.p < criteria.alpha:
            why = (f"significant alone (p={stats.p:.2g}) but not once corrected for every "
                   f"row compared (adjusted p={p_adjusted:.2g})")
        else:
            why = f"not significant (p={stats.p:.2g})"
        if min(stats.n_base, stats.n_head) < _FEW_SAMPLES:
            why += f"; only {stats.n_base} vs {stats.n_head} samples: raise --rep-ms for this op"
        return "noisy", f"{change} beyond the threshold but {why}"
    if stats.ci_low < criteria.lower or stats.ci_high > criteria.upper:
        return "noisy", (
            f"{change}, but the {criteria.confidence:.0%} interval "
            f"[{stats.ci_low:.3f}, {stats.ci_high:.3f}] reaches past the threshold"
        )
    return "unchanged", f"{change}, within the {criteria.threshold:.0%} threshold"
