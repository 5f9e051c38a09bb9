"""What a failed graph capture leaves of torch's current stream and caching allocator, and
whether ending the capture's pool by hand gives them back (docs/timing.md, "Capture failures").

    python3 benchmarks/capture_pool.py --out FILE.json        # on a machine with a CUDA device

Why (torch's source as we read it; measured on an H200, docs/timing.md, "Capture failures"):
``CUDAGraph::capture_end`` raises at ``cudaStreamEndCapture`` when the capture was invalidated,
before it calls the allocator's ``endAllocateToPool``; ``reset()`` releases the pool only after
a capture that ended; and
``torch.cuda.graph.__exit__`` leaves its stream context unexited when ``capture_end`` raises.
If so, after a failed capture the process runs on the capture's side stream, and the allocator
believes a capture is still under way for the rest of the process: it defers forever the free of
every block used on a second stream (``needs_events_deferred_until_no_capture``) and skips its
event processing. At linalg_lu_factor_ex_out's out-of-memory row (benchmarks/results/
flaggems-corpus-h200-2026-12-03b/README.md) torch reported 15 GiB "allocated in private pools (e.g., CUDA Graphs)" and
44 GiB reserved but unallocated, at the fourteenth failed capture of the op.

Each mode runs in a fresh process: ``control`` (no capture), ``harness`` (a capture that fails
as the graph timer makes it: under ``torch.random.fork_rng``, inside ``torch.cuda.graph``, its
body a host read-back), ``mended`` (the same capture given its own pool,
``torch.cuda.graph_pool_handle()``; after the failure the stream before the capture is set again
and the pool's diversion ended and released: ``torch._C._cuda_endAllocateToPool``,
``torch._C._cuda_releasePool``), ``timer`` (the harness's own graph timer measuring a call that
reads back to the host, so that its capture fails; the graph timer ends the pool itself since
ea688fb: DeviceApi.after_failed_capture). Every process runs ``x @ x`` outside any capture first:
cuBLAS used for the first time inside a capture fails that capture by itself. The failed graph
object is then dropped (a pool released twice would fail there). After it each process checks: whether the current stream is the
one before the capture; eight rounds of a 256 MiB block used on a second stream
(``record_stream``) then freed, and how much of them is still active and reserved after a
synchronize (``control`` reuses one block); whether ``empty_cache`` gives the reserved memory
back; the bytes the memory snapshot puts in private pools; and a capture that works afterwards.
The table is printed and written to ``--out`` (JSON, with torch's version and the device).

Where no CUDA device is present it says so and exits 2, writing nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODES = ("control", "harness", "mended", "timer")

CHILD = r"""
import gc, json, sys, torch
mode = sys.argv[1]
dev = torch.device("cuda:0")
MiB = 1 << 20
x = torch.randn(64, 64, device=dev)
(x @ x).sum().item()  # cuBLAS warmed up outside capture: its first use inside one fails by itself
out = {"mode": mode}

def attempt(fn):
    try:
        fn()
        return "ok"
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"

def private_pools():
    segs = [s for s in torch.cuda.memory_snapshot() if tuple(s.get("segment_pool_id", (0, 0))) != (0, 0)]
    return {"segments": len(segs), "reserved_mib": sum(s["total_size"] for s in segs) / MiB,
            "allocated_mib": sum(s["allocated_size"] for s in segs) / MiB}

before = torch.cuda.current_stream()
torch.cuda.synchronize()
if mode == "timer":
    sys.path.insert(0, sys.argv[2])
    from harness.backends import get_backend
    from harness.child.plugins.timing import rng_keep, rng_probe
    from harness.child.timing.base import CaptureRefused, device_api
    from harness.child.timing.graph import GraphTimer

    timer = GraphTimer(api=device_api("cuda", None, "CUDAGraph"), backend=get_backend("cuda"), op_id="capture_pool",
                       rng_probe=rng_probe("cuda:0", "cuda"), rng_keep=rng_keep("cuda:0", "cuda"))

    def measure():
        try:
            timer.measure(lambda: (x @ x).sum().item())  # a host read-back: every capture fails
        except CaptureRefused as refused:
            out["refused"] = f"{refused.reason}: {refused.detail}"[-200:]
            return
        raise AssertionError("the capture did not fail")

    out["capture"] = attempt(measure)
    out["pools_ended"] = timer.pools_ended
    out["private_pools_after_capture"] = private_pools()
elif mode != "control":
    graph = torch.cuda.CUDAGraph()
    pool = torch.cuda.graph_pool_handle() if mode == "mended" else None

    def capture():
        with torch.random.fork_rng(devices=[0], device_type="cuda"):
            with torch.cuda.graph(graph, pool=pool):
                y = x @ x
                y.sum().item()  # a host read-back: the capture is invalidated

    out["capture"] = attempt(capture)
    out["sync_after"] = attempt(torch.cuda.synchronize)
    if mode == "mended":
        out["mend"] = attempt(lambda: (torch.cuda.set_stream(before),
                                       torch._C._cuda_endAllocateToPool(0, pool),
                                       torch._C._cuda_releasePool(0, pool)))
    out["private_pools_after_capture"] = private_pools()

    def drop():
        global graph
        del graph
        gc.collect()

    out["graph_dropped"] = attempt(drop)
out["stream_is_the_one_before"] = torch.cuda.current_stream() == before
side = torch.cuda.Stream()
start_active = torch.cuda.memory_stats().get("active_bytes.all.current", 0)
start_reserved = torch.cuda.memory_reserved()

def rounds():
    for _ in range(8):
        t = torch.empty(256 * MiB, dtype=torch.uint8, device=dev)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            t.add_(1)
        t.record_stream(side)
        del t
        torch.cuda.synchronize()

out["rounds"] = attempt(rounds)
stats = torch.cuda.memory_stats()
out["rounds_active_mib"] = (stats.get("active_bytes.all.current", 0) - start_active) / MiB
out["rounds_reserved_mib"] = (torch.cuda.memory_reserved() - start_reserved) / MiB
torch.cuda.empty_cache()
out["reserved_after_empty_cache_mib"] = (torch.cuda.memory_reserved() - start_reserved) / MiB
out["private_pools_at_end"] = private_pools()

def working_capture():
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x @ x
    g.replay()
    torch.cuda.synchronize()

out["capture_after"] = attempt(working_capture)
print("RESULT " + json.dumps(out))
"""


def child(mode: str) -> dict[str, Any]:
    root = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, root], capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return {"mode": mode, "error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ['(no output)']}"}
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=list(MODES))
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("capture_pool: no CUDA device here; run it on the GPU machine", file=sys.stderr)
        return 2
    rows = [child(mode) for mode in args.modes]
    columns = ("mode", "capture", "mend", "pools_ended", "graph_dropped", "stream_is_the_one_before", "rounds",
               "rounds_active_mib", "rounds_reserved_mib", "reserved_after_empty_cache_mib", "capture_after", "error")
    for row in rows:
        print(" | ".join(f"{c}={str(row.get(c, '-'))[:70]}" for c in columns))
        for key in ("private_pools_after_capture", "private_pools_at_end"):
            if key in row:
                print(f"    {key}: {row[key]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                                    "rows": rows}, indent=1) + "\n")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
