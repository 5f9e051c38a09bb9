"""Where an op process's start-up time goes, alone and with one on each of two devices at once.

Every op of a batch runs in a fresh process (docs/batch.md), so its fixed cost (interpreter,
imports, device context, the device-state query, exit) is paid per op; when two devices work
side by side those costs may also contend (disk, driver locks). This times each piece in fresh
processes, first one at a time, then two at once pinned to different devices, and prints a table.

    python benchmarks/op_start_cost.py --out benchmarks/results/op_start_cost.json   # needs a GPU (two for 'pair')
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

ROOT = Path(__file__).resolve().parents[1]

PIECES: dict[str, list[str]] = {
    "python": [sys.executable, "-c", "pass"],
    "import pytest": [sys.executable, "-c", "import pytest"],
    "import torch": [sys.executable, "-c", "import torch"],
    "import torch+triton+harness plugins": [
        sys.executable, "-c",
        "import torch, triton, pytest, harness.child.plugins.session, harness.child.plugins.timing, harness.child.measure"],
    "torch + device context": [sys.executable, "-c", "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"],
    "nvidia-smi state query": ["nvidia-smi", "--query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw",
                               "--format=csv,noheader,nounits"],
}


def _timed(cmd: list[str], devices: list[str]) -> list[float]:
    """Start one copy of ``cmd`` per device at once; each one's wall time."""
    procs = []
    for d in devices:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=d, PYTHONPATH=f"{ROOT}:{os.environ.get('PYTHONPATH', '')}")
        procs.append((time.perf_counter(), subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)))
    walls = []
    for t0, p in procs:
        p.wait()
        walls.append(time.perf_counter() - t0)
    return walls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "op_start_cost.json"))
    args = ap.parse_args()
    _timed(PIECES["torch + device context"], ["0"])  # warm the page cache once, as a batch's first op does
    rows = {}
    print(f"{'piece':38} {'alone s':>8} {'two at once s':>14}")
    for name, cmd in PIECES.items():
        alone = [_timed(cmd, ["0"])[0] for _ in range(args.reps)]
        pair = [max(_timed(cmd, ["0", "1"])) for _ in range(args.reps)]
        rows[name] = {"alone_s": alone, "pair_s": pair}
        print(f"{name:38} {statistics.median(alone):8.2f} {statistics.median(pair):14.2f}", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"benchmark": "op_start_cost", "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
