"""Calibrate the compare gate on the device at hand, in the situations it is used in.

Three modes, each judged A/A (identical code: every row flagged is a false alarm) and A/B (a
known slowdown injected: the detection rate):

- ``independent``: ``--runs`` separate `harness run` processes, as the nightly and `harness
  gate` between two CI runs compare them (one run a side, each tuning its autotuners live);
  every pair is compared (A/A: i<j; A/B: i != j, so the run-to-run wander is in the test);
- ``gate-run``: `harness gate-run` with the same tree as base and head (``--gate-repeats`` runs
  a side, ABBA, each side's later runs replaying its run 1's autotune configs);
- ``ab``: `harness ab` with no switch (``--ab-repeats`` runs a side, B replaying A's configs).

The injected slowdown: each run also times a slowed copy of ``--slow-op`` (default softmax),
the same kernel fed inputs whose first dimension is ``--slowdown`` percent larger, so it does
that much more work with no wrapper around it. A/B replaces head's candidate samples of the
op with its slowed copy's from the same run; torch's samples stay the op's own (the slowed copy
feeds torch larger inputs too, which would read as machine drift). The slowdown each row really
got is measured inside one run (slowed copy vs original) and reported beside it.

From the independent runs it also measures the run-to-run spread per op and kernel size and
prints the entry for harness/compare/run_spread.yaml (``proposed_spread``: an upper 95% bound
of the per-run sigma); the verdicts are given with the spread table in force and, marked as
in-sample, with the proposed one.

    python benchmarks/gate_calibration.py --backend cuda --dtypes bf16            # all modes
    python benchmarks/gate_calibration.py --modes independent --runs 3
    python benchmarks/gate_calibration.py --rejudge benchmarks/results/gate_calibration-samples.json.gz \\
        [--spread my_spread.yaml] [--threshold 3]                                   # offline, no device

Writes benchmarks/results/gate_calibration.json (--out) and every run's records (raw samples,
per run) to gate_calibration-samples.json.gz beside it, so the statistics can be re-judged
offline with --rejudge. ``--deadline-s`` skips a mode that would not finish in time (the
results so far are written after each mode).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import shlex
import statistics
import subprocess
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

from harness.compare.compare import RowComparison, compare_records, load_run  # noqa: E402
from harness.compare.spread import SpreadTable, load_spread, parse_spread  # noqa: E402
from harness.compare.stats import Criteria, pooled_spread  # noqa: E402
from harness.ops.base import OpSpec, Shape  # noqa: E402
from harness.results.schema import Measurement, record_from_dict  # noqa: E402

SLOW_SUFFIX = "_slow"
MODES = ("independent", "gate-run", "ab")
FLAGGED = ("regression", "improvement")
# --shapes reduced on the core level: every op, 11 rows a dtype (mm's two included, softmax's two
# of 10 us or more for the detection rate), so that a run of one dtype takes about 40 s on an
# H200 (16 rows of the 8 ops, bf16, took 62 s there with compile and IR capture on, 2026-12-01,
# benchmarks/results/toolbox-h200-2026-12-01/ir).
REDUCED_CORE = {
    "softmax": [[8192, 4096], [16384, 8192]],
    "layer_norm": [[4096, 4096]],
    "rms_norm": [[8192, 5120]],
    "gelu": [[8192, 11008]],
    "silu_and_mul": [[4096, 11008]],
    "add": [[1024, 1024], [8192, 8192]],
    "sum": [[16384, 1024]],
    "mm": [[4096, 4096, 4096], [4096, 11008, 4096]],
}


def slowed_ops(names: Sequence[str], fraction: float) -> list[OpSpec]:
    """Copies of built-in ops that do ``fraction`` more work under the same shape.

    The first dimension of the inputs grows by ``fraction``: row-wise ops do
    that many more rows, mm that many more rows of A. No wrapper runs around
    the kernel, so the extra time is the extra work and nothing else.
    """
    from harness.ops.registry import load_ops

    catalog = load_ops()
    out = []
    for name in names:
        spec = catalog[name]

        def grown(shape: Shape, dtype: Any, gen: Any, device: str, _spec: OpSpec = spec) -> tuple[Any, ...]:
            bigger = (max(shape[0] + 1, math.ceil(shape[0] * (1 + fraction))), *shape[1:])
            return _spec.make_inputs(bigger, dtype, gen, device)

        out.append(replace(spec, id=f"{name}{SLOW_SUFFIX}", make_inputs=grown, source="gate_calibration",
                           description=f"{name} on inputs {fraction:.0%} larger (gate calibration)"))
    return out


def calibration_shapes(level_shapes: Mapping[str, Sequence[Sequence[int]]], ops: Sequence[str],
                       slow: Sequence[str], reduced: bool) -> dict[str, list[list[int]]]:
    """Shapes per op (the slowed copies get their op's), reduced on the core level if asked."""
    out: dict[str, list[list[int]]] = {}
    for op in ops:
        shapes = [list(s) for s in level_shapes.get(op, [])]
        if reduced and op in REDUCED_CORE and all(s in shapes for s in REDUCED_CORE[op]):
            shapes = [list(s) for s in REDUCED_CORE[op]]
        if shapes:
            out[op] = shapes
    for name in slow:
        if name in out:
            out[f"{name}{SLOW_SUFFIX}"] = out[name]
    return out


def _write_helpers(work: Path, slow: Sequence[str], fraction: float, shapes: Mapping[str, Any]) -> tuple[Path, Path]:
    module = work / "slowed_ops.py"
    module.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from gate_calibration import slowed_ops\n"
        f"HARNESS_OPS = slowed_ops({list(slow)!r}, {fraction!r})\n"
    )
    lines = []
    for op, op_shapes in shapes.items():
        lines.append(f"{op}:")
        lines += [f"  - {list(s)}" for s in op_shapes]
    shapes_file = work / "calibration_shapes.yaml"
    shapes_file.write_text("\n".join(lines) + "\n")
    return module, shapes_file


