"""Where a suite run's time went and what each op cost, from what its run directories keep
(ops_status.csv, each op process's timeline ``specs/<op>.times.json``, run.json's start and end):
the cost timeline behind a corpus nightly's projection (harness/suite/projection.py).

- :func:`timeline`: the ended ops' seconds before pytest's session, in it and after it, and
  waiting for their own preparation;
- :func:`final_status`, :func:`cost_rows`: one status per op over several runs of it (the last
  that ended it) and its cost from a run that had its device alone;
- :func:`part_leads`: what an op paid for leading a run that pre-started its ops (the imports);
- :func:`part_span`, :func:`run_spans`, :func:`side_by_side`, :func:`union_s`: when runs ran (a
  resumed run: its ops' intervals), which shared a device at the same time, and the wall time they
  covered together.

harness/suite/costing.py summarizes a sample's calls with these (benchmarks/flaggems_corpus.py through it).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.contract import RunFiles

__all__ = ["ENDED", "Span", "cost_rows", "final_status", "part_leads", "part_span", "run_spans", "side_by_side",
           "timeline", "union_s"]


def read_csv(path: Path) -> list[dict[str, str]]:
    """A CSV file's rows by column; none for a file that is not there (a run cut before it wrote it)."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


ENDED = ("PASS", "FAIL", "ERROR", "CRASH", "TIMEOUT", "SKIP")


def timeline(run_dirs: Sequence[Path]) -> dict[str, Any]:
    """Where the ended ops' time went, from each op process's timeline (``specs/<op>.times.json``,
    harness.child.process) and its ``elapsed_s``: waiting for its own preparation (``import_wait``:
    a pre-started process asked to run before its imports, and its profiler warm-up where it is
    warmed, were done; known only from timelines
    with ``asked``, 889336c on, and counted as time after the session before), before pytest's
    session (pytest's start, conftest and plugins), the session (collection and the cases), and
    after it (pytest's end, the process's exit, the parent noticing). Seconds summed over the
    ops. A retried op's timeline is its last attempt's, so its earlier attempts count as time
    after the session."""
    sums = {"ops": 0, "elapsed_s": 0.0, "before_session_s": 0.0, "session_s": 0.0, "after_session_s": 0.0,
            "import_wait_s": 0.0}
    for run in run_dirs:
        for row in read_csv(run / "ops_status.csv"):
            path = RunFiles(run).times_file(row["op"])
            try:
                t = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if row["status"] not in ENDED or "session_start" not in t or "session_end" not in t:
                continue
            # From when the parent asked the op to run (a pre-started process: the time its go line
            # carries; before that line had it, the time the process read it, after its imports).
            t0 = t.get("asked", t.get("go", t["started"]))
            # ready: held with its imports done and, warmed (harness.child.process), the profiler's start paid
            wait = max(0.0, t.get("held", t.get("preloaded", t0)) - t0)
            elapsed = float(row["elapsed_s"])
            sums["ops"] += 1
            sums["elapsed_s"] += elapsed
            sums["import_wait_s"] += wait
            sums["before_session_s"] += t["session_start"] - t0 - wait
            sums["session_s"] += t["session_end"] - t["session_start"]
            sums["after_session_s"] += elapsed - (t["session_end"] - t0)
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in sums.items()}


def final_status(rows: Iterable[Mapping[str, str]]) -> dict[str, Mapping[str, str]]:
    """One row per op over the parts, in order: the last row in which it ended. A later part
    that ran an op again (it was cut, or never started, in an earlier one; or it ended there and
    is run again on purpose: alone after running side by side, after a harness fix) decides
    its status (its cost: cost_rows); a later part that did not end it (cut, not reached) changes
    nothing. Of an op no part ended, the last part that started it says how far it got (a later
    one that never reached it does not)."""
    final: dict[str, Mapping[str, str]] = {}
    for row in rows:
        known = final.get(row["op"])
        if known is None or row["status"] in ENDED or (known["status"] not in ENDED and row["status"] != "PENDING"):
            final[row["op"]] = row
    return final


