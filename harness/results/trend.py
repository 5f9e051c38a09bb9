"""The persistence rule of nightly history, pure: how one case's median is judged against the
medians of earlier runs of the same fingerprint.

A case slower than its baseline (the median of its medians in the last ``window`` runs) by more
than ``threshold`` is *suspect*; it is a regression only when it was also suspect in the
previous ``persist - 1`` runs, or at once when it is slower by more than ``large``.
`harness history check` (harness.compare.history) and the history pages
(harness.results.html.history) both judge with it, so it sits below both."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["CaseCheck", "HistoryRules", "assess_case", "check_run"]


@dataclass(frozen=True)
class HistoryRules:
    window: int = 5  # runs whose median makes the baseline
    threshold: float = 0.05  # slower than this is suspect
    large: float = 0.25  # slower than this is flagged at once
    persist: int = 2  # consecutive suspect runs that make a regression
    min_history: int = 3  # runs needed before a baseline exists

    def __post_init__(self) -> None:
        if self.window < 1 or self.persist < 1 or self.min_history < 1:
            raise ValueError("window, persist and min_history must be at least 1")
        if not (0 < self.threshold <= self.large):
            raise ValueError("need 0 < threshold <= large")


@dataclass(frozen=True)
class CaseCheck:
    case_id: str
    status: str  # regression, suspect, improvement, ok, no baseline, not measured
    reason: str
    current_ms: float | None = None
    baseline_ms: float | None = None
    ratio: float | None = None
    history: int = 0  # how many earlier values the baseline drew on


def _baseline(earlier: Sequence[float | None], rules: HistoryRules) -> tuple[float, int] | None:
    values = [v for v in earlier if v is not None][-rules.window:]
    if len(values) < rules.min_history:
        return None
    return statistics.median(values), len(values)


def _ratio(earlier: Sequence[float | None], value: float, rules: HistoryRules) -> float | None:
    base = _baseline(earlier, rules)
    if base is None or base[0] <= 0:
        return None
    return value / base[0]


def assess_case(
    case_id: str, earlier: Sequence[float | None], current: float | None, rules: HistoryRules
) -> CaseCheck:
    """Judge one case. ``earlier`` holds its median in each earlier run, oldest first,
    None where the run did not measure it (then the run breaks a streak)."""
    if current is None:
        return CaseCheck(case_id, "not measured", "no passing measurement in this run")
    base = _baseline(earlier, rules)
    if base is None or base[0] <= 0:
        have = sum(v is not None for v in earlier)
        return CaseCheck(case_id, "no baseline", f"{have} earlier run(s); {rules.min_history} needed",
                         current_ms=current, history=have)
    baseline, used = base
    ratio = current / baseline
    change = f"{(ratio - 1) * 100:+.1f}% against the median of the last {used} run(s)"

    def verdict(status: str, reason: str) -> CaseCheck:
        return CaseCheck(case_id, status, reason, current_ms=current, baseline_ms=baseline,
                         ratio=ratio, history=used)

    if ratio > 1 + rules.large:
        return verdict("regression", f"{change}: beyond {rules.large:.0%}, flagged at once")
    if ratio > 1 + rules.threshold:
        streak = 1
        k = len(earlier)
        while streak < rules.persist and k > 0:
            k -= 1
            value = earlier[k]
            earlier_ratio = _ratio(earlier[:k], value, rules) if value is not None else None
            if earlier_ratio is None or earlier_ratio <= 1 + rules.threshold:
                break
            streak += 1
        if streak >= rules.persist:
            return verdict("regression",
                           f"{change}: slower than {rules.threshold:.0%} in {streak} consecutive runs")
        return verdict("suspect", f"{change}: flagged if the next run is slower too")
    if ratio < 1 / (1 + rules.threshold):
        return verdict("improvement", change)
    return verdict("ok", change)


def check_run(
    current: Mapping[str, float | None],
    earlier_runs: Sequence[Mapping[str, float | None]],
    rules: HistoryRules,
) -> list[CaseCheck]:
    """Judge every case of a run; ``earlier_runs`` are case -> median maps, oldest first."""
    return [
        assess_case(case_id, [run.get(case_id) for run in earlier_runs], value, rules)
        for case_id, value in current.items()
    ]
