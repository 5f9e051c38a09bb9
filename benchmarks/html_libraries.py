"""Page weight and build time of one run page, made with each candidate chart library.

The page is the same for every library: the 90-case H200 core run (rebuilt from
benchmarks/results/h200-core-2026-11-29 by tests/html_data.py) as a plain table, and three
charts: speedup per op and dtype (log y), percent of peak per op, and latency against problem
size in one panel per op (log-log). Each library's JavaScript is inlined once per page, as an
offline page needs. Each library is timed in a fresh process: "first" is the first page of
that process (the bundle included), "next" the median of five more pages. Last, the
harness's own pages (harness/results/html: the run page with its full table, compare,
across and a history site of 8 ops x 30 nights x 2 backends) are measured the same way.

    PYTHONPATH=. python benchmarks/html_libraries.py              # the libraries installed here
    PYTHONPATH=. python benchmarks/html_libraries.py --out /tmp/pages   # also keep the pages

Writes benchmarks/results/html_libraries.json. Needs no accelerator.
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("altair", "plotly", "bokeh")


def rows() -> list[dict[str, Any]]:
    from tests.html_data import h200_info, h200_records

    out = []
    for r in h200_records(h200_info()):
        extra = r.extra
        pct = max((float(extra[k]) for k in ("pct_peak_bandwidth", "pct_peak_bf16_tflops") if extra.get(k) is not None),
                  default=None)
        out.append({
            "case_id": r.case_id, "op": r.op, "dtype": r.dtype, "shape": "x".join(map(str, r.shape)),
            "speedup": r.speedup, "pct_peak": pct, "elements": math.prod(r.shape),
            "ms": r.candidate.summary.median if r.candidate else None,
        })
    return out


def table(data: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{html.escape(k)}</th>" for k in data[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row.values()) + "</tr>"
                   for row in data)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(head: str, body: str) -> str:
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'>{head}</head><body>{body}</body></html>"


@functools.cache
def _vega_bundle(vl_version: str) -> str:
    """Made once per process, as harness/results/html/page.py does."""
    import vl_convert as vlc

    bundle: str = vlc.javascript_bundle("window.vegaEmbed = vegaEmbed;", vl_version=vl_version)
    return bundle


def build_altair(data: list[dict[str, Any]]) -> str:
    import altair as alt

    base = alt.Chart(alt.Data(values=data))
    charts = [
        base.mark_point().encode(x="op:N", xOffset="dtype:N", y=alt.Y("speedup:Q").scale(type="log"),
                                 color="dtype:N", tooltip=["case_id:N", "speedup:Q"]),
        base.mark_point().encode(x="op:N", xOffset="dtype:N", y="pct_peak:Q", color="dtype:N",
                                 tooltip=["case_id:N", "pct_peak:Q"]),
        base.mark_line(point=True).encode(
            x=alt.X("elements:Q").scale(type="log"), y=alt.Y("ms:Q").scale(type="log"), color="dtype:N",
        ).properties(width=180, height=140).facet(facet="op:N", columns=4).resolve_scale(
            x="independent", y="independent"),
    ]
    bundle = _vega_bundle(alt.SCHEMA_VERSION.lstrip("v").rsplit(".", 1)[0])
    divs = "".join(f"<div id='c{i}'></div>" for i in range(len(charts)))
    specs = json.dumps([c.to_dict() for c in charts]).replace("<", "\\u003c")
    script = (f"<script>{bundle}</script><script>const specs={specs};"
              "specs.forEach((s,i)=>vegaEmbed('#c'+i,s,{actions:false,renderer:'svg'}));</script>")
    return page("", divs + table(data) + script)


def build_plotly(data: list[dict[str, Any]]) -> str:
    import plotly.graph_objects as go
    import plotly.offline
    from plotly.subplots import make_subplots

    dtypes = sorted({d["dtype"] for d in data})
    ops = list(dict.fromkeys(d["op"] for d in data))
    figs = []
    for key, log in (("speedup", True), ("pct_peak", False)):
        fig = go.Figure([go.Box(x=[d["op"] for d in data if d["dtype"] == t],
                                y=[d[key] for d in data if d["dtype"] == t], name=t,
                                boxpoints="all", text=[d["case_id"] for d in data if d["dtype"] == t])
                         for t in dtypes])
        fig.update_layout(boxmode="group")
        if log:
            fig.update_yaxes(type="log")
        figs.append(fig)
    grid = make_subplots(rows=2, cols=4, subplot_titles=ops)
    for i, op in enumerate(ops):
        for t in dtypes:
            pts = sorted((d["elements"], d["ms"]) for d in data if d["op"] == op and d["dtype"] == t)
            grid.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], name=t,
                                      mode="lines+markers", showlegend=i == 0), row=i // 4 + 1, col=i % 4 + 1)
    grid.update_xaxes(type="log")
    grid.update_yaxes(type="log")
    figs.append(grid)
    parts = [f.to_html(full_html=False, include_plotlyjs=False) for f in figs]
    return page(f"<script>{plotly.offline.get_plotlyjs()}</script>", "".join(parts) + table(data))


def build_bokeh(data: list[dict[str, Any]]) -> str:
    from bokeh.embed import components
    from bokeh.layouts import column, gridplot
    from bokeh.models import ColumnDataSource
    from bokeh.palettes import Category10
    from bokeh.plotting import figure
    from bokeh.resources import INLINE
    from bokeh.transform import dodge

    dtypes = sorted({d["dtype"] for d in data})
    ops = list(dict.fromkeys(d["op"] for d in data))
    plots = []
    for key, log in (("speedup", True), ("pct_peak", False)):
        p = figure(x_range=ops, y_axis_type="log" if log else "linear", width=800, height=300,
                   tooltips=[("case", "@case_id"), (key, f"@{key}")])
        for j, t in enumerate(dtypes):
            src = ColumnDataSource({k: [d[k] for d in data if d["dtype"] == t] for k in ("op", key, "case_id")})
            p.scatter(x=dodge("op", -0.25 + 0.25 * j, range=p.x_range), y=key, source=src,
                      color=Category10[10][j], legend_label=t)
        plots.append(p)
    panels = []
    for op in ops:
        p = figure(title=op, x_axis_type="log", y_axis_type="log", width=200, height=160)
        for j, t in enumerate(dtypes):
            pts = sorted((d["elements"], d["ms"]) for d in data if d["op"] == op and d["dtype"] == t)
            p.line([q[0] for q in pts], [q[1] for q in pts], color=Category10[10][j])
            p.scatter([q[0] for q in pts], [q[1] for q in pts], color=Category10[10][j])
        panels.append(p)
    plots.append(gridplot(panels, ncols=4))
    script, div = components(column(*plots))
    return page(INLINE.render() + script, div + table(data))


def measure_harness(out: Path | None) -> dict[str, Any]:
    """The harness's own pages (harness/results/html) from the same 90 cases: the run page
    first in a fresh process (imports, templates and the Vega bundle included), then again,
    and the other pages' weight and time once the bundle is made."""
    import gzip

    t0 = time.perf_counter()
    from harness.compare.page import render_compare_html
    from harness.results.html import (
        render_across_html,
        render_history_site,
        render_run_html,
    )
    from tests.html_data import (
        H200_PEAKS,
        comparison,
        h200_info,
        h200_records,
        history_points,
        musa_like,
    )
    t_import = time.perf_counter() - t0
    info = h200_info()
    records = h200_records(info)
    t0 = time.perf_counter()
    text = render_run_html(info, records, [], H200_PEAKS)
    first = time.perf_counter() - t0
    again = []
    for _ in range(5):
        t0 = time.perf_counter()
        render_run_html(info, records, [], H200_PEAKS)
        again.append(time.perf_counter() - t0)
    pages: dict[str, str] = {"run": text}
    timings: dict[str, float] = {}
    musa_info, musa_records = musa_like(info, records)
    c = comparison()
    points = history_points(ops=("softmax", "layer_norm", "rms_norm", "gelu", "silu_and_mul", "add", "sum", "mm"),
                            runs=30)
    for name, build in (("compare", lambda: {"compare": render_compare_html(c)}),
                        ("across", lambda: {"across": render_across_html([(info, records), (musa_info, musa_records)])}),
                        ("history site", lambda: render_history_site(points))):
        t0 = time.perf_counter()
        built = build()
        timings[name] = round(time.perf_counter() - t0, 3)
        pages.update({f"{name}/{k}" if len(built) > 1 else name: v for k, v in built.items()})
    if out:
        for key, page_text in pages.items():
            path = out / "harness" / (key if key.endswith(".html") else f"{key}.html")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(page_text)
    raw = text.encode()
    site = [v.encode() for k, v in pages.items() if k.startswith("history site/")]
    from importlib.metadata import version

    return {"library": "harness (altair + vl-convert)",
            "versions": {"altair": version("altair"), "vl-convert-python": version("vl-convert-python")},
            "cases": len(records), "page_bytes": len(raw), "page_gzip_bytes": len(gzip.compress(raw, 6)),
            "first_page_s": round(first, 3), "next_page_s": round(statistics.median(again), 3),
            "import_s": round(t_import, 3),
            "other_pages": {
                "compare_bytes": len(pages["compare"].encode()), "compare_s": timings["compare"],
                "across_bytes": len(pages["across"].encode()), "across_s": timings["across"],
                "history_site_pages": len(site), "history_site_bytes": sum(map(len, site)),
                "history_site_points": len(points), "history_site_s": timings["history site"]}}


