"""What one use of the torch profiler costs an op process, step by step (docs/timing.md).

A suite op's first profiler row took 3.9-6.2 s on the H200 (2026-12-01, sample-4 of the corpus
run) where its later profiler rows took 1.2-1.7 s and its graph rows 0.5-1.2 s. This script
times, in a fresh process, the steps the profiler timer goes through: CUDA's start, the first
profiler session and later ones (entering, the calls, leaving), and reading the device events,
for sessions of 10 and of 1200 iterations of a small kernel between boundary kernels, as the
timer takes them.

    python3 benchmarks/profiler_cost.py [--out benchmarks/results/profiler_cost-<device>.json]

Prints a table and writes the numbers to --out. Needs a CUDA device with CUPTI.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--sessions", type=int, default=4, help="sessions of each size after the first")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []

    def step(name: str, start: float, **extra: Any) -> float:
        now = time.perf_counter()
        rows.append({"step": name, "s": round(now - start, 4), **extra})
        return now

    t = time.perf_counter()
    import torch
    from torch.profiler import ProfilerActivity, profile
    t = step("import torch", t)
    x = torch.randn(64, 64, device="cuda")
    marker = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    t = step("CUDA start (first tensor)", t)

    def session(n: int, label: str) -> None:
        t0 = time.perf_counter()
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.__enter__()
        t1 = step(f"{label}: enter", t0)
        for _ in range(n):
            marker.add_(1)
            torch.neg(x)
        marker.add_(1)
        torch.cuda.synchronize()
        t2 = step(f"{label}: {n} iterations", t1)
        prof.__exit__(None, None, None)
        t3 = step(f"{label}: leave", t2)
        events = prof.profiler.kineto_results.events()
        kernels = [e for e in events if e.device_type() != torch.autograd.DeviceType.CPU]
        step(f"{label}: read events", t3, events=len(events), kernels=len(kernels))
        rows.append({"step": f"{label}: whole session", "s": round(time.perf_counter() - t0, 4)})

    session(10, "first session")
    for k in range(args.sessions):
        session(10, f"session {k + 2}, 10 iterations")
    for k in range(args.sessions):
        session(1200, f"session {k + 2 + args.sessions}, 1200 iterations")

    width = max(len(r["step"]) for r in rows)
    print(f"{'step':<{width}}  seconds  events")
    for r in rows:
        print(f"{r['step']:<{width}}  {r['s']:7.4f}  {r.get('events', '')}")
    device = torch.cuda.get_device_name(0)
    result = {"device": device, "torch": torch.__version__, "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d"), "rows": rows}
    out = args.out or REPO / "benchmarks" / "results" / f"profiler_cost-{device.replace(' ', '_')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
