"""Driving the HTML pages in chromium through Playwright: what the browser tests and
benchmarks/page_speed.py share (the browser's binary and flags, the window, the scripts that
read a page's state and time an action in it, and the grids whose sort and filter are timed).

Nothing here imports pytest or playwright: the caller launches the browser and hands pages in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("HARNESS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync",
]
WINDOW = {"width": 1400, "height": 900}
LOCAL = ("file:", "data:", "blob:", "about:")  # a request to anything else leaves the page's file

# Grids whose sort (a click on the column's header) and filter (the text typed in the filter
# box) are timed: (page, grid id, column label, filter text).
GRID_ACTIONS = (
    ("run-generated", "case-grid", "speedup", "gen_op_0042"),
    ("run-corpus", "case-grid", "speedup", "softmax"),
    ("run-corpus", "op-grid", "geomean", "norm"),
    ("history-index", "op-grid", "worst change %", "op_001"),
)

READY = "() => window.harnessReady !== undefined"
ALL_CHARTS_DONE = "() => window.harnessChartsDone !== undefined"

CHART_STATE = """() => Array.from(document.querySelectorAll('div.chart[data-spec]')).map(d => {
  const spec = JSON.parse(document.getElementById(d.dataset.spec).textContent);
  const view = (window.harnessCharts || {})[d.id];
  const names = Object.keys(spec.datasets).filter(n => !n.startsWith('data-'));
  return {
    id: d.id,
    rows: Number(d.dataset.rows),
    canvas: d.dataset.renderer === 'canvas',
    rendered: d.dataset.rendered === '1',
    marks: d.querySelectorAll('svg g.role-mark.mark-symbol > path, svg g.role-mark.mark-rect > path').length,
    data: view ? names.map(n => [n, view.data(n).length]) : [],
    legend: Array.from(d.querySelectorAll('svg g.role-legend text')).map(t => t.textContent),
  };
})"""

# Time a synchronous action in the page, layout included (reading offsetHeight forces it).
TIMED = """([selector, action, value]) => {
  const el = document.querySelector(selector);
  const t0 = performance.now();
  if (action === 'click') { el.click(); } else { el.value = value; el.dispatchEvent(new Event('input')); }
  void document.body.offsetHeight;
  return performance.now() - t0;
}"""

# When the landing page's first row was in the document: the end of DOMContentLoaded, from
# navigation start (the rows are in the HTML, before any script runs).
FIRST_ROW = "() => performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"


class Opened:
    """A browser page that notes console errors and requests leaving its file as they come."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        self.outside: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: None if r.url.startswith(LOCAL) else self.outside.append(r.url))

    def load(self, path: Path, charts: bool = True) -> Opened:
        self.page.goto(path.as_uri())
        self.page.wait_for_function(READY, timeout=60_000)
        if charts:
            self.page.wait_for_function(ALL_CHARTS_DONE, timeout=120_000)
        return self

    def ready_ms(self) -> float:
        """When the page's summaries and tables were usable, from navigation start."""
        value: float = self.page.evaluate("() => window.harnessReady")
        return value

    def charts_ms(self) -> float:
        """When every chart was drawn, from navigation start."""
        value: float = self.page.evaluate("() => window.harnessChartsDone")
        return value

    def charts(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.page.evaluate(CHART_STATE)
        return result

    def grid(self, grid: str, label: str) -> list[Any]:
        """One column of a grid's rows as filtered and sorted (all pages), by header label."""
        values: list[Any] = self.page.evaluate(
            """([grid, label]) => {
                 const g = window.harnessGrids[grid];
                 const i = g.columns.indexOf(label);
                 if (i < 0) throw new Error('no column ' + label);
                 return g.view().map(r => r[i]);
               }""", [grid, label])
        return values

    def header(self, grid: str, label: str) -> str:
        """The selector of a grid's column header, by label."""
        index = self.page.evaluate(f"() => window.harnessGrids['{grid}'].columns.indexOf('{label}')")
        return f"#{grid} thead th[data-col='{index}']"

    def shown(self, grid: str) -> int:
        n: int = self.page.evaluate(f"() => document.querySelectorAll('#{grid} tbody tr').length")
        return n

    def column(self, table: str, label: str) -> list[str]:
        """The data-sort values (else the text) of one column of a plain table, visible rows."""
        values: list[str] = self.page.evaluate(
            """([table, label]) => {
                 const t = document.getElementById(table);
                 const i = Array.from(t.tHead.rows[0].cells).findIndex(h => h.textContent.trim() === label);
                 if (i < 0) throw new Error('no column ' + label);
                 return Array.from(t.tBodies[0].rows).filter(r => !r.hidden)
                   .map(r => r.cells[i].getAttribute('data-sort') ?? r.cells[i].textContent.trim());
               }""", [table, label])
        return values

    def timed(self, selector: str, action: str, value: str = "") -> float:
        """Milliseconds a click on ``selector`` (or ``value`` typed into it) takes, layout included."""
        ms: float = self.page.evaluate(TIMED, [selector, action, value])
        return ms

    def first_row_ms(self) -> float:
        """Open-to-first-row of a history landing page: waits for its first row, then reads when
        the document holding it was loaded."""
        self.page.wait_for_selector("#landing-table tbody tr")
        ms: float = self.page.evaluate(FIRST_ROW)
        return ms
