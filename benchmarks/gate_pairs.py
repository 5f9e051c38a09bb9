"""The gate on pairs of independent runs already made: A/A as they are, A/B with head slowed.

Each pair is a run and another run of the same ops from another process (the corpus sample's
part K cold, ``sample-K``, against the same part measured again warm, ``warm-K-cN``: the same
kernels, its autotune configs replayed). A/A: every row flagged (regression or improvement) is a
false alarm. A/B: head's candidate samples multiplied by 1 + ``--slowdown`` (a synthetic change
of exactly that size, on the pair's own noise); the rows flagged as regressions are the
detection rate. Both with the run-spread table in force (``--spread``, default the shipped one)
and no history: what `harness gate A B` says about two nightlies.

    python benchmarks/gate_pairs.py RUNS [--min-us 10] [--slowdown 10] [--spread FILE] --out FILE.json

Prints one table (by the timer that measured the row) and writes the counts and the flagged
rows to ``--out``.

It also prints each timer's run-to-run spread over the pairs judged (harness.compare.spread.
pair_spread: sigma per run and its upper 95% bound). ``--fit 1-5 --test 6-10``: the spread
measured from the fitting parts' pairs (each size class's upper 95% bound, graph rows) becomes a
device entry of the table (written beside ``--out``, ``.spread.yaml`` in place of ``.json``), and
the testing parts' pairs (default: the parts not fitted) are judged with it: what the gate says
given a spread table measured from independent runs, out of sample.

``--repeats``: RUNS holds ``rep-N`` runs of the same ops instead (independent runs of the same
code and configs). ``--history 1-6`` stores those reps in a history database (written beside
``--out``, ``.history.sqlite``) and each pair is judged with each case's spread measured from it
(``harness gate --history DB``); ``--test 7-11`` (default: the reps not in the history) are
judged in consecutive pairs (7 against 8, 9 against 10): what the gate says about two nightlies
given a history of that machine's earlier nights, out of sample. ``--leave-pair-out`` in place of
``--history``: each pair judged with a history of every other rep (oldest first), the pair left
out: the longest history the reps give, with no rep judged in sample.

    python benchmarks/gate_pairs.py REPS --repeats --history 1-6 --test 7-11 --out FILE.json
    python benchmarks/gate_pairs.py REPS --repeats --leave-pair-out --out FILE.json
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from harness.compare.compare import RowComparison, RunData, compare_records, load_run  # noqa: E402
from harness.compare.spread import SpreadTable, load_spread, pair_spread, parse_spread  # noqa: E402
from harness.compare.stats import Criteria  # noqa: E402
from harness.results.schema import Measurement, Timing  # noqa: E402
from harness.yamlfile import load_yaml  # noqa: E402

FLAGGED = ("regression", "improvement")


def pairs_in(runs: Path) -> list[tuple[Path, Path]]:
    """(sample-K, warm-K-cN) for every warm run whose part has a cold run, in part order."""
    found = []
    for warm in runs.glob("warm-*-c*"):
        match = re.fullmatch(r"warm-(\d+)-c\d+", warm.name)
        cold = runs / f"sample-{match.group(1)}" if match else None
        if cold is not None and (cold / "run.json").is_file() and (warm / "run.json").is_file():
            found.append((cold, warm))
    return sorted(found, key=lambda p: (int(p[1].name.split("-")[1]), p[1].name))


def repeats_in(runs: Path) -> dict[int, Path]:
    """N -> the ``rep-N`` run directories of ``runs``."""
    found = {}
    for run in runs.glob("rep-*"):
        match = re.fullmatch(r"rep-(\d+)", run.name)
        if match and (run / "run.json").is_file():
            found[int(match.group(1))] = run
    return found


def consecutive_pairs(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """Disjoint pairs in order: [7, 8, 9, 10, 11] -> (7, 8), (9, 10); an odd one out is left."""
    ordered = sorted(numbers)
    return list(zip(ordered[0::2], ordered[1::2], strict=False))


def history_of(runs: Sequence[Path], db: Path) -> Path:
    """A history database at ``db`` (replaced) holding ``runs``, oldest first."""
    from harness.compare.history import HistoryStore

    db.unlink(missing_ok=True)
    store = HistoryStore(db)
    for run in runs:
        store.add(run_data(run))
    return db


def slowed(records: Sequence[Measurement], factor: float) -> list[Measurement]:
    """Each record with its candidate's samples multiplied by ``factor`` (torch's left alone)."""
    out = []
    for r in records:
        c = r.candidate
        out.append(r if c is None else replace(r, candidate=Timing.of([x * factor for x in c.samples_ms], c.blocks,
                                                                      c.settled)))
    return out


def parts(text: str) -> set[int]:
    """``1-5`` or ``1,3,5`` (or both, comma-separated) as part numbers."""
    found: set[int] = set()
    for piece in text.split(","):
        low, _, high = piece.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


@functools.cache
def run_data(run: Path) -> RunData:
    """A run directory read once (its run.json and records), however many steps below look at it."""
    return load_run(run)


def records(run: Path) -> tuple[Measurement, ...]:
    """A run directory's records, read once however many steps below look at them."""
    return run_data(run).records


