"""report.html of one run: identity, counts, every case in a sortable table, charts, failures."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.backends.base import Peaks, roofline
from harness.results.html.charts import latency_chart, peak_chart, speedup_chart, throughput_chart
from harness.results.html.page import (
    Cell,
    Chart,
    Column,
    Table,
    clip,
    first_line,
    fmt_num,
    render_page,
)
from harness.results.render import Unreached, commit_label
from harness.results.schema import Measurement, shape_str

__all__ = ["case_rows", "log_path", "nearest_ceiling", "peak_values", "render_run_html", "split_case_id"]

STATUS_ORDER = ("pass", "fail", "error", "skip", "not run")
SIZE_TITLE = "elements (product of shape dims)"

CASE_COLUMNS = (
    Column("op", "op"),
    Column("provider", "provider"),
    Column("dtype", "dtype"),
    Column("shape", "shape"),
    Column("status", "status"),
    Column("timer", "timer"),
    Column("torch_ms", "torch ms", numeric=True, title="torch baseline median"),
    Column("cand_ms", "candidate ms", numeric=True, title="candidate median"),
    Column("speedup", "speedup", numeric=True, title="torch median / candidate median"),
    Column("gbps", "GB/s", numeric=True),
    Column("tflops", "TFLOP/s", numeric=True),
    Column("pct_bw", "% peak BW", numeric=True, title="% of the datasheet memory bandwidth"),
    Column("pct_mm", "% peak bf16", numeric=True, title="% of the datasheet dense bf16 rate (16-bit dtypes)"),
    Column("max_abs", "max abs err", numeric=True),
    Column("note", "notes / message"),
)


_NUMERIC = {c.key for c in CASE_COLUMNS if c.numeric}


def log_path(op: str) -> str:
    """The op's log, relative to the run directory (named by harness.contract.RunFiles)."""
    from harness.contract import op_file_stem

    return f"logs/{op_file_stem(op)}.log"


