"""Batch scaling: the same batch of built-in ops on one device, then sharded over two.

Reports the throughput ratio (wall time on 1 device / wall time on 2; target >= 1.8) and
whether each case's candidate latency on 2 devices agrees with the 1-device run, judged by
the harness's own compare statistics (a row the gate would not flag is "within noise").
Each run starts with an empty Triton cache of its own, as a nightly container does, so
neither run inherits the other's compiled kernels.

    python benchmarks/batch_scaling.py                              # needs >= 2 accelerator devices
    python benchmarks/batch_scaling.py --devices 2 3 --dtypes bf16
    python benchmarks/batch_scaling.py --cpu-dry-run                # two pseudo-devices on the CPU

On a host with fewer than two accelerator devices it says so and exits 0. --cpu-dry-run
exercises the script on the CPU backend with two pseudo-devices (its numbers only show that
the pipeline works). Prints a table; writes benchmarks/results/batch_scaling.json.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.backends import enumerate_devices, resolve_backend  # noqa: E402
from harness.backends.base import read_visibility  # noqa: E402
from harness.compare.compare import compare_records  # noqa: E402
from harness.compare.stats import Criteria  # noqa: E402
from harness.ops.registry import BUILTIN  # noqa: E402
from harness.options import resolve_run_options  # noqa: E402
from harness.results.schema import Measurement  # noqa: E402
from harness.results.store import read_records  # noqa: E402
from harness.run.execute import execute  # noqa: E402
from harness.run.plan import share_ops  # noqa: E402
from harness.sources import prepare  # noqa: E402

TARGET_RATIO = 1.8
FLAGGED = ("regression", "improvement")


def _run(label: str, devices: Sequence[str], args: argparse.Namespace, work: Path, env: Mapping[str, str],
         pseudo: bool) -> dict[str, Any]:
    """One `harness run` of the batch, in-process, on ``devices``; its wall time and records."""
    cli: dict[str, Any] = {"backend": args.backend, "ops": args.ops, "level": args.level, "dtypes": args.dtypes,
                           "progress": "plain", "out": str(work / label), "devices": None if pseudo else list(devices)}
    if args.rep_ms:
        cli["rep_ms"] = args.rep_ms
    options = resolve_run_options(cli, env={}, config={})  # this script's choices only, no pyproject
    prepared = prepare(options, env)
    if pseudo:  # the CPU backend has one device; label two for a dry run of the sharding
        plan = replace(prepared.plan, devices=tuple(devices), ops=share_ops(prepared.plan.ops, devices))
        prepared = replace(prepared, plan=plan)
    run_env = dict(env)
    run_env["TRITON_CACHE_DIR"] = str(work / f"{label}-triton-cache")  # a cold compile cache per run
    log = work / f"{label}.log"
    devices = prepared.plan.devices  # physical ids (under inherited visibility --devices are indices)
    print(f"  {label}: {len(prepared.plan.ops)} ops on device(s) {','.join(devices)} (log: {log}) ...", flush=True)
    with open(log, "w") as out:
        t0 = time.monotonic()
        code = execute(prepared, run_env, out)
        wall = time.monotonic() - t0
    records = read_records(work / label / "records.jsonl")
    with open(work / label / "ops_status.csv", newline="") as fh:
        status_rows = list(csv.DictReader(fh))
    ops_status = {row["op"]: f"{row['status']} on {row['device']}" for row in status_rows}
    # What the next calibration of OpSpec.case_cost needs: each op's wall time and each case's.
    op_elapsed_s = {row["op"]: float(row["elapsed_s"] or 0) for row in status_rows}
    case_duration_s = {r.case_id: round(r.duration_s, 3) for r in records}
    load: dict[str, int] = {}
    for o in prepared.plan.ops:
        load[o.device] = load.get(o.device, 0) + len(o.cases())
    return {"label": label, "devices": list(devices), "wall_s": wall, "exit_code": code,
            "cases": len(records), "passed": sum(r.status == "pass" for r in records),
            "cases_per_device": dict(sorted(load.items())), "ops_status": ops_status, "run_dir": str(work / label),
            "op_elapsed_s": op_elapsed_s, "case_duration_s": case_duration_s,
            "_records": records}


def _agreement(one: Sequence[Measurement], two: Sequence[Measurement]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = compare_records(one, two, Criteria())
    per_case: list[dict[str, Any]] = []
    for row in rows:
        if row.stats is None:
            continue
        per_case.append({"case_id": row.case_id, "op": row.op, "ratio_2dev_over_1dev": row.stats.ratio,
                         "ci": [row.stats.ci_low, row.stats.ci_high], "verdict": row.verdict,
                         "within_noise": row.verdict not in FLAGGED,
                         "median_ms_1dev": row.stats.base_median, "median_ms_2dev": row.stats.head_median})
    per_op: dict[str, Any] = {}
    for op in dict.fromkeys(c["op"] for c in per_case):
        mine = [c for c in per_case if c["op"] == op]
        ratios = [c["ratio_2dev_over_1dev"] for c in mine]
        per_op[op] = {"cases": len(mine), "within_noise": sum(c["within_noise"] for c in mine),
                      "median_ratio": statistics.median(ratios), "worst_ratio": max(ratios, key=lambda r: abs(r - 1))}
    return per_case, per_op


def _table(per_op: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], ratio: float) -> str:
    lines = [f"{'run':8} {'devices':8} {'wall s':>8} {'cases':>6} {'cases/s':>8}  cases per device"]
    for r in runs:
        lines.append(f"{r['label']:8} {','.join(r['devices']):8} {r['wall_s']:8.1f} {r['cases']:6d} "
                     f"{r['cases'] / r['wall_s']:8.2f}  {r['cases_per_device']}")
    lines.append(f"throughput ratio (1-device wall / 2-device wall): {ratio:.2f}x (target {TARGET_RATIO}x)")
    lines.append("")
    lines.append(f"{'op':14} {'cases':>5} {'in noise':>8} {'median 2dev/1dev':>17} {'worst':>7}")
    for op, s in per_op.items():
        lines.append(f"{op:14} {s['cases']:5d} {s['within_noise']:8d} {s['median_ratio']:17.3f} {s['worst_ratio']:7.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="auto")
    p.add_argument("--devices", nargs=2, metavar="ID",
                   help="the two devices, as for `harness run --devices` (default: the first two visible)")
    p.add_argument("--ops", nargs="+", default=list(BUILTIN),
                   help="default: every built-in op (the memory-bound ones and mm)")
    p.add_argument("--level", default="auto", help="auto = core on accelerators (smoke on cpu)")
    p.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16", "float32"],
                   help="default: float16 bfloat16 float32, what a nightly `harness run` measures")
    p.add_argument("--rep-ms", type=float, help="measurement budget per timing (harness default if not given)")
    p.add_argument("--cpu-dry-run", action="store_true", help="CPU backend, two pseudo-devices: checks the script")
    p.add_argument("--work-dir", help="where the two runs go (default: a new temporary directory)")
    p.add_argument("--out", default=str(HERE / "results" / "batch_scaling.json"))
    args = p.parse_args(argv)
    env = dict(os.environ)
    if args.cpu_dry_run:
        args.backend = "cpu"
        devices, pseudo = ["cpu0", "cpu1"], True
    else:
        backend = resolve_backend(args.backend)
        found = list(enumerate_devices(backend, None, env) if backend.capabilities.accelerator else ())
        if len(found) < 2:
            print(f"batch_scaling needs >= 2 accelerator devices; this host has {len(found)} "
                  f"(backend {backend.name}). Run it on a machine with two GPUs, or pass --cpu-dry-run "
                  "to exercise the script with two pseudo-devices on the CPU.")
            return 0
        args.backend = backend.name
        # What `harness run --devices` takes: indices under inherited visibility, else device ids.
        default = ["0", "1"] if read_visibility(backend, env) is not None else found[:2]
        devices, pseudo = list(args.devices or default), False
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="batch_scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"batch_scaling: backend {args.backend}, ops {' '.join(args.ops)}, dtypes {' '.join(args.dtypes)}, "
          f"work dir {work}")
    one = _run("1dev", devices[:1], args, work, env, pseudo)
    two = _run("2dev", devices[:2], args, work, env, pseudo)
    ratio = one["wall_s"] / two["wall_s"]
    per_case, per_op = _agreement(one.pop("_records"), two.pop("_records"))
    print(_table(per_op, [one, two], ratio))
    info = json.loads((Path(one["run_dir"]) / "run.json").read_text())
    result = {
        "benchmark": "batch_scaling",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "backend": args.backend,
        "dry_run": pseudo,
        "device_name": info.get("identity", {}).get("device_name"),
        "torch": info.get("identity", {}).get("torch"),
        "triton": info.get("identity", {}).get("triton"),
        "git_commit": info.get("git_commit"),
        "level": info.get("level"),
        "ops": args.ops,
        "dtypes": args.dtypes,
        "runs": [one, two],
        "throughput_ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "cases_within_noise": sum(c["within_noise"] for c in per_case),
        "cases_compared": len(per_case),
        "per_op": per_op,
        "per_case": per_case,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(f"{result['cases_within_noise']}/{result['cases_compared']} case(s) within noise; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
