"""A real browser for the HTML report tests: Playwright for Python driving Debian's chromium.

Playwright's own browser download cannot be used here, so the tests launch the system
chromium (``apt-get install -y chromium``; HARNESS_CHROMIUM names another binary). Without
playwright or chromium the tests skip and say why, unless HARNESS_REQUIRE_BROWSER=1 (set
where the browser tests must run, as in CI), which turns the skip into a failure.

The pages are built once per session into a temporary directory. Screenshots go to
HARNESS_SCREENSHOT_DIR when set (``HARNESS_SCREENSHOT_DIR=docs/img`` refreshes the
documentation's), else next to the pages.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("HARNESS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync",
]


def _unavailable(reason: str) -> None:
    if os.environ.get("HARNESS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"HARNESS_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e .[browser]; do not run "
                     "`playwright install`: the tests use the system chromium)")
    chromium = shutil.which(CHROMIUM) or (CHROMIUM if Path(CHROMIUM).is_file() else None)
    if chromium is None:
        _unavailable(f"no chromium at {CHROMIUM} (apt-get install -y chromium, or set HARNESS_CHROMIUM)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every kind of page, built from the test data: name -> file."""
    pytest.importorskip("altair")
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
        small_run,
    )

    out = tmp_path_factory.mktemp("pages")
    info = h200_info()
    records = h200_records(info)
    musa_info, musa_records = musa_like(info, records)
    small_info, small_records, small_unreached = small_run()
    texts = {
        "run-h200": render_run_html(info, records, [], H200_PEAKS),
        "run-failures": render_run_html(small_info, small_records, small_unreached, H200_PEAKS),
        "compare": render_compare_html(comparison(), title="Performance comparison (gate)"),
        "across": render_across_html([(info, records), (musa_info, musa_records)]),
    }
    site = render_history_site(history_points(), commit_url="https://example.org/commit/{commit}")
    texts["history-index"] = site["index.html"]
    texts["history-op"] = site["ops/softmax.html"]
    files = {}
    for name, text in texts.items():
        path = out / f"{name}.html"
        path.write_text(text, encoding="utf-8")
        files[name] = path
    site_dir = out / "site"
    for rel, text in site.items():
        (site_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (site_dir / rel).write_text(text, encoding="utf-8")
    files["site-index"] = site_dir / "index.html"
    return files


@pytest.fixture(scope="session")
def screenshot_dir(pages: dict[str, Path]) -> Path:
    chosen = os.environ.get("HARNESS_SCREENSHOT_DIR")
    path = Path(chosen) if chosen else next(iter(pages.values())).parent / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path
