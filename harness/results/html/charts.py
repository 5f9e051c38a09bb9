"""Vega-Lite chart specs, written with altair, from plain row dicts.

Each builder returns a :class:`Chart` whose spec names its data (``data: {name: ...}``)
and carries the rows in the spec's top-level ``datasets``: altair validates the chart's
structure without walking every data row, and the page holds each row once.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt

from harness.results.html.page import Chart

__all__ = [
    "STATUS_COLOURS",
    "VERDICT_COLOURS",
    "across_op_chart",
    "forest_chart",
    "latency_scatter",
    "op_speedup_chart",
    "peak_scatter",
    "throughput_scatter",
    "trend_chart",
]

Rows = Sequence[Mapping[str, Any]]

VERDICT_COLOURS = {
    "regression": "#d62728",
    "failing": "#8c1d18",
    "noisy": "#ff7f0e",
    "improvement": "#2ca02c",
    "drift": "#9467bd",
    "unchanged": "#7f7f7f",
}
STATUS_COLOURS = {"regression": "#d62728", "suspect": "#ff7f0e"}
_TORCH_COLOUR = "#555555"


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such a value is shown as missing."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _spec(chart: alt.TopLevelMixin, datasets: Mapping[str, Rows]) -> dict[str, Any]:
    spec: dict[str, Any] = chart.to_dict()
    # altair already moved inline values (the reference lines) into ``datasets``; add ours.
    spec.setdefault("datasets", {}).update(
        {name: [{k: _finite(v) for k, v in r.items()} for r in rows] for name, rows in datasets.items()})
    return spec


def _rule(value: float, dash: Sequence[int] = (4, 4), colour: str = "#888888",
          channel: str = "y") -> alt.Chart:
    """A reference line at ``value`` (one row of its own, so it is drawn once)."""
    chart = alt.Chart(alt.Data(values=[{"v": value}])).mark_rule(strokeDash=list(dash), color=colour)
    return chart.encode(**{channel: alt.Y("v:Q") if channel == "y" else alt.X("v:Q")})


def _log_domain(values: Sequence[float], around: float) -> list[float]:
    """A log axis domain that holds ``values`` and 1/around .. around, with a little room."""
    good = [v for v in values if v > 0]
    return [min([1 / around, *good]) / 1.03, max([around, *good]) * 1.03]


def forest_chart(chart_id: str, rows: Rows, threshold: float, confidence: float) -> Chart:
    """Each compared row's head/base ratio with its interval (log x), the torch baseline's
    own ratio beside it, and the regression band's edges."""
    labels = [str(r["case_id"]) for r in rows]
    y = alt.Y("case_id:N", sort=labels, title=None, axis=alt.Axis(labelLimit=360))
    x_title = "head / base candidate median (log; right of 1 is slower)"
    colour = alt.Color("verdict:N", scale=alt.Scale(domain=list(VERDICT_COLOURS),
                                                    range=list(VERDICT_COLOURS.values())))
    lo, hi = _log_domain([float(r[k]) for r in rows for k in ("ci_low", "ci_high", "ratio", "torch_ratio")
                          if r.get(k) is not None], around=1 + threshold)
    base = alt.Chart(alt.Data(name="rows"))
    interval = base.mark_rule(strokeWidth=2).encode(
        y=y, x=alt.X("ci_low:Q", scale=alt.Scale(type="log", domain=[lo, hi], nice=False), title=x_title),
        x2="ci_high:Q", color=colour)
    tips = [alt.Tooltip("case_id:N", title="case"), "verdict:N",
            alt.Tooltip("ratio:Q", format=".4f"), alt.Tooltip("ci_low:Q", format=".4f"),
            alt.Tooltip("ci_high:Q", format=".4f"), alt.Tooltip("p_adjusted:Q", format=".3g"),
            alt.Tooltip("torch_ratio:Q", title="torch ratio", format=".4f"), "reason:N"]
    point = base.mark_point(filled=True, size=50).encode(y=y, x=alt.X("ratio:Q", title=x_title),
                                                         color=colour, tooltip=tips)
    torch = base.transform_filter("isValid(datum.torch_ratio)").mark_point(
        shape="diamond", size=45, filled=False, color=_TORCH_COLOUR, strokeWidth=1.5,
    ).encode(y=y, x=alt.X("torch_ratio:Q", title=x_title), tooltip=tips)
    edges = [_rule(1.0, colour="#333333", dash=(1, 0), channel="x"),
             _rule(1 + threshold, channel="x"), _rule(1 / (1 + threshold), channel="x")]
    layered = alt.layer(*edges, interval, point, torch).properties(width=520, height=alt.Step(18))
    note = (f"Point: head/base ratio of candidate medians; bar: its {confidence:.0%} bootstrap "
            f"interval; hollow grey diamond: the torch baseline's own ratio (drift of the machine "
            f"or of torch, not of the candidate). Dashed lines: ±{threshold:.0%} band.")
    return Chart(chart_id, "Forest plot of compared rows", _spec(layered, {"rows": rows}),
                 note=note, marks=len(rows))


