"""What one use of the torch profiler costs an op process, step by step (docs/timing.md).

A suite op's first profiler row took 3.5-9.7 s on the H200 (2026-12-01,
benchmarks/results/flaggems-corpus-h200-2026-12-01d) where its later profiler rows took 0.9-1.7 s and its graph rows 0.5-1.2 s. This script
times, in a fresh process, the steps the profiler timer goes through: CUDA's start, the opening
profiler session and later ones (entering, the calls, leaving), and reading the device events,
for sessions of 10 and of 1200 iterations of a small kernel between boundary kernels, as the
timer takes them.

    python3 benchmarks/profiler_cost.py [--out benchmarks/results/profiler_cost-<device>.json]
    python3 benchmarks/profiler_cost.py --warm-up [--out ...]

Prints a table and writes the numbers to --out. Needs a CUDA device with CUPTI.

``--warm-up`` asks whether the opening session's cost can be paid ahead, where a pre-started op
process could pay it off the device's clock, and whether that breaks the profiler afterwards
(an empty session before a graph capture is reported to leave CUPTI recording nothing on CUDA
13: lightseekorg/tokenspeed#1348). Each way runs in a fresh process: an empty profiler session
(``none``: no warm-up; ``before-cuda``: before CUDA starts; ``after-cuda``: after it, before any
capture), then a CUDA graph captured and replayed as the graph timer does, then a profiler
session of eager calls and one of graph replays. Per way: the warm-up's seconds, whether it
started CUDA (the question for ``before-cuda``: a pre-started process must not open its
device; asked of torch and of the driver, whose primary context a library can open without
torch knowing), the first real session's seconds to enter, and the kernels each session
recorded, including a session after a second capture (a later row's).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def write_json(path: Path, data: Any) -> None:
    """benchmarks._common's, imported when the numbers are written: importing it first would load
    the harness's timing modules before the "import torch" step this script times."""
    from benchmarks._common import write_json as write

    write(path, data)


WAYS = ("none", "before-cuda", "after-cuda")


def warm_up_way(way: str) -> dict[str, Any]:
    """One way of warming the profiler, in this (fresh) process: see the module's docstring."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    # the empty session a held op process opens
    from harness.child.timing.profiler import warm_up as empty_session

    def kernels(prof: Any) -> int:
        return sum(1 for e in prof.profiler.kineto_results.events()
                   if e.device_type() != torch.autograd.DeviceType.CPU)

    result: dict[str, Any] = {"way": way, "warm_up_s": None}
    if way == "before-cuda":
        result["warm_up_s"] = round(empty_session(), 4)
    # asked before anything else starts CUDA: only the before-cuda way's warm-up can have opened it
    result["cuda_started_by_warm_up"] = torch.cuda.is_initialized() if way == "before-cuda" else None
    result["device_context_by_warm_up"] = primary_context_active() if way == "before-cuda" else None
    x = torch.randn(64, 64, device="cuda")
    torch.cuda.synchronize()
    if way == "after-cuda":
        result["warm_up_s"] = round(empty_session(), 4)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.neg(x)  # warm the call outside the capture, as the graph timer does
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(10):
            torch.neg(x)
    graph.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    prof = profile(activities=[ProfilerActivity.CUDA])
    prof.__enter__()
    result["first_session_enter_s"] = round(time.perf_counter() - t0, 4)
    for _ in range(10):
        torch.neg(x)
    torch.cuda.synchronize()
    prof.__exit__(None, None, None)
    result["eager_kernels"] = kernels(prof)  # 10 expected
    with profile(activities=[ProfilerActivity.CUDA]) as replays:
        graph.replay()
        torch.cuda.synchronize()
    result["graph_replay_kernels"] = kernels(replays)  # 10 expected where CUPTI sees graph kernels
    again = torch.cuda.CUDAGraph()  # a later row's capture, after profiler sessions, then its profiler session
    with torch.cuda.graph(again):
        torch.neg(x)
    again.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as later:
        for _ in range(10):
            torch.neg(x)
        torch.cuda.synchronize()
    result["eager_kernels_after_second_capture"] = kernels(later)  # 10 expected
    return result


def primary_context_active(device: int = 0) -> bool | None:
    """Whether this process holds device ``device``'s primary context (the driver's own answer,
    which torch.cuda.is_initialized cannot give for a context a library opened); None where the
    driver library cannot be asked. cuInit opens no context."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        handle, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        if (cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(handle), device) != 0
                or cuda.cuDevicePrimaryCtxGetState(handle, ctypes.byref(flags), ctypes.byref(active)) != 0):
            return None
    except (OSError, AttributeError):
        return None
    return bool(active.value)


def warm_up(out: Path | None) -> None:
    import subprocess
    import sys

    rows = []
    for way in WAYS:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--way", way], capture_output=True, text=True, timeout=300)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        row = json.loads(lines[-1]) if done.returncode == 0 and lines else \
            {"way": way, "error": " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])}
        row["process_s"] = round(time.perf_counter() - t0, 2)
        rows.append(row)
    columns = ("way", "warm_up_s", "cuda_started_by_warm_up", "device_context_by_warm_up", "first_session_enter_s",
               "eager_kernels", "graph_replay_kernels", "eager_kernels_after_second_capture", "process_s", "error")
    print("  ".join(columns))
    for row in rows:
        print("  ".join(str(row.get(c, "")) for c in columns))
    import torch
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no-cuda"
    target = out or REPO / "benchmarks" / "results" / f"profiler_warm_up-{device.replace(' ', '_')}.json"
    write_json(target, {"device": device, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"), "ways": rows})
    print(f"-> {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--sessions", type=int, default=4, help="sessions of each size after the first")
    parser.add_argument("--warm-up", action="store_true", help="compare ways of paying the opening session ahead")
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # one way, in its own process
    args = parser.parse_args()
    if args.way:
        print(json.dumps(warm_up_way(args.way)))
        return
    if args.warm_up:
        warm_up(args.out)
        return
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
        prof: Any = profile(activities=[ProfilerActivity.CUDA])
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

    session(10, "opening session")  # results/profiler_cost-h200.json has it under its former label
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
    write_json(out, result)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
