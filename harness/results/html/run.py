"""report.html of one run, made to be read at a thousand ops.

Its first screen says how the run went: counts of cases and ops by status and by cause
(an op's TIMEOUT or CRASH included), the ops slower than torch, a one-row-per-op summary and
the failures grouped by cause, with warnings on values that cannot be right (a median at or
below zero, more than 100% of the device's peak). Below come three fixed-width charts and
every case in a paged grid (one line per row), then the run's identity.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from harness.backends.base import Peaks, roofline
from harness.results.html.charts import (
    latency_scatter,
    op_speedup_chart,
    peak_scatter,
    throughput_scatter,
)
from harness.results.html.devices import PeakChoice, choose_peaks
from harness.results.html.page import (
    Chart,
    Grid,
    GridColumn,
    clip,
    first_line,
    render_page,
)
from harness.results.render import Unreached, commit_label
from harness.results.schema import Measurement, shape_str

__all__ = [
    "CAUSES",
    "case_rows",
    "cause_of",
    "log_path",
    "nearest_ceiling",
    "op_summary",
    "peak_values",
    "render_run_html",
    "split_case_id",
]

STATUS_ORDER = ("pass", "fail", "error", "skip", "not run")
# The causes a record may name (the corpus triage's words), then the page's own word for a
# failure whose record names none.
CAUSES = ("library", "benchmark", "harness", "environment", "unknown")
UNCLASSIFIED = "unclassified"
FAILING = ("fail", "error", "not run")
SLOW, VERY_SLOW = 1.0, 0.5  # geometric-mean speedups the first screen lists ops under
WARNING_LIST_LIMIT = 200  # cases named per warning; the grid's warning filter finds every one

CASE_COLUMNS = (
    GridColumn("op", "op", width=180),
    GridColumn("dtype", "dtype", width=80),
    GridColumn("shape", "shape", kind="code", width=130),
    GridColumn("status", "status", kind="status", width=84),
    GridColumn("cause", "cause", width=96),
    GridColumn("timer", "timer", width=70),
    GridColumn("torch_ms", "torch ms", kind="num", title="torch median", width=80),
    GridColumn("cand_ms", "lib ms", kind="num", title="library (candidate) median", width=74),
    GridColumn("speedup", "speedup", kind="num", title="torch median / library median", width=80),
    GridColumn("gbps", "GB/s", kind="num", width=66),
    GridColumn("pct", "% peak", kind="num", digits=3, title="% of the nearer datasheet ceiling", width=70),
    GridColumn("max_abs", "max err", kind="num", digits=3, title="largest absolute error", width=72),
    GridColumn("warning", "warning", width=90),
    GridColumn("note", "notes / message"),
)

OP_COLUMNS = (
    GridColumn("op", "op", width=230),
    GridColumn("status", "status", kind="status", width=100),
    GridColumn("cause", "cause", width=100),
    GridColumn("cases", "cases", kind="num", width=60),
    GridColumn("passed", "passed", kind="num", width=70),
    GridColumn("failing", "not passing", kind="num", title="fail, error or not run", width=100),
    GridColumn("geomean", "geomean", kind="num", digits=3,
               title="geometric mean of the passing cases' speedups over torch", width=140),
    GridColumn("worst", "worst", kind="num", digits=3, title="the worst passing case's speedup", width=120),
    GridColumn("worst_case", "worst case", kind="code"),
)


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
    """(% of peak bandwidth, % of peak bf16 rate) of a record against ``peaks``, the peaks of
    the device that ran: computed from its throughput, or the percentages measure_case stored
    when they were taken against the same device. No peaks, no percentages."""
    if peaks is None or r.status != "pass":
        return None, None
    if r.gbps is not None or r.tflops is not None:
        computed = roofline(peaks, _finite(r.gbps), _finite(r.tflops), r.dtype)
        bw, mm = computed.get("pct_peak_bandwidth"), computed.get("pct_peak_bf16_tflops")
    else:
        extra = r.extra or {}
        if extra.get("peak_device") != peaks.device:
            return None, None
        bw, mm = extra.get("pct_peak_bandwidth"), extra.get("pct_peak_bf16_tflops")
    return _finite(float(bw) if bw is not None else None), _finite(float(mm) if mm is not None else None)


def nearest_ceiling(pct_bw: float | None, pct_mm: float | None) -> tuple[float, str] | None:
    """The roofline percentage of a case: of the two ceilings, the one it comes nearer to."""
    if pct_bw is None and pct_mm is None:
        return None
    if pct_mm is not None and (pct_bw is None or pct_mm >= pct_bw):
        return pct_mm, "bf16 matrix rate"
    assert pct_bw is not None
    return pct_bw, "memory bandwidth"


def cause_of(item: object) -> str:
    """The kind of cause a record, an unreached case or an op's row names (a ``cause`` with a
    ``kind``, or a word), empty when it names none. Read where present: records written before
    causes existed have none."""
    found = item.get("cause") if isinstance(item, Mapping) else getattr(item, "cause", None)
    if not found and isinstance(item, Measurement):
        found = (item.extra or {}).get("cause")
    if isinstance(found, Mapping):
        found = found.get("kind")
    found = getattr(found, "kind", found)
    return str(found) if found else ""


def _op_cause(entry: Mapping[str, Any], records: Sequence[Measurement]) -> str:
    """The cause of an op that did not pass: its row's, else derived from its status, notes and
    records where the harness derives causes (harness/results/causes.py)."""
    said = cause_of(entry)
    if said or not entry:
        return said
    try:
        from harness.results.causes import op_cause
    except ImportError:
        return ""
    found = op_cause(str(entry.get("status") or "").upper(), [str(entry.get("notes") or "")], records)
    return cause_of({"cause": found}) if found is not None else ""


def _median(t: Any) -> float | None:
    return t.summary.median if t is not None else None


def _finite(value: Any) -> Any:
    """NaN and infinity are shown as missing (JSON cannot carry them; axes cannot place them)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _warnings(torch_ms: float | None, cand_ms: float | None, speedup: float | None,
              pct_bw: float | None, pct_mm: float | None) -> list[str]:
    out = []
    for who, value in (("torch", torch_ms), ("library", cand_ms)):
        if value is not None and value <= 0:
            out.append(f"{who} median {value:.3g} ms (at or below zero)")
    if speedup is not None and speedup <= 0 and not out:
        out.append(f"speedup {speedup:.3g} (at or below zero)")
    for what, value in (("bandwidth", pct_bw), ("bf16 rate", pct_mm)):
        if value is not None and value > 100:
            out.append(f"{value:.0f}% of peak {what} (over 100%)")
    return out