# ---------------------------------------------------------------------------------------------
# Judging (pure: records in, numbers out; used live and by --rejudge)


def _is_slowed(r: Measurement, slow: Sequence[str]) -> bool:
    return r.op.endswith(SLOW_SUFFIX) and r.op[: -len(SLOW_SUFFIX)] in slow


def split_slowed(records: Sequence[Measurement], slow: Sequence[str]) -> tuple[list[Measurement], list[Measurement]]:
    """(the suite's own rows, the same rows with the slowed op's candidate in place of its own).

    The replacement keeps the original row's torch samples: the slowed copy gave torch larger
    inputs too, and a torch baseline that moved as much as the candidate reads as drift."""
    suite = [r for r in records if not _is_slowed(r, slow)]
    slowed = {replace(r, op=r.op[: -len(SLOW_SUFFIX)]).case_id: r for r in records if _is_slowed(r, slow)}
    swapped = []
    for r in suite:
        s = slowed.get(r.case_id)
        if r.op in slow and s is not None and r.status == "pass" and s.status == "pass":
            r = replace(r, candidate=s.candidate, device_state=s.device_state, speedup=None, notes=s.notes)
        swapped.append(r)
    return suite, swapped


def _flag_rows(rows: Sequence[RowComparison]) -> dict[str, Any]:
    compared = [r for r in rows if r.compared]
    flagged = [r for r in compared if r.verdict in FLAGGED]
    return {
        "rows": len(compared),
        "flagged": len(flagged),
        "regressions": sum(r.verdict == "regression" for r in compared),
        "drift": sum(r.verdict == "drift" for r in compared),
        "noisy": sum(r.verdict == "noisy" for r in compared),
        "mm_rows": sum(r.op == "mm" for r in compared),
        "mm_flagged": sum(r.op == "mm" for r in flagged),
        "flagged_rows": [{"case_id": r.case_id, "verdict": r.verdict, "change_pct": round((r.stats.ratio - 1) * 100, 2),
                          "reason": r.reason} for r in flagged if r.stats],
        "largest_change_pct": max((abs(r.stats.ratio - 1) * 100 for r in compared if r.stats), default=None),
    }


