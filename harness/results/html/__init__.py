"""HTML reports: pure functions from loaded run data to self-contained HTML pages.

- :func:`render_run_html` — report.html of one run
- :func:`render_compare_html` (its adapter: :func:`compare_rows`) — compare.html of
  compare, gate, gate-run and ab
- :func:`render_across_html` — one page joining runs of different backends or devices
- :func:`render_history_site` — a static site (index + one page per op) of nightly history

Charts are Vega-Lite specs written with altair; every page inlines the Vega bundle from
vl-convert once, plus its own stylesheet and table script (docs/reports.md).
"""

from __future__ import annotations

from harness.results.html.across import render_across_html
from harness.results.html.compare import compare_rows, render_compare_html
from harness.results.html.history import render_history_site
from harness.results.html.run import render_run_html

__all__ = ["compare_rows", "render_across_html", "render_compare_html", "render_history_site", "render_run_html"]