def case_rows(records: Sequence[Measurement], peaks: Peaks | None) -> list[dict[str, Any]]:
    """One plain dict per record: what the grid, the summaries and the charts show. ``peaks``
    are the peaks of the device that ran (None: no percentages)."""
    out = []
    for r in records:
        bw, mm = peak_values(r, peaks)
        nearest = nearest_ceiling(bw, mm)
        note = "; ".join(r.notes)
        if r.fallback:
            note = f"fallback {r.fallback.phase}:{r.fallback.reason}" + (f"; {note}" if note else "")
        if r.status != "pass" and r.message:
            note = first_line(r.message) + (f"; {note}" if note else "")
        torch_ms, cand_ms = _finite(_median(r.baseline)), _finite(_median(r.candidate))
        speedup = _finite(r.speedup)
        warnings = _warnings(torch_ms, cand_ms, speedup, bw, mm)
        # A median at or below zero makes the speedup meaningless; a throughput over the peak
        # does not (the time may be right where the byte count is not).
        signed = [v for v in (torch_ms, cand_ms, speedup) if v is not None]
        cause = cause_of(r) or (UNCLASSIFIED if r.status in FAILING else "")
        row = {
            "case_id": r.case_id, "op": r.op, "provider": r.provider, "dtype": r.dtype,
            "shape": shape_str(r.shape), "status": r.status, "cause": cause, "timer": r.timer,
            "torch_ms": torch_ms, "cand_ms": cand_ms, "speedup": speedup,
            "gbps": _finite(r.gbps), "tflops": _finite(r.tflops), "pct_bw": bw, "pct_mm": mm,
            "pct": nearest[0] if nearest else None, "ceiling": nearest[1] if nearest else "",
            "max_abs": _finite(r.correctness.max_abs) if r.correctness else None,
            "note": note, "elements": math.prod(r.shape) if r.shape else None,
            "warning": "; ".join(warnings), "flag": "warning" if warnings else "none", "message": r.message,
            "believable": all(v > 0 for v in signed),
        }
        out.append(row)
    return out


