"""A simulated step runner: a range of commits where one commit slows one case down (or each of
several cases its own commit: ``cases``), timed with
run-to-run noise like a real device's, and judged with the gate's own statistics
(harness.compare.stats: ``row_stats`` and ``decide``). The unit tests and
benchmarks/bisect_accuracy.py bisect it to measure how often the right commit is named.

Each `harness run` of a side is modelled as a level (the case's true time, times a log-normal
run-to-run wander of ``run_sigma``) and ``samples`` samples around it (``sample_sigma``). Commits
in ``broken`` cannot run (as an op that fails to import there); a commit in ``noisy`` wanders
``noisy_factor`` times more than the others.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.bisect.plan import RowResult
from harness.bisect.session import Commit, StepRun
from harness.compare.stats import Criteria, decide, row_stats

__all__ = ["CASE", "SimulatedRange", "commits_of"]

CASE = "op[builtin-float32-4096]"


def commits_of(n: int) -> tuple[Commit, ...]:
    """``n`` made-up commits, oldest first."""
    return tuple(Commit(sha=f"{i:040x}", subject=f"commit {i}", tree=f"tree{i}") for i in range(n))


@dataclass
class SimulatedRange:
    """``commits[culprit:]`` are ``slowdown`` slower than the good commit (``culprit`` = None:
    no change anywhere) in :data:`CASE`; with ``cases``, each case id is slowed from its own
    commit on (its value; None: never) and ``culprit`` is not used."""

    commits: Sequence[Commit]
    culprit: int | None
    cases: Mapping[str, int | None] | None = None
    slowdown: float = 0.05
    run_sigma: float = 0.01
    sample_sigma: float = 0.005
    samples: int = 25
    known_spread: float | None = None  # the spread the judge assumes; None: run_sigma (measured)
    broken: Collection[int] = ()
    noisy: Collection[int] = ()
    noisy_factor: float = 6.0
    base_ms: float = 0.1
    alpha: float = 0.05
    seed: int = 0
    runs_made: list[tuple[int, int]] = field(default_factory=list)  # (commit index, repeats) per try
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _kept: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = field(default_factory=dict)

    def _index(self, tested: Commit) -> int:
        """The commit's index; the bad ref itself (not in the range) has the last commit's source."""
        return next((i for i, c in enumerate(self.commits) if c.sha == tested.sha), len(self.commits) - 1)

    def _side(self, rng: np.random.Generator, index: int | None, culprit: int | None, repeats: int,
              sigma: float) -> list[np.ndarray]:
        slow = culprit is not None and index is not None and index >= culprit
        level = self.base_ms * (1.0 + self.slowdown if slow else 1.0)
        return [level * np.exp(rng.normal(0.0, sigma) + rng.normal(0.0, self.sample_sigma, self.samples))
                for _ in range(repeats)]

    def run(self, tested: Commit, try_number: int, repeats: int, device: str | None, threshold: float,
            earlier: Sequence[str] = ()) -> StepRun:
        index = self._index(tested)
        with self._lock:
            self.runs_made.append((index, repeats))
            where = f"try-{len(self.runs_made)}"
        cases = dict(self.cases) if self.cases is not None else {CASE: self.culprit}
        if index in self.broken:
            broken = tuple(RowResult(case_id=case, verdict="failing", head_status="absent", head_op_status="ERROR",
                                     reason="passed in base; in head no record: op ERROR (ImportError)") for case in cases)
            return StepRun(rows=broken, runs=2 * repeats, seconds=0.0, where=where)
        sigma = self.run_sigma * (self.noisy_factor if index in self.noisy else 1.0)
        criteria = Criteria(threshold=threshold, alpha=self.alpha, resamples=200)
        known = self.run_sigma if self.known_spread is None else self.known_spread
        rows: list[RowResult] = []
        for number, (case, culprit) in enumerate(cases.items()):
            # Seeded by what is run, not by the order: probes run in threads at once.
            # (the first case's stream as when the range had one case)
            rng = np.random.default_rng([self.seed, index, try_number, int(tested.sha == self.commits[index].sha)]
                                        + ([number] if number else []))
            base = self._side(rng, None, culprit, repeats, self.run_sigma)
            head = self._side(rng, index, culprit, repeats, sigma)
            with self._lock:
                self._kept[f"{where}:{case}"] = (base, head)
                for name in earlier:
                    base = [*self._kept[f"{name}:{case}"][0], *base]
                    head = [*self._kept[f"{name}:{case}"][1], *head]
            stats = row_stats(base, head, known, criteria, seed=index)
            verdict, reason = decide(stats, stats.p, criteria)
            rows.append(RowResult(case_id=case, verdict=verdict, reason=reason, ratio=stats.ratio, ci_low=stats.ci_low,
                                  ci_high=stats.ci_high, head_status="pass", head_op_status="PASS"))
        return StepRun(rows=tuple(rows), runs=2 * repeats, seconds=0.0, where=where)
