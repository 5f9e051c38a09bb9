"""The HTML reports in a real browser (chromium through Playwright; tests/browser/conftest.py).

Every page loads offline from a file:// URL with no console error and no request leaving its
file (a history site: its own folder), every chart draws its data, and at corpus scale (the
committed 206-op corpus run, a generated run of 5,520 cases over 920 ops, a history of 30
nights and one of 1,000 ops on 5 backends) each page fits a 1400 px window with one-line
rows, sorts and filters to the right rows and works from the keyboard. How fast is recorded
in timings.json (conftest.py), never asserted: benchmarks/page_speed.py measures the same
pages against the speed targets. Run with ``python -m pytest -m browser tests/browser``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.drive import ALL_CHARTS_DONE, GRID_ACTIONS, WINDOW, Opened

pytestmark = pytest.mark.browser

PAGES = ("run-h200", "run-failures", "run-corpus", "run-generated", "compare", "across",
         "small-site-index", "small-site-op", "history-index", "history-regressions", "history-op")
BIG = ("run-corpus", "run-generated", "across", "compare", "history-index", "history-regressions", "history-op")


@pytest.fixture()
def opened(browser: Any) -> Iterator[Opened]:
    context = browser.new_context(viewport=WINDOW, offline=True)
    try:
        yield Opened(context.new_page())
    finally:
        context.close()


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_offline_and_every_chart_draws_its_data(opened: Opened, pages: dict[str, Path],
                                                           screenshot_dir: Path, name: str,
                                                           timings: dict[str, dict[str, float]]) -> None:
    opened.load(pages[name])
    for chart in opened.charts():
        assert chart["rendered"], f"{chart['id']} was not drawn"
        assert chart["data"] and all(n > 0 for _, n in chart["data"]), chart
        if not chart["canvas"]:
            assert chart["marks"] >= chart["rows"] > 0, chart
    assert opened.errors == []
    assert opened.outside == [], "the page reached outside its file"
    timings.setdefault(name, {}).update(ready=round(opened.ready_ms()), charts=round(opened.charts_ms()))
    opened.page.screenshot(path=str(screenshot_dir / f"{name}.png"))


@pytest.mark.parametrize("name", BIG)
def test_page_fits_the_window_with_one_line_rows(
        opened: Opened, pages: dict[str, Path], name: str, timings: dict[str, dict[str, float]]) -> None:
    opened.load(pages[name])
    width = opened.page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"{name} is {width[0]} px wide in a {width[1]} px window"
    heights = opened.page.evaluate(
        "() => Array.from(document.querySelectorAll('table.grid-table tbody tr')).map(r => r.getBoundingClientRect().height)")
    if name not in ("compare", "history-regressions"):  # plain tables: a row may wrap (a bisect command)
        assert heights and max(heights) <= 30, "a grid row is taller than one line"
    timings.setdefault(name, {})["ready"] = round(opened.ready_ms())


@pytest.mark.parametrize("name,grid,column,needle", GRID_ACTIONS)
def test_grids_sort_and_filter(opened: Opened, pages: dict[str, Path], name: str, grid: str,
                               column: str, needle: str, timings: dict[str, dict[str, float]]) -> None:
    opened.load(pages[name], charts=False)
    total = len(opened.grid(grid, column))
    header = opened.header(grid, column)
    sort_ms = opened.timed(header, "click")
    ascending = [v for v in opened.grid(grid, column) if v is not None]
    assert ascending == sorted(ascending) and len(ascending) > 0
    values = opened.grid(grid, column)
    assert values[len(ascending):] == [None] * (total - len(ascending))  # empty cells last
    opened.timed(header, "click")
    descending = [v for v in opened.grid(grid, column) if v is not None]
    assert descending == sorted(descending, reverse=True)
    filter_ms = opened.timed(f"#{grid} input.filter-text", "input", needle)
    kept = len(opened.grid(grid, column))
    assert 0 < kept < total
    assert opened.page.text_content(f"#{grid} .filter-count") == f"{kept} of {total} rows"
    assert opened.shown(grid) == min(kept, opened.page.evaluate(
        f"() => JSON.parse(document.getElementById('data-{grid}').textContent).page_size"))
    timings.setdefault(name, {}).update({f"sort {grid}": round(sort_ms, 1), f"filter {grid}": round(filter_ms, 1)})
    assert opened.errors == []


def test_keyboard_sorts_filters_and_pages(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["run-generated"], charts=False)
    header = opened.header("case-grid", "speedup")
    opened.page.focus(header)
    opened.page.keyboard.press("Enter")
    assert opened.page.get_attribute(header, "aria-sort") == "ascending"
    first_page = opened.page.text_content("#case-grid tbody")
    opened.page.focus("#case-grid .pager button[data-step='1']")
    opened.page.keyboard.press("Enter")
    assert "rows 51–100 of" in opened.page.text_content("#case-grid .pager")
    assert opened.page.text_content("#case-grid tbody") != first_page
    opened.page.focus("#case-grid input.filter-text")
    opened.page.keyboard.type("gen_op_0001_")
    assert opened.page.text_content("#case-grid .filter-count").startswith("6 of ")
    opened.page.keyboard.press("Tab")  # from the filter box to the first select
    assert opened.page.evaluate("() => document.activeElement.getAttribute('data-attr')") == "op"
    assert opened.errors == []


def test_run_page_first_screen_of_the_corpus(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["run-corpus"], charts=False)
    first = opened.page.evaluate(
        "() => ['#summary .badges', '#slower', '#failures'].map(s => document.querySelector(s).getBoundingClientRect().top)")
    assert max(first) < WINDOW["height"], "counts, slower ops and failures are on the first screen"
    text = opened.page.text_content("#summary")
    assert "TIMEOUT1" in text.replace(" ", "") and "Slower than torch: 83 of 182 timed op(s)" in text
    for chip in ("#slower a.chip >> nth=0", "#slower a.chip:text-matches('^mul ')"):  # "mul" is in other ops' names
        opened.page.click(chip)  # an op slower than torch: its cases, and only its, listed
        op = opened.page.text_content(chip).rsplit(" ", 1)[0]
        assert set(opened.grid("case-grid", "op")) == {op}


def test_empty_cells_sort_last_and_filters_select(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["run-failures"], charts=False)
    assert len(opened.grid("case-grid", "op")) == 11
    opened.page.select_option("#case-grid select.filter-select[data-attr=status]", "fail")
    assert opened.grid("case-grid", "status") == ["fail"]
    opened.page.select_option("#case-grid select.filter-select[data-attr=status]", "not run")
    assert opened.grid("case-grid", "op") == ["gelu"]
    opened.page.select_option("#case-grid select.filter-select[data-attr=status]", "")
    opened.page.fill("#case-grid input.filter-text", "softmax")
    assert set(opened.grid("case-grid", "op")) == {"softmax"} and len(opened.grid("case-grid", "op")) == 4
    assert opened.errors == []


def test_hostile_text_is_not_run(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["run-failures"])
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    opened.page.on("dialog", on_dialog)
    opened.page.click("details.cause-group >> nth=0")
    opened.page.click("details.failure >> nth=0")
    assert "</script><script>alert(1)</script>" in opened.page.text_content("#failures")
    opened.page.fill("#case-grid input.filter-text", "alert")
    assert dialogs == [] and opened.errors == []


def test_compare_page_puts_regressions_first_and_reads_in_greyscale(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["compare"])
    verdicts = opened.column("row-table", "verdict")
    assert verdicts[:4] == ["0"] * 4  # sort key of "regression"
    icons = opened.page.evaluate("""() => ['regression', 'failing'].map(v =>
        getComputedStyle(document.querySelector('#row-table td.status-' + v), '::before').content)""")
    assert icons[0] != icons[1] and all(i not in ("none", "normal", "") for i in icons)
    opened.page.select_option("select.filter-select[data-attr=verdict]", "regression")
    assert len([r for r in opened.column("row-table", "verdict")]) == 4
    (forest,) = opened.charts()
    assert forest["marks"] >= 2 * forest["rows"]  # each row's point and its torch diamond


def test_across_page_shows_both_backends_and_not_run_apart(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["across"])
    for chart in opened.charts():
        assert "cuda · NVIDIA H200" in chart["legend"] and "musa · MTT S4000" in chart["legend"]
    runs = opened.page.locator("#runs tr.run-row").all_text_contents()
    assert len(runs) == 2 and "cuda" in runs[0] and "musa" in runs[1]
    opened.page.select_option("#case-grid select.filter-select[data-attr=coverage]", "gaps")
    statuses = opened.grid("case-grid", "run 2 status")
    assert sorted(statuses) == ["fail", "not run", "not run"]
    icons = opened.page.evaluate("""() => ['not-run', 'fail'].map(v =>
        getComputedStyle(document.querySelector('#case-grid td.status-' + v), '::before').content)""")
    assert icons[0] != icons[1]
    ratios = [v for v in opened.page.evaluate(
        "() => window.harnessGrids['case-grid'].view().length") and opened.grid("case-grid", "time run 2 / run 1")]
    assert ratios.count(None) == 3


def test_history_site_links_to_op_pages(opened: Opened, pages: dict[str, Path]) -> None:
    opened.load(pages["history-index"], charts=False)
    assert opened.page.locator("#landing-table tbody tr").count() == 6
    opened.page.click("#landing-table tbody tr >> nth=0 >> a")
    opened.page.wait_for_url("**/ops/op_00*.html")
    opened.page.wait_for_function(ALL_CHARTS_DONE, timeout=60_000)
    (trend,) = opened.charts()
    assert trend["rendered"] and trend["marks"] >= trend["rows"]
    legend = opened.page.locator("svg g.role-legend text").all_text_contents()
    assert "regression" in legend and "cuda · NVIDIA H200" in legend
    axis = opened.page.locator("svg g.role-axis-label text").all_text_contents()
    assert any(":" in t for t in axis), "the time axis shows hours and minutes"
    assert opened.errors == [] and opened.outside == []


def test_history_regressions_page(opened: Opened, pages: dict[str, Path], screenshot_dir: Path) -> None:
    opened.load(pages["history-regressions"], charts=False)
    sizes = [float(v) for v in opened.column("regression-table", "size")]
    assert len(sizes) == 6 and sizes == sorted(sizes, reverse=True)
    assert opened.page.locator("code.cmd").first.text_content().startswith(
        "harness bisect --repo GIT_DIR --good ")
    opened.page.click("#regression-table thead th:text-is('size')")
    assert [float(v) for v in opened.column("regression-table", "size")] == sorted(sizes)


def test_thousand_op_landing_page_shows_regressions_first(browser: Any, thousand_op_site: Path,
                                                         screenshot_dir: Path,
                                                         timings: dict[str, dict[str, float]]) -> None:
    context = browser.new_context(viewport=WINDOW, offline=True)
    try:
        opened = Opened(context.new_page())
        opened.page.goto(thousand_op_site.as_uri())
        shown = opened.first_row_ms()
        top = opened.page.evaluate("() => document.querySelector('#landing-table tbody tr').getBoundingClientRect().top")
        opened.page.wait_for_function("() => window.harnessReady !== undefined")
        timings["history-1000-index"] = {"first regressed row": round(shown), "ready": round(opened.ready_ms())}
        assert top < WINDOW["height"] and opened.errors == [] and opened.outside == []
        assert len(opened.grid("op-grid", "op")) == 1000
        assert opened.page.locator("#landing-table tbody tr").count() == 25  # of 143 regressions
        href = opened.page.get_attribute("#landing-table tbody tr >> nth=0 >> a", "href")
        assert href is not None and int(href.removeprefix("ops/op_").removesuffix(".html")) % 7 == 0  # a regressed op
    finally:
        context.close()
