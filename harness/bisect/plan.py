"""The bisection itself, with no I/O: which commits to test next, how a step is judged, and
what the marks so far say.

The range is a list of commits, oldest first: ``commits[0]`` is the first commit after the good
one that changes the library's source, ``commits[-1]`` the last one up to the bad ref (the bad
ref's source is that commit's source). Each tested commit gets a mark: ``bad`` (it behaves as the
bad ref does), ``good`` (as the good ref does) or ``skip`` (the step could not decide, as
``git bisect skip``). The first bad commit is searched for; the bad end is known bad once the
opening check (bad against good) has shown the change.

With ``k`` devices, ``k`` commits are tested at once: the commits that can still be the culprit
are split into ``k + 1`` parts of equal size (a k-ary split); ``k = 1`` is plain bisection.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "BAD",
    "GOOD",
    "Check",
    "MARKS",
    "NOISY",
    "SKIP",
    "METRICS",
    "Outcome",
    "RowResult",
    "StepJudgement",
    "bounds",
    "judge_check",
    "judge_step",
    "midpoint_threshold",
    "next_probes",
    "outcome",
    "repeats_for_try",
    "row_marks",
]

GOOD, BAD, SKIP, NOISY = "good", "bad", "skip", "noisy"
MARKS = (GOOD, BAD, SKIP)
METRICS = ("speed", "verdict")
# The direction a changed row moved, by compare's verdict word.
SPEED_CHANGES = ("regression", "improvement")
# An op's status (ops_status.csv) that ends it without a verdict: it did not run at that commit.
NOT_RUN_STATUSES = ("ERROR", "")
# An op's status that is a verdict of its own: the library broke the op.
BROKEN_STATUSES = ("FAIL", "CRASH", "TIMEOUT")


@dataclass(frozen=True)
class RowResult:
    """One case of one step, as the gate's statistics judged it (tested commit against good)."""

    case_id: str
    verdict: str  # compare's word: regression, improvement, unchanged, noisy, drift, failing, not compared
    reason: str
    ratio: float | None = None  # tested / good
    ci_low: float | None = None
    ci_high: float | None = None
    head_status: str = ""  # the case's status at the tested commit: pass, fail, error, skip, absent
    head_op_status: str = ""  # the op's status at the tested commit: PASS, FAIL, ERROR, CRASH, TIMEOUT, ""
    base_status: str = ""  # the case's status at the good commit: pass, fail, error, skip, absent

    def to_json(self) -> dict[str, object]:
        return {"case_id": self.case_id, "verdict": self.verdict, "reason": self.reason, "ratio": self.ratio,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "head_status": self.head_status,
                "head_op_status": self.head_op_status, "base_status": self.base_status}

    @staticmethod
    def from_json(data: Mapping[str, object]) -> RowResult:
        def num(key: str) -> float | None:
            value = data.get(key)
            return float(value) if isinstance(value, int | float) else None

        return RowResult(case_id=str(data["case_id"]), verdict=str(data["verdict"]), reason=str(data["reason"]),
                         ratio=num("ratio"), ci_low=num("ci_low"), ci_high=num("ci_high"),
                         head_status=str(data.get("head_status") or ""),
                         head_op_status=str(data.get("head_op_status") or ""),
                         base_status=str(data.get("base_status") or ""))


@dataclass(frozen=True)
class StepJudgement:
    """What one step says of the tested commit: good, bad, noisy (run it again) or skip."""

    mark: str
    reason: str


@dataclass(frozen=True)
class Check:
    """The opening check, bad against good: whether there is a change to bisect, and which rows
    show it (the rows every later step is judged on)."""

    changed: bool
    direction: str  # speed: "regression" or "improvement"; verdict: "failing" or "passing"; "" when unchanged
    tracked: tuple[str, ...]  # case ids that changed
    ratio: float | None  # the geometric mean of the tracked rows' ratios (speed), None otherwise
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"changed": self.changed, "direction": self.direction, "tracked": list(self.tracked),
                "ratio": self.ratio, "reason": self.reason}

    @staticmethod
    def from_json(data: Mapping[str, object]) -> Check:
        tracked = data.get("tracked")
        ratio = data.get("ratio")
        return Check(changed=bool(data.get("changed")), direction=str(data.get("direction") or ""),
                     tracked=tuple(str(t) for t in tracked) if isinstance(tracked, list) else (),
                     ratio=float(ratio) if isinstance(ratio, int | float) else None,
                     reason=str(data.get("reason") or ""))


