"""What a sample of a suite's ops cost over the runs that measured it, and the whole-corpus
nightly projected from that (reads the runs' ops_status.csv, run.json and op timelines).

:func:`sample_summary` joins the cost timeline (harness/run/timeline.py) and the projection
(harness/suite/projection.py): one status per op over the runs (the last that ended it), each
op's cost from a run that had its devices alone (runs side by side on a device count for the
statuses only), less what a run's lead paid for the imports of a pre-started run, and the
projection of every op of the corpus from those costs, with its interval and a second
projection without each op's Triton compile time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.run.timeline import (
    ENDED,
    cost_rows,
    final_status,
    part_leads,
    read_csv,
    run_spans,
    side_by_side,
    union_s,
)
from harness.suite.projection import GPUS, category, project, project_interval
from harness.suite.select import SuiteOp

__all__ = ["sample_summary"]


def sample_summary(run_dirs: Sequence[Path], ops: Sequence[SuiteOp], base_classes: frozenset[str],
                   gpus: Sequence[int] = GPUS) -> dict[str, Any]:
    """Counts per status, the wall time the runs covered together and the projection of ``ops``
    (the whole corpus) from the runs in ``run_dirs`` (in the order they ran: a later run that
    ended an op decides its status). A run without a start in run.json counts as run alone
    (named in ``unspanned``). The interval needs scipy; without it, ``projection_interval`` says
    why it was skipped rather than failing the summary."""
    span_of = {d: run_spans(d) for d in run_dirs}
    spans = [span for found in span_of.values() for span in found]
    shared = side_by_side(spans)
    rows = [dict(row, part=str(d)) for d in run_dirs for row in read_csv(d / "ops_status.csv")]
    final = final_status(rows)
    ended = {op for op, r in final.items() if r["status"] in ENDED}
    leads = {str(d): part_leads(d) for d in run_dirs if str(d) not in shared}
    costs = cost_rows(rows, shared, leads)
    # the compile time of the row each cost came from (cost_rows keeps the last row of a run alone)
    compiled = {row["op"]: float(row.get("compile_s") or 0) for row in rows
                if row["op"] in costs and row["status"] in ENDED and row["part"] not in shared}
    warm = {op: max(0.0, costs[op] - compiled[op]) for op in costs}
    try:
        interval: dict[str, Any] = project_interval(ops, costs, base_classes, gpus)
    except ImportError as exc:  # a GPU machine's Python may lack scipy; a CPU machine computes it
        interval = {"skipped": f"{exc} (computed where scipy is installed)"}
    return {"runs": [d.name for d in run_dirs],
            "unspanned": [d.name for d, found in span_of.items() if not found and (d / "run.json").is_file()],
            "side_by_side_runs": sorted(Path(p).name for p in shared),
            "ops_planned": len(final), "ops_ended": len(ended), "ops_costed": len(costs),
            "run_leads": {Path(run).name: found for run, found in leads.items() if found},
            "ops_by_status": dict(Counter(r["status"] for r in final.values())),
            "strata_ended": dict(Counter(category(o, base_classes) for o in ops if o.id in ended)),
            "wall_s": round(union_s(spans), 1),
            "projection": project(ops, costs, base_classes, gpus),
            # An estimate: each op's time less its Triton compile time (the records' ir.compile_ms),
            # what a nightly whose compiler cache persists would not pay again for unchanged kernels.
            "projection_without_compile": project(ops, warm, base_classes, gpus),
            "projection_interval": interval,
            "compile_s": round(sum(compiled.values()), 1)}