def _merge(counts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: sum(c[k] for c in counts) for k in
                           ("rows", "flagged", "regressions", "drift", "noisy", "mm_rows", "mm_flagged")}
    out["flagged_rows"] = [row for c in counts for row in c["flagged_rows"]]
    largest = [c["largest_change_pct"] for c in counts if c["largest_change_pct"] is not None]
    out["largest_change_pct"] = round(max(largest), 2) if largest else None
    out["flagged_rate"] = out["flagged"] / out["rows"] if out["rows"] else None
    return out


def judge_pairs(pairs: Sequence[tuple[Sequence[Measurement], Sequence[Measurement]]], slow: Sequence[str],
                criteria: Criteria, spread: SpreadTable, min_us: float) -> dict[str, Any]:
    """A/A over the pairs as given; A/B over the pairs with head's slowed rows swapped in."""
    aa: list[dict[str, Any]] = []
    ab_other: list[dict[str, Any]] = []
    ab_rows: list[dict[str, Any]] = []
    for base, head in pairs:
        b_suite, _ = split_slowed(base, slow)
        h_suite, h_swapped = split_slowed(head, slow)
        aa.append(_flag_rows(compare_records(b_suite, h_suite, criteria, spread=spread)))
        own = {r.case_id: r for r in h_suite}
        slowed = {r.case_id: r for r in h_swapped if r.op in slow}
        other = []
        for row in compare_records(b_suite, h_swapped, criteria, spread=spread):
            if row.op not in slow:
                other.append(row)
                continue
            if row.stats is None:
                continue
            o, s = own.get(row.case_id), slowed.get(row.case_id)
            real = (s.candidate.summary.median / o.candidate.summary.median
                    if o and s and o.candidate and s.candidate else None)
            ab_rows.append({"case_id": row.case_id, "base_median_us": row.stats.base_median * 1000,
                            "observed_ratio": row.stats.ratio, "realized_ratio_in_run": real,
                            "p_adjusted": row.p_adjusted, "verdict": row.verdict, "reason": row.reason})
        ab_other.append(_flag_rows(other))
    targets = [d for d in ab_rows if d["base_median_us"] >= min_us]
    detected = sum(d["verdict"] == "regression" for d in targets)
    return {
        "pairs": len(pairs),
        "aa": _merge(aa),
        "ab": {"rows": len(ab_rows), "target_rows": len(targets), "target_min_us": min_us, "detected": detected,
               "detection_rate": detected / len(targets) if targets else None,
               "detected_all_sizes": sum(d["verdict"] == "regression" for d in ab_rows),
               "other_rows": _merge(ab_other)},
        "ab_rows": ab_rows,
    }


def mode_pairs(mode: str, data: Mapping[str, Any], ordered: bool) -> list[tuple[list[Measurement], list[Measurement]]]:
    """The (base, head) record lists a mode compares: A/A each pair once (``ordered`` False),
    A/B both ways (True), so that each side's slowed copy is tested against the other side."""
    if mode == "independent":
        runs = data["runs"]
        pick = itertools.permutations if ordered else itertools.combinations
        return [(runs[i], runs[j]) for i, j in pick(range(len(runs)), 2)]
    pairs = [(data["base"], data["head"])]
    return pairs + [(data["head"], data["base"])] if ordered else pairs


def judge_mode(mode: str, data: Mapping[str, Any], slow: Sequence[str], criteria: Criteria,
               spread: SpreadTable, min_us: float) -> dict[str, Any]:
    aa = judge_pairs(mode_pairs(mode, data, ordered=False), slow, criteria, spread, min_us)
    ab = judge_pairs(mode_pairs(mode, data, ordered=True), slow, criteria, spread, min_us)
    return {"aa": aa["aa"], "aa_pairs": aa["pairs"], "ab": ab["ab"], "ab_pairs": ab["pairs"], "ab_rows": ab["ab_rows"]}