def _row_mark_speed(row: RowResult, direction: str, threshold: float) -> tuple[str, str]:
    """A row is bad when its whole interval of the change (the gate's: samples' noise and the
    run-to-run spread) lies beyond the threshold in the bad end's direction, good when it lies
    wholly on the good side, noisy when it straddles the threshold."""
    if row.ratio is None or row.ci_low is None or row.ci_high is None:
        return SKIP, f"{row.case_id} was not timed at this commit ({row.verdict}: {row.reason})"
    # An improvement is judged as a regression of the inverse ratio.
    low, high = (row.ci_low, row.ci_high) if direction == "regression" else (1.0 / row.ci_high, 1.0 / row.ci_low)
    edge = 1.0 + threshold
    numbers = (f"{row.case_id}: x{row.ratio:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}] against the "
               f"{threshold:.1%} threshold")
    if low > edge:
        return BAD, numbers
    if high < edge:
        return GOOD, numbers
    return NOISY, numbers + " (the interval straddles it)"


def _broken(row: RowResult) -> bool:
    """The case failed, or its op failed, crashed or timed out, at the tested commit."""
    return row.head_status == "fail" or row.head_op_status in BROKEN_STATUSES


def _row_mark_verdict(row: RowResult, direction: str) -> tuple[str, str]:
    """A row that passes is good when the bad end broke the case ("failing") and bad when the bad
    end fixed it ("passing"); a row that fails or crashes the other way round; a row that did not
    run (the op did not import, the tree does not match) is a skip either way."""
    if row.head_status == "pass":
        return (BAD, f"{row.case_id} passes") if direction == "passing" else (GOOD, f"{row.case_id} passes")
    if _broken(row):
        why = f"{row.case_id}: {row.reason}"
        return (GOOD, why) if direction == "passing" else (BAD, why)
    return SKIP, f"{row.case_id} did not run at this commit ({row.reason})"


def row_marks(rows: Sequence[RowResult], metric: str, check: Check, threshold: float) -> dict[str, tuple[str, str]]:
    """Each tracked case's mark at one tested commit (tested against good) and why: good, bad,
    noisy or skip (a tracked case with no row, or whose row did not run, is a skip). With the
    speed metric a row is judged by which side of ``threshold`` its interval lies on."""
    by_id = {r.case_id: r for r in rows}
    marks: dict[str, tuple[str, str]] = {}
    for case in check.tracked:
        row = by_id.get(case)
        if row is None:
            marks[case] = (SKIP, f"{case} has no result at this commit (the op did not run: import or "
                                 "benchmark tree)")
        elif metric == "verdict":
            marks[case] = _row_mark_verdict(row, check.direction)
        else:
            marks[case] = _row_mark_speed(row, check.direction, threshold)
    return marks


def judge_step(rows: Sequence[RowResult], metric: str, check: Check, threshold: float) -> StepJudgement:
    """The mark of one tested commit from its rows (tested against good). Only the rows the
    check tracked count (:func:`row_marks`). A commit is bad when any tracked row changed as the
    bad end did (the first commit where some tracked row changed is the culprit); good when every
    tracked row is as at the good end; noisy when a row could not be told apart from the noise;
    skip when a tracked row did not run (the op failed to import, or the benchmark tree does not
    match)."""
    marks = list(row_marks(rows, metric, check, threshold).values())
    if not marks:
        return StepJudgement(SKIP, "no tracked row")
    for wanted in (SKIP, BAD, NOISY):
        found = [why for mark, why in marks if mark == wanted]
        if found:
            return StepJudgement(wanted, "; ".join(found))
    return StepJudgement(GOOD, "; ".join(why for _, why in marks))