def changes(pairs: Sequence[tuple[Path, Path]]) -> list[tuple[Measurement, float]]:
    """Each row that passed on both sides of a pair, with the same timer and a time above zero:
    (base's record, the change of its candidate's median as a log ratio)."""
    found = []
    for cold, warm in pairs:
        head = {r.case_id: r for r in records(warm)}
        for b in records(cold):
            h = head.get(b.case_id)
            if (h is None or h.timer != b.timer or b.status != "pass" or h.status != "pass" or not b.candidate
                    or not h.candidate or min(b.candidate.summary.median, h.candidate.summary.median) <= 0):
                continue
            found.append((b, math.log(h.candidate.summary.median / b.candidate.summary.median)))
    return found


def _pct(log_changes: Sequence[float]) -> float:
    """The upper 95% bound of one run's sigma, in percent (never 0: a table refuses it)."""
    return max(0.01, round(100 * pair_spread(log_changes)[1], 2))


def fitted_table(pairs: Sequence[tuple[Path, Path]], table: dict[str, Any], origin: str,
                 source: str) -> tuple[SpreadTable, dict[str, Any]]:
    """The spread table ``table`` (parsed YAML, read from ``origin``) with one device entry, for
    the graph timer, measured from ``pairs``: the changes of log median of the rows under and
    over 10 us (:func:`changes`)."""
    graph = [(b, c) for b, c in changes(pairs) if b.timer == "graph"]
    devices = {(b.device_name, b.backend) for b, _ in graph}
    if len(devices) != 1:
        raise SystemExit(f"gate_pairs: the fitting pairs hold graph rows of {len(devices)} devices "
                         f"({sorted(devices)}); measure one device at a time")
    ((device, backend),) = devices
    below = [c for b, c in graph if b.candidate and b.candidate.summary.median * 1000 < 10]
    above = [c for b, c in graph if b.candidate and b.candidate.summary.median * 1000 >= 10]
    # one class where one size has no rows: it answers for both
    classes = ([{"below_us": 10, "sigma_pct": _pct(below)}, {"sigma_pct": _pct(above)}] if below and above
               else [{"sigma_pct": _pct(below or above)}])
    entry = {"device_name": device, "backend": backend, "timer": "graph", "source": source, "classes": classes}
    data = {**table, "devices": [entry]}
    return parse_spread(data, f"{origin} + {source}"), {"entry": entry, "pairs_below_10us": len(below),
                                                          "pairs_10us_or_more": len(above), "table": data}


