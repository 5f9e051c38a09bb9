"""The step runner of a real bisection: a commit against the good one through `harness ab`
(interleaved on one device, side A's configs replayed on both sides), each side's library
source exported from git and put first on PYTHONPATH, judged with the gate's statistics.

Every step's runs are kept in the cache folder under a key of the two source trees, the run
arguments without their ``--ops`` and the runs a side. A later step with the same key (a resumed
bisection, a second op over the same range) takes the rows of its ops from there when the
cached runs measured them, and runs nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.bisect.git import Repo
from harness.bisect.plan import RowResult
from harness.bisect.session import Commit, StepRun
from harness.results.store import read_json, write_json

__all__ = ["AbStepRunner", "ops_of", "run_key"]

ENTRY = "entry.json"  # written once a step's runs are complete


def ops_of(run_args: Sequence[str]) -> tuple[str, ...] | None:
    """The ops the run arguments select by name (None: not named, the run's default). With
    ``--suite TREE`` the names are its op ids, as `harness run` resolves them (an op mark such as
    ``adaptive_avg_pool2d`` is the function ``perf_adaptive_avg_pool2d``): the rows a bisection
    tracks carry those ids. A name the tree does not resolve stays as written; the run refuses it."""
    from harness.runargs import named_ops, parse_run_args

    ns = parse_run_args(run_args)
    names = list(named_ops(ns))
    if not names:
        return None
    suite = getattr(ns, "suite", None)
    if suite:
        from harness.errors import UsageError
        from harness.suite.inventory import read_inventory
        from harness.suite.layout import locate_suite
        from harness.suite.select import resolve_ops

        try:
            names = [o.id for o in resolve_ops(read_inventory(locate_suite(Path(suite))), [(n, "--ops") for n in names])]
        except (UsageError, OSError):
            pass
    return tuple(sorted(set(names)))


def run_key(run_args: Sequence[str]) -> str:
    """What makes two steps' runs the same measurement, apart from the ops and the device."""
    from harness.runargs import cli_values, parse_run_args

    values = cli_values(parse_run_args(run_args))
    for name in ("ops", "devices", "out", "run_id", "progress", "reports_dir"):
        values.pop(name, None)
    # Only the options given: a harness that learns a new option keeps the keys of the runs it has.
    return json.dumps({k: v for k, v in values.items() if v is not None}, sort_keys=True, default=str)


class AbStepRunner:
    """Runs each step with :func:`harness.compare.ab.run_ab` in ``cache/runs/``."""

    def __init__(self, repo: Repo, good: Commit, source_path: str, run_args: Sequence[str], cache: Path,
                 env: Mapping[str, str], allow_cpu: bool = False, alpha: float = 0.05,
                 spread_file: Path | None = None) -> None:
        self.repo, self.good, self.source_path = repo, good, source_path
        self.run_args = list(run_args)
        self.cache = cache.resolve()
        self.env = dict(env)
        self.allow_cpu, self.alpha, self.spread_file = allow_cpu, alpha, spread_file
        self.ops = ops_of(self.run_args)
        self.key = run_key(self.run_args)
        self._lock = threading.Lock()

    def _folder(self, tested: Commit, try_number: int, repeats: int) -> Path:
        name = f"{self.good.tree}\0{tested.tree}\0{self.key}\0{try_number}\0{repeats}"
        digest = hashlib.sha256(name.encode()).hexdigest()
        return self.cache / "runs" / digest[:20]

    def _cached(self, folder: Path) -> dict[str, Any] | None:
        """The folder's entry when its runs measured every op this bisection selects."""
        try:
            entry = read_json(folder / ENTRY)
        except (OSError, ValueError):
            return None
        measured = entry.get("ops")
        if measured is None:
            return entry  # the runs measured every op of the run arguments
        if self.ops is not None and set(self.ops) <= set(measured):
            return dict(entry)
        return None

    def _source(self, commit: Commit) -> str:
        with self._lock:  # one export per tree, even with several probes at once
            return str(self.repo.export(commit.sha, self.source_path, self.cache / "src") / self.source_path)

    def run(self, tested: Commit, try_number: int, repeats: int, device: str | None, threshold: float,
            earlier: Sequence[str] = ()) -> StepRun:
        folder = self._folder(tested, try_number, repeats)
        entry = self._cached(folder)
        cached = entry is not None
        if entry is None:
            entry = self._measure(tested, repeats, device, folder)
        rows = self._judge([*(Path(e) for e in earlier), folder], threshold)
        return StepRun(rows=rows, runs=int(entry["runs"]), seconds=float(entry["seconds"]), cached=cached,
                       where=str(folder))

    def _measure(self, tested: Commit, repeats: int, device: str | None, folder: Path) -> dict[str, Any]:
        from harness.compare.ab import AbSide, run_ab

        if folder.exists():  # an interrupted step's runs: measured again whole
            shutil.rmtree(folder)
        sides = {"a": AbSide(name="a", pythonpath=(self._source(self.good),)),
                 "b": AbSide(name="b", pythonpath=(self._source(tested),))}
        args = [*self.run_args, *(["--devices", device] if device is not None else [])]
        started = time.time()
        print(f"bisect: {tested.sha[:12]} against {self.good.sha[:12]}, {repeats} run(s) a side"
              + (f" on device {device}" if device is not None else "") + f" -> {folder}", flush=True)
        result = run_ab(sides, args, folder, self.env, repeats=repeats)
        entry = {"good": self.good.sha, "good_tree": self.good.tree, "tested": tested.sha, "tree": tested.tree,
                 "ops": list(self.ops) if self.ops is not None else None, "run_args": self.run_args,
                 "repeats": repeats, "runs": len(result.steps), "seconds": round(time.time() - started, 3)}
        write_json(folder / ENTRY, entry)
        return entry

    def _judge(self, folders: Sequence[Path], threshold: float) -> tuple[RowResult, ...]:
        """The rows of the last try, pooled with the earlier tries' runs (each side's repeats)."""
        from harness.compare.compare import compare_runs
        from harness.compare.gate import pool_side
        from harness.compare.spread import load_spread
        from harness.compare.stats import Criteria
        from harness.results.runinfo import ENVIRONMENT_FIELDS

        last = folders[-1]
        sides = {"a": last / "a", "b": last / "b"}
        if len(folders) > 1:
            pooled = last / "pooled"
            shutil.rmtree(pooled, ignore_errors=True)
            pooled.mkdir()
            for side in sides:
                runs = sorted(p for f in folders for p in (f / "repeats").glob(f"{side}-*") if p.is_dir())
                sides[side] = pool_side(runs, pooled / side, f"bisect-{side}", f"{len(folders)} tries pooled",
                                        {"ab_side": side})
        comparison = compare_runs(sides["a"], sides["b"], Criteria(threshold=threshold, alpha=self.alpha),
                                  allow_cpu=self.allow_cpu, spread=load_spread(self.spread_file),
                                  deliberate=tuple(ENVIRONMENT_FIELDS))
        rows = []
        for row in comparison.rows:
            if self.ops is not None and row.op not in self.ops:
                continue
            stats = row.stats
            rows.append(RowResult(
                case_id=row.case_id, verdict=row.verdict, reason=row.reason,
                ratio=stats.ratio if stats else None, ci_low=stats.ci_low if stats else None,
                ci_high=stats.ci_high if stats else None, head_status=row.head_status,
                head_op_status=comparison.head.op_status(row.op)[0], base_status=row.base_status))
        return tuple(rows)