def _unreached_row(u: Unreached) -> dict[str, Any]:
    provider, dtype, shape = split_case_id(u.op, u.case_id)
    return {
        "case_id": u.case_id, "op": u.op, "provider": u.provider or provider, "dtype": u.dtype or dtype,
        "shape": u.shape or shape or u.case_id, "status": "not run", "cause": cause_of(u) or UNCLASSIFIED,
        "timer": "", "torch_ms": None, "cand_ms": None, "speedup": None, "gbps": None, "tflops": None,
        "pct_bw": None, "pct_mm": None, "pct": None, "ceiling": "", "max_abs": None,
        "note": first_line(u.message), "elements": None, "warning": "", "flag": "none", "message": u.message,
        "believable": False,
    }


def _timed(row: Mapping[str, Any]) -> bool:
    """A passing case whose speedup can be believed (positive medians, positive speedup)."""
    return row["status"] == "pass" and row["speedup"] is not None and bool(row["believable"])


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _op_statuses(info: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(o.get("op")): o for o in info.get("ops") or [] if isinstance(o, Mapping) and o.get("op")}


def _status_from_cases(statuses: Sequence[str]) -> str:
    for word, status in (("error", "ERROR"), ("not run", "ERROR"), ("fail", "FAIL")):
        if word in statuses:
            return status
    return "SKIP" if statuses and all(s == "skip" for s in statuses) else "PASS"


def op_summary(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any],
               records: Sequence[Measurement] = ()) -> list[dict[str, Any]]:
    """One row per op (the op table of run.json, else the cases): its status (TIMEOUT and
    CRASH as run.json says), cause, case counts, geometric mean and worst speedup."""
    by_op: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_op.setdefault(str(r["op"]), []).append(r)
    stored = _op_statuses(info)
    records_of: dict[str, list[Measurement]] = {}
    for rec in records:
        records_of.setdefault(rec.op, []).append(rec)
    out = []
    for op in list(dict.fromkeys([*stored, *by_op])):
        cases = by_op.get(op, [])
        timed = [r for r in cases if _timed(r)]
        speedups = [float(r["speedup"]) for r in timed]
        worst = min(timed, key=lambda r: float(r["speedup"])) if timed else None
        failing = [r for r in cases if r["status"] in FAILING]
        entry = stored.get(op, {})
        status = str(entry.get("status") or _status_from_cases([str(r["status"]) for r in cases])).upper()
        causes = Counter(str(r["cause"]) for r in failing)
        cause = "" if status in ("PASS", "SKIP") else _op_cause(entry, records_of.get(op, []))
        cause = cause or (causes.most_common(1)[0][0] if causes else "")
        if not cause and status not in ("PASS", "SKIP"):
            cause = UNCLASSIFIED
        out.append({
            "op": op, "status": status.lower(), "cause": cause, "cases": len(cases),
            "passed": sum(r["status"] == "pass" for r in cases), "failing": len(failing),
            "geomean": _geomean(speedups),
            "worst": float(worst["speedup"]) if worst else None,
            "best": max(speedups) if speedups else None,
            "worst_case": str(worst["case_id"]) if worst else (str(failing[0]["case_id"]) if failing else ""),
            "n": len(speedups), "notes": str(entry.get("notes") or ""),
        })
    return out