def trend_chart(chart_id: str, points: Rows) -> Chart:
    """One panel per case: the median per night and backend/device with its p10-p90 band,
    torch's median dashed, a marker where the rules flagged a regression or suspect, a
    vertical dashed line on a night the case failed and a dotted one where the software
    changed (the tooltip says what). A point links to its commit where a commit URL was given.

    The spec's structure is the same for every op (built once per process); only its data
    differ, so a site of a thousand ops pays altair once."""
    spec = copy.deepcopy(_trend_structure())
    spec["datasets"]["points"] = [{k: _finite(v) for k, v in r.items()} for r in points]
    count = sum(1 for p in points if p.get("median_ms") is not None)
    note = ("Library median per night and backend/device, with the p10–p90 band; torch's median "
            "dashed. Triangle: flagged as a regression; diamond: suspect (flagged if the next "
            "night is slower too). Dashed vertical line: a night the case failed; dotted: the "
            "software changed (hover for what). Click a point to open its commit.")
    return Chart(chart_id, "Trend per case", spec, note=note, marks=count)


@functools.cache
def _trend_structure() -> dict[str, Any]:
    x = alt.X("t:T", title=None, scale=alt.Scale(type="utc"),
              axis=alt.Axis(format="%m-%d %H:%M", labelAngle=-30, labelOverlap=True))
    colour = alt.Color("series:N", title="backend / device", legend=alt.Legend(symbolOpacity=1, orient="top"))
    y_title = "median (ms)"
    tips = [alt.Tooltip("run_id:N", title="run"), alt.Tooltip("commit_short:N", title="commit"),
            alt.Tooltip("t:T", title="started", format="%Y-%m-%d %H:%M UTC"),
            alt.Tooltip("status:N"), alt.Tooltip("median_ms:Q", title="median ms", format=".4g"),
            alt.Tooltip("torch_median_ms:Q", title="torch ms", format=".4g"),
            alt.Tooltip("check:N", title="history check"), alt.Tooltip("reason:N", title="why"),
            alt.Tooltip("change:N", title="software change")]
    measured = "isValid(datum.median_ms)"
    band = alt.Chart().transform_filter(measured).mark_area(opacity=0.15).encode(
        x=x, y=alt.Y("p10_ms:Q", title=y_title, scale=alt.Scale(zero=False)), y2="p90_ms:Q", color=colour)
    line = alt.Chart().transform_filter(measured).mark_line(point=True).encode(
        x=x, y=alt.Y("median_ms:Q", title=y_title), color=colour, href="url:N", tooltip=tips)
    torch = alt.Chart().transform_filter("isValid(datum.torch_median_ms)").mark_line(
        strokeDash=[4, 3], strokeWidth=1, opacity=0.7).encode(
        x=x, y=alt.Y("torch_median_ms:Q", title=y_title), color=colour, detail="series:N")
    shapes = alt.Scale(domain=list(STATUS_COLOURS), range=["triangle-up", "diamond"])
    marks = alt.Chart().transform_filter(
        alt.FieldOneOfPredicate(field="check", oneOf=list(STATUS_COLOURS))
    ).mark_point(size=150, filled=False, strokeWidth=2, color=STATUS_COLOURS["regression"]).encode(
        x=x, y=alt.Y("median_ms:Q", title=y_title), shape=alt.Shape("check:N", scale=shapes, title="flag"),
        href="url:N", tooltip=tips)
    failed = alt.Chart().transform_filter("datum.status !== 'pass'").mark_rule(
        strokeDash=[3, 2], strokeWidth=1.5, color="#8c1d18").encode(x=x, tooltip=tips)
    changed = alt.Chart().transform_filter("datum.change").mark_rule(
        strokeDash=[1, 2], strokeWidth=1.5, color="#444444").encode(x=x, tooltip=tips)
    layered = alt.layer(band, torch, line, marks, failed, changed, data=alt.Data(name="points")).properties(
        width=330, height=140)
    facet = layered.facet(facet=alt.Facet("case_id:N", title=None, header=alt.Header(labelLimit=330)),
                          columns=3).resolve_scale(y="independent")
    spec: dict[str, Any] = facet.to_dict()
    spec.setdefault("datasets", {})
    return spec