def measured_spread(runs: Sequence[Sequence[Measurement]], slow: Sequence[str], boundary_us: float = 10.0,
                    confidence: float = 0.95) -> dict[str, Any]:
    """The run-to-run sigma of log run medians across independent runs, per size class and per
    op, with an upper ``confidence`` bound (chi-square on the pooled degrees of freedom)."""
    by_case: dict[str, list[float]] = {}
    op_of: dict[str, str] = {}
    for records in runs:
        for r in split_slowed(records, slow)[0]:
            if r.status == "pass" and r.candidate and r.candidate.summary.median > 0:
                by_case.setdefault(r.case_id, []).append(r.candidate.summary.median)
                op_of[r.case_id] = r.op

    def pooled(cases: Sequence[str]) -> dict[str, Any] | None:
        found = pooled_spread(([math.log(m) for m in by_case[c]] for c in cases), confidence)
        if found is None:
            return None
        sigma, upper, dof = found
        return {"sigma_pct": round(sigma * 100, 3), "upper_pct": round(upper * 100, 3), "dof": dof, "cases": len(cases)}

    small = [c for c in by_case if statistics.median(by_case[c]) * 1000 < boundary_us]
    large = [c for c in by_case if c not in small]
    ops = sorted(set(op_of.values()))
    return {"below_us": boundary_us, "small": pooled(small), "large": pooled(large),
            "ops": {op: pooled([c for c in by_case if op_of[c] == op]) for op in ops}}


def proposed_entry(measured: Mapping[str, Any], device: str, backend: str, timer: str, source: str) -> dict[str, Any] | None:
    """A run_spread.yaml device entry from ``measured``: classes at their upper bounds, and an op
    of its own where its bound exceeds its size class's by half again."""
    small, large = measured.get("small"), measured.get("large")
    if large is None and small is None:
        return None
    floor, ceiling = 0.1, 50.0  # the table's sigma lies in (0, 100) percent

    def pct(x: Mapping[str, Any] | None, fallback: Mapping[str, Any] | None) -> float:
        chosen = x or fallback
        return min(ceiling, max(floor, round(float(chosen["upper_pct"]) if chosen else 2.0, 2)))

    classes = [{"below_us": measured["below_us"], "sigma_pct": pct(small, large)}, {"sigma_pct": pct(large, small)}]
    ops = {}
    widest = max(float(c["sigma_pct"]) for c in classes)
    for op, m in (measured.get("ops") or {}).items():
        own = min(ceiling, round(float(m["upper_pct"]), 2)) if m else 0.0
        if own > 1.5 * widest:
            ops[op] = [{"sigma_pct": own}]
    entry: dict[str, Any] = {"device_name": device, "backend": backend, "source": source, "classes": classes}
    if timer:
        entry["timer"] = timer
    if ops:
        entry["ops"] = ops
    return entry


def judge_all(samples: Mapping[str, Any], criteria: Criteria, spread: SpreadTable, min_us: float) -> dict[str, Any]:
    meta = samples["calibration"]
    slow = meta["slowed_ops"]
    modes: dict[str, Any] = {}
    loaded = {mode: _load_mode(data) for mode, data in samples["modes"].items()}
    for mode, data in loaded.items():
        modes[mode] = judge_mode(mode, data, slow, criteria, spread, min_us)
    result: dict[str, Any] = {"modes": modes, "spread_table": spread.origin}
    if "independent" in loaded and len(loaded["independent"]["runs"]) >= 2:
        measured = measured_spread(loaded["independent"]["runs"], slow)
        # No timer in the entry: rows of small kernels are timed by the profiler under the graph timer.
        entry = proposed_entry(measured, meta.get("device", "?"), meta.get("backend", "?"), "",
                               f"benchmarks/gate_calibration.py, {meta.get('date', '?')}, {meta.get('device', '?')}, "
                               f"commit {meta.get('commit', '?')}, {len(loaded['independent']['runs'])} "
                               "independent runs (upper 95% bound)")
        result["measured_spread"] = measured
        result["proposed_spread"] = entry
        if entry is not None:
            table = parse_spread({"format_version": 1, "default": {"source": "proposed", "classes": entry["classes"]},
                                  "devices": [entry]}, "proposed (in-sample)")
            result["modes_with_proposed_spread"] = {
                mode: judge_mode(mode, data, slow, criteria, table, min_us) for mode, data in loaded.items()}
    return result


