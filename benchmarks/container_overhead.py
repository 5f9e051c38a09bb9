"""What a container costs: wall time of the same `harness run` on the host and in the cpu image.

Paired runs, alternating which side goes first, with a warm image and warm nox
virtualenvs (one unmeasured run of each side first). Two pairs of commands:

* nox:    `nox -R -s bench-cpu -- ARGS`  against  `nox -R -s bench -- ARGS`
  (-R reuses the virtualenvs and skips installs; without it the host session
  reinstalls the harness on every call, ~25 s, which would hide the container)
* direct: `python -m harness.container run --backend cpu -- ARGS`  against
  `python -m harness run --backend cpu ARGS` (the container machinery alone)

ARGS default to `--ops add --level smoke` (issue 4's benchmark). The table goes
to stdout, the numbers to benchmarks/results/container_overhead.json.

Needs a docker engine and the cpu image's base (HARNESS_BASE_IMAGE_CPU, e.g.
harness-base/debian:bookworm-py from .ci/docker-up.sh).

    python benchmarks/container_overhead.py [--pairs 5] [-- ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "container_overhead.json"
TARGET_EXTRA_S = 3.0


def _commands(args: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    nox = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-R"]
    return {
        "nox": (nox + ["-s", "bench", "--", "--backend", "cpu", *args], nox + ["-s", "bench-cpu", "--", *args]),
        "direct": (
            [sys.executable, "-m", "harness", "run", "--backend", "cpu", *args],
            [sys.executable, "-m", "harness.container", "run", "--backend", "cpu", "--", *args],
        ),
    }


def _timed(command: list[str], run_dir: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    full = command + ["--out", f"reports/{run_dir.name}"]
    started = time.perf_counter()
    done = subprocess.run(full, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    shutil.rmtree(run_dir, ignore_errors=True)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(full)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


@dataclass(frozen=True)
class Pair:
    index: int
    first: str  # which side ran first in this pair
    host_s: float
    container_s: float

    @property
    def extra_s(self) -> float:
        return self.container_s - self.host_s

    def row(self) -> dict[str, object]:
        return {"pair": self.index, "first": self.first, "host_s": round(self.host_s, 3),
                "container_s": round(self.container_s, 3), "extra_s": round(self.extra_s, 3)}


def _summary(host_cmd: list[str], container_cmd: list[str], pairs: list[Pair]) -> dict[str, object]:
    def shown(cmd: list[str]) -> str:
        return " ".join(["python", *cmd[1:]] if cmd[0] == sys.executable else cmd)

    return {
        "host_command": shown(host_cmd),
        "container_command": shown(container_cmd),
        "pairs": [p.row() for p in pairs],
        "median_host_s": round(statistics.median(p.host_s for p in pairs), 3),
        "median_container_s": round(statistics.median(p.container_s for p in pairs), 3),
        "median_extra_s": round(statistics.median(p.extra_s for p in pairs), 3),
        "max_extra_s": round(max(p.extra_s for p in pairs), 3),
    }


def measure(pairs: int, args: list[str]) -> dict[str, tuple[list[Pair], dict[str, object]]]:
    results: dict[str, tuple[list[Pair], dict[str, object]]] = {}
    scratch = ROOT / "reports"
    for name, (host_cmd, container_cmd) in _commands(args).items():
        _timed(host_cmd, scratch / "bench-overhead-warm-host")  # warm: venvs, page cache
        _timed(container_cmd, scratch / "bench-overhead-warm-container")  # warm: image present
        measured: list[Pair] = []
        for i in range(pairs):
            order = ("host", "container") if i % 2 == 0 else ("container", "host")
            times: dict[str, float] = {}
            for side in order:
                cmd = host_cmd if side == "host" else container_cmd
                times[side] = _timed(cmd, scratch / f"bench-overhead-{side}-{i}")
            measured.append(Pair(i, order[0], times["host"], times["container"]))
        results[name] = (measured, _summary(host_cmd, container_cmd, measured))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5, help="paired runs per comparison (default 5)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="`harness run` arguments after --")
    ns = parser.parse_args(argv)
    args = [a for a in ns.args if a != "--"] or ["--ops", "add", "--level", "smoke"]
    results = measure(ns.pairs, args)
    print(f"container overhead, {ns.pairs} paired runs, harness run {' '.join(args)}")
    print(f"{'compare':8} {'pair':>4} {'first':10} {'host s':>8} {'container s':>12} {'extra s':>8}")
    for name, (measured, summary) in results.items():
        for p in measured:
            print(f"{name:8} {p.index:>4} {p.first:10} {p.host_s:>8.2f} {p.container_s:>12.2f} {p.extra_s:>8.2f}")
        print(f"{name:8} {'med':>4} {'':10} {summary['median_host_s']:>8.2f} "
              f"{summary['median_container_s']:>12.2f} {summary['median_extra_s']:>8.2f}   "
              f"(max extra {summary['max_extra_s']:.2f}; target <= {TARGET_EXTRA_S:.0f} s)")
    record = {
        "benchmark": "container_overhead",
        "harness_args": args,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "target_extra_s": TARGET_EXTRA_S,
        "results": {name: summary for name, (_, summary) in results.items()},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=2) + "\n")
    print(f"written: {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