def split_case_id(op: str, cid: str) -> tuple[str, str, str]:
    """(provider, dtype, shape) from ``op[provider-dtype-shape]``; empty strings when the id
    does not have that form (an unreached case's id is all the plan gave)."""
    prefix = f"{op}["
    if not (cid.startswith(prefix) and cid.endswith("]")):
        return "", "", ""
    parts = cid[len(prefix):-1].rsplit("-", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else ("", "", "")


def peak_values(r: Measurement, peaks: Peaks | None) -> tuple[float | None, float | None]:
    """(% of peak bandwidth, % of peak bf16 rate) of a record: what measure_case stored in
    ``extra``, or computed from ``peaks`` for records written without them."""
    extra = r.extra or {}
    bw, mm = extra.get("pct_peak_bandwidth"), extra.get("pct_peak_bf16_tflops")
    if bw is None and mm is None and peaks is not None and r.status == "pass":
        computed = roofline(peaks, r.gbps, r.tflops, r.dtype)
        bw, mm = computed.get("pct_peak_bandwidth"), computed.get("pct_peak_bf16_tflops")
    return _finite(float(bw) if bw is not None else None), _finite(float(mm) if mm is not None else None)


def nearest_ceiling(pct_bw: float | None, pct_mm: float | None) -> tuple[float, str] | None:
    """The roofline percentage of a case: of the two ceilings, the one it comes nearer to."""
    if pct_bw is None and pct_mm is None:
        return None
    if pct_mm is not None and (pct_bw is None or pct_mm >= pct_bw):
        return pct_mm, "bf16 matrix rate"
    assert pct_bw is not None
    return pct_bw, "memory bandwidth"


def _median(t: Any) -> float | None:
    return t.summary.median if t is not None else None


def _finite(value: Any) -> Any:
    """NaN and infinity are shown as missing (JSON cannot carry them; axes cannot place them)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def case_rows(records: Sequence[Measurement], peaks: Peaks | None) -> list[dict[str, Any]]:
    """One plain dict per record: what the table and the charts show."""
    out = []
    for r in records:
        bw, mm = peak_values(r, peaks)
        note = "; ".join(r.notes)
        if r.fallback:
            note = f"fallback {r.fallback.phase}:{r.fallback.reason}" + (f"; {note}" if note else "")
        if r.status != "pass" and r.message:
            note = first_line(r.message) + (f"; {note}" if note else "")
        row = {
            "case_id": r.case_id, "op": r.op, "provider": r.provider, "dtype": r.dtype,
            "shape": shape_str(r.shape), "status": r.status, "timer": r.timer,
            "torch_ms": _median(r.baseline), "cand_ms": _median(r.candidate), "speedup": r.speedup,
            "gbps": r.gbps, "tflops": r.tflops, "pct_bw": bw, "pct_mm": mm,
            "max_abs": r.correctness.max_abs if r.correctness else None,
            "note": note, "elements": math.prod(r.shape) if r.shape else None,
        }
        out.append({k: _finite(v) for k, v in row.items()})
    return out


def _unreached_row(u: Unreached) -> dict[str, Any]:
    provider, dtype, shape = split_case_id(u.op, u.case_id)
    return {
        "case_id": u.case_id, "op": u.op, "provider": provider, "dtype": dtype,
        "shape": shape or u.case_id, "status": "not run", "timer": "", "torch_ms": None,
        "cand_ms": None, "speedup": None, "gbps": None, "tflops": None, "pct_bw": None,
        "pct_mm": None, "max_abs": None, "note": first_line(u.message), "elements": None,
    }


def _cell(key: str, value: Any) -> Cell:
    if key == "status":
        return Cell(str(value).upper(), cls=f"status-{str(value).replace(' ', '-')}")
    if isinstance(value, float) or (value is None and key in _NUMERIC):
        digits = 3 if key in ("pct_bw", "pct_mm", "max_abs") else 4
        return Cell(fmt_num(value, digits), sort=repr(value) if value is not None else "")
    return Cell("" if value is None else str(value))


def _case_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    statuses = [s for s in STATUS_ORDER if any(r["status"] == s for r in rows)]
    ops = list(dict.fromkeys(str(r["op"]) for r in rows))
    dtypes = sorted({str(r["dtype"]) for r in rows if r["dtype"]})
    return Table(
        table_id="case-table",
        columns=CASE_COLUMNS,
        rows=[{c.key: _cell(c.key, r[c.key]) for c in CASE_COLUMNS} for r in rows],
        row_attrs=[{"status": str(r["status"]), "op": str(r["op"]), "dtype": str(r["dtype"])} for r in rows],
        filters=(("status", "status", statuses), ("op", "op", ops), ("dtype", "dtype", dtypes)),
    )


def _geomeans(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r["op"], r["dtype"]), []).append(float(r["speedup"]))
    return [{"op": op, "dtype": dt, "n": len(v), "geomean": math.exp(sum(map(math.log, v)) / len(v))}
            for (op, dt), v in groups.items()]


def _peak_label(peaks: Peaks | None, records: Sequence[Measurement]) -> str | None:
    if peaks is not None:
        return f"{peaks.device}: {peaks.bandwidth_gbps:g} GB/s, {peaks.bf16_tflops:g} bf16 TFLOP/s"
    named = {str(r.extra.get("peak_device")) for r in records if r.extra and r.extra.get("peak_device")}
    return ", ".join(sorted(named)) or None


def run_charts(rows: Sequence[Mapping[str, Any]], records: Sequence[Measurement],
               peaks: Peaks | None, backend: str) -> list[Chart]:
    timed = [r for r in rows if r["status"] == "pass" and r["speedup"] is not None and r["speedup"] > 0]
    speed_rows = [{k: r[k] for k in ("case_id", "op", "dtype", "speedup", "torch_ms", "cand_ms")} for r in timed]
    charts = [speedup_chart("chart-speedup", speed_rows, _geomeans(speed_rows))]
    roof = []
    for r in timed:
        nearest = nearest_ceiling(r["pct_bw"], r["pct_mm"])
        if nearest is None:
            continue
        roof.append({"case_id": r["case_id"], "op": r["op"], "dtype": r["dtype"],
                     "pct": nearest[0], "ceiling": nearest[1], "pct_bw": r["pct_bw"],
                     "pct_mm": r["pct_mm"], "gbps": r["gbps"], "tflops": r["tflops"]})
    label = _peak_label(peaks, records)
    if roof and label:
        charts.append(peak_chart("chart-peak", roof, label))
    else:
        thru = [{k: r[k] for k in ("case_id", "op", "dtype", "gbps", "tflops")} for r in timed
                if r["gbps"] is not None and r["gbps"] > 0]
        charts.append(throughput_chart(
            "chart-peak", thru,
            f"No datasheet peaks are known for backend {backend!r}, so the roofline view shows "
            "achieved GB/s rather than a percentage of peak."))
    latency = []
    for r in rows:
        if not r["elements"]:
            continue
        for who, key in (("candidate", "cand_ms"), ("torch", "torch_ms")):
            if r[key] is not None and r[key] > 0:
                latency.append({"case_id": r["case_id"], "op": r["op"], "dtype": r["dtype"],
                                "who": who, "ms": r[key], "size": r["elements"]})
    charts.append(latency_chart("chart-latency", latency, SIZE_TITLE))
    return charts


def _failures(records: Sequence[Measurement], unreached: Sequence[Unreached]) -> list[dict[str, str]]:
    out = []
    for r in records:
        if r.status in ("fail", "error"):
            out.append({"case_id": r.case_id, "status": r.status, "summary": first_line(r.message),
                        "message": clip(r.message or "(no message)"), "log": log_path(r.op)})
    for u in unreached:
        out.append({"case_id": u.case_id, "status": "not run", "summary": first_line(u.message),
                    "message": clip(u.message or "(no message)"), "log": log_path(u.op)})
    return out


def _identity(info: Mapping[str, Any]) -> list[tuple[str, str]]:
    ident = info.get("identity") or {}
    container = info.get("container") or {}
    options = info.get("options") or {}
    state = info.get("device_state") or {}
    pairs: list[tuple[str, Any]] = [
        ("run id", info.get("run_id")),
        ("status", info.get("status")),
        ("backend", " — ".join(str(x) for x in (info.get("backend"), info.get("backend_description")) if x)),
        ("device", " ".join(str(x) for x in (ident.get("device_name"),
                                             f"({ident['device_arch']})" if ident.get("device_arch") else None) if x)),
        ("devices", ", ".join(str(d) for d in info.get("devices") or [])),
        ("driver", ident.get("driver")),
        ("versions", ", ".join(f"{k} {ident[k]}" for k in ("torch", "triton", "numpy") if ident.get(k))
         + (f", python {info['python']}" if info.get("python") else "")),
        ("harness", f"{info.get('harness_version', '?')} ({commit_label(info)})"),
        ("container", " @ ".join(str(x) for x in (container.get("image"), container.get("digest")) if x)),
        ("level / timer / cache", " / ".join(str(x or "?") for x in (info.get("level"), info.get("timer"),
                                                                     options.get("cache")))),
        ("started / finished", " → ".join(str(x) for x in (info.get("started_at"), info.get("finished_at")) if x)),
        ("fingerprint", info.get("fingerprint")),
        ("clock drop", "yes" if state.get("clock_drop") else ("no" if state else None)),
    ]
    return [(k, str(v)) for k, v in pairs if v not in (None, "", "?")]


def _options(info: Mapping[str, Any]) -> list[tuple[str, str]]:
    options = info.get("options") or {}
    return [(str(k), v if isinstance(v, str) else json.dumps(v, sort_keys=True)) for k, v in sorted(options.items())]


def render_run_html(info: Mapping[str, Any], records: Sequence[Measurement],
                    unreached: Sequence[Unreached] = (), peaks: Peaks | None = None) -> str:
    """report.html of one run (pure: run.json's dict, the records, the cases never reached,
    and the backend's datasheet peaks in; the page's text out)."""
    rows = case_rows(records, peaks) + [_unreached_row(u) for u in unreached]
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUS_ORDER}
    backend = str(info.get("backend") or (records[0].backend if records else "?"))
    charts = run_charts(rows, records, peaks, backend)
    run_id = str(info.get("run_id") or (records[0].run_id if records else "?"))
    ident = info.get("identity") or {}
    return render_page(
        "run.html",
        title=f"Run {run_id}",
        subtitle=f"{backend} · {ident.get('device_name', '?')} · {len(rows)} case(s)",
        identity=_identity(info),
        options=_options(info),
        op_status=[{k: str(o.get(k, "")) for k in ("op", "status", "attempts", "elapsed_s", "rows", "notes")}
                   for o in info.get("ops") or [] if isinstance(o, Mapping)],
        counts=[(s, n) for s, n in counts.items()],
        charts=charts,
        table=_case_table(rows),
        failures=_failures(records, unreached),
    )
