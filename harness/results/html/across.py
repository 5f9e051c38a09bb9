"""One page joining runs of different backends or devices case by case.

Cases are joined on (op, provider, dtype, shape). Per op it shows each run's passed cases,
geometric-mean speedup and median percentage of its own device's peak; per case each run's
status, speedup, % of peak and the ratio of its time to the time of the run named first; and for each run
the cases it did not run and those it ran and failed, kept apart.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from harness.backends.base import Peaks
from harness.results.html.charts import across_op_chart
from harness.results.html.devices import choose_peaks
from harness.results.html.page import Grid, GridColumn, first_line, render_page
from harness.results.html.run import nearest_ceiling, peak_values
from harness.results.render import commit_label
from harness.results.schema import Measurement, shape_str

__all__ = ["CaseKey", "across_rows", "render_across_html", "run_labels"]

CaseKey = tuple[str, str, str, tuple[int, ...]]  # op, provider, dtype, shape
NOT_RUN = "not run"


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


def _median_ms(r: Measurement) -> float | None:
    if r.status != "pass" or r.candidate is None:
        return None
    m = r.candidate.summary.median
    return m if math.isfinite(m) and m > 0 else None


def across_rows(runs: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]],
                peaks: Mapping[str, Peaks | None] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """(run labels, one dict per case key) where each dict holds, per run label that has the
    case, its status, speedup, % of its device's peak and library median (a run without the
    case is absent from ``runs``: it did not run it)."""
    labels = run_labels(runs)
    keys: dict[CaseKey, dict[str, Any]] = {}
    for label, (info, records) in zip(labels, runs, strict=True):
        backend = _backend(info, records)
        offered = (peaks or {}).get(backend) if peaks is not None else _default_peaks(backend)
        run_peaks = choose_peaks(_device(info, records), offered).peaks
        for r in records:
            k = _key(r)
            row = keys.setdefault(k, {"op": r.op, "provider": r.provider, "dtype": r.dtype,
                                      "shape": shape_str(r.shape), "case_id": r.case_id, "runs": {}})
            nearest = nearest_ceiling(*peak_values(r, run_peaks)) if r.status == "pass" else None
            row["runs"][label] = {"status": r.status, "speedup": r.speedup,
                                  "pct": nearest[0] if nearest else None,
                                  "ceiling": nearest[1] if nearest else "", "ms": _median_ms(r),
                                  "message": first_line(r.message) if r.status != "pass" else ""}
    return labels, list(keys.values())


def _geomean(values: Sequence[float]) -> float | None:
    good = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, good)) / len(good)) if good else None


def _summary(labels: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per op and run: cases passed of those any run has (or "not run" where the run has no
    case of the op), failing cases, geomean speedup, median % of peak."""
    ops = list(dict.fromkeys(str(r["op"]) for r in rows))
    out = []
    for op in ops:
        of_op = [r for r in rows if r["op"] == op]
        cells = []
        for label in labels:
            got = [r["runs"][label] for r in of_op if label in r["runs"]]
            passed = [g for g in got if g["status"] == "pass"]
            pcts = [g["pct"] for g in passed if g["pct"] is not None]
            cells.append({"ran": bool(got), "passed": len(passed), "total": len(of_op),
                          "failing": sum(g["status"] in ("fail", "error") for g in got),
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


def _grid(labels: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Grid:
    columns = [GridColumn("op", "op", width=150), GridColumn("dtype", "dtype", width=76),
               GridColumn("shape", "shape", kind="code", width=120)]
    for n, label in enumerate(labels):
        short = f"run {n + 1}"
        columns += [GridColumn(f"s{n}", f"{short} status", kind="status", title=label, width=92),
                    GridColumn(f"x{n}", f"{short} speedup", kind="num", digits=3, title=label, width=70),
                    GridColumn(f"p{n}", f"{short} % peak", kind="num", digits=3, title=label, width=62)]
        if n:
            columns.append(GridColumn(f"r{n}", f"time {short} / run 1", kind="num", digits=3, width=80,
                                      title=f"library median on {label} / on {labels[0]} (above 1: slower)"))
    out = []
    for r in rows:
        row: dict[str, Any] = {"op": r["op"], "dtype": r["dtype"], "shape": r["shape"]}
        complete = True
        first = r["runs"].get(labels[0])
        for n, label in enumerate(labels):
            got = r["runs"].get(label)
            if got is None:
                complete = False
                row[f"s{n}"] = NOT_RUN
                continue
            complete = complete and got["status"] == "pass"
            row[f"s{n}"] = got["status"]
            row[f"x{n}"], row[f"p{n}"] = got["speedup"], got["pct"]
            if n and first is not None and first["ms"] and got["ms"]:
                row[f"r{n}"] = got["ms"] / first["ms"]
        row["coverage"] = "everywhere" if complete else "gaps"
        out.append(row)
    return Grid("case-grid", "cases", columns, out, filters=(("op", "op"), ("dtype", "dtype"), ("coverage", "passed")),
                page_size=50, caption="Run n is numbered as in the runs table; hover a header for its backend and device.")


def _identity(n: int, label: str, info: Mapping[str, Any], records: Sequence[Measurement]) -> dict[str, str]:
    ident = info.get("identity") or {}
    return {"n": str(n + 1), "label": label, "run_id": str(info.get("run_id") or (records[0].run_id if records else "?")),
            "device": _device(info, records), "driver": str(ident.get("driver") or ""),
            "versions": ", ".join(f"{k} {ident[k]}" for k in ("torch", "triton") if ident.get(k)),
            "commit": commit_label(info, 12), "setting": " / ".join(
                str(x or "?") for x in (info.get("level"), info.get("timer"), (info.get("options") or {}).get("cache"))),
            "cases": str(len(records))}


def render_across_html(runs: Sequence[tuple[Mapping[str, Any], Sequence[Measurement]]],
                       peaks: Mapping[str, Peaks | None] | None = None) -> str:
    """The cross-vendor page of ``runs`` (run.json dict, records) — pure.

    Peaks are each run's device's (harness/results/html/devices.py); ``peaks`` maps a backend
    name to peaks offered for a device the table does not know (by default each backend's own,
    harness/backends), used only where they name that device."""
    labels, rows = across_rows(runs, peaks)
    summary = _summary(labels, rows)
    chart_rows = []
    for s in summary:
        for label, c in zip(labels, s["cells"], strict=True):
            if c["speedup"] is not None:
                chart_rows.append({"op": s["op"], "run": label, "speedup": c["speedup"], "pct": c["pct"]})
    charts = [
        across_op_chart("chart-speedup", chart_rows, "speedup", "Speedup over torch, per op and run",
                        "geometric mean speedup (torch / library)", log=True, runs=labels,
                        note="Each op's geometric-mean speedup over torch on each backend/device (log axis; "
                             "above 1 the library is faster than torch there)."),
        across_op_chart("chart-peak", chart_rows, "pct", "% of each device's peak, per op and run",
                        "median % of peak", log=False, runs=labels,
                        note="Each op's median percentage of its own device's datasheet peak (the nearer of "
                             "memory bandwidth and the dense bf16 rate); a device with no known peak has none."),
    ]
    return render_page(
        "across.html",
        title="Across backends",
        subtitle=" vs ".join(labels),
        runs=[_identity(n, label, info, records) for n, (label, (info, records)) in enumerate(zip(labels, runs, strict=True))],
        labels=labels,
        summary=summary,
        charts=charts,
        table=_grid(labels, rows),
        gaps=_gaps(labels, rows),
    )