# Charts of a run at corpus scale: a fixed width whatever the number of ops or cases, so the
# page fits its window (a step per op made a 200-op run's page tens of thousands of px wide).
RUN_CHART_WIDTH = 1060
HALF_CHART_WIDTH = 470
_MANY_OPS = 60  # more ops than this: no op names under the axis (the tooltip names each)


def op_speedup_chart(chart_id: str, rows: Rows) -> Chart:
    """One point per op at the geometric mean of its passing cases' speedups, ops sorted from
    slowest to fastest; a bar from its worst to its best case; lines at 1 and 0.5."""
    ops = [str(r["op"]) for r in sorted(rows, key=lambda r: (float(r["geomean"]), str(r["op"])))]
    values = [float(r[k]) for r in rows for k in ("geomean", "worst", "best") if r.get(k)]
    domain = _log_domain(values, around=2.0)
    axis = alt.Axis(labels=len(ops) <= _MANY_OPS, ticks=len(ops) <= _MANY_OPS, labelAngle=-60, labelLimit=120,
                    title=f"{len(ops)} ops, slowest first" if len(ops) > _MANY_OPS else None)
    x = alt.X("op:N", sort=ops, axis=axis, scale=alt.Scale(paddingOuter=0.5))
    y_title = "speedup over torch (geometric mean; bar: worst to best case)"
    y = alt.Y("geomean:Q", scale=alt.Scale(type="log", domain=domain, nice=False), title=y_title)
    tips = [alt.Tooltip("op:N"), alt.Tooltip("geomean:Q", title="geometric mean", format=".3f"),
            alt.Tooltip("worst:Q", title="worst case", format=".3f"),
            alt.Tooltip("best:Q", title="best case", format=".3f"), alt.Tooltip("n:Q", title="cases")]
    base = alt.Chart(alt.Data(name="ops"))
    spread = base.mark_rule(opacity=0.35).encode(x=x, y=alt.Y("worst:Q", title=y_title), y2="best:Q")
    band = alt.Scale(domain=["below 0.5", "0.5 to 1", "1 or more"], range=["#8c1d18", "#e08214", "#2e7d32"])
    points = base.mark_point(filled=True, size=36).encode(
        x=x, y=y, tooltip=tips,
        color=alt.Color("band:N", scale=band, title="geometric mean"),
        shape=alt.Shape("band:N", scale=alt.Scale(domain=band.domain, range=["triangle-down", "diamond", "circle"]),
                        title="geometric mean"))
    layered = alt.layer(_rule(1.0), _rule(0.5, dash=(1, 3)), spread, points).properties(
        width=RUN_CHART_WIDTH, height=260)
    note = ("One point per op: the geometric mean of its passing cases' speedups over torch (log axis), "
            "the bar spans its worst and best case. Below the dashed line at 1 the library is slower "
            "than torch; below the dotted line at 0.5, at under half its speed.")
    return Chart(chart_id, "Speedup per op", _spec(layered, {"ops": rows}), note=note, marks=len(rows))


def peak_scatter(chart_id: str, rows: Rows, peak_label: str) -> Chart:
    """% of the device's peak per case against problem size: the nearer of the two ceilings."""
    top = max([100.0, *(float(r["pct"]) for r in rows)])
    points = alt.Chart(alt.Data(name="roofline")).mark_point(filled=True, size=22, opacity=0.6).encode(
        x=alt.X("size:Q", scale=alt.Scale(type="log"), title="elements (product of shape dims)"),
        y=alt.Y("pct:Q", scale=alt.Scale(domain=[0, top]), title="% of peak"),
        shape=alt.Shape("ceiling:N", title="nearest ceiling"),
        color=alt.Color("ceiling:N", title="nearest ceiling"),
        tooltip=[alt.Tooltip("case_id:N", title="case"),
                 alt.Tooltip("pct_bw:Q", title="% peak bandwidth", format=".1f"),
                 alt.Tooltip("pct_mm:Q", title="% peak bf16 TFLOP/s", format=".1f"),
                 alt.Tooltip("gbps:Q", title="GB/s", format=".4g"),
                 alt.Tooltip("tflops:Q", title="TFLOP/s", format=".4g")],
    )
    layered = alt.layer(_rule(100.0, dash=(2, 2)), points).properties(width=HALF_CHART_WIDTH, height=240)
    note = (f"Each passing case's throughput as a percentage of {peak_label}: memory bandwidth for "
            "every op, the dense bf16 matrix rate for 16-bit dtypes; each point shows the nearer "
            "ceiling. Above the dotted line at 100% a value is impossible (listed under warnings).")
    return Chart(chart_id, "Roofline: % of the device's peak", _spec(layered, {"roofline": rows}),
                 note=note, marks=len(rows))


