"""Calibrate the compare gate on the device at hand.

A/A: the same suite run ``--repeats`` times; every pair of runs is compared and
each row flagged (regression or improvement) is a false positive.

A/B: each run also times a slowed copy of ``--slow-op`` (default softmax):
the same op fed inputs whose first dimension is ``--slowdown`` percent larger,
so it does that much more work under the same case id. Comparing run i's op
against run j's slowed copy (i != j, so run-to-run wander is included) gives
the detection rate. The slowdown each row really got is measured inside one
run (slowed copy vs original) and reported beside it.

    python benchmarks/gate_calibration.py                         # auto backend, its default level
    python benchmarks/gate_calibration.py --backend cuda --level core --repeats 2

Prints the table and writes benchmarks/results/gate_calibration.json, and every row's raw
samples per run to gate_calibration-samples.json.gz beside it (so a change to the statistics,
such as treating repeats as blocks, can be judged offline on real device samples).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.compare.compare import RowComparison, compare_records, load_run  # noqa: E402
from harness.compare.stats import Criteria  # noqa: E402
from harness.ops.base import OpSpec, Shape  # noqa: E402
from harness.results.schema import Measurement  # noqa: E402

SLOW_SUFFIX = "_slow"


def slowed_ops(names: Sequence[str], fraction: float) -> list[OpSpec]:
    """Copies of built-in ops that do ``fraction`` more work under the same shape.

    The first dimension of the inputs grows by ``fraction``: row-wise ops do
    that many more rows, mm that many more rows of A. No wrapper runs around
    the kernel, so the extra time is the extra work and nothing else.
    """
    from harness.ops.registry import builtin_ops

    catalog = builtin_ops()
    out = []
    for name in names:
        spec = catalog[name]

        def grown(shape: Shape, dtype: Any, gen: Any, device: str, _spec: OpSpec = spec) -> tuple[Any, ...]:
            bigger = (max(shape[0] + 1, math.ceil(shape[0] * (1 + fraction))), *shape[1:])
            return _spec.make_inputs(bigger, dtype, gen, device)

        out.append(replace(spec, id=f"{name}{SLOW_SUFFIX}", make_inputs=grown, source="gate_calibration",
                           description=f"{name} on inputs {fraction:.0%} larger (gate calibration)"))
    return out


def _write_helpers(work: Path, slow: Sequence[str], fraction: float, level: str) -> tuple[Path, Path]:
    from harness.ops.shapes import load_level

    module = work / "slowed_ops.py"
    module.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from gate_calibration import slowed_ops\n"
        f"HARNESS_OPS = slowed_ops({list(slow)!r}, {fraction!r})\n"
    )
    shapes = load_level(level)
    lines = []
    for name in slow:
        lines.append(f"{name}{SLOW_SUFFIX}:")
        lines += [f"  - {list(s)}" for s in shapes.get(name, [])]
    shapes_file = work / "slowed_shapes.yaml"
    shapes_file.write_text("\n".join(lines) + "\n")
    return module, shapes_file


def _resolve(backend: str, level: str) -> tuple[str, str]:
    from harness.backends import resolve_backend
    from harness.run.plan import resolve_level

    b = resolve_backend(backend)
    return b.name, resolve_level(level, b)


def _run(out: Path, args: argparse.Namespace, backend: str, level: str, ops: Sequence[str],
         module: Path, shapes: Path) -> float:
    cmd = [sys.executable, "-m", "harness", "run", "--backend", backend, "--level", level,
           "--ops", *ops, "--ops-module", str(module), "--shapes-file", str(shapes), "--out", str(out)]
    if args.rep_ms:
        cmd += ["--rep-ms", str(args.rep_ms)]
    if args.dtypes:
        cmd += ["--dtypes", *args.dtypes]
    t0 = time.monotonic()
    code = subprocess.run(cmd, cwd=ROOT, check=False).returncode
    if code not in (0, 1):
        raise SystemExit(f"gate_calibration: `harness run` exited {code}; its message is above")
    return time.monotonic() - t0


def _split(records: Sequence[Measurement], slow: Sequence[str]) -> tuple[list[Measurement], dict[str, Measurement]]:
    """(the suite's own rows, the slowed rows renamed to their original op, keyed by case id)."""
    suite, slowed = [], {}
    for r in records:
        if r.op.endswith(SLOW_SUFFIX) and r.op[: -len(SLOW_SUFFIX)] in slow:
            renamed = replace(r, op=r.op[: -len(SLOW_SUFFIX)])
            slowed[renamed.case_id] = renamed
        else:
            suite.append(r)
    return suite, slowed


def _flagged(rows: Sequence[RowComparison]) -> int:
    return sum(r.verdict in ("regression", "improvement") for r in rows)


def _write_samples(path: Path, runs: Sequence[Any], result: dict[str, Any]) -> None:
    """Raw samples of every row of every run (baseline and candidate, in ms), gzip JSON."""
    data = {"calibration": {k: result[k] for k in ("backend", "device", "level", "repeats", "slowed_ops",
                                                   "slowdown_pct")},
            "runs": [{"run": k + 1, "rows": [
                {"case_id": r.case_id, "status": r.status, "timer": r.timer,
                 "baseline_ms": list(r.baseline.samples_ms) if r.baseline else None,
                 "candidate_ms": list(r.candidate.samples_ms) if r.candidate else None}
                for r in run.records]} for k, run in enumerate(runs)]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(data, fh)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="auto")
    p.add_argument("--level", default="auto", help="auto = core on accelerators, smoke on cpu")
    p.add_argument("--ops", nargs="+", help="suite ops (default: every built-in op)")
    p.add_argument("--dtypes", nargs="+", help="default: all")
    p.add_argument("--repeats", type=int, default=2, help="runs of the suite (default 2)")
    p.add_argument("--slow-op", dest="slow_ops", nargs="+", default=["softmax"])
    p.add_argument("--slowdown", type=float, default=10.0, help="extra work, percent (default 10)")
    p.add_argument("--threshold", type=float, default=5.0, help="gate threshold, percent (default 5)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--correction", default="holm", choices=("holm", "bh", "none"))
    p.add_argument("--min-us", type=float, default=10.0, help="detection target counts kernels this slow or more")
    p.add_argument("--rep-ms", type=float, help="measurement budget per timing (harness default 100)")
    p.add_argument("--work", help="keep the runs here (default: a temporary directory)")
    p.add_argument("--out", default=str(HERE / "results" / "gate_calibration.json"))
    p.add_argument("--samples-out", help="every row's raw samples, per run (gzip JSON), so the statistics can be "
                   "re-judged offline (default: --out with -samples.json.gz)")
    args = p.parse_args(argv)
    if args.repeats < 2:
        p.error("--repeats must be at least 2: the comparisons are between runs")

    from harness.ops.registry import BUILTIN_OP_IDS

    backend, level = _resolve(args.backend, args.level)
    suite_ops = list(args.ops or BUILTIN_OP_IDS)
    slow = list(args.slow_ops)
    criteria = Criteria(threshold=args.threshold / 100, alpha=args.alpha, correction=args.correction)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gate-calibration-"))
    work.mkdir(parents=True, exist_ok=True)
    module, shapes = _write_helpers(work, slow, args.slowdown / 100, level)
    ops = list(dict.fromkeys(suite_ops + slow)) + [f"{s}{SLOW_SUFFIX}" for s in slow]

    durations = []
    for k in range(1, args.repeats + 1):
        print(f"gate_calibration: run {k}/{args.repeats} ({backend}, level {level})", flush=True)
        durations.append(_run(work / f"run-{k}", args, backend, level, ops, module, shapes))
    runs = [load_run(work / f"run-{k}") for k in range(1, args.repeats + 1)]
    split = [_split(r.records, slow) for r in runs]
    device = (runs[0].info.get("identity") or {}).get("device_name", "?")

    aa_rows = aa_flagged = aa_regressions = aa_noisy = 0
    for i, j in itertools.combinations(range(len(runs)), 2):
        rows = [r for r in compare_records(split[i][0], split[j][0], criteria) if r.compared]
        aa_rows += len(rows)
        aa_flagged += _flagged(rows)
        aa_regressions += sum(r.verdict == "regression" for r in rows)
        aa_noisy += sum(r.verdict == "noisy" for r in rows)

    ab_detail: list[dict[str, Any]] = []
    ab_other_rows = ab_other_flagged = 0
    for i, j in itertools.permutations(range(len(runs)), 2):
        base_rows, _ = split[i]
        head_own, head_slowed = split[j]
        head_rows = [head_slowed.get(r.case_id, r) if r.op in slow else r for r in head_own]
        own = {r.case_id: r for r in head_own}
        for row in compare_records(base_rows, head_rows, criteria):
            if row.op not in slow:
                if row.compared:
                    ab_other_rows += 1
                    ab_other_flagged += row.verdict in ("regression", "improvement")
                continue
            if row.stats is None:
                continue
            orig, slowed = own.get(row.case_id), head_slowed.get(row.case_id)
            real = (slowed.candidate.summary.median / orig.candidate.summary.median
                    if orig and slowed and orig.candidate and slowed.candidate else None)
            ab_detail.append({
                "case_id": row.case_id, "base_run": i + 1, "head_run": j + 1,
                "base_median_us": row.stats.base_median * 1000, "observed_ratio": row.stats.ratio,
                "realized_ratio_in_run": real, "p_adjusted": row.p_adjusted, "verdict": row.verdict,
            })

    targets = [d for d in ab_detail if d["base_median_us"] >= args.min_us]
    detected = sum(d["verdict"] == "regression" for d in targets)
    result = {
        "backend": backend, "device": device, "level": level, "repeats": args.repeats,
        "suite_ops": suite_ops, "slowed_ops": slow, "slowdown_pct": args.slowdown,
        "criteria": {"threshold_pct": args.threshold, "alpha": args.alpha, "correction": args.correction},
        "run_seconds": [round(d, 1) for d in durations],
        "aa": {"rows": aa_rows, "flagged": aa_flagged, "regressions": aa_regressions, "noisy": aa_noisy,
               "false_positive_rate": aa_flagged / aa_rows if aa_rows else None},
        "ab": {"rows": len(ab_detail), "target_rows": len(targets), "target_min_us": args.min_us,
               "detected": detected, "detection_rate": detected / len(targets) if targets else None,
               "detected_all_sizes": sum(d["verdict"] == "regression" for d in ab_detail),
               "other_rows": ab_other_rows, "other_rows_flagged": ab_other_flagged},
        "ab_rows": ab_detail,
        "work": str(work),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    samples_out = Path(args.samples_out or out.with_name(out.stem + "-samples.json.gz"))
    _write_samples(samples_out, runs, result)

    print(f"\ngate calibration on {device} ({backend}, level {level}, {args.repeats} runs, "
          f"threshold {args.threshold:g}%, alpha {args.alpha:g}, {args.correction})")
    aa = result["aa"]
    rate = aa["false_positive_rate"]
    print(f"A/A: {aa['flagged']} of {aa['rows']} rows flagged "
          f"({'n/a' if rate is None else f'{rate:.2%}'}), {aa['regressions']} regression(s), {aa['noisy']} noisy")
    ab = result["ab"]
    det = ab["detection_rate"]
    print(f"A/B ({args.slowdown:g}% more work in {', '.join(slow)}): {ab['detected']} of {ab['target_rows']} rows "
          f">= {args.min_us:g} us detected ({'n/a' if det is None else f'{det:.1%}'}); all sizes "
          f"{ab['detected_all_sizes']} of {ab['rows']}; other rows flagged {ab['other_rows_flagged']} "
          f"of {ab['other_rows']}")
    print(f"\n{'case':42} {'runs':5} {'base':>10} {'real':>7} {'seen':>7} verdict")
    for d in ab_detail:
        realised = "" if d["realized_ratio_in_run"] is None else f"{(d['realized_ratio_in_run'] - 1) * 100:+.1f}%"
        print(f"{d['case_id']:42} {d['base_run']}->{d['head_run']:<2} {d['base_median_us']:>8.1f}us "
              f"{realised:>7} {(d['observed_ratio'] - 1) * 100:+6.1f}% {d['verdict']}")
    print(f"\nwritten: {out} (runs in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
