"""The persistence rule of nightly history, pure: how one case's median is judged against the
medians of earlier runs of the same fingerprint.

A case slower than its baseline (the median of its medians in the last ``window`` runs) by more
than ``threshold`` is *suspect*; it is a regression only when it was also suspect in the
previous ``persist - 1`` runs, or at once when it is slower by more than ``large``.
`harness history check` (harness.compare.history) and the history pages
(harness.results.html.history) both judge with it, so it sits below both.

A series' run-to-run spread (:func:`history_spread`, which `harness compare|gate --history`
also uses) says how small a lasting slowdown the rule can catch (:func:`detectable_change`).
:func:`regression_ranges` names, for each regression, the library commits between the last run
before its slowdown and the first slow run: the range `harness bisect` searches."""

from __future__ import annotations

import functools
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["DETECT_CHANCE", "MIN_MEASURED_SIGMA", "PLAIN_OP", "CaseCheck", "HistoryRules", "RegressionRange", "assess_case",
           "check_run", "detectable_change", "history_spread", "regression_ranges"]

# The least spread a case's history is taken to show: a timer's own resolution and rounding keep
# two runs from agreeing closer than this, however quiet a short history looked.
MIN_MEASURED_SIGMA = 0.001
# How often a lasting slowdown of the size :func:`detectable_change` names is flagged in time.
DETECT_CHANCE = 0.9
# MAD of a normal sample / its standard deviation: 1 / Phi^-1(3/4).
_MAD_SCALE = 1.482602218505602


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
    streak: int = 0  # slow runs in a row ending with this one (a regression or suspect; else 0)
    # A regression's slowdown as positions in the runs judged against (oldest first) then this
    # run: the last measured run before it judged not slow, and the first slow run after that;
    # None where the history does not show such a run (the slowdown may predate it).
    began: tuple[int, int] | None = None


# An op id a workflow may put on a command line: a letter, digit or _ first, then those and . : / -
PLAIN_OP = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]*")


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

    def verdict(status: str, reason: str, streak: int = 0) -> CaseCheck:
        began = _slowdown_began(earlier, len(earlier) - streak + 1, rules) if status == "regression" else None
        return CaseCheck(case_id, status, reason, current_ms=current, baseline_ms=baseline,
                         ratio=ratio, history=used, streak=streak, began=began)

    if ratio > 1 + rules.threshold:
        streak = 1
        k = len(earlier)
        while k > 0:  # the whole streak: where the slowdown began (regression_ranges)
            k -= 1
            value = earlier[k]
            earlier_ratio = _ratio(earlier[:k], value, rules) if value is not None else None
            if earlier_ratio is None or earlier_ratio <= 1 + rules.threshold:
                break
            streak += 1
        if ratio > 1 + rules.large:
            return verdict("regression", f"{change}: beyond {rules.large:.0%}, flagged at once", streak)
        if streak >= rules.persist:
            return verdict("regression",
                           f"{change}: slower than {rules.threshold:.0%} in {streak} consecutive runs", streak)
        return verdict("suspect", f"{change}: flagged if the next run is slower too", streak)
    if ratio < 1 / (1 + rules.threshold):
        return verdict("improvement", change)
    return verdict("ok", change)


def _slowdown_began(earlier: Sequence[float | None], first_slow: int,
                    rules: HistoryRules) -> tuple[int, int] | None:
    """(the last measured run before position ``first_slow`` judged not slow, the first slow run
    after it), as positions in ``earlier`` then the current run; runs that did not measure the case
    are stepped over, a slow one moves the start back. None where a run has no baseline first."""
    bad, k = first_slow, first_slow - 1
    while k >= 0:
        value = earlier[k]
        if value is not None:
            ratio = _ratio(earlier[:k], value, rules)
            if ratio is None:
                return None
            if ratio <= 1 + rules.threshold:
                return k, bad
            bad = k
        k -= 1
    return None


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


@dataclass(frozen=True)
class RegressionRange:
    """Regressions whose slowdown began between two library commits: ``good`` measured by the last
    run before the slowdown, ``bad`` by the first slow run; ``ops`` and ``cases`` in check order."""

    good: str
    bad: str
    ops: tuple[str, ...]
    cases: tuple[str, ...]