def throughput_scatter(chart_id: str, rows: Rows, reason: str) -> Chart:
    """Where no peak is known for the device: achieved GB/s per case against problem size."""
    points = alt.Chart(alt.Data(name="throughput")).mark_point(filled=True, size=22, opacity=0.6).encode(
        x=alt.X("size:Q", scale=alt.Scale(type="log"), title="elements (product of shape dims)"),
        y=alt.Y("gbps:Q", scale=alt.Scale(type="log"), title="achieved GB/s"),
        tooltip=[alt.Tooltip("case_id:N", title="case"), alt.Tooltip("gbps:Q", title="GB/s", format=".4g"),
                 alt.Tooltip("tflops:Q", title="TFLOP/s", format=".4g")],
    ).properties(width=HALF_CHART_WIDTH, height=240)
    return Chart(chart_id, "Achieved throughput (no roofline)", _spec(points, {"throughput": rows}),
                 note=reason, marks=len(rows))


def latency_scatter(chart_id: str, rows: Rows) -> Chart:
    """Each passing case's median latency, torch's against the library's, log-log, with the
    line where they are equal."""
    values = [float(r[k]) for r in rows for k in ("torch_ms", "cand_ms")]
    lo, hi = (min(values) / 1.2, max(values) * 1.2) if values else (1e-3, 1.0)
    scale = alt.Scale(type="log", domain=[lo, hi], nice=False)
    points = alt.Chart(alt.Data(name="latency")).mark_point(filled=True, size=22, opacity=0.6).encode(
        x=alt.X("torch_ms:Q", scale=scale, title="torch median (ms)"),
        y=alt.Y("cand_ms:Q", scale=scale, title="library median (ms)"),
        tooltip=[alt.Tooltip("case_id:N", title="case"), alt.Tooltip("torch_ms:Q", title="torch ms", format=".4g"),
                 alt.Tooltip("cand_ms:Q", title="library ms", format=".4g"),
                 alt.Tooltip("speedup:Q", format=".3f")],
    )
    equal = alt.Chart(alt.Data(values=[{"a": lo, "b": lo}, {"a": hi, "b": hi}])).mark_line(
        strokeDash=[4, 4], color="#888888").encode(x=alt.X("a:Q", scale=scale), y=alt.Y("b:Q", scale=scale))
    layered = alt.layer(equal, points).properties(width=HALF_CHART_WIDTH, height=240)
    note = "Each passing case's median latency: above the dashed line the library is slower than torch."
    return Chart(chart_id, "Latency: library against torch", _spec(layered, {"latency": rows}),
                 note=note, marks=len(rows))


def across_op_chart(chart_id: str, rows: Rows, field: str, title: str, y_title: str,
                    log: bool, runs: Sequence[str], note: str) -> Chart:
    """One point per op and run (shape and colour by run), ops on a fixed-width axis sorted
    by the value of the run named first: the page fits its window whatever the number of ops."""
    have = [r for r in rows if r.get(field) is not None]
    first = {str(r["op"]): float(r[field]) for r in have if r["run"] == runs[0]}
    ops = sorted({str(r["op"]) for r in have}, key=lambda op: (first.get(op, float("inf")), op))
    scale = alt.Scale(type="log") if log else alt.Scale(zero=True)
    axis = alt.Axis(labels=len(ops) <= _MANY_OPS, ticks=len(ops) <= _MANY_OPS, labelAngle=-60, labelLimit=120,
                    title=f"{len(ops)} ops" if len(ops) > _MANY_OPS else None)
    points = alt.Chart(alt.Data(name="across")).mark_point(filled=True, size=45, opacity=0.8).encode(
        x=alt.X("op:N", sort=ops, axis=axis),
        y=alt.Y(f"{field}:Q", scale=scale, title=y_title),
        color=alt.Color("run:N", sort=list(runs), title="backend / device", legend=alt.Legend(orient="top")),
        shape=alt.Shape("run:N", sort=list(runs), title="backend / device", legend=alt.Legend(orient="top")),
        tooltip=[alt.Tooltip("op:N"), alt.Tooltip("run:N", title="backend / device"),
                 alt.Tooltip(f"{field}:Q", format=".3f")],
    ).transform_filter(f"isValid(datum.{field})")
    layers = [_rule(1.0), points] if log else [points]
    chart = alt.layer(*layers).properties(width=RUN_CHART_WIDTH, height=220)
    return Chart(chart_id, title, _spec(chart, {"across": rows}), note=note, marks=len(have))