def tally(rows: Sequence[RowComparison], min_us: float) -> dict[str, Counter[str]]:
    """Verdicts of the rows compared whose base kernel takes ``min_us`` or more, by timer."""
    by_timer: dict[str, Counter[str]] = {}
    for row in rows:
        if row.compared and row.stats is not None and row.stats.base_median * 1000 >= min_us:
            by_timer.setdefault(row.timer, Counter())[row.verdict] += 1
    return by_timer


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path,
                        help="a folder of sample-K and warm-K-cN run directories (with --repeats: rep-N ones)")
    parser.add_argument("--min-us", type=float, default=10.0, help="rows whose base kernel is this fast or slower")
    parser.add_argument("--slowdown", type=float, default=10.0, help="A/B: head slowed by this many percent")
    parser.add_argument("--spread", type=Path, default=None, help="run-spread table (default: the shipped one)")
    parser.add_argument("--fit", type=parts, default=None, help="parts whose pairs measure the spread (1-5)")
    parser.add_argument("--test", type=parts, default=None,
                        help="parts whose pairs are judged (default: all, or those not in --fit); with "
                             "--repeats the reps judged in consecutive pairs (default: those not in --history; "
                             "a rep in --history is never judged)")
    parser.add_argument("--repeats", action="store_true", help="RUNS holds rep-N runs of the same ops")
    parser.add_argument("--history", type=parts, default=None,
                        help="with --repeats: the reps stored in a history that gives each case's spread (1-6)")
    parser.add_argument("--leave-pair-out", action="store_true",
                        help="with --repeats: each pair judged with a history of every other rep")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    spread, criteria = load_spread(args.spread), Criteria()
    fitted: dict[str, Any] = {}
    histories: dict[tuple[Path, Path], Path] = {}  # a pair -> the history database its spreads come from
    scratch = tempfile.TemporaryDirectory(prefix="gate-pairs-")
    if args.repeats:
        if args.fit is not None:
            parser.error("--fit measures a table from sample/warm pairs; with --repeats give --history")
        if args.leave_pair_out and args.history:
            parser.error("--leave-pair-out takes every other rep as the history: give it or --history, not both")
        reps = repeats_in(args.runs)
        chosen = set(reps) if args.test is None else args.test
        judged = sorted(chosen - (args.history or set()))
        missing = sorted(((args.history or set()) | set(judged)) - set(reps))
        if missing:
            parser.error(f"{args.runs}: no rep-N run for {missing}")
        pairs = [(reps[a], reps[b]) for a, b in consecutive_pairs(judged)]
        if not pairs:
            parser.error(f"{args.runs}: fewer than two reps left to judge")
        if args.history:
            db = history_of([reps[n] for n in sorted(args.history)], args.out.with_suffix(".history.sqlite"))
            histories = dict.fromkeys(pairs, db)
        for first, second in consecutive_pairs(judged) if args.leave_pair_out else ():
            histories[(reps[first], reps[second])] = history_of(
                [reps[n] for n in sorted(set(reps) - {first, second})], Path(scratch.name) / f"without-{first}-{second}.sqlite")
    else:
        if args.history or args.leave_pair_out:
            parser.error("--history and --leave-pair-out take reps: give --repeats")
        every = pairs_in(args.runs)
        if not every:
            parser.error(f"{args.runs}: no sample-K and warm-K-cN run directories to pair")

        def part(pair: tuple[Path, Path]) -> int:
            return int(pair[1].name.split("-")[1])

        # with --fit and no --test, the pairs not fitted (judging the fitted ones would be in sample)
        test = args.test if args.test is not None or args.fit is None else {part(p) for p in every} - args.fit
        pairs = [p for p in every if test is None or part(p) in test]
        if args.fit is not None:
            fit = [p for p in every if part(p) in args.fit]
            source = (f"pairs of independent runs (cold, then warm and replayed) of parts {sorted(args.fit)} of "
                      f"{args.runs.name}: upper 95% bound (benchmarks/gate_pairs.py)")
            path = args.spread or ROOT / "harness" / "compare" / "run_spread.yaml"
            shown = str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
            spread, fitted = fitted_table(fit, load_yaml(path.read_text(), shown), shown, source)
            args.out.with_suffix(".spread.yaml").write_text(yaml.safe_dump(fitted["table"], sort_keys=False))
    by_print: dict[tuple[Path, str], SpreadTable] = {}
    aa: dict[str, Counter[str]] = {}
    ab: dict[str, Counter[str]] = {}
    flagged: list[dict[str, Any]] = []
    for cold, warm in pairs:
        base, head = records(cold), records(warm)
        pair_db = histories.get((cold, warm))
        if pair_db is not None:  # each case's spread from the runs of base's fingerprint, once per database and fingerprint
            from harness.compare.history import with_history_spread
            from harness.results.runinfo import fingerprint

            info = run_data(cold).info
            key = (pair_db, str(info.get("fingerprint") or fingerprint(info)))
            if key not in by_print:
                by_print[key] = with_history_spread(load_spread(args.spread), pair_db, info)
            spread = by_print[key]
        rows = compare_records(base, head, criteria, spread=spread)
        for mine, found in ((aa, tally(rows, args.min_us)),
                            (ab, tally(compare_records(base, slowed(head, 1 + args.slowdown / 100), criteria,
                                                       spread=spread), args.min_us))):
            for timer, counts in found.items():
                mine.setdefault(timer, Counter()).update(counts)
        flagged += [{"pair": f"{cold.name} {warm.name}", "case_id": r.case_id, "timer": r.timer, "verdict": r.verdict,
                     "change_pct": round((r.stats.ratio - 1) * 100, 2), "base_median_ms": r.stats.base_median}
                    for r in rows if r.verdict in FLAGGED and r.stats is not None
                    and r.stats.base_median * 1000 >= args.min_us]
    spreads: dict[str, dict[str, float]] = {}  # each timer's run-to-run spread (rows of min_us or more)
    judged = [(b, c) for b, c in changes(pairs) if b.candidate and b.candidate.summary.median * 1000 >= args.min_us]
    for timer in sorted({b.timer for b, _ in judged}):
        logs = [c for b, c in judged if b.timer == timer]
        sigma, upper = pair_spread(logs)
        spreads[timer] = {"rows": len(logs), "sigma_pct": round(100 * sigma, 2), "upper95_pct": round(100 * upper, 2)}
    scratch.cleanup()
    origin = ("each case's spread measured in a history of the other reps, per pair (--leave-pair-out)"
              if args.leave_pair_out else spread.origin)
    print(f"{len(pairs)} pairs, rows of {args.min_us:g} us or more, spread table {origin}")
    print(f"{'timer':<10}{'rows':>6}{'A/A flagged':>13}{'unchanged':>11}{'noisy':>7}"
          f"{'A/B +' + format(args.slowdown, 'g') + '% flagged':>22}")
    summary: dict[str, Any] = {}
    for timer in sorted(set(aa) | set(ab)):
        a, b = aa.get(timer, Counter()), ab.get(timer, Counter())
        n, nb = sum(a.values()), sum(b.values())
        summary[timer] = {"rows": n, "aa": dict(a), "ab": dict(b), "aa_flagged": sum(a[v] for v in FLAGGED),
                          "ab_detected": b["regression"], "ab_rows": nb}
        print(f"{timer:<10}{n:>6}{summary[timer]['aa_flagged']:>13}{a['unchanged']:>11}{a['noisy']:>7}"
              f"{b['regression']:>15} of {nb}")
    for timer, measured in spreads.items():
        print(f"run-to-run spread, {timer} rows: sigma {measured['sigma_pct']}% per run (upper 95% bound "
              f"{measured['upper95_pct']}%), {measured['rows']:g} pairs of rows")
    if fitted:
        print(f"spread measured on parts {sorted(args.fit or ())}: {fitted['entry']['classes']} "
              f"({fitted['pairs_below_10us']} and {fitted['pairs_10us_or_more']} graph rows)")
    args.out.write_text(json.dumps({"pairs": [[c.name, w.name] for c, w in pairs], "min_us": args.min_us,
                                    "slowdown_pct": args.slowdown, "spread": origin, "by_timer": summary,
                                    "run_spread": spreads,
                                    "fitted_entry": fitted.get("entry"), "aa_flagged_rows": flagged},
                                   indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
