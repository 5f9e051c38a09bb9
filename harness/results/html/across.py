"""One page joining runs of different backends or devices case by case.

Cases are joined on (op, provider, dtype, shape). Per op it shows each run's speedup and
percentage of its own device's peak side by side, and for each run the cases it lacks or
failed while another run has them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from harness.backends.base import Peaks
from harness.results.html.charts import across_chart
from harness.results.html.page import Cell, Column, Table, first_line, fmt_num, render_page
from harness.results.html.run import nearest_ceiling, peak_values
from harness.results.render import commit_label
from harness.results.schema import Measurement, shape_str

__all__ = ["CaseKey", "across_rows", "render_across_html", "run_labels"]

CaseKey = tuple[str, str, str, tuple[int, ...]]  # op, provider, dtype, shape


def _key(r: Measurement) -> CaseKey:
    return r.op, r.provider, r.dtype, tuple(r.shape)


def _device(info: Mapping[str, Any], records: Sequence[Measurement]) -> str:
    ident = info.get("identity") or {}
    return str(ident.get("device_name") or (records[0].device_name if records else "") or "?")


def _backend(info: Mapping[str, Any], records: Sequence[Measurement]) -> str:
    return str(info.get("backend") or (records[0].backend if records else "?"))


def run_labels(runs: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]]) -> list[str]:
    """"backend · device" per run; the run id is added where two runs would read alike."""
    base = [f"{_backend(i, r)} · {_device(i, r)}" for i, r in runs]
    out = []
    for n, (label, (info, records)) in enumerate(zip(base, runs, strict=True)):
        if base.count(label) > 1:
            run_id = info.get("run_id") or (records[0].run_id if records else f"run {n + 1}")
            label = f"{label} · {run_id}"
        out.append(label)
    return out


def _default_peaks(backend: str) -> Peaks | None:
    from harness.backends import get_backend
    from harness.errors import UsageError

    try:
        return get_backend(backend).peaks
    except UsageError:  # a backend this harness does not know: no peaks, no percentages
        return None


def across_rows(runs: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]],
                peaks: Mapping[str, Peaks | None] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """(run labels, one dict per case key) where each dict holds, per run label, that run's
    status, speedup and % of peak (None where the run lacks the case)."""
    labels = run_labels(runs)
    keys: dict[CaseKey, dict[str, Any]] = {}
    for label, (info, records) in zip(labels, runs, strict=True):
        backend = _backend(info, records)
        run_peaks = (peaks or {}).get(backend) if peaks is not None else _default_peaks(backend)
        for r in records:
            k = _key(r)
            row = keys.setdefault(k, {"op": r.op, "provider": r.provider, "dtype": r.dtype,
                                      "shape": shape_str(r.shape), "case_id": r.case_id, "runs": {}})
            nearest = nearest_ceiling(*peak_values(r, run_peaks)) if r.status == "pass" else None
            row["runs"][label] = {"status": r.status, "speedup": r.speedup,
                                  "pct": nearest[0] if nearest else None,
                                  "ceiling": nearest[1] if nearest else "",
                                  "message": first_line(r.message) if r.status != "pass" else ""}
    return labels, list(keys.values())


def _geomean(values: Sequence[float]) -> float | None:
    good = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, good)) / len(good)) if good else None


def _summary(labels: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per op and run: cases passed of those any run has, geomean speedup, median % of peak."""
    ops = list(dict.fromkeys(str(r["op"]) for r in rows))
    out = []
    for op in ops:
        of_op = [r for r in rows if r["op"] == op]
        cells = []
        for label in labels:
            got = [r["runs"][label] for r in of_op if label in r["runs"]]
            passed = [g for g in got if g["status"] == "pass"]
            pcts = [g["pct"] for g in passed if g["pct"] is not None]
            cells.append({"passed": len(passed), "total": len(of_op),
                          "speedup": _geomean([g["speedup"] for g in passed if g["speedup"] is not None]),
                          "pct": statistics.median(pcts) if pcts else None})
        out.append({"op": op, "cells": cells})
    return out