def part_leads(run_dir: Path) -> dict[str, float]:
    """The ops that ran in a fresh process though the part pre-started its ops, and the seconds of
    their time that were not their own. In a part that pre-started its ops (some timeline has
    ``go``), such an op's first and only attempt's timeline has none: it ran as soon as its process
    began, so its time holds the imports (FlagGems' among them). That is each device's first op (a
    nightly pays it once per device, and the projection adds it once per device), and any op whose
    held process was not used (the batch's own reasons, harness.run.batch). Its own time is taken as its time less what it spent before pytest's
    session, plus what the part's pre-started ops spent between their go and their session (the
    median): what it would have cost pre-started. (A retried op's later attempts are fresh
    processes too, but part of its cost: not leads.) An op without a timeline (parts made before
    they were kept) is no lead; nor is one that crashed or timed out, whose process wrote no
    timeline (its imports stay in its cost). A fresh process's profiler start, where its rows used
    the profiler, stays in too (a held one pays it while held: 3-6 s on the H200)."""
    times: dict[str, dict[str, float]] = {}
    attempts: dict[str, str] = {}
    for row in read_csv(run_dir / "ops_status.csv"):
        try:
            times[row["op"]] = json.loads(RunFiles(run_dir).times_file(row["op"]).read_text())
        except (OSError, ValueError):
            continue
        attempts[row["op"]] = row.get("attempts", "")
    held = [t["session_start"] - t["go"] for t in times.values() if "go" in t and "session_start" in t]
    if not held:
        return {}
    ready = statistics.median(held)
    return {op: round(max(0.0, t["session_start"] - t["started"] - ready), 2) for op, t in times.items()
            if "go" not in t and attempts[op] == "1" and "session_start" in t and "started" in t}


def cost_rows(rows: Iterable[Mapping[str, str]], shared: set[str],
              leads: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each op's cost in seconds: its last ended row in a part that ran alone (not in ``shared``),
    less what it paid for leading that part (``leads``: part -> part_leads). An op's status is its
    last ended row (final_status); its cost comes from an earlier part than its status where the
    later one ran side by side."""
    costs: dict[str, float] = {}
    for row in rows:
        if row["status"] in ENDED and row["part"] not in shared:
            costs[row["op"]] = max(0.0, float(row["elapsed_s"]) - leads.get(row["part"], {}).get(row["op"], 0.0))
    return costs


Span = tuple[str, float, float, frozenset[str]]  # (part, started, finished, devices)


def part_span(run_dir: Path) -> Span | None:
    """When a sample part ran and on which devices, from its run.json; a run cut before it wrote its
    end (a call cut by its limit, the part kept by a periodic archive) ends when it last wrote a
    file. None where run.json says no start."""
    from datetime import datetime

    info = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    if not info.get("started_at"):
        return None
    end = (datetime.fromisoformat(info["finished_at"]).timestamp() if info.get("finished_at")
           else max(p.stat().st_mtime for p in run_dir.rglob("*") if p.is_file()))
    return (str(run_dir), datetime.fromisoformat(info["started_at"]).timestamp(), end,
            frozenset(map(str, info.get("devices") or ())))


def run_spans(run_dir: Path) -> list[Span]:
    """When a run had its devices, as its ops' own intervals: each ended op's process from its
    start to its return (``specs/<op>.times.json``), overlapping ones joined. A run resumed in a
    later call thus leaves out the time between its calls, when other runs may have had the device.
    Where an ended op has no such interval (a process killed before it wrote one, a run from before
    the timelines), the run's whole :func:`part_span`. None for a run without a start: []."""
    whole = part_span(run_dir)
    if whole is None:
        return []
    name, _, _, devices = whole
    intervals: list[tuple[float, float]] = []
    for row in read_csv(run_dir / "ops_status.csv"):
        if row["status"] not in ENDED:
            continue
        try:
            t = json.loads(RunFiles(run_dir).times_file(row["op"]).read_text())
            stamps = [float(v) for v in t.values() if isinstance(v, int | float)]
            start, end = float(t["started"]), max(stamps)
        except (OSError, ValueError, KeyError, TypeError):
            return [whole]
        # a retried op's timeline is its last attempt's: reach back over its whole elapsed time
        intervals.append((min(start, end - float(row.get("elapsed_s") or 0)), end))
    if not intervals:
        return [whole]
    joined: list[list[float]] = []
    for start, end in sorted(intervals):
        if joined and start <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], end)
        else:
            joined.append([start, end])
    return [(name, start, end, devices) for start, end in joined]


def side_by_side(spans: Sequence[Span]) -> set[str]:
    """The parts that ran at the same time as another part on a device they share (several
    harness runs on one GPU, to fit a session's device time): their ops' statuses count, but
    their times are not an op's cost alone on a device, so they stay out of the projection. A part
    may have several spans (:func:`run_spans`); its own never count against each other."""
    shared: set[str] = set()
    for i, (name, start, end, devices) in enumerate(spans):
        for other, start2, end2, devices2 in spans[i + 1:]:
            if other != name and start < end2 and start2 < end and devices & devices2:
                shared.update((name, other))
    return shared


def union_s(spans: Sequence[Span]) -> float:
    """Seconds during which at least one part ran (parts side by side count once)."""
    total, reach = 0.0, -math.inf
    for _, start, end, _ in sorted(spans, key=lambda s: s[1]):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