def _load_mode(data: Mapping[str, Any]) -> dict[str, Any]:
    def records(rows: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        return [record_from_dict(r) for r in rows]

    if "runs" in data:
        return {"runs": [records(rs) for rs in data["runs"]]}
    return {"base": records(data["base"]), "head": records(data["head"])}


# ---------------------------------------------------------------------------------------------
# Running (the device part)


def _run(cmd: Sequence[str], deadline: float) -> float:
    t0 = time.monotonic()
    left = max(30.0, deadline - time.monotonic())
    code = subprocess.run(list(cmd), cwd=ROOT, check=False, timeout=left).returncode
    if code not in (0, 1):
        raise SystemExit(f"gate_calibration: `{' '.join(cmd[:4])} ...` exited {code}; its message is above")
    return time.monotonic() - t0


def _dicts(run_dir: Path) -> list[dict[str, Any]]:
    return [r.to_dict() for r in load_run(run_dir).records]


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, check=False).stdout.strip() or "?"
    except OSError:
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="auto")
    p.add_argument("--level", default="auto", help="auto = core on accelerators, smoke on cpu")
    p.add_argument("--ops", nargs="+", help="suite ops (default: every built-in op)")
    p.add_argument("--dtypes", nargs="+", help="default: all")
    p.add_argument("--shapes", choices=("reduced", "level"), default="reduced",
                   help="reduced (default: 1-2 shapes an op on the core level, mm included) or the level's own")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--runs", type=int, default=3, help="independent runs (default 3)")
    p.add_argument("--gate-repeats", type=int, default=2, help="gate-run repeats a side (default 2)")
    p.add_argument("--ab-repeats", type=int, default=2, help="ab repeats a side (default 2)")
    p.add_argument("--slow-op", dest="slow_ops", nargs="+", default=["softmax"])
    p.add_argument("--slowdown", type=float, default=10.0, help="extra work, percent (default 10)")
    p.add_argument("--threshold", type=float, default=5.0, help="gate threshold, percent (default 5)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--correction", default="holm", choices=("holm", "bh", "none"))
    p.add_argument("--spread", help="run-spread table to judge with (default: the shipped one)")
    p.add_argument("--min-us", type=float, default=10.0, help="detection target counts kernels this slow or more")
    p.add_argument("--rep-ms", type=float, help="measurement budget per timing (harness default 100)")
    p.add_argument("--run-args", default="", help="more `harness run` arguments for every run, one string "
                   "(e.g. '--triton-cache user --ir off' to save compile time between runs)")
    p.add_argument("--deadline-s", type=float, default=1e9, help="skip a mode that would end after this long")
    p.add_argument("--work", help="keep the runs here (default: a temporary directory)")
    p.add_argument("--out", default=str(HERE / "results" / "gate_calibration.json"))
    p.add_argument("--samples-out", help="every run's records, raw samples included (gzip JSON), for --rejudge "
                   "(default: --out with -samples.json.gz)")
    p.add_argument("--rejudge", metavar="SAMPLES", help="judge a samples file again (no device, no runs)")
    args = p.parse_args(argv)
    criteria = Criteria(threshold=args.threshold / 100, alpha=args.alpha, correction=args.correction)
    spread = load_spread(Path(args.spread) if args.spread else None)
    out = Path(args.out)
    if args.rejudge:
        with gzip.open(args.rejudge, "rt", encoding="utf-8") as fh:
            stored = json.load(fh)
        result = {"calibration": stored["calibration"], "criteria": _criteria_json(args),
                  "rejudged_from": args.rejudge, **judge_all(stored, criteria, spread, args.min_us)}
        _report(result, args)
        _write(out, result)
        return 0
    if args.runs < 2 and "independent" in args.modes:
        p.error("--runs must be at least 2: the comparisons are between runs")

    from harness.backends import resolve_backend
    from harness.ops.registry import BUILTIN
    from harness.ops.shapes import load_level
    from harness.run.plan import resolve_level

    started = time.monotonic()
    deadline = started + args.deadline_s
    b = resolve_backend(args.backend)
    backend, level = b.name, resolve_level(args.level, b)
    suite_ops = list(args.ops or BUILTIN)
    slow = list(args.slow_ops)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gate-calibration-"))
    work.mkdir(parents=True, exist_ok=True)
    shapes = calibration_shapes(load_level(level), list(dict.fromkeys(suite_ops + slow)), slow,
                                reduced=args.shapes == "reduced")
    module, shapes_file = _write_helpers(work, slow, args.slowdown / 100, shapes)
    ops = list(dict.fromkeys(suite_ops + slow)) + [f"{s}{SLOW_SUFFIX}" for s in slow]
    run_args = ["--backend", backend, "--level", level, "--ops", *ops, "--ops-module", str(module),
                "--shapes-file", str(shapes_file), "--progress", "plain"]
    run_args += ["--rep-ms", str(args.rep_ms)] if args.rep_ms else []
    run_args += ["--dtypes", *args.dtypes] if args.dtypes else []
    run_args += shlex.split(args.run_args)
    compare_flags = ["--allow-cpu"] if not b.timings_comparable else []
    meta: dict[str, Any] = {"backend": backend, "level": level, "suite_ops": suite_ops, "slowed_ops": slow,
                            "slowdown_pct": args.slowdown, "shapes": shapes, "dtypes": args.dtypes,
                            "date": time.strftime("%Y-%m-%d"), "commit": _git_commit(), "run_args": run_args}
    samples: dict[str, Any] = {"calibration": meta, "modes": {}}
    durations: list[float] = []
    seconds: dict[str, float] = {}
    skipped: dict[str, str] = {}
    py = [sys.executable, "-m", "harness"]
    runs_of = {"independent": args.runs, "gate-run": 2 * args.gate_repeats, "ab": 2 * args.ab_repeats}
    for mode in args.modes:
        per_run = statistics.fmean(durations) if durations else 0.0
        if time.monotonic() + per_run * runs_of[mode] > deadline:
            skipped[mode] = f"deadline: {runs_of[mode]} runs of about {per_run:.0f} s would end after --deadline-s"
            print(f"gate_calibration: {mode} skipped ({skipped[mode]})", flush=True)
            continue
        t0 = time.monotonic()
        print(f"gate_calibration: {mode} ({backend}, level {level})", flush=True)
        try:
            _run_mode(mode, args, py, run_args, compare_flags, work, deadline, durations, samples, runs_of[mode])
        except subprocess.TimeoutExpired:
            skipped[mode] = "stopped at --deadline-s (its runs were cut short)"
            print(f"gate_calibration: {mode} {skipped[mode]}", flush=True)
            continue
        seconds[mode] = round(time.monotonic() - t0, 1)
        device = (load_run(next((work / mode).rglob("run.json")).parent).info.get("identity") or {}).get("device_name")
        meta.update(device=device or meta.get("device", "?"), timer=_timer(work / mode))
        _checkpoint(out, args, samples, criteria, spread, seconds, skipped, started)
    result = _checkpoint(out, args, samples, criteria, spread, seconds, skipped, started)
    _report(result, args)
    print(f"\nwritten: {out} and {_samples_path(out, args)} (runs in {work})")
    return 0


