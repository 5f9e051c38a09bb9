"""One bisection from start to end, over any :class:`StepRunner`: the opening check (bad against
good), then rounds of probes (``k`` at once with ``k`` devices), each probe run again with twice
the runs while it is noisy, and skipped when it stays noisy or cannot run.

The state is a plain dictionary, handed to ``save`` after the check and after every round, so an
interrupted bisection resumes from it (:func:`bisect` with ``state``). What runs a step is the
runner's business: `harness ab` in a cache folder (harness.bisect.runner), or a simulation
(tests, benchmarks/bisect_accuracy.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.bisect.plan import (
    BAD,
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
)

__all__ = ["STATE_VERSION", "BisectResult", "Commit", "Settings", "StepRun", "StepRunner", "bisect", "check_state"]

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


@dataclass
class BisectResult:
    commits: tuple[Commit, ...]
    check: Check
    threshold: float
    steps: list[dict[str, Any]]  # every commit tested, in the order tested
    outcome: Outcome | None  # None when the check found nothing to bisect
    rounds: int
    runs: int
    seconds: float
    cached_runs: int = 0
    marks: dict[str, str] = field(default_factory=dict)


def _try_row(run: StepRun, repeats: int, pooled: int) -> dict[str, Any]:
    return {"repeats": repeats, "pooled_repeats": pooled, "runs": run.runs, "seconds": round(run.seconds, 3), "cached": run.cached,
            "where": run.where, "rows": [r.to_json() for r in run.rows]}


def _test(commit: Commit, runner: StepRunner, settings: Settings, check: Check, threshold: float,
          device: str | None) -> dict[str, Any]:
    """Every try of one commit until it is judged good or bad, or skipped."""
    started = time.time()
    tries: list[dict[str, Any]] = []
    judgement = None
    for try_number in range(1, settings.max_tries + 1):
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
            "tries": tries}


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
    by_sha = {c.sha: c for c in commits}
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
    marks: dict[str, str] = {}
    if check.changed:
        marks[shas[-1]] = BAD  # the bad ref's source is the last commit's
    for step in steps:
        if not step.get("check") and step["sha"] in by_sha:
            marks[step["sha"]] = step["mark"]

    if check.changed:
        judged = "by verdict" if settings.metric == "verdict" else f"at {threshold:.1%}"
        say(f"bisect: {check.reason}; {len(commits)} commit(s) change the source; steps judged {judged}")
        while True:
            probes = next_probes(shas, marks, len(settings.devices))
            if not probes:
                break
            current["rounds"] = int(current["rounds"]) + 1
            chosen = [commits[i] for i in probes]
            say(f"bisect: round {current['rounds']}: " + ", ".join(f"{c.sha[:12]} {c.subject[:50]}" for c in chosen))
            with ThreadPoolExecutor(max_workers=len(chosen)) as pool:
                done = list(pool.map(
                    lambda pair: _test(pair[0], runner, settings, check, threshold, pair[1]),
                    zip(chosen, settings.devices, strict=False)))
            for step in done:
                marks[step["sha"]] = step["mark"]
                steps.append(step)
                say(f"bisect:   {step['sha'][:12]} {step['mark']}: {step['reason'][:160]}")
            current["steps"] = steps
            save(dict(current))
    tries = [a for s in steps for a in s["tries"]]
    return BisectResult(
        commits=tuple(commits), check=check, threshold=threshold, steps=steps,
        outcome=outcome(shas, marks) if check.changed else None, rounds=int(current["rounds"]),
        runs=sum(int(a["runs"]) for a in tries if not a["cached"]),
        seconds=sum(float(a["seconds"]) for a in tries if not a["cached"]),
        cached_runs=sum(int(a["runs"]) for a in tries if a["cached"]), marks=marks,
    )
