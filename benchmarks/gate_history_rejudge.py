"""Judge `harness gate` between independent runs with each case's spread taken from a history.

Reads a folder of independent runs of the same code (benchmarks/gate_history_h200.sh keeps
them whole in runs.tgz: run.json and records.jsonl, raw samples included). For every pair of
runs it builds a history database from the *other* runs (``HistoryStore.add``, as `harness
history add` does), measures each case's run-to-run spread from it (what `harness gate
--history DB` does), and judges the pair twice:

- A/A, each unordered pair once: every row flagged is a false alarm; a row should read
  "unchanged" rather than "noisy";
- A/B, each ordered pair: head's candidate samples of the slowed ops (``*_slow`` copies, fed
  more work) replace its own, torch's samples stay (benchmarks/gate_calibration.py,
  ``split_slowed``); the detection rate over rows of ``--min-us`` or more.

The same pairs are also judged with the shipped spread table alone (no history), so the table
shows what the history buys. No device: everything here reads the committed runs.

    python benchmarks/gate_history_rejudge.py                       # the committed H200 runs
    python benchmarks/gate_history_rejudge.py --runs-tgz R.tgz --out result.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gate_calibration import judge_pairs  # noqa: E402
from harness.compare.compare import RunData, load_run  # noqa: E402
from harness.compare.history import HistoryStore  # noqa: E402
from harness.compare.spread import SpreadTable, history_series, load_spread, measured_spread  # noqa: E402
from harness.compare.stats import Criteria  # noqa: E402
from harness.results.runinfo import fingerprint  # noqa: E402

RESULTS = HERE / "results" / "gate-history-h200-2026-12-03"


def runs_in(folder: Path) -> list[RunData]:
    """The run directories under ``folder`` (any depth), oldest first by their start."""
    runs = [load_run(p.parent) for p in sorted(folder.rglob("run.json"))]
    return sorted(runs, key=lambda r: str(r.info.get("started_at") or r.path.name))


def history_spread_table(others: Sequence[RunData], base: SpreadTable, db: Path) -> SpreadTable:
    """``base`` with each case's spread measured from a history database of ``others``."""
    store = HistoryStore(db)
    for run in others:
        store.add(run)
    print_of = str(others[0].info.get("fingerprint") or fingerprint(others[0].info))
    cases = measured_spread(history_series(store.export(print_of)), f"history of {len(others)} runs")
    return base.with_cases(cases, f"{len(cases)} case(s) measured in a history of {len(others)} runs")


def _slowed_ops(runs: Sequence[RunData]) -> list[str]:
    ops = {r.op for run in runs for r in run.records}
    return sorted(op[: -len("_slow")] for op in ops if op.endswith("_slow") and op[: -len("_slow")] in ops)


def judge(runs: Sequence[RunData], criteria: Criteria, min_us: float, work: Path) -> dict[str, Any]:
    """Both judgements (history, shipped table) over every pair of ``runs``."""
    slow = _slowed_ops(runs)
    shipped = load_spread()
    out: dict[str, Any] = {"runs": len(runs), "slowed_ops": slow, "history_runs": len(runs) - 2}
    for label in ("history", "shipped"):
        aa: list[dict[str, Any]] = []
        ab: list[dict[str, Any]] = []
        for n, (i, j) in enumerate(itertools.permutations(range(len(runs)), 2)):
            spread = shipped
            if label == "history":
                others = [r for k, r in enumerate(runs) if k not in (i, j)]
                spread = history_spread_table(others, shipped, work / f"h-{n}.sqlite")
            pair = [(list(runs[i].records), list(runs[j].records))]
            judged = judge_pairs(pair, slow, criteria, spread, min_us)
            if i < j:
                aa.append(judged["aa"])
            ab.append(judged["ab"])
        rows = sum(a["rows"] for a in aa)
        flagged = sum(a["flagged"] for a in aa)
        noisy = sum(a["noisy"] for a in aa)
        targets = sum(b["target_rows"] for b in ab)
        detected = sum(b["detected"] for b in ab)
        out[label] = {
            "aa_pairs": len(aa), "aa_rows": rows, "aa_flagged": flagged, "aa_noisy": noisy,
            "aa_unchanged": rows - flagged - noisy,
            "aa_flagged_rows": [row for a in aa for row in a["flagged_rows"]],
            "ab_pairs": len(ab), "ab_target_rows": targets, "ab_detected": detected,
            "ab_other_flagged": sum(b["other_rows"]["flagged"] for b in ab),
            "ab_other_rows": sum(b["other_rows"]["rows"] for b in ab),
        }
    return out


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:5.1f}%" if d else "   -  "


def report(result: Mapping[str, Any], min_us: float) -> str:
    lines = [f"{result['runs']} independent runs; each pair judged with a history of the other "
             f"{result['history_runs']}; slowed ops {', '.join(result['slowed_ops'])}",
             "",
             f"{'spread from':<12} {'A/A rows':>8} {'flagged':>9} {'unchanged':>10} {'noisy':>8}   "
             f"{'A/B rows >= ' + format(min_us, 'g') + ' us':>18} {'detected':>9}"]
    for label in ("history", "shipped"):
        r = result[label]
        lines.append(f"{label:<12} {r['aa_rows']:>8} {_pct(r['aa_flagged'], r['aa_rows']):>9} "
                     f"{_pct(r['aa_unchanged'], r['aa_rows']):>10} {_pct(r['aa_noisy'], r['aa_rows']):>8}   "
                     f"{r['ab_target_rows']:>18} {_pct(r['ab_detected'], r['ab_target_rows']):>9}")
    for label in ("history", "shipped"):
        for row in result[label]["aa_flagged_rows"]:
            lines.append(f"  A/A flagged ({label}): {row['case_id']} {row['change_pct']:+.1f}% {row['verdict']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs-tgz", type=Path, default=RESULTS / "runs.tgz")
    p.add_argument("--threshold", type=float, default=5.0, help="gate threshold, percent (default 5)")
    p.add_argument("--min-us", type=float, default=10.0, help="detection counts kernels this slow or more")
    p.add_argument("--out", type=Path, default=RESULTS / "gate_history_rejudge.json")
    args = p.parse_args(argv)
    criteria = Criteria(threshold=args.threshold / 100)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(args.runs_tgz) as tar:
            tar.extractall(tmp, filter="data")
        runs = runs_in(Path(tmp))
        if len(runs) < 6:
            print(f"{args.runs_tgz}: {len(runs)} run(s); a history of 4 needs 6", file=sys.stderr)
            return 2
        result = judge(runs, criteria, args.min_us, Path(tmp))
    result.update({"source": str(args.runs_tgz), "threshold_pct": args.threshold, "min_us": args.min_us})
    print(report(result, args.min_us))
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