def judge_check(rows: Sequence[RowResult], metric: str) -> Check:
    """The opening check (bad against good): the rows that changed, and in which direction. With
    the speed metric, the direction is the one most rows took (slower when tied). With the verdict
    metric, cases that pass at the good end and fail or crash at the bad end ("failing", a
    breakage) are tracked; where there are none, cases that fail at the good end and pass at the
    bad end ("passing": the commit that fixed them is searched for)."""
    if metric == "verdict":
        tracked = tuple(r.case_id for r in rows if r.verdict == "failing" and _broken(r))
        if tracked:
            return Check(True, "failing", tracked, None, f"{len(tracked)} case(s) pass at the good end and fail at "
                         "the bad end")
        fixed = tuple(r.case_id for r in rows if r.base_status == "fail" and r.head_status == "pass")
        if fixed:
            return Check(True, "passing", fixed, None, f"{len(fixed)} case(s) fail at the good end and pass at "
                         "the bad end")
        return Check(False, "", (), None, "no case changed between pass and fail or crash from the good end to "
                     "the bad end")
    counts = {word: sum(1 for r in rows if r.verdict == word) for word in SPEED_CHANGES}
    if not any(counts.values()):
        noisy = sum(1 for r in rows if r.verdict in ("noisy", "drift"))
        why = f"no case is slower or faster at the bad end ({len(rows)} row(s)"
        return Check(False, "", (), None, why + (f", {noisy} noisy)" if noisy else ")"))
    direction = "regression" if counts["regression"] >= counts["improvement"] else "improvement"
    changed = [r for r in rows if r.verdict == direction]
    ratios = [r.ratio for r in changed if r.ratio is not None and r.ratio > 0]
    ratio = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None
    word = "slower" if direction == "regression" else "faster"
    return Check(True, direction, tuple(r.case_id for r in changed), ratio,
                 f"{len(changed)} case(s) {word} at the bad end"
                 + (f" (x{ratio:.3f})" if ratio is not None else ""))


def midpoint_threshold(ratio: float, floor: float = 0.005, ceiling: float = 9.0) -> float:
    """The threshold a step is judged with when none is given: half the change the check saw,
    in log-time (a commit is bad when its change is nearer the bad end's than the good end's),
    kept between ``floor`` and ``ceiling`` (the gate takes thresholds below 1000%)."""
    return min(ceiling, max(floor, math.expm1(abs(math.log(ratio)) / 2.0)))


def repeats_for_try(repeats: int, try_number: int) -> int:
    """New runs a side at the ``try_number``-th try of one commit (1-based). A try is judged on its
    runs pooled with the earlier tries' (the cache keeps them), so each try doubles the runs a
    side judged: ``repeats``, then 2, 4, 8 times as many."""
    return repeats if try_number == 1 else repeats * 2 ** (try_number - 2)


def bounds(commits: Sequence[str], marks: Mapping[str, str]) -> tuple[int, int]:
    """(lo, hi): every commit at index <= lo behaves as good (lo = -1: the good ref itself),
    ``commits[hi]`` is the first commit known bad. A good mark above the first bad one is
    noise and is ignored."""
    hi = next((i for i, c in enumerate(commits) if marks.get(c) == BAD), len(commits) - 1)
    lo = max((i for i, c in enumerate(commits[:hi]) if marks.get(c) == GOOD), default=-1)
    return lo, hi


def next_probes(commits: Sequence[str], marks: Mapping[str, str], k: int = 1) -> list[int]:
    """Indices of the commits to test next, at most ``k`` at once; [] when the search is over.

    The culprit is one of the untested commits between the bounds or the first bad one; the
    ``k`` probes split those candidates into ``k + 1`` parts of equal size."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    lo, hi = bounds(commits, marks)
    open_ = [i for i in range(lo + 1, hi) if commits[i] not in marks]
    if not open_:
        return []
    outcomes = len(open_) + 1  # the culprit is one of open_, or hi
    picks: list[int] = []
    for j in range(1, k + 1):
        position = round(j * outcomes / (k + 1))
        index = open_[min(max(position, 1), len(open_)) - 1]
        if index not in picks:
            picks.append(index)
    return picks


@dataclass(frozen=True)
class Outcome:
    """Where a finished search stands: the culprit, or the range it could not narrow."""

    culprit: str | None  # the first bad commit, when it is known
    first: int  # the range that holds the culprit: commits[first..last]
    last: int
    skipped: tuple[str, ...]  # the commits inside that range that could not be judged

    @property
    def remaining(self) -> int:
        return self.last - self.first + 1


def outcome(commits: Sequence[str], marks: Mapping[str, str]) -> Outcome:
    """The culprit when the bounds meet (only skipped commits between them leave a range)."""
    lo, hi = bounds(commits, marks)
    skipped = tuple(commits[i] for i in range(lo + 1, hi) if marks.get(commits[i]) == SKIP)
    culprit = commits[hi] if hi == lo + 1 and marks.get(commits[hi]) == BAD else None
    return Outcome(culprit=culprit, first=lo + 1, last=hi, skipped=skipped)
