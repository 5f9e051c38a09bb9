"""How fast the `harness` command answers when it has nothing heavy to do: --help, the listings,
`doctor`, and refusals of bad input, against `python -c pass` (the interpreter's own start).

Each command runs as `python tests/cli_probe.py ARGS` (a fresh interpreter, as a user's shell
would start it) REPEATS times; the table gives the median wall time and what it adds to the
interpreter's start. Target (issue: the first minute): every refusal under 1 s on a 2-core machine.

    python benchmarks/cli_latency.py [--repeats 7] [--out benchmarks/results/cli_latency.json]
"""

from __future__ import annotations

import argparse
import json
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

from tests.unit.test_cli_imports import COMMANDS  # noqa: E402  (the same commands the test checks)


def wall(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                   capture_output=True, check=False, timeout=120)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cli_latency.json"))
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        base = statistics.median(wall([sys.executable, "-c", "pass"], cwd) for _ in range(ns.repeats))
        rows: list[dict[str, Any]] = []
        for args, code in COMMANDS:
            argv = [sys.executable, str(ROOT / "tests" / "cli_probe.py"), *args]
            seconds = statistics.median(wall(argv, cwd) for _ in range(ns.repeats))
            rows.append({"command": "harness " + " ".join(args), "exit": code, "median_s": round(seconds, 3),
                         "over_python_s": round(seconds - base, 3)})
    print(f"python -c pass: {base:.3f} s (median of {ns.repeats})")
    print(f"{'command':72} {'exit':>4} {'median s':>9} {'+python s':>9}")
    for row in rows:
        print(f"{row['command'][:72]:72} {row['exit']:>4} {row['median_s']:>9.3f} {row['over_python_s']:>9.3f}")
    worst = max(r["median_s"] for r in rows)
    print(f"slowest: {worst:.3f} s ({'within' if worst < 1.0 else 'OVER'} the 1 s target)")
    result = {"machine": platform.node(), "cpus": __import__("os").cpu_count(), "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d"), "repeats": ns.repeats, "python_c_pass_s": round(base, 3),
              "rows": rows}
    Path(ns.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"written: {ns.out}")


if __name__ == "__main__":
    main()
