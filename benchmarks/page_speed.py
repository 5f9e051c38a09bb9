"""How fast the HTML pages are in a browser, against the targets of the corpus-scale pages
(issue 37): a page usable within 2 s, a sort or a filter within 200 ms, a history landing
page's first regressed row within 1 s, and a landing page of at most 150 KB compressed apart
from the site's shared assets.

The pages are the ones the browser tests open, built by the same code (tests/html_data.py
``build_pages`` and ``build_thousand_op_site``): the generated run of 5,520 cases over 920 ops,
the committed 206-op FlagGems corpus run on the H200 rebuilt from its summary.csv, the
30-night history of 40 ops on two devices (landing page, regressions page, an op page) and
the landing page of a 1,000-op history on 5 devices. Each page is opened REPEATS times, each
in a fresh offline context of Debian's chromium through Playwright (1400 x 900, from a
file:// URL; tests/browser/drive.py has the browser's flags and the timing scripts):

- load: ``window.harnessReady``, when the summaries and tables are usable, from navigation start;
- charts: ``window.harnessChartsDone``, when every chart is drawn (no target);
- sort / filter: a click on a grid's header and a text put in its filter box, timed in the
  page with layout (after the charts are drawn), for the grids the browser tests sort and filter;
- first row: when the document holding a history landing page's first regressed row was loaded;
- weight: the page's file and its gzip size (a site page's own file; the shared assets/ apart).

The table gives the median and the worst of the repeats; a page meets a time target when its
median does. The numbers go to benchmarks/results/page_speed.json. The times depend on the
machine and on what else it runs: say which in --note.

    python benchmarks/page_speed.py [--repeats 5] [--out benchmarks/results/page_speed.json] [--note TEXT]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.drive import (  # noqa: E402  (the browser tests' flags and timing scripts)
    ALL_CHARTS_DONE,
    CHROMIUM,
    CHROMIUM_ARGS,
    GRID_ACTIONS,
    READY,
    WINDOW,
    Opened,
)
from tests.html_data import build_pages, build_thousand_op_site  # noqa: E402  (the browser tests' pages)

LOAD_MS, ACTION_MS, FIRST_ROW_MS, LANDING_GZIP_KB = 2000.0, 200.0, 1000.0, 150.0

# page -> what it holds; the pages measured, in the table's order.
PAGES = {
    "run-generated": "run: 920 ops, 5,520 cases (generated)",
    "run-corpus": "run: FlagGems corpus on the H200, 206 ops, 1,428 cases",
    "history-index": "history 30 nights, 40 ops x 2 devices: landing",
    "history-regressions": "history 30 nights: regressions",
    "history-op": "history 30 nights: an op page",
    "history-1000-index": "history 30 nights, 1,000 ops x 5 devices: landing",
}
LANDING = ("history-index", "history-1000-index")
ACTIONS = [*GRID_ACTIONS, ("history-1000-index", "op-grid", "worst change %", "op_001")]


def weight(path: Path) -> dict[str, int]:
    data = path.read_bytes()
    return {"bytes": len(data), "gzip_bytes": len(gzip.compress(data, 9))}


def folder_weight(folder: Path) -> dict[str, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {"bytes": sum(p.stat().st_size for p in files),
            "gzip_bytes": sum(len(gzip.compress(p.read_bytes(), 9)) for p in files)}


def open_once(browser: Any, name: str, path: Path) -> dict[str, float]:
    """One visit of a page in a fresh offline context: its times in ms."""
    context = browser.new_context(viewport=WINDOW, offline=True)
    try:
        opened = Opened(context.new_page())
        opened.page.goto(path.as_uri())
        times: dict[str, float] = {}
        if name in LANDING:
            times["first row"] = opened.first_row_ms()
        opened.page.wait_for_function(READY, timeout=60_000)
        times["load"] = opened.ready_ms()
        opened.page.wait_for_function(ALL_CHARTS_DONE, timeout=120_000)
        if opened.charts():
            times["charts"] = opened.charts_ms()
        for page, grid, column, needle in ACTIONS:
            if page == name:
                times[f"sort {grid}"] = opened.timed(opened.header(grid, column), "click")
                times[f"filter {grid}"] = opened.timed(f"#{grid} input.filter-text", "input", needle)
        if opened.errors or opened.outside:
            raise SystemExit(f"{name}: console errors {opened.errors}, requests outside {opened.outside}: "
                             "the page is broken, not slow (run the browser tests)")
        return times
    finally:
        context.close()


def summary(samples: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(samples), 1), "worst": round(max(samples), 1)}


def misses(name: str, row: dict[str, Any]) -> list[str]:
    """The targets a page's medians (and a landing page's weight) miss."""
    out = []
    times = row["ms"]
    if times["load"]["median"] > LOAD_MS:
        out.append("load")
    if any(v["median"] > ACTION_MS for k, v in times.items() if k.startswith(("sort ", "filter "))):
        out.append("sort/filter")
    if "first row" in times and times["first row"]["median"] > FIRST_ROW_MS:
        out.append("first row")
    if name in LANDING and row["gzip_bytes"] > LANDING_GZIP_KB * 1024:
        out.append("weight")
    return out


def cell(times: dict[str, dict[str, float]], prefix: str) -> str:
    """median/worst ms of the slowest grid's action (by median), or "" when the page has none."""
    found = [v for k, v in times.items() if k.startswith(prefix)]
    if not found:
        return ""
    worst = max(found, key=lambda v: v["median"])
    return f"{worst['median']:.0f}/{worst['worst']:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "page_speed.json"))
    parser.add_argument("--note", default="", help="what the machine was doing besides (written with the numbers)")
    ns = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from harness.run.provenance import commit_state

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        files = build_pages(Path(tmp) / "pages")
        files["history-1000-index"] = build_thousand_op_site(Path(tmp) / "site1000")
        built_s = time.perf_counter() - started
        assets = {"history-index": folder_weight(files["history-index"].parent / "assets"),
                  "history-1000-index": folder_weight(files["history-1000-index"].parent / "assets")}
        samples: dict[str, dict[str, list[float]]] = {name: {} for name in PAGES}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            version = browser.version
            try:
                for _ in range(ns.repeats):  # pages in turn, so a busy minute spreads over all of them
                    for name in PAGES:
                        for key, ms in open_once(browser, name, files[name]).items():
                            samples[name].setdefault(key, []).append(ms)
            finally:
                browser.close()
        rows: dict[str, dict[str, Any]] = {name: {"data": PAGES[name], **weight(files[name]),
                       "ms": {k: summary(v) for k, v in samples[name].items()},
                       "samples_ms": {k: [round(x, 1) for x in v] for k, v in samples[name].items()}}
                for name in PAGES}
    for name, row in rows.items():
        row["misses"] = misses(name, row)

    state = commit_state(ROOT)
    print(f"chromium {version}, {WINDOW['width']} x {WINDOW['height']}, offline, file://; {ns.repeats} visits per page; "
          f"pages built in {built_s:.0f} s; times in ms as median/worst")
    print(f"targets: load <= {LOAD_MS:.0f}, sort and filter <= {ACTION_MS:.0f}, first regressed row <= "
          f"{FIRST_ROW_MS:.0f} (landing pages), landing page <= {LANDING_GZIP_KB:.0f} KB gzip apart from assets/")
    header = f"{'page':54} {'KB':>7} {'gzip KB':>8} {'load':>11} {'charts':>11} {'sort':>9} {'filter':>9} {'1st row':>9}  targets"
    print(header)
    print("-" * len(header))
    for row in rows.values():
        t = row["ms"]
        load = f"{t['load']['median']:.0f}/{t['load']['worst']:.0f}"
        charts = f"{t['charts']['median']:.0f}/{t['charts']['worst']:.0f}" if "charts" in t else "no chart"
        first = f"{t['first row']['median']:.0f}/{t['first row']['worst']:.0f}" if "first row" in t else ""
        verdict = "met" if not row["misses"] else "MISSED: " + ", ".join(row["misses"])
        print(f"{row['data'][:54]:54} {row['bytes'] / 1024:7.0f} {row['gzip_bytes'] / 1024:8.0f} {load:>11} "
              f"{charts:>11} {cell(t, 'sort '):>9} {cell(t, 'filter '):>9} {first:>9}  {verdict}")
    for name, w in assets.items():
        print(f"shared assets/ of {name.removesuffix('-index')}: {w['bytes'] / 1024:.0f} KB ({w['gzip_bytes'] / 1024:.0f} KB gzip)")
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": state.commit,
        "dirty": state.dirty, "machine": platform.node(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "chromium": version, "window": WINDOW,
        "repeats": ns.repeats, "note": ns.note, "built_s": round(built_s, 1),
        "targets": {"load_ms": LOAD_MS, "sort_filter_ms": ACTION_MS, "first_row_ms": FIRST_ROW_MS,
                    "landing_gzip_kb": LANDING_GZIP_KB},
        "assets": assets, "pages": rows,
    }
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {ns.out}")


if __name__ == "__main__":
    main()
