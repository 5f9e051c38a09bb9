"""What the correctness check costs in device memory on a large output, whole and in slices
(``harness.child.measure.check_close``; benchmarks/results/flaggems-corpus-h200-2026-12-03b/README.md).

    python3 benchmarks/compare_memory.py --out FILE.json               # a CUDA device, 1G elements
    python3 benchmarks/compare_memory.py --device cpu --numel 1000000  # a dry run of the plumbing

For each dtype it makes a reference and a perturbed candidate of ``--numel`` elements on the
device, then runs the comparison with one slice (as the check did before it was sliced) and with
the default slice length, and prints, per way: the peak memory the comparison allocated beyond the
two tensors (torch's allocator statistics; not measured on the CPU), its wall time, and whether
its verdict and figures equal the other way's. The table is written to ``--out`` as JSON with
torch's version and the device.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.child.measure import COMPARE_CHUNK, check_close  # noqa: E402


def _one(torch: Any, device: str, dtype: Any, numel: int, chunk: int) -> dict[str, Any]:
    gen = torch.Generator(device=device).manual_seed(0)
    ref = torch.randn(numel, generator=gen, device=device, dtype=dtype)
    cand = ref + 1e-7 * torch.randn(numel, generator=gen, device=device, dtype=dtype)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    start = time.perf_counter()
    result = check_close(cand, ref, 1e-7, 1e-7, chunk=chunk)
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    extra = (torch.cuda.max_memory_allocated() - before) if cuda else None
    del ref, cand
    if cuda:
        torch.cuda.empty_cache()
    return {"chunk": chunk, "peak_extra_gib": None if extra is None else round(extra / 2**30, 3),
            "wall_s": round(wall, 3), "correctness": dataclasses.asdict(result)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--numel", type=int, default=1 << 30)
    ap.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    ap.add_argument("--out", type=Path)
    ns = ap.parse_args(argv)
    import torch

    if ns.device.startswith("cuda") and not torch.cuda.is_available():
        print("compare_memory: no CUDA device here", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    for name in ns.dtypes:
        dtype = getattr(torch, name)
        whole = _one(torch, ns.device, dtype, ns.numel, ns.numel)
        sliced = _one(torch, ns.device, dtype, ns.numel, COMPARE_CHUNK)
        same = whole["correctness"] == sliced["correctness"]
        for way, row in (("whole", whole), ("slices", sliced)):
            rows.append({"dtype": name, "numel": ns.numel, "way": way, "same_verdict": same, **row})
    print(f"{'dtype':8} {'numel':>12} {'way':7} {'slice':>11} {'peak extra GiB':>15} {'wall s':>8} {'same':>5}")
    for r in rows:
        peak = "-" if r["peak_extra_gib"] is None else f"{r['peak_extra_gib']:.2f}"
        print(f"{r['dtype']:8} {r['numel']:>12} {r['way']:7} {r['chunk']:>11} {peak:>15} {r['wall_s']:>8.2f} "
              f"{str(r['same_verdict']):>5}")
    if ns.out is not None:
        device_name = torch.cuda.get_device_name() if ns.device.startswith("cuda") else "cpu"
        ns.out.write_text(json.dumps({"torch": torch.__version__, "device": device_name, "rows": rows}, indent=1))
    return 0 if all(r["same_verdict"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