def _run_mode(mode: str, args: argparse.Namespace, py: Sequence[str], run_args: Sequence[str],
              compare_flags: Sequence[str], work: Path, deadline: float, durations: list[float],
              samples: dict[str, Any], runs: int) -> None:
    """Run one mode's runs and keep their records in ``samples``."""
    if mode == "independent":
        dirs = []
        for k in range(1, args.runs + 1):
            d = work / "independent" / f"run-{k}"
            durations.append(_run([*py, "run", "--out", str(d), "--run-id", f"cal-{k}", *run_args], deadline))
            dirs.append(d)
        samples["modes"][mode] = {"runs": [_dicts(d) for d in dirs]}
    else:
        d = work / mode
        if mode == "gate-run":
            cmd = [*py, "gate-run", "--base-ref", str(ROOT), "--head-ref", str(ROOT), "--repeats",
                   str(args.gate_repeats), "--out", str(d), *compare_flags, "--", *run_args]
            sides = ("base", "head")
        else:
            cmd = [*py, "ab", "--repeats", str(args.ab_repeats), "--out", str(d), *compare_flags, "--", *run_args]
            sides = ("a", "b")
        elapsed = _run(cmd, deadline)
        durations += [elapsed / runs] * runs
        samples["modes"][mode] = {"base": _dicts(d / sides[0]), "head": _dicts(d / sides[1]),
                                  "repeats": {p.name: _dicts(p) for p in sorted((d / "repeats").iterdir())}}


