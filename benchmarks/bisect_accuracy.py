"""How often `harness bisect` names the right commit, and what it costs, over simulated ranges.

Each range has N commits that change the library (N drawn from 8 to 223, the first-parent
commits between FlagGems v5.3.1 and v5.3.4) with a slowdown injected at a random commit. A step
is a simulated `harness ab` (harness.bisect.simulate): each run's level wanders from run to run
by a log-normal sigma drawn per range from 0.2% to 2% (as the H200's runs do), each run has 25
samples around its level, and the rows are judged with the gate's own statistics; the
bisection itself is harness.bisect.session's, as the command runs it. Nothing runs on a device.

Scenarios:
- ``measured``: the judge knows the run-to-run spread (a measured spread table or history);
- ``assumed``: the judge assumes the shipped default spread (2%), whatever the real one is;
- ``skip``: as measured, with 10% of the commits unable to run (an op that fails to import);
- ``noisy``: as measured, with 10% of the commits wandering five times more;
- ``k4``: as measured, four devices (four commits tested a round);
- ``a-a``: no change at all: how often a culprit is named anyway (a false alarm);
- ``two``: as measured, two cases slowed by two different commits of the range (a nightly range
  where two commits slowed two ops): right when each case's own commit is named for it.

    python benchmarks/bisect_accuracy.py                 # 200 ranges a scenario
    python benchmarks/bisect_accuracy.py --ranges 20 --scenarios measured k4

Prints a table and writes benchmarks/results/bisect_accuracy.json (--out).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.bisect.session import Commit, Settings, bisect
from harness.bisect.simulate import CASE, SimulatedRange, commits_of

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("measured", "assumed", "skip", "noisy", "k4", "a-a", "two")
BAD_REF = Commit("f" * 40, "bad ref", "tree-bad")
SHIPPED_SPREAD = 0.02  # harness/compare/run_spread.yaml's default for kernels of 10 us and more


def one_range(scenario: str, index: int, seed: int, slowdown: float) -> dict[str, Any]:
    rng = random.Random(f"{seed}-{scenario}-{index}")
    n = rng.randint(8, 223)
    culprit = None if scenario == "a-a" else rng.randrange(n)
    sigma = rng.uniform(0.002, 0.02)
    others = [i for i in range(n - 1) if i != culprit]  # the bad end runs: the user saw it
    broken = set(rng.sample(others, max(1, n // 10))) if scenario == "skip" else set()
    noisy = set(rng.sample(range(n), max(1, n // 10))) if scenario == "noisy" else set()
    commits = commits_of(n)
    # each case and the commit that slows it (None: none does)
    expected: dict[str, int | None] = {CASE: culprit}
    if scenario == "two":
        expected = {"first[1]": culprit, "second[2]": rng.choice([i for i in range(n) if i != culprit])}
    sim = SimulatedRange(commits, culprit, cases=expected if scenario == "two" else None, slowdown=slowdown,
                         run_sigma=sigma, broken=broken, noisy=noisy,
                         noisy_factor=5.0, known_spread=SHIPPED_SPREAD if scenario == "assumed" else None,
                         seed=rng.randrange(2**31))
    devices: tuple[str | None, ...] = ("0", "1", "2", "3") if scenario == "k4" else (None,)
    result = bisect(commits, BAD_REF, sim, Settings(devices=devices), key={})
    named: dict[str, str | None] = dict.fromkeys(expected)
    left: dict[str, tuple[int, int]] = {}
    for answer in result.answers:
        for case in answer.cases:
            named[case] = answer.outcome.culprit
            if answer.outcome.culprit is None:
                left[case] = (answer.outcome.first, answer.outcome.last)
    want = {case: commits[i].sha if i is not None else None for case, i in expected.items()}
    held = bool(left) and all(expected[c] is not None and lo <= int(expected[c] or 0) <= hi for c, (lo, hi) in left.items())
    out = result.outcome
    return {
        "n": n, "culprit": culprit if scenario != "two" else sorted(i for i in expected.values() if i is not None),
        "sigma": round(sigma, 5), "named": any(named.values()), "right": named == want,
        "wrong": any(sha is not None and sha != want[c] for c, sha in named.items()), "range_left": bool(left),
        "range_holds_culprit": held,
        "missed": any(expected[c] is not None and sha is None and c not in left for c, sha in named.items()), "remaining": sum(hi - lo + 1 for lo, hi in left.values()),
        "rounds": result.rounds, "bound": round(math.log2(n) + 2, 3) * (2 if scenario == "two" else 1),
        "runs": result.runs, "steps": len(result.steps), "skipped": len(out.skipped) if out is not None else 0,
    }


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def share(key: str) -> float:
        return sum(1 for r in rows if r[key]) / len(rows)

    within = sum(1 for r in rows if r["rounds"] <= r["bound"]) / len(rows)
    return {
        "ranges": len(rows), "right": share("right"), "wrong": share("wrong"), "range_left": share("range_left"),
        "missed": share("missed"),
        "range_left_holds_culprit": share("range_holds_culprit"),
        "rounds_mean": statistics.fmean(r["rounds"] for r in rows), "rounds_max": max(r["rounds"] for r in rows),
        "bound_mean": statistics.fmean(r["bound"] for r in rows),
        "rounds_over_bound_max": max(r["rounds"] - r["bound"] for r in rows), "within_bound": within,
        "runs_mean": statistics.fmean(r["runs"] for r in rows), "runs_max": max(r["runs"] for r in rows),
        "runs_per_commit_tested": sum(r["runs"] for r in rows) / max(1, sum(r["steps"] for r in rows)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--ranges", type=int, default=200, help="simulated ranges a scenario (default 200)")
    p.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    p.add_argument("--slowdown", type=float, default=5.0, help="the injected slowdown in percent (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bisect_accuracy.json")
    ns = p.parse_args(argv)
    if ns.ranges < 1:
        p.error("--ranges must be at least 1")
    results: dict[str, Any] = {}
    started = time.time()
    header = (f"{'scenario':<9} {'ranges':>6} {'right':>6} {'wrong':>6} {'left':>6} {'missed':>6} {'rounds':>12} "
              f"{'log2N+2':>7} {'within':>6} {'runs':>11} {'runs/commit':>11}")
    print(header)
    for scenario in ns.scenarios:
        rows = [one_range(scenario, i, ns.seed, ns.slowdown / 100.0) for i in range(ns.ranges)]
        s = summarise(rows)
        results[scenario] = {"summary": s, "ranges": rows}
        print(f"{scenario:<9} {s['ranges']:>6} {s['right']:>6.1%} {s['wrong']:>6.1%} {s['range_left']:>6.1%} "
              f"{s['missed']:>6.1%} "
              f"{s['rounds_mean']:>6.1f} (<={s['rounds_max']:>2}) {s['bound_mean']:>7.1f} {s['within_bound']:>6.1%} "
              f"{s['runs_mean']:>5.1f} (<={s['runs_max']:>3}) {s['runs_per_commit_tested']:>11.1f}", flush=True)
    data = {
        "what": "harness bisect over simulated ranges: a slowdown injected at a random commit, run-to-run noise "
                "0.2-2% (log-normal sigma per range), 25 samples a run, judged with the gate's statistics",
        "slowdown": ns.slowdown / 100.0, "seed": ns.seed, "settings": {"repeats": Settings().repeats,
                                                                       "max_tries": Settings().max_tries},
        "columns": {"right": "the injected commit named", "wrong": "another commit named",
                    "left": "no single commit named: a range of skipped commits is left",
                    "missed": "a slowed case the opening check did not see change, so not followed",
                    "rounds": "rounds of probes (a round tests k commits at once)",
                    "runs": "`harness run`s, both sides, the check included"},
        "seconds": round(time.time() - started, 1), "scenarios": results,
    }
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    # One line a range: the summaries stay readable, the file small.
    text = json.dumps({k: v for k, v in data.items() if k != "scenarios"}, indent=1, sort_keys=True)[:-2]
    parts = []
    for name, scenario in results.items():
        ranges = ",\n".join("   " + json.dumps(r, sort_keys=True) for r in scenario["ranges"])
        parts.append(f'  "{name}": {{\n   "summary": {json.dumps(scenario["summary"], sort_keys=True)},\n'
                     f'   "ranges": [\n{ranges}\n   ]\n  }}')
    text += ',\n "scenarios": {\n' + ",\n".join(parts) + "\n }\n}\n"
    json.loads(text)
    ns.out.write_text(text)
    print(f"wrote {ns.out} ({data['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