BUILDERS: dict[str, Callable[[list[dict[str, Any]]], str]] = {
    "altair": build_altair, "plotly": build_plotly, "bokeh": build_bokeh,
}


def measure_one(name: str, out: Path | None) -> dict[str, Any]:
    """In this process (a fresh one per library): first page, then five more."""
    t0 = time.perf_counter()
    data = rows()
    t_data = time.perf_counter() - t0
    t0 = time.perf_counter()
    text = BUILDERS[name](data)
    first = time.perf_counter() - t0
    again = []
    for _ in range(5):
        t0 = time.perf_counter()
        BUILDERS[name](data)
        again.append(time.perf_counter() - t0)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.html").write_text(text)
    import gzip

    raw = text.encode()
    from importlib.metadata import version

    versions = {dist: version(dist) for dist in
                {"altair": ("altair", "vl-convert-python"), "plotly": ("plotly",), "bokeh": ("bokeh",)}[name]}
    return {"library": name, "versions": versions, "cases": len(data), "page_bytes": len(raw),
            "page_gzip_bytes": len(gzip.compress(raw, 6)), "first_page_s": round(first, 3),
            "next_page_s": round(statistics.median(again), 3), "data_s": round(t_data, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="keep the pages here")
    parser.add_argument("--one", choices=(*LIBRARIES, "harness"), help=argparse.SUPPRESS)  # a child's job
    args = parser.parse_args()
    if args.one:
        row = measure_harness(args.out) if args.one == "harness" else measure_one(args.one, args.out)
        print(json.dumps(row))
        return 0
    results = []
    for name in (*LIBRARIES, "harness"):
        cmd = [sys.executable, __file__, "--one", name] + (["--out", str(args.out)] if args.out else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            print(f"{name}: not measured ({last})")
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        results.append(row)
        print(f"{name:7} {row['page_bytes'] / 1e6:6.2f} MB ({row['page_gzip_bytes'] / 1e6:.2f} MB gzip), "
              f"first page {row['first_page_s']:.2f} s, next {row['next_page_s']:.3f} s  {row['versions']}")
        if "other_pages" in row:
            print(f"        {row['other_pages']}")
    doc = {"what": "one run page (90 cases, 3 charts, library JS inlined once)",
           "machine": platform.machine(), "python": platform.python_version(), "results": results}
    (ROOT / "benchmarks" / "results" / "html_libraries.json").write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
