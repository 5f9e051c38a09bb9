"""HTML reports: pure functions from loaded run data to self-contained HTML pages.

- :func:`render_run_html` — report.html of one run
- :func:`render_across_html` — one page joining runs of different backends or devices
- :func:`render_history_site` — a static site of nightly history: a landing page with the
  regressions first, a regressions page, one page per op, and their shared assets

Charts are Vega-Lite specs written with altair. A single page inlines the Vega bundle from
vl-convert once, plus its stylesheet and table script; a site's pages share one copy of them
in assets/ (docs/reports.md). compare.html, which
reads a Comparison, is made above both packages, by harness.compare.page with these pages' parts.
"""

from __future__ import annotations

from harness.results.html.across import render_across_html
from harness.results.html.history import render_history_site
from harness.results.html.run import render_run_html

__all__ = ["render_across_html", "render_history_site", "render_run_html"]
