"""Timer fidelity: every harness timer and triton.testing's against the profiler's kernel time.

A calibration set from about 1 us to about 1 ms (small and large add, softmax
at several sizes, mm). Each kernel is timed 5 times by each timer; printed per
kernel and timer: the median's ratio to the profiler median, and the A/A
spread (max - min) / median of the 5 repeats' medians.

    python benchmarks/timing_fidelity.py --out benchmarks/results/timing_fidelity.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import cuda_setup, harness_timers, median, write_json  # noqa: E402

CALIBRATION = [
    ("add", (1, 1024)),
    ("add", (256, 1024)),
    ("softmax", (1024, 1024)),
    ("softmax", (4096, 4096)),
    ("add", (4096, 4096)),
    ("mm", (1024, 1024, 1024)),
    ("softmax", (16384, 8192)),
    ("mm", (4096, 4096, 4096)),
    ("add", (16384, 16384)),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results/timing_fidelity.json")
    args = parser.parse_args()
    import torch
    import triton.testing as tt

    from harness.ops.registry import load_ops

    backend, api, info = cuda_setup(args.backend)
    device = f"{backend.device_type}:0"
    ops = load_ops()
    rows: list[dict[str, Any]] = []
    for op_id, shape in CALIBRATION:
        op = ops[op_id]
        gen = torch.Generator(device=device).manual_seed(0)
        inputs = op.make_inputs(shape, torch.bfloat16, gen, device)

        def fn(op=op, inputs=inputs):
            return op.candidate(*inputs)

        timers = harness_timers(backend, api, device, info["l2_bytes"], op_id)
        per_timer: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for name, timer in timers.items():
                per_timer.setdefault(name, []).append(median(list(timer.measure(fn).values)))
            per_timer.setdefault("do_bench", []).append(tt.do_bench(fn, return_mode="median"))
            per_timer.setdefault("do_bench_cudagraph", []).append(tt.do_bench_cudagraph(fn, return_mode="median"))
        truth = median(per_timer["profiler"])
        for name, meds in per_timer.items():
            m = median(meds)
            rows.append({
                "kernel": f"{op_id} {'x'.join(map(str, shape))}",
                "timer": name,
                "median_ms": m,
                "profiler_ms": truth,
                "ratio": m / truth,
                "spread": (max(meds) - min(meds)) / m,
                "repeats": meds,
            })
        del inputs
    print(f"{'kernel':22} {'profiler us':>11} " + " ".join(f"{t:>20}" for t in
          ("graph", "direct", "profiler", "do_bench", "do_bench_cudagraph")))
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    for k in kernels:
        sel = {r["timer"]: r for r in rows if r["kernel"] == k}
        cells = " ".join(f"{sel[t]['ratio']:8.3f}x {100 * sel[t]['spread']:6.2f}%    " for t in
                         ("graph", "direct", "profiler", "do_bench", "do_bench_cudagraph"))
        print(f"{k:22} {sel['profiler']['profiler_ms'] * 1e3:11.2f} {cells}")
    print("cells: ratio to the profiler's kernel time, A/A spread (max-min)/median over repeats")
    write_json(args.out, {"device": info, "repeats": args.repeats, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
