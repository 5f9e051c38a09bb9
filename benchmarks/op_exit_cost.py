"""What an op process costs after its last case: pytest's end and the process's exit.

Every op of a batch runs in a fresh process that has imported torch, Triton and pytest
(docs/batch.md), and the parent waits for it to end before the op counts as done. This starts
fresh processes that import what an op process imports, run a pytest session of one trivial
test, and end; each says the wall-clock time its session ended, and the parent reads the clock
when it has reaped the process: the difference is what an op pays after its cases. Four ways,
alternated: pytest with or without its unraisableexception plugin (whose cleanup runs
gc.collect() five times), then the interpreter's own exit or harness.child.process.leave; and a
fifth, the harness's own: every plugin of harness.contract.PYTEST_OFF left out (Hypothesis'
too, where it is installed) and ``leave``. Prints a table and writes the numbers to --out.

    python benchmarks/op_exit_cost.py --out benchmarks/results/op_exit_cost-cpu.json   # any machine
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import write_json  # noqa: E402
from harness.contract import PYTEST_OFF  # noqa: E402

CHILD = """
import sys, time
import torch, triton, pytest, harness.child.measure, harness.child.plugins.records

class Clock:
    def pytest_sessionfinish(self):  # into a file: pytest still captures the output here
        with open(sys.argv[1] + ".end", "w") as fh:
            fh.write(repr(time.time()))

code = pytest.main([sys.argv[1], "-q", "-p", "no:cacheprovider", *sys.argv[3:]], plugins=[Clock()])
if sys.argv[2] == "leave":
    from harness.child.process import leave
    leave(int(code))
sys.exit(int(code))
"""

WAYS = {  # name: (exit, extra pytest args)
    "pytest as is, interpreter exit": ("exit", []),
    "pytest as is, leave()": ("leave", []),
    "no unraisableexception, interpreter exit": ("exit", ["-p", "no:unraisableexception"]),
    "no unraisableexception, leave()": ("leave", ["-p", "no:unraisableexception"]),
    "PYTEST_OFF, leave() (the harness)": ("leave", list(PYTEST_OFF)),
}


def one(test_file: Path, exit_way: str, extra: list[str]) -> float:
    """Seconds from the end of the pytest session to the process's end, as the parent sees it."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(test_file), exit_way, *extra], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    ended = time.time()
    assert done.returncode == 0, done.stdout + done.stderr
    return ended - float(Path(f"{test_file}.end").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "op_exit_cost-cpu.json")
    args = parser.parse_args()
    samples: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as tmp:
        test_file = Path(tmp) / "test_one.py"
        test_file.write_text("def test_one():\n    assert True\n")
        one(test_file, "exit", [])  # warm the file cache once
        for _ in range(args.repeats):
            for way, (exit_way, extra) in WAYS.items():
                samples[way].append(one(test_file, exit_way, extra))
    print(f"{'after the session':48} {'median s':>9} {'min s':>7} {'max s':>7}")
    rows: dict[str, dict[str, Any]] = {}
    for way, values in samples.items():
        rows[way] = {"median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3),
                     "max_s": round(max(values), 3), "samples_s": [round(v, 3) for v in values]}
        print(f"{way:48} {rows[way]['median_s']:9.3f} {rows[way]['min_s']:7.3f} {rows[way]['max_s']:7.3f}")
    first: float = rows[next(iter(WAYS))]["median_s"]
    last: float = rows[list(WAYS)[-1]]["median_s"]
    print(f"saved per op process: {first - last:.3f} s")
    import torch

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    write_json(args.out, {
        "date": time.strftime("%Y-%m-%d"), "commit": commit, "machine": platform.machine(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "torch": torch.__version__, "repeats": args.repeats,
        "ways": rows, "saved_per_op_s": round(first - last, 3)})
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
