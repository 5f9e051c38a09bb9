"""The parallel autotune sweep on one device against two (issue 18; docs/batch.md, "Sweep").

    # GPU machine with two GPUs: one harness run per (what, sweep devices)
    python3 benchmarks/sweep_scaling.py run --what builtin --sweep-devices 0 --out DIR/builtin-1
    python3 benchmarks/sweep_scaling.py run --what builtin --sweep-devices 0,1 --out DIR/builtin-2
    python3 benchmarks/sweep_scaling.py run --what suite --sweep-devices 0 --out DIR/suite-1 --budget 300
    # anywhere: the table (printed, and written as JSON)
    python3 benchmarks/sweep_scaling.py table DIR/builtin-1 DIR/builtin-2 DIR/suite-1 DIR/suite-2 --out FILE.json

``run`` times ``harness run --ops mm --dtypes bfloat16 --level comprehensive --sweep-devices D
--devices 0`` (``--what builtin``: the harness's mm; ``--what suite``: FlagGems' mm benchmark of
the v5.3.4 tree, ``--suite``), bounded by ``--budget`` seconds (the run is interrupted cleanly
past it), and writes ``DIR/result.json``: the run's wall time, the sweep's wall time
(``sweep/<op>/sweep.json``), each shard's cases and time, conflicts, the merged configs, and
each case's measured median and autotune marker. The run directory stays in ``DIR/run``.

``table`` pairs results of the same ``what`` by their number of sweep devices: sweep time on 1
and 2, the speed-up, how many keys chose the same config, and the measured medians side by side
(ratio two / one per case; the sweep's point is that the same configs measure the same).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.flaggems_corpus import bounded  # noqa: E402  (the same bounded run, SIGTERM past its budget)

SUITE = Path(os.environ.get("SUITE", REPO / ".flaggems" / "v5.3.4" / "benchmark"))


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _records(run: Path) -> list[dict[str, Any]]:
    path = run / "records.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def command(what: str, sweep_devices: str, run: Path, level: str, backend: str) -> list[str]:
    cmd = [sys.executable, "-m", "harness", "run", "--backend", backend, "--ops", "mm", "--dtypes", "bfloat16",
           "--level", level, "--sweep-devices", sweep_devices, "--devices", sweep_devices.split(",")[0],
           "--op-timeout", "1500", "--progress", "plain", "--out", str(run)]
    if what == "suite":
        cmd += ["--suite", str(SUITE)]
    return cmd


def summarize(run: Path, what: str, sweep_devices: str, code: int | None, wall_s: float | None) -> dict[str, Any]:
    """What ``table`` needs from one run directory (pure reading)."""
    sweep = _json(run / "sweep" / "mm" / "sweep.json") or {}
    configs = _json(run / "sweep" / "mm" / "configs.json") or {}
    status = {}
    status_path = run / "ops_status.csv"
    if status_path.is_file():
        import csv

        status = next((r for r in csv.DictReader(status_path.open()) if r["op"] == "mm"), {})
    cases = {}
    for r in _records(run):
        cand = (r.get("candidate") or {}).get("summary") or {}
        base = (r.get("baseline") or {}).get("summary") or {}
        cases[r["case_id"]] = {"status": r.get("status"), "candidate_ms": cand.get("median"),
                               "baseline_ms": base.get("median"), "autotune": r.get("autotune"),
                               "noisy": any("noisy" in n for n in r.get("notes") or [])}
    return {
        "what": what, "sweep_devices": sweep_devices, "count": len(sweep_devices.split(",")), "rc": code,
        "wall_s": None if wall_s is None else round(wall_s, 1),
        "op_status": status.get("status"), "op_elapsed_s": status.get("elapsed_s"), "op_notes": status.get("notes"),
        "sweep_s": sweep.get("elapsed_s"),
        "shards": [{k: sh.get(k) for k in ("index", "device", "ok", "reason", "elapsed_s", "compile_s", "configs")}
                   | {"cases": len(sh.get("cases") or [])} for sh in sweep.get("shards", [])],
        "keys": sweep.get("keys"), "conflicts": len(sweep.get("conflicts") or []),
        "configs": {json.dumps([c["kernel"], c["key"]]): {k: v for k, v in c.items() if k not in ("kernel", "key")}
                    for c in configs.get("configs", [])},
        "cases": cases,
    }


def pair_table(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per ``what``: its 1-device and 2-device results compared (pure)."""
    rows = []
    for what in sorted({r["what"] for r in results}):
        by_count = {r["count"]: r for r in results if r["what"] == what}
        one, two = by_count.get(1), by_count.get(2)
        if one is None or two is None:
            rows.append({"what": what, "missing": "1-device" if one is None else "2-device"})
            continue
        shared = sorted(set(one["configs"]) & set(two["configs"]))
        same = sum(one["configs"][k] == two["configs"][k] for k in shared)
        ratios = []
        for case, c1 in one["cases"].items():
            c2 = two["cases"].get(case)
            if c2 and c1.get("candidate_ms") and c2.get("candidate_ms"):
                ratios.append(c2["candidate_ms"] / c1["candidate_ms"])
        s1, s2 = one.get("sweep_s"), two.get("sweep_s")
        rows.append({
            "what": what, "sweep_1_s": s1, "sweep_2_s": s2,
            "sweep_speedup": round(s1 / s2, 3) if s1 and s2 else None,
            "op_1_s": one.get("op_elapsed_s"), "op_2_s": two.get("op_elapsed_s"),
            "keys_1": one.get("keys"), "keys_2": two.get("keys"), "keys_compared": len(shared),
            "same_config": same, "conflicts_2": two.get("conflicts"),
            "cases_compared": len(ratios),
            "median_ratio_2_over_1": round(statistics.median(ratios), 4) if ratios else None,
            "ratio_range": [round(min(ratios), 4), round(max(ratios), 4)] if ratios else None,
        })
    return rows


def cmd_run(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    run = out / "run"
    cmd = command(args.what, args.sweep_devices, run, args.level, args.backend)
    print(" ".join(cmd), flush=True)
    code, wall = bounded(cmd, args.budget, log=out / "run.log", env=os.environ)
    result = summarize(run, args.what, args.sweep_devices, code, wall)
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("what", "sweep_devices", "rc", "wall_s", "sweep_s", "op_status",
                                             "keys", "conflicts")}), flush=True)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    results = [r for d in args.dirs if (r := _json(Path(d) / "result.json"))]
    rows = pair_table(results)
    for row in rows:
        print(json.dumps(row))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"rows": rows, "results": results}, indent=2) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--what", choices=("builtin", "suite"), required=True)
    r.add_argument("--sweep-devices", required=True, help="0 or 0,1")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--budget", type=float, default=420.0)
    r.add_argument("--level", default="comprehensive")
    r.add_argument("--backend", default="cuda")
    t = sub.add_parser("table")
    t.add_argument("dirs", nargs="+")
    t.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    return cmd_run(args) if args.command == "run" else cmd_table(args)


if __name__ == "__main__":
    sys.exit(main())