def _gaps(labels: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for label in labels:
        missing = [r["case_id"] for r in rows if label not in r["runs"]]
        failing = [{"case_id": r["case_id"], "status": r["runs"][label]["status"],
                    "message": r["runs"][label]["message"]}
                   for r in rows if label in r["runs"] and r["runs"][label]["status"] != "pass"]
        out.append({"label": label, "missing": missing, "failing": failing})
    return out


def _table(labels: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Table:
    columns = [Column("op", "op"), Column("dtype", "dtype"), Column("shape", "shape")]
    for n, label in enumerate(labels):
        columns += [Column(f"s{n}", f"{label}: status"),
                    Column(f"x{n}", f"{label}: speedup", numeric=True),
                    Column(f"p{n}", f"{label}: % peak", numeric=True)]
    cells = []
    attrs = []
    for r in rows:
        row: dict[str, Cell] = {"op": Cell(r["op"]), "dtype": Cell(r["dtype"]), "shape": Cell(r["shape"])}
        complete = True
        for n, label in enumerate(labels):
            got = r["runs"].get(label)
            if got is None:
                complete = False
                row[f"s{n}"] = Cell("MISSING", cls="status-missing")
                row[f"x{n}"] = row[f"p{n}"] = Cell("", sort="")
                continue
            complete = complete and got["status"] == "pass"
            row[f"s{n}"] = Cell(got["status"].upper(), cls=f"status-{got['status']}")
            row[f"x{n}"] = Cell(fmt_num(got["speedup"]), sort=repr(got["speedup"]) if got["speedup"] is not None else "")
            row[f"p{n}"] = Cell(fmt_num(got["pct"], 3), sort=repr(got["pct"]) if got["pct"] is not None else "")
        cells.append(row)
        attrs.append({"op": str(r["op"]), "dtype": str(r["dtype"]), "coverage": "everywhere" if complete else "gaps"})
    ops = list(dict.fromkeys(str(r["op"]) for r in rows))
    dtypes = sorted({str(r["dtype"]) for r in rows})
    return Table(table_id="case-table", columns=columns, rows=cells, row_attrs=attrs,
                 filters=(("op", "op", ops), ("dtype", "dtype", dtypes),
                          ("coverage", "passed", ["everywhere", "gaps"])))


def _identity(label: str, info: Mapping[str, Any], records: Sequence[Measurement]) -> dict[str, str]:
    ident = info.get("identity") or {}
    return {"label": label, "run_id": str(info.get("run_id") or (records[0].run_id if records else "?")),
            "device": _device(info, records), "driver": str(ident.get("driver") or ""),
            "versions": ", ".join(f"{k} {ident[k]}" for k in ("torch", "triton") if ident.get(k)),
            "commit": commit_label(info, 12), "setting": " / ".join(
                str(x or "?") for x in (info.get("level"), info.get("timer"), (info.get("options") or {}).get("cache"))),
            "cases": str(len(records))}


def render_across_html(runs: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]],
                       peaks: Mapping[str, Peaks | None] | None = None) -> str:
    """The cross-vendor page of ``runs`` (run.json dict, records) — pure.

    ``peaks`` maps a backend name to its datasheet peaks for records written without
    percentages; by default each backend's own (harness/backends)."""
    labels, rows = across_rows(runs, peaks)
    chart_rows = []
    multi_provider = len({r["provider"] for r in rows}) > 1
    for r in rows:
        case = f"{r['dtype']} {r['shape']}" + (f" ({r['provider']})" if multi_provider else "")
        for label, got in r["runs"].items():
            if got["status"] == "pass":
                chart_rows.append({"op": r["op"], "case": case, "case_id": r["case_id"], "run": label,
                                   "speedup": got["speedup"], "pct": got["pct"]})
    charts = [
        across_chart("chart-speedup", chart_rows, "speedup", "Speedup over torch, per backend",
                     "speedup (torch / candidate)", log=True, runs=labels,
                     note="Each case's speedup over torch on each backend/device (log axis; above 1 "
                          "the candidate is faster than torch there)."),
        across_chart("chart-peak", chart_rows, "pct", "% of each device's peak", "% of peak",
                     log=False, runs=labels,
                     note="Each case's achieved throughput as a percentage of its own device's "
                          "datasheet peak (the nearer of memory bandwidth and the dense bf16 rate)."),
    ]
    return render_page(
        "across.html",
        title="Across backends",
        subtitle=" vs ".join(labels),
        runs=[_identity(label, info, records) for label, (info, records) in zip(labels, runs, strict=True)],
        labels=labels,
        summary=_summary(labels, rows),
        charts=charts,
        table=_table(labels, rows),
        gaps=_gaps(labels, rows),
    )