def _timer(mode_dir: Path) -> str:
    for path in mode_dir.rglob("run.json"):
        return str(json.loads(path.read_text()).get("timer", ""))
    return ""


def _samples_path(out: Path, args: argparse.Namespace) -> Path:
    return Path(args.samples_out or out.with_name(out.stem + "-samples.json.gz"))


def _checkpoint(out: Path, args: argparse.Namespace, samples: Mapping[str, Any], criteria: Criteria,
                spread: SpreadTable, seconds: Mapping[str, float], skipped: Mapping[str, str],
                started: float) -> dict[str, Any]:
    path = _samples_path(out, args)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(samples, fh)
    result = {"calibration": samples["calibration"],
              "criteria": _criteria_json(args),
              "mode_seconds": dict(seconds), "skipped": dict(skipped),
              "total_seconds": round(time.monotonic() - started, 1),
              **judge_all(samples, criteria, spread, args.min_us)}
    _write(out, result)
    return result


def _criteria_json(args: argparse.Namespace) -> dict[str, Any]:
    return {"threshold_pct": args.threshold, "alpha": args.alpha, "correction": args.correction,
            "min_us": args.min_us, "spread": args.spread}


def _write(out: Path, result: Mapping[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")


def _rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _report(result: Mapping[str, Any], args: argparse.Namespace) -> None:
    meta = result["calibration"]
    print(f"\ngate calibration on {meta.get('device', '?')} ({meta.get('backend')}, level {meta.get('level')}, "
          f"timer {meta.get('timer', '?')}; threshold {args.threshold:g}%, alpha {args.alpha:g}, {args.correction}; "
          f"spread table {result.get('spread_table')})")
    tables = [("spread table in force", result["modes"])]
    if result.get("modes_with_proposed_spread"):
        tables.append(("proposed spread (in-sample, optimistic)", result["modes_with_proposed_spread"]))
    for title, modes in tables:
        print(f"\n{title}:")
        print(f"{'mode':12} {'A/A flagged':>18} {'mm flagged':>11} {'drift':>6} {'noisy':>6} {'largest':>8}   "
              f"{'A/B detected >= ' + format(args.min_us, 'g') + ' us':>22} {'all sizes':>10} {'others flagged':>15}")
        for mode, m in modes.items():
            aa, ab = m["aa"], m["ab"]
            largest = "" if aa["largest_change_pct"] is None else f"{aa['largest_change_pct']:.1f}%"
            print(f"{mode:12} {aa['flagged']:>4} of {aa['rows']:<4} {_rate(aa['flagged_rate']):>6} "
                  f"{aa['mm_flagged']:>3} of {aa['mm_rows']:<4} {aa['drift']:>6} {aa['noisy']:>6} {largest:>8}   "
                  f"{ab['detected']:>6} of {ab['target_rows']:<4} {_rate(ab['detection_rate']):>7} "
                  f"{ab['detected_all_sizes']:>4} of {ab['rows']:<3} "
                  f"{ab['other_rows']['flagged']:>5} of {ab['other_rows']['rows']:<5}")
    for mode, reason in (result.get("skipped") or {}).items():
        print(f"{mode}: skipped ({reason})")
    for mode, m in result["modes"].items():
        for row in m["aa"]["flagged_rows"]:
            print(f"  A/A flagged in {mode}: {row['case_id']} {row['change_pct']:+.1f}% {row['verdict']}: {row['reason']}")
        missed = [d for d in m["ab_rows"] if d["base_median_us"] >= args.min_us and d["verdict"] != "regression"]
        for d in missed:
            real = "" if d["realized_ratio_in_run"] is None else f" (realised {(d['realized_ratio_in_run'] - 1) * 100:+.1f}%)"
            print(f"  A/B missed in {mode}: {d['case_id']} {(d['observed_ratio'] - 1) * 100:+.1f}%{real} "
                  f"{d['verdict']}: {d['reason']}")
    if result.get("proposed_spread"):
        import yaml

        print("\nproposed entry for harness/compare/run_spread.yaml (devices:):")
        print(yaml.safe_dump([result["proposed_spread"]], sort_keys=False).rstrip())


if __name__ == "__main__":
    sys.exit(main())
