"""How many intra-op threads make torch's cpu timings stable on a shared host.

The cpu backend times torch baselines with a wall clock. With torch's default intra-op pool
(one thread per core), a busy host stalls the pool's threads and a 6 us softmax can read
milliseconds. This script starts fresh op-like processes (the way `harness run` starts op
processes) under each threading rule, with and without a competing busy process, and times a
few small torch ops in each; it prints, per rule and load, the median, the p90/median and
max/median within a process, and the spread of the medians across processes (run to run).

    python benchmarks/cpu_threads.py [--processes 3] [--calls 300] [--out benchmarks/results/cpu_threads.json]

Rules: ``default`` (torch's own pool size), ``omp1`` (OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1
in the process's environment, what harness/run/spawn.py child_env sets for the cpu backend),
``set1`` (torch.set_num_threads(1) after import).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RULES = ("default", "omp1", "set1")
CASES = (("softmax", (64, 64)), ("softmax", (1024, 1024)), ("add", (1024, 1024)), ("layer_norm", (256, 1024)))

_CHILD = r"""
import json, sys, time
import torch
rule, calls = sys.argv[1], int(sys.argv[2])
if rule == "set1":
    torch.set_num_threads(1)
cases = json.loads(sys.argv[3])
out = {"threads": torch.get_num_threads(), "cases": {}}
for name, shape in cases:
    x = torch.randn(*shape)
    y = torch.randn(*shape)
    w = torch.randn(shape[-1])
    fn = {"softmax": lambda: torch.softmax(x, -1), "add": lambda: x + y,
          "layer_norm": lambda: torch.nn.functional.layer_norm(x, (shape[-1],), w, w)}[name]
    for _ in range(20):
        fn()
    samples = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e3)
    out["cases"][f"{name} {'x'.join(map(str, shape))}"] = samples
print(json.dumps(out))
"""


def _quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1)))]


def _child(rule: str, calls: int) -> dict[str, Any]:
    env = dict(os.environ)
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(key, None)
    if rule == "omp1":
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _CHILD, rule, str(calls), json.dumps(CASES)],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


def _busy() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=3, help="fresh processes per rule and load (default 3)")
    p.add_argument("--calls", type=int, default=300, help="timed calls per case and process (default 300)")
    p.add_argument("--out", default="benchmarks/results/cpu_threads.json")
    args = p.parse_args()
    rows = []
    for load in ("idle", "busy"):
        busy = _busy() if load == "busy" else None
        try:
            time.sleep(0.2)
            for rule in RULES:
                runs = [_child(rule, args.calls) for _ in range(args.processes)]
                for case in runs[0]["cases"]:
                    per = [r["cases"][case] for r in runs]
                    medians = [statistics.median(s) for s in per]
                    rows.append({
                        "load": load, "rule": rule, "threads": runs[0]["threads"], "case": case,
                        "median_us": statistics.median(medians) * 1e3,
                        "p90_over_median": statistics.median(_quantile(s, 0.9) / statistics.median(s) for s in per),
                        "max_over_median": max(max(s) / statistics.median(s) for s in per),
                        "run_to_run": (max(medians) - min(medians)) / statistics.median(medians),
                        "medians_us": [m * 1e3 for m in medians],
                    })
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    print(f"host: {os.cpu_count()} cores; {args.processes} processes x {args.calls} calls per rule and load")
    print(f"{'load':5} {'rule':8} {'thr':>3} {'case':22} {'median':>10} {'p90/med':>8} {'max/med':>9} {'run-to-run':>10}")
    for r in rows:
        print(f"{r['load']:5} {r['rule']:8} {r['threads']:>3} {r['case']:22} {r['median_us']:8.1f}us "
              f"{r['p90_over_median']:8.2f} {r['max_over_median']:9.1f} {100 * r['run_to_run']:9.1f}%")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"cores": os.cpu_count(), "processes": args.processes, "calls": args.calls,
                               "rows": rows}, indent=2) + "\n")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
