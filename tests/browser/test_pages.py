"""The HTML reports in a real browser (chromium through Playwright; tests/browser/conftest.py).

Every page loads from a file:// URL with no console error and no request leaving the file,
every chart draws its data, the tables sort and filter, and the cross-vendor page shows
both backends. Run with ``python -m pytest -m browser tests/browser``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

PAGES = ("run-h200", "run-failures", "compare", "across", "history-index", "history-op")
LOCAL = ("file:", "data:", "blob:", "about:")

ALL_CHARTS_DONE = """() => {
  const charts = Array.from(document.querySelectorAll('div.chart[data-spec]'));
  return charts.every(d => d.dataset.rendered === '1' || d.textContent.includes('could not be drawn'));
}"""

CHART_STATE = """() => Array.from(document.querySelectorAll('div.chart[data-spec]')).map(d => {
  const spec = JSON.parse(document.getElementById(d.dataset.spec).textContent);
  const view = (window.harnessCharts || {})[d.id];
  const names = Object.keys(spec.datasets).filter(n => !n.startsWith('data-'));
  return {
    id: d.id,
    rows: Number(d.dataset.rows),
    rendered: d.dataset.rendered === '1',
    marks: d.querySelectorAll('svg g.role-mark.mark-symbol > path, svg g.role-mark.mark-rect > path').length,
    data: view ? names.map(n => [n, view.data(n).length]) : [],
    legend: Array.from(d.querySelectorAll('svg g.role-legend text')).map(t => t.textContent),
  };
})"""


class Opened:
    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        self.outside: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: None if r.url.startswith(LOCAL) else self.outside.append(r.url))

    def load(self, path: Path) -> Opened:
        self.page.goto(path.as_uri())
        self.page.wait_for_function(ALL_CHARTS_DONE, timeout=60_000)
        return self

    def charts(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.page.evaluate(CHART_STATE)
        return result

    def column(self, table: str, label: str) -> list[str]:
        """The data-sort values (else the text) of one column, visible rows, in order."""
        values: list[str] = self.page.evaluate(
            """([table, label]) => {
                 const t = document.getElementById(table);
                 const i = Array.from(t.tHead.rows[0].cells).findIndex(h => h.textContent.trim() === label);
                 if (i < 0) throw new Error('no column ' + label);
                 return Array.from(t.tBodies[0].rows).filter(r => !r.hidden)
                   .map(r => r.cells[i].getAttribute('data-sort') ?? r.cells[i].textContent.trim());
               }""", [table, label])
        return values

    def visible_rows(self, table: str) -> int:
        n: int = self.page.evaluate(
            "t => Array.from(document.getElementById(t).tBodies[0].rows).filter(r => !r.hidden).length", table)
        return n


@pytest.fixture()
def opened(browser: Any) -> Iterator[Opened]:
    context = browser.new_context(viewport={"width": 1280, "height": 1500})
    try:
        yield Opened(context.new_page())
    finally:
        context.close()


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_and_every_chart_draws_its_data(opened: Opened, pages: dict[str, Path],
                                                    screenshot_dir: Path, name: str) -> None:
    opened.load(pages[name])
    charts = opened.charts()
    assert charts, "every page has at least one chart"
    for chart in charts:
        assert chart["rendered"], f"{chart['id']} was not drawn"
        assert chart["data"] and all(n > 0 for _, n in chart["data"]), chart
        assert chart["marks"] >= chart["rows"] > 0, chart
    assert opened.errors == []
    assert opened.outside == [], "the page reached outside its file"
    opened.page.screenshot(path=str(screenshot_dir / f"{name}.png"))


def _numbers(values: list[str]) -> list[float]:
    return [float(v) for v in values if v != ""]


def test_sorting_reorders_the_table(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["run-h200"])
    before = opened.column("case-table", "speedup")
    opened.page.click("#case-table thead th:text-is('speedup')")
    ascending = _numbers(opened.column("case-table", "speedup"))
    assert ascending == sorted(ascending) and len(ascending) == 90
    assert opened.column("case-table", "speedup") != before
    opened.page.click("#case-table thead th:text-is('speedup')")
    descending = _numbers(opened.column("case-table", "speedup"))
    assert descending == sorted(descending, reverse=True)
    opened.page.click("#case-table thead th:text-is('op')")
    ops = opened.column("case-table", "op")
    assert ops == sorted(ops)
    assert opened.errors == []


def test_empty_cells_sort_last(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["run-failures"])
    for _ in range(2):  # ascending, then descending: the unmeasured rows stay at the bottom
        opened.page.click("#case-table thead th:text-is('speedup')")
        values = opened.column("case-table", "speedup")
        filled = [v for v in values if v != ""]
        assert values[: len(filled)] == filled and len(filled) == 7


def test_filtering_hides_rows(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["run-failures"])
    assert opened.visible_rows("case-table") == 11
    opened.page.fill("input.filter-text[data-table=case-table]", "softmax")
    assert opened.visible_rows("case-table") == 4
    assert set(opened.column("case-table", "op")) == {"softmax"}
    assert "4 of 11 rows" in opened.page.text_content(".filter-count[data-table=case-table]")
    opened.page.fill("input.filter-text[data-table=case-table]", "")
    opened.page.select_option("select.filter-select[data-attr=status]", "fail")
    assert opened.column("case-table", "status") == ["FAIL"]
    opened.page.select_option("select.filter-select[data-attr=status]", "not run")
    assert opened.column("case-table", "op") == ["gelu"]
    opened.page.select_option("select.filter-select[data-attr=status]", "")
    assert opened.visible_rows("case-table") == 11
    assert opened.errors == []


def test_hostile_text_is_not_run(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["run-failures"])
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    opened.page.on("dialog", on_dialog)
    opened.page.click("details.failure >> nth=0")
    assert "</script><script>alert(1)</script>" in opened.page.text_content("#failures")
    assert dialogs == [] and opened.errors == []


def test_compare_page_puts_regressions_first(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["compare"])
    verdicts = opened.column("row-table", "verdict")
    assert verdicts[:4] == ["0"] * 4  # sort key of "regression"
    opened.page.select_option("select.filter-select[data-attr=verdict]", "regression")
    assert opened.visible_rows("row-table") == 4
    (forest,) = opened.charts()
    assert forest["marks"] >= 2 * forest["rows"]  # each row's point and its torch diamond


def test_across_page_shows_both_backends(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["across"])
    for chart in opened.charts():
        assert "cuda · NVIDIA H200" in chart["legend"] and "musa · MTT S4000" in chart["legend"]
    runs = opened.page.locator("#runs tr.run-row").all_text_contents()
    assert len(runs) == 2 and "cuda" in runs[0] and "musa" in runs[1]
    assert opened.page.locator(".gap").count() == 2
    opened.page.select_option("select.filter-select[data-attr=coverage]", "gaps")
    assert opened.visible_rows("case-table") == 3


def test_history_site_links_to_op_pages(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["site-index"])
    opened.page.click("table.op-index a:text-is('softmax')")
    opened.page.wait_for_url("**/ops/softmax.html")
    opened.page.wait_for_function(ALL_CHARTS_DONE, timeout=60_000)
    (trend,) = opened.charts()
    assert trend["rendered"] and trend["marks"] >= trend["rows"]
    shapes = opened.page.locator("svg g.role-legend text").all_text_contents()
    assert "regression" in shapes
    assert opened.errors == []