def regression_ranges(checks: Sequence[CaseCheck], ops: Mapping[str, str], commits: Sequence[str],
                      ) -> tuple[list[RegressionRange], list[str]]:
    """The library-commit range of each regression in ``checks``, regressions of one range
    grouped, and a line for each regression no range can be named for.

    ``commits`` holds the library commit of each run the checks judged against, oldest first,
    then the checked run's own ("" where a run names none); ``ops`` maps a case id to its op. A
    regression's range runs from the commit of the last run before its slowdown judged not slow
    to that of its first slow run (``CaseCheck.began``). Where both name one commit the library
    did not change there (the harness, torch, the driver or the machine did): nothing to bisect.
    An op id that is not plain (:data:`PLAIN_OP`) names no range. Runs that name no library
    commit at all (the harness's own ops) give neither."""
    grouped: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    unnamed: list[str] = []
    if not any(commits):  # runs of no library (the harness's own ops): nothing to name
        return [], []
    for check in checks:
        if check.status != "regression":
            continue
        op = ops.get(check.case_id, check.case_id.split("[", 1)[0])
        if check.began is None:
            unnamed.append(f"{check.case_id}: no run before the slowdown is judged not slow in the stored "
                           "history (the slowdown may be older than it)")
            continue
        good, bad = (commits[i] if 0 <= i < len(commits) else "" for i in check.began)
        if not good or not bad:
            unnamed.append(f"{check.case_id}: no library commit recorded for the run "
                           f"{'before the slowdown' if not good else 'where it began'}")
        elif good.startswith(bad) or bad.startswith(good):  # one commit, however long each id
            unnamed.append(f"{check.case_id}: the library commit ({good[:12]}) is the same before and after the "
                           "slowdown; something else changed (the harness, torch, the driver or the machine)")
        elif not PLAIN_OP.fullmatch(op):
            unnamed.append(f"{check.case_id}: its op id is not one a command line can take as it is")
        else:
            op_list, cases = grouped.setdefault((good, bad), ([], []))
            if op not in op_list:
                op_list.append(op)
            cases.append(check.case_id)
    ranges = [RegressionRange(good, bad, tuple(o), tuple(c)) for (good, bad), (o, c) in grouped.items()]
    return ranges, unnamed


def history_spread(medians: Sequence[float | None], min_runs: int = 4) -> float | None:
    """Sigma of one run's log median, from a case's medians over a series of runs of the same code
    and machine (a history, oldest first); None with fewer than ``min_runs`` usable medians.

    Taken from the successive changes of the log median, robustly: the median absolute
    deviation of the differences, scaled to a standard deviation and divided by sqrt(2) (each
    difference holds two runs' wander). A step (an upgrade, a real regression) moves one
    difference only, so it does not inflate the spread as a plain standard deviation would."""
    m = [float(x) for x in medians if x is not None and x > 0 and math.isfinite(x)]
    if len(m) < max(min_runs, 3):
        return None
    diffs = [math.log(b) - math.log(a) for a, b in zip(m, m[1:], strict=False)]
    center = statistics.median(diffs)
    mad = statistics.median(abs(d - center) for d in diffs)
    return _MAD_SCALE * mad / math.sqrt(2.0)


def _baseline_shift(window: int, slowed: int) -> float | None:
    """Where the baseline (the median of ``window`` nights) lies, in sigmas of one night, when
    ``slowed`` of those nights are nights of a slowdown and so above all the others: the expected
    order statistic(s) of the rest (Blom's approximation); None once a slowed night is at the
    median (the baseline has moved to the slowdown)."""
    rest = window - slowed
    middle = sorted({(window - 1) // 2, window // 2})  # statistics.median's middle value(s)
    if middle[-1] >= rest:
        return None
    normal = statistics.NormalDist()
    return statistics.fmean(normal.inv_cdf((i + 1 - 0.375) / (rest + 0.25)) for i in middle)


@functools.lru_cache(maxsize=64)
def _persist_margin(rules: HistoryRules, chance: float) -> float | None:
    """How far, in sigmas of one night, a lasting slowdown's log must lie beyond the threshold's
    for the rule to find it suspect on each of its first ``persist`` nights with ``chance``;
    None when a slowed night reaches the baseline's median before then."""
    wander = math.sqrt(1.0 + math.pi / (2.0 * rules.window))
    shifts = [_baseline_shift(rules.window, min(k, rules.window)) for k in range(rules.persist)]
    if any(m is None for m in shifts):
        return None
    shift = [float(m) for m in shifts if m is not None]
    normal = statistics.NormalDist()
    low, high = min(shift) - 40.0 * wander, max(shift) + 40.0 * wander
    for _ in range(200):
        mid = (low + high) / 2.0
        if math.prod(normal.cdf((mid - m) / wander) for m in shift) >= chance:
            high = mid
        else:
            low = mid
    return high


def detectable_change(sigma: float, rules: HistoryRules, chance: float = DETECT_CHANCE) -> float:
    """The smallest lasting slowdown (a fraction: 0.06 is 6% slower) that :func:`assess_case`
    flags as a regression by its ``persist``-th night with about ``chance``, on a series whose
    nightly median wanders by ``sigma`` (of its log: :func:`history_spread`).

    A night is judged on its ratio to the median of the ``window`` nights before it, so the log
    of that ratio wanders by sigma * sqrt(1 + pi / (2 * window)): its own night's wander and the
    baseline's (the median of ``window`` values varies about pi / 2 times as much as their mean).
    The slowdown's own earlier nights enter the later nights' baselines and raise them (taken as
    above every quiet night, true where the change is large against sigma). The rule flags the
    slowdown when the ratio is beyond ``threshold`` on each of its first ``persist`` nights, or
    beyond ``large`` on its first; the answer is the smaller of the two sizes. With sigma 0 it
    is ``threshold``."""
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be a finite spread of 0 or more, got {sigma!r}")
    if not 0 < chance < 1:
        raise ValueError(f"chance must lie between 0 and 1, got {chance!r}")
    wander = math.sqrt(1.0 + math.pi / (2.0 * rules.window))
    at_once = (1.0 + rules.large) * math.exp(statistics.NormalDist().inv_cdf(chance) * wander * sigma)
    margin = _persist_margin(rules, chance)
    if margin is None:
        return at_once - 1.0
    return min((1.0 + rules.threshold) * math.exp(margin * sigma), at_once) - 1.0
