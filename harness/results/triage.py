"""Causes for a finished run or a results folder, derived again from what it holds (no device).

`python -m harness.results.triage FOLDER [--out FILE]` reads FOLDER's ops_status.csv and its
cases (records.jsonl where there is one, else summary.csv: a results folder that kept only the
CSVs) and writes ``causes.csv`` (FOLDER/causes.csv unless ``--out``): one row per op that did
not pass and per case that did not pass, with its cause and evidence
(harness/results/causes.py). It prints the count of each cause. A record that already carries a
cause keeps it; the others, and summary.csv's rows, get one derived from their fields. A CRASH
op whose log (logs/<op>.log, where kept) ends in a fatal error inside the graph timer's capture
is the harness's, as a run that kept the capture mark would have said.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from harness.contract import RunFiles
from harness.errors import HarnessError, UsageError
from harness.results.causes import CAPTURE_DIED, case_cause, died_in_capture, op_cause
from harness.results.schema import CASE_STATUSES, TIMERS, Measurement
from harness.results.store import atomic_write_text, csv_text, read_records

__all__ = ["CAPTURE_DEATH_NOTE", "CAUSES_COLUMNS", "causes_rows", "died_capturing", "main", "read_folder"]

CAUSES_COLUMNS = ("op", "case", "status", "cause", "evidence")
# The note a CRASH op gets when its log, not its run, says it died inside a capture.
CAPTURE_DEATH_NOTE = f"its log ends in a fatal error {CAPTURE_DIED}"


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split("x")) if text else ()
    except ValueError:
        return ()


def _from_summary(row: Mapping[str, str]) -> Measurement | None:
    """A summary.csv row as a record of what the causes need (status, message, notes, shape);
    None for a row that is not a case's."""
    status = row.get("status", "")
    if status not in CASE_STATUSES:
        return None
    notes = tuple(n for n in (row.get("notes") or "").split("; ") if n)
    return Measurement(run_id="", op=row.get("op", ""), provider=row.get("provider", ""), dtype=row.get("dtype", ""),
                       shape=_shape(row.get("shape", "")), backend=row.get("backend", ""),
                       device=row.get("device", ""),
                       timer=row["timer"] if row.get("timer") in TIMERS else "cpu", status=status,
                       message=row.get("message", ""), notes=notes)


def _csv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror}).") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not a CSV file ({exc}).") from None


def read_folder(folder: Path) -> tuple[list[dict[str, str]], list[Measurement], str]:
    """(ops_status rows, the cases, where the cases came from) of a run directory or a results
    folder; UsageError when it has neither records.jsonl nor summary.csv beside ops_status.csv."""
    status = folder / "ops_status.csv"
    if not status.is_file():
        raise UsageError(f"{folder}: no ops_status.csv there; give a run directory or a results folder that "
                         "kept its ops_status.csv.")
    if (folder / "records.jsonl").is_file():
        return _csv(status), read_records(folder / "records.jsonl"), "records.jsonl"
    if (folder / "summary.csv").is_file():
        cases = [m for m in map(_from_summary, _csv(folder / "summary.csv")) if m is not None]
        return _csv(status), cases, "summary.csv"
    raise UsageError(f"{folder}: neither records.jsonl nor summary.csv beside ops_status.csv; the causes need "
                     "the cases.")


def died_capturing(folder: Path, ops: Sequence[Mapping[str, str]]) -> set[str]:
    """The CRASH ops whose log (logs/<op>.log, where the folder kept it) ends in a fatal error
    inside the graph timer's capture (:func:`harness.results.causes.died_in_capture`)."""
    found = set()
    for row in ops:
        op = row.get("op", "")
        log = RunFiles(folder).log(op)
        if row.get("status") == "CRASH" and CAPTURE_DIED not in (row.get("notes") or "") and log.is_file():
            if died_in_capture(log.read_text(errors="replace")):
                found.add(op)
    return found


def causes_rows(ops: Sequence[Mapping[str, str]], cases: Sequence[Measurement],
                capture_deaths: Collection[str] = ()) -> list[dict[str, str]]:
    """One row per op that did not pass (case empty), followed by its cases that did not pass
    (pure). ``capture_deaths``: CRASH ops whose log shows the process died inside a capture
    (:func:`died_capturing`), read as their notes say now."""
    by_op: dict[str, list[Measurement]] = {}
    for r in cases:
        by_op.setdefault(r.op, []).append(r)
    rows: list[dict[str, str]] = []
    for row in ops:
        op, status = row.get("op", ""), row.get("status", "")
        notes = [n for n in (row.get("notes") or "").split("; ") if n]
        if op in capture_deaths:
            notes.append(CAPTURE_DEATH_NOTE)
        cause = op_cause(status, notes, by_op.get(op, ()))
        if cause is None:
            continue
        rows.append({"op": op, "case": "", "status": status, "cause": cause.kind, "evidence": cause.evidence})
        for r in by_op.get(op, ()):
            found = r.cause or case_cause(r)
            if found is not None:
                rows.append({"op": op, "case": r.case_id, "status": r.status, "cause": found.kind,
                             "evidence": found.evidence})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.results.triage", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="a run directory, or a results folder with ops_status.csv and summary.csv")
    parser.add_argument("--out", help="where to write the table (default FOLDER/causes.csv)")
    ns = parser.parse_args(argv)
    folder = Path(ns.folder)
    try:
        ops, cases, source = read_folder(folder)
        rows = causes_rows(ops, cases, died_capturing(folder, ops))
        out = Path(ns.out) if ns.out else folder / "causes.csv"
        atomic_write_text(out, csv_text(CAUSES_COLUMNS, rows))
    except HarnessError as exc:
        print(f"harness: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    op_rows = [r for r in rows if not r["case"]]
    counts = Counter(r["cause"] for r in op_rows)
    print(f"{out}: {len(op_rows)} op(s) not passing of {len(ops)}, {len(rows) - len(op_rows)} case(s); cases from "
          f"{source}; " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
