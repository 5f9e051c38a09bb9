"""One bisection from start to end, over any :class:`StepRunner`: the opening check (bad against
good), then rounds of probes (``k`` at once with ``k`` devices), each probe run again with twice
the runs while it is noisy, and skipped when it stays noisy or cannot run.

A culprit answers for the tracked cases that changed at it. Cases still as at the good end
there changed later: a further search over the commits after it follows them alone (an
*answer* each), judging the commits already tested from their rows, so that two commits of one
range that slowed different ops are both named.

The state is a plain dictionary, handed to ``save`` after the check and after every round, so an
interrupted bisection resumes from it (:func:`bisect` with ``state``). What runs a step is the
runner's business: `harness ab` in a cache folder (harness.bisect.runner), or a simulation
(tests, benchmarks/bisect_accuracy.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from harness.bisect.plan import (
    BAD,
    GOOD,
    NOISY,
    SKIP,
    Check,
    Outcome,
    RowResult,
    judge_check,
    judge_step,
    midpoint_threshold,
    next_probes,
    outcome,
    repeats_for_try,
    row_marks,
)

__all__ = ["STATE_VERSION", "Answer", "BisectResult", "Commit", "Settings", "StepRun", "StepRunner", "bisect",
           "check_state", "tries_run"]

STATE_VERSION = 1
# The threshold the opening check is judged with when --threshold is not given: the smallest
# change a bisection looks for.
CHECK_THRESHOLD = 0.02
# The check runs this many times the runs a side of a step: the change it measures places the
# threshold every step is judged against (half of it), so its error weighs on every step.
CHECK_FACTOR = 2


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    tree: str  # the library source's tree id at this commit: commits that share it share results


@dataclass(frozen=True)
class StepRun:
    """One interleaved run of a commit against good, judged."""

    rows: tuple[RowResult, ...]
    runs: int  # `harness run` invocations, both sides
    seconds: float
    cached: bool = False  # taken from the cache, nothing run now
    where: str = ""  # the folder that holds the runs


class StepRunner(Protocol):
    def run(self, tested: Commit, try_number: int, repeats: int, device: str | None, threshold: float,
            earlier: Sequence[str] = ()) -> StepRun:
        """Run ``tested`` against the good commit interleaved, ``repeats`` runs a side, on
        ``device`` (None: the run arguments' own), as its ``try_number``-th try; judge each row with
        ``threshold`` on these runs pooled with those of the ``earlier`` tries (their ``where``)."""


@dataclass(frozen=True)
class Settings:
    metric: str = "speed"
    threshold: float | None = None  # a fraction; None: half the change the check saw
    repeats: int = 2  # runs a side at a commit's first try
    max_tries: int = 5  # tries of a noisy commit before it is skipped
    devices: tuple[str | None, ...] = (None,)  # one probe per device in each round


@dataclass(frozen=True)
class Answer:
    """One search of a bisection: the tracked cases it answers for and where it ended (its
    ``outcome``'s indices are into the whole range)."""

    cases: tuple[str, ...]
    outcome: Outcome


@dataclass
class BisectResult:
    commits: tuple[Commit, ...]
    check: Check
    threshold: float
    steps: list[dict[str, Any]]  # every commit tested, in the order tested (one commit again in a later search)
    outcome: Outcome | None  # the first answer's; None when the check found nothing to bisect
    rounds: int
    runs: int
    seconds: float
    cached_runs: int = 0
    marks: dict[str, str] = field(default_factory=dict)  # the first search's
    answers: tuple[Answer, ...] = ()  # oldest culprit first; the last one may have none (a range left)


def _try_row(run: StepRun, repeats: int, pooled: int) -> dict[str, Any]:
    return {"repeats": repeats, "pooled_repeats": pooled, "runs": run.runs, "seconds": round(run.seconds, 3), "cached": run.cached,
            "where": run.where, "rows": [r.to_json() for r in run.rows]}


def _test(commit: Commit, runner: StepRunner, settings: Settings, check: Check, threshold: float,
          device: str | None, search: int = 1, earlier: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Every try of one commit until it is judged good or bad, or skipped; after the ``earlier``
    tries of it (an earlier search's, that could not tell this search's cases apart), pooled."""
    started = time.time()
    tries: list[dict[str, Any]] = list(earlier)
    judgement = None
    for try_number in range(len(tries) + 1, settings.max_tries + 1):
        repeats = repeats_for_try(settings.repeats, try_number)
        pooled = repeats + sum(int(a["repeats"]) for a in tries)
        run = runner.run(commit, try_number, repeats, device, threshold, [str(a["where"]) for a in tries])
        tries.append(_try_row(run, repeats, pooled))
        judgement = judge_step(run.rows, settings.metric, check, threshold)
        if judgement.mark != NOISY:
            break
    assert judgement is not None
    mark, reason = judgement.mark, judgement.reason
    if mark == NOISY:
        mark, reason = SKIP, f"still noisy after {len(tries)} tries: {reason}"
    return {"sha": commit.sha, "subject": commit.subject, "tree": commit.tree, "mark": mark, "reason": reason,
            "device": device, "started_at": started, "seconds": round(time.time() - started, 3),
            "tries": tries, "search": search, "continued": len(earlier)}


def tries_run(step: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tries a step ran itself: a commit tested again by a later search holds the earlier
    search's tries first (``continued`` of them), counted there."""
    return list(step["tries"])[int(step.get("continued") or 0):]


def _rows(step: Mapping[str, Any]) -> tuple[RowResult, ...]:
    """The rows of a tested commit's last try (judged on all its tries' runs pooled)."""
    return tuple(RowResult.from_json(r) for r in step["tries"][-1]["rows"])


def _mark(step: Mapping[str, Any], settings: Settings, check: Check, threshold: float) -> str | None:
    """A tested commit's mark for ``check``'s cases from its rows; None where they cannot tell
    (noisy) and tries are left: the commit is run again when it is probed."""
    mark = judge_step(_rows(step), settings.metric, check, threshold).mark
    if mark != NOISY:
        return mark
    return SKIP if len(step["tries"]) >= settings.max_tries else None


def _settle(shas: Sequence[str], marks: Mapping[str, str], latest: Mapping[str, dict[str, Any]],
            by_sha: Mapping[str, Commit], steps: list[dict[str, Any]], search: int, check: Check, threshold: float,
            runner: StepRunner, settings: Settings, current: dict[str, Any], save: Callable[[dict[str, Any]], None],
            say: Callable[[str], None]) -> dict[str, Any] | None:
    """Where the bounds have met on a culprit whose rows cannot yet tell some of ``check``'s cases
    apart (noisy: did they change at it or later?), the culprit tried again for those cases
    alone, its runs pooled with its earlier tries: the step, marked for every case of ``check``
    on the pooled rows (a culprit that no case reads changed at any more is good, and the search
    goes on), and kept in ``steps`` as ``settles``. None where there is nothing to settle: one
    case followed, the bad end (the check's), a step settled already, or no tries left."""
    culprit = outcome(shas, marks).culprit
    step = latest.get(culprit or "")
    if culprit is None or step is None or len(check.tracked) < 2 or step.get("settles"):
        return None
    unsure = tuple(case for case, (mark, _) in row_marks(_rows(step), settings.metric, check, threshold).items()
                   if mark == NOISY)
    if not unsure or len(step["tries"]) >= settings.max_tries:
        return None
    say(f"bisect: {culprit[:12]} again for {len(unsure)} case(s) its rows cannot tell apart yet")
    settled = _test(by_sha[culprit], runner, settings, replace(check, tracked=unsure), threshold, settings.devices[0],
                    search, step["tries"])
    judged = judge_step(_rows(settled), settings.metric, check, threshold)  # every case, not only the unsure
    mark = SKIP if judged.mark == NOISY else judged.mark
    settled.update(mark=mark, reason=judged.reason if mark == judged.mark else f"still noisy: {judged.reason}",
                   settles=list(unsure))
    steps.append(settled)
    current["steps"] = steps
    save(dict(current))
    say(f"bisect:   {culprit[:12]} {mark}: {settled['reason'][:160]}")
    return settled


def _search(shas: Sequence[str], commits: Sequence[Commit], steps: list[dict[str, Any]], search: int,
            check: Check, threshold: float, runner: StepRunner, settings: Settings, current: dict[str, Any],
            save: Callable[[dict[str, Any]], None], say: Callable[[str], None]) -> tuple[dict[str, str], dict[str, Any]]:
    """The first commit of ``shas`` (the last one known bad) at which a case of ``check`` changed:
    the commits tested so far (by this search or an earlier one) judged for its cases, then rounds
    of probes until the bounds meet. (marks, the latest step of each commit tested)."""
    by_sha = {c.sha: c for c in commits}
    latest = {step["sha"]: step for step in steps
              if not step.get("check") and step["sha"] in by_sha and int(step.get("search", 1)) <= search}
    marks: dict[str, str] = {shas[-1]: BAD}  # the check showed every tracked case changed at the bad end
    for sha, step in latest.items():
        if sha != shas[-1] and (mark := (step["mark"] if search == 1 else _mark(step, settings, check, threshold))):
            marks[sha] = mark
    while True:
        probes = next_probes(shas, marks, len(settings.devices))
        if not probes:
            settled = _settle(shas, marks, latest, by_sha, steps, search, check, threshold, runner, settings,
                              current, save, say)
            if settled is None:
                return marks, latest
            marks[settled["sha"]] = settled["mark"]
            latest[settled["sha"]] = settled
            continue
        current["rounds"] = int(current["rounds"]) + 1
        chosen = [by_sha[shas[i]] for i in probes]
        say(f"bisect: round {current['rounds']}: " + ", ".join(f"{c.sha[:12]} {c.subject[:50]}" for c in chosen))
        with ThreadPoolExecutor(max_workers=len(chosen)) as pool:
            done = list(pool.map(
                lambda pair: _test(pair[0], runner, settings, check, threshold, pair[1], search,
                                   latest[pair[0].sha]["tries"] if pair[0].sha in latest else ()),
                zip(chosen, settings.devices, strict=False)))
        for step in done:
            marks[step["sha"]] = step["mark"]
            latest[step["sha"]] = step
            steps.append(step)
            say(f"bisect:   {step['sha'][:12]} {step['mark']}: {step['reason'][:160]}")
        current["steps"] = steps
        save(dict(current))


def _check(bad: Commit, runner: StepRunner, settings: Settings,
           say: Callable[[str], None]) -> tuple[dict[str, Any], Check]:
    """The opening check, bad against good, run again with twice the runs while it finds no
    change and some row is noisy."""
    threshold = settings.threshold or CHECK_THRESHOLD
    started = time.time()
    tries: list[dict[str, Any]] = []
    found = Check(False, "", (), None, "not run")
    for try_number in range(1, settings.max_tries + 1):
        repeats = repeats_for_try(CHECK_FACTOR * settings.repeats, try_number)
        pooled = repeats + sum(int(a["repeats"]) for a in tries)
        say(f"bisect: check: {bad.sha[:12]} (bad) against good, {pooled} run(s) a side")
        run = runner.run(bad, try_number, repeats, settings.devices[0], threshold, [str(a["where"]) for a in tries])
        tries.append(_try_row(run, repeats, pooled))
        found = judge_check(run.rows, settings.metric)
        if found.changed or not any(r.verdict in ("noisy", "drift") for r in run.rows):
            break
    step = {"sha": bad.sha, "subject": bad.subject, "tree": bad.tree, "check": True,
            "mark": BAD if found.changed else "unchanged", "reason": found.reason, "device": settings.devices[0],
            "started_at": started, "seconds": round(time.time() - started, 3), "tries": tries}
    return step, found


def check_state(state: Mapping[str, Any], key: Mapping[str, Any]) -> str | None:
    """Why ``state`` cannot be resumed by a bisection of ``key`` (None: it can)."""
    if state.get("format_version") != STATE_VERSION:
        return f"its format_version is {state.get('format_version')!r}, not {STATE_VERSION}"
    if state.get("key") != dict(key):
        differ = sorted(k for k in set(key) | set(state.get("key") or {})
                        if (state.get("key") or {}).get(k) != key.get(k))
        return "it was started with other " + ", ".join(differ)
    return None


def bisect(
    commits: Sequence[Commit],
    bad: Commit,
    runner: StepRunner,
    settings: Settings,
    key: Mapping[str, Any],
    state: Mapping[str, Any] | None = None,
    save: Callable[[dict[str, Any]], None] = lambda _state: None,
    say: Callable[[str], None] = lambda _line: None,
) -> BisectResult:
    """Find the first commit of ``commits`` (oldest first, each changing the library's source)
    that behaves as ``bad`` does. ``key`` names the bisection (stored with the state; a state of
    another key is not resumed: the caller refuses it with :func:`check_state`)."""
    shas = [c.sha for c in commits]
    current: dict[str, Any] = {"format_version": STATE_VERSION, "key": dict(key), "check": None,
                               "threshold": None, "steps": [], "rounds": 0}
    if state is not None:
        current.update({k: state[k] for k in ("check", "threshold", "steps", "rounds") if k in state})
    steps: list[dict[str, Any]] = list(current["steps"])

    if current["check"] is None:
        step, found = _check(bad, runner, settings, say)
        steps.append(step)
        current["check"] = found.to_json()
        fallback = settings.threshold or CHECK_THRESHOLD
        current["threshold"] = settings.threshold or (midpoint_threshold(found.ratio) if found.ratio else fallback)
        current["steps"] = steps
        save(dict(current))
    check = Check.from_json(current["check"])
    threshold = float(current["threshold"])

    answers: list[Answer] = []
    first_marks: dict[str, str] = {}
    if check.changed:
        judged = "by verdict" if settings.metric == "verdict" else f"at {threshold:.1%}"
        say(f"bisect: {check.reason}; {len(commits)} commit(s) change the source; steps judged {judged}")
        start, cases = 0, check.tracked
        while True:
            search = len(answers) + 1
            following = replace(check, tracked=cases)
            marks, latest = _search(shas[start:], commits, steps, search, following, threshold, runner, settings,
                                    current, save, say)
            ended = outcome(shas[start:], marks)
            first_marks = first_marks or marks
            where = Outcome(ended.culprit, ended.first + start, ended.last + start, ended.skipped)
            culprit_step = latest.get(ended.culprit or "")
            # the cases still as at the good end where the culprit is: they changed after it
            later = () if culprit_step is None else tuple(
                case for case, (mark, _) in row_marks(_rows(culprit_step), settings.metric, following,
                                                      threshold).items() if mark == GOOD)
            answers.append(Answer(tuple(c for c in cases if c not in later), where))
            if ended.culprit is None or not later:
                break
            say(f"bisect: {ended.culprit[:12]} answers for {len(cases) - len(later)} case(s); "
                f"{len(later)} changed after it: searching the commits after it for them")
            start, cases = shas.index(ended.culprit) + 1, later
    tries = [a for s in steps for a in tries_run(s)]
    return BisectResult(
        commits=tuple(commits), check=check, threshold=threshold, steps=steps,
        outcome=answers[0].outcome if answers else None, rounds=int(current["rounds"]),
        runs=sum(int(a["runs"]) for a in tries if not a["cached"]),
        seconds=sum(float(a["seconds"]) for a in tries if not a["cached"]),
        cached_runs=sum(int(a["runs"]) for a in tries if a["cached"]), marks=first_marks, answers=tuple(answers),
    )