def _failure_groups(rows: Sequence[Mapping[str, Any]], ops: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Failures by cause, then by op: each op's status, its failing cases of that cause, and
    each distinct first line of their messages with how many cases share it (the whole message
    once). An op that ended badly (TIMEOUT, CRASH, ...) is also listed under its own cause,
    even when every case it recorded passed."""
    failing_by_op: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r["status"] in FAILING:
            failing_by_op.setdefault(str(r["op"]), []).append(r)
    groups: dict[str, list[dict[str, Any]]] = {}
    for o in ops:
        by_cause: dict[str, list[Mapping[str, Any]]] = {}
        for r in failing_by_op.get(o["op"], []):
            by_cause.setdefault(str(r["cause"]), []).append(r)
        if o["status"] not in ("pass", "skip", "fail", "error"):
            by_cause.setdefault(o["cause"] or UNCLASSIFIED, [])
        for cause, cases in by_cause.items():
            kinds: dict[str, dict[str, Any]] = {}
            for r in cases:
                head = first_line(str(r["message"] or r["note"] or "(no message)"))
                k = kinds.setdefault(head, {"summary": head, "count": 0, "statuses": Counter(),
                                            "example": str(r["case_id"]),
                                            "message": clip(str(r["message"] or "(no message)"))})
                k["count"] += 1
                k["statuses"][str(r["status"])] += 1
            groups.setdefault(cause, []).append({
                "op": o["op"], "status": o["status"], "cases": len(cases), "log": log_path(o["op"]),
                "notes": o["notes"], "kinds": [
                    {**k, "statuses": ", ".join(f"{n} {s}" for s, n in k["statuses"].most_common())}
                    for k in sorted(kinds.values(), key=lambda k: -k["count"])]})
    order = [*CAUSES, UNCLASSIFIED]
    return [{"cause": c, "ops": groups[c], "cases": sum(e["cases"] for e in groups[c])}
            for c in sorted(groups, key=lambda c: (order.index(c) if c in order else len(order), c))]


_OP_ORDER = ("crash", "timeout", "poisoned", "error", "fail", "pass", "skip")


def _worst_op_first(o: Mapping[str, Any]) -> tuple[int, float, str]:
    rank = _OP_ORDER.index(o["status"]) if o["status"] in _OP_ORDER else 0
    return rank, o["geomean"] if o["geomean"] is not None else math.inf, str(o["op"])


def _peak_label(choice: PeakChoice) -> str:
    assert choice.peaks is not None
    p = choice.peaks
    return f"{p.device}: {p.bandwidth_gbps:g} GB/s, {p.bf16_tflops:g} bf16 TFLOP/s"


def run_charts(rows: Sequence[Mapping[str, Any]], ops: Sequence[Mapping[str, Any]],
               choice: PeakChoice) -> list[Chart]:
    timed = [r for r in rows if _timed(r)]
    op_rows = [{k: o[k] for k in ("op", "geomean", "worst", "best", "n")} for o in ops if o["geomean"]]
    for o in op_rows:
        o["band"] = "below 0.5" if o["geomean"] < VERY_SLOW else ("0.5 to 1" if o["geomean"] < SLOW else "1 or more")
    charts = [op_speedup_chart("chart-speedup", op_rows)]
    if choice.peaks is not None:
        roof = [{"case_id": r["case_id"], "pct": r["pct"], "ceiling": r["ceiling"], "pct_bw": r["pct_bw"],
                 "pct_mm": r["pct_mm"], "gbps": r["gbps"], "tflops": r["tflops"], "size": r["elements"]}
                for r in timed if r["pct"] is not None and r["elements"]]
        charts.append(peak_scatter("chart-peak", roof, _peak_label(choice)))
    else:
        thru = [{"case_id": r["case_id"], "gbps": r["gbps"], "tflops": r["tflops"], "size": r["elements"]}
                for r in timed if r["gbps"] is not None and r["gbps"] > 0 and r["elements"]]
        charts.append(throughput_scatter("chart-peak", thru, f"No roofline: {choice.reason}. Shown instead: "
                                                             "achieved GB/s, which needs no peak."))
    latency = [{"case_id": r["case_id"], "torch_ms": r["torch_ms"], "cand_ms": r["cand_ms"], "speedup": r["speedup"]}
               for r in timed if r["torch_ms"] and r["cand_ms"]]
    charts.append(latency_scatter("chart-latency", latency))
    return charts


def _identity(info: Mapping[str, Any], choice: PeakChoice) -> list[tuple[str, str]]:
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
        ("peaks", f"{_peak_label(choice)} — {choice.source}" if choice.peaks else f"none: {choice.reason}"),
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


def _counted(values: Sequence[str], order: Sequence[str]) -> list[tuple[str, int]]:
    counts = Counter(values)
    known = [(k, counts[k]) for k in order if counts[k]]
    return known + sorted((k, n) for k, n in counts.items() if k not in order and n)


def render_run_html(info: Mapping[str, Any], records: Sequence[Measurement],
                    unreached: Sequence[Unreached] = (), peaks: Peaks | None = None) -> str:
    """report.html of one run (pure: run.json's dict, the records, the cases never reached,
    and the backend's datasheet peaks in; the page's text out).

    The roofline uses the peaks of the device that ran, from the table of known devices
    (harness/results/html/devices.py); ``peaks`` are used only where they name that device."""
    ident = info.get("identity") or {}
    device = str(ident.get("device_name") or (records[0].device_name if records else "") or "")
    choice = choose_peaks(device, peaks)
    rows = case_rows(records, choice.peaks) + [_unreached_row(u) for u in unreached]
    ops = op_summary(rows, info, records)
    op_cause = {o["op"]: o["cause"] for o in ops}
    for r in rows:  # a case never reached shares the cause of its op's end (a CRASH, a TIMEOUT)
        if r["status"] == "not run" and r["cause"] == UNCLASSIFIED and op_cause.get(r["op"]):
            r["cause"] = op_cause[r["op"]]
    backend = str(info.get("backend") or (records[0].backend if records else "?"))
    run_id = str(info.get("run_id") or (records[0].run_id if records else "?"))
    timed_ops = [o for o in ops if o["geomean"] is not None]
    slow = sorted((o for o in timed_ops if o["geomean"] < SLOW), key=lambda o: o["geomean"])
    failing_rows = [r for r in rows if r["status"] in FAILING]
    op_failing = [o for o in ops if o["status"] not in ("pass", "skip")]
    warned = [r for r in rows if r["warning"]]
    warning_kinds = Counter(kind for r in warned for kind in {
        w.split(" (", 1)[1].rstrip(")") if " (" in w else w for w in str(r["warning"]).split("; ")})
    return render_page(
        "run.html",
        title=f"Run {run_id}",
        subtitle=f"{backend} · {device or '?'} · {len(ops)} op(s), {len(rows)} case(s) · {commit_label(info)}",
        case_counts=_counted([str(r["status"]) for r in rows], STATUS_ORDER),
        op_counts=_counted([str(o["status"]).upper() for o in ops],
                           ("PASS", "FAIL", "ERROR", "TIMEOUT", "CRASH", "POISONED", "SKIP")),
        cause_counts=_counted([str(r["cause"]) for r in failing_rows], [*CAUSES, UNCLASSIFIED]),
        op_cause_counts=_counted([str(o["cause"] or UNCLASSIFIED) for o in op_failing], [*CAUSES, UNCLASSIFIED]),
        timed_ops=len(timed_ops),
        very_slow=[o for o in slow if o["geomean"] < VERY_SLOW],
        slow=[o for o in slow if o["geomean"] >= VERY_SLOW],
        warned=warned[:WARNING_LIST_LIMIT],
        warned_total=len(warned),
        warning_kinds=sorted(warning_kinds.items()),
        peak_line=(f"{_peak_label(choice)} ({choice.source})" if choice.peaks else f"no roofline: {choice.reason}"),
        failures=_failure_groups(rows, ops),
        op_grid=Grid("op-grid", "ops", OP_COLUMNS, sorted(ops, key=_worst_op_first), filters=(("status", "status"), ("cause", "cause")),
                     page_size=15),
        identity=_identity(info, choice),
        options=_options(info),
        charts=run_charts(rows, ops, choice),
        table=Grid("case-grid", "cases", CASE_COLUMNS, rows, carried=("case_id",),
                   filters=(("op", "op"), ("status", "status"), ("cause", "cause"), ("dtype", "dtype"),
                            ("timer", "timer"), ("flag", "warning")),
                   page_size=50),
    )
