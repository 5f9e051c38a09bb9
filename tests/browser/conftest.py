"""A real browser for the HTML report tests: Playwright for Python driving Debian's chromium.

Playwright's own browser download cannot be used here, so the tests launch the system
chromium (``apt-get install -y chromium``; HARNESS_CHROMIUM names another binary). Without
playwright or chromium the tests skip and say why, unless HARNESS_REQUIRE_BROWSER=1 (set
where the browser tests must run, as in CI), which turns the skip into a failure.

The pages are built once per session into a temporary directory. Screenshots, and
timings.json with what the tests measured, go to HARNESS_SCREENSHOT_DIR when set
(``HARNESS_SCREENSHOT_DIR=docs/img`` refreshes the documentation's), else next to the pages.
The timings are recorded, not judged: the speed targets are benchmarks/page_speed.py's.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.drive import CHROMIUM, CHROMIUM_ARGS


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
    """Every kind of page, built from the test data: name -> file (tests/html_data.py
    build_pages, which benchmarks/page_speed.py builds too)."""
    pytest.importorskip("altair")
    from tests.html_data import build_pages

    return build_pages(tmp_path_factory.mktemp("pages"))


@pytest.fixture(scope="session")
def thousand_op_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The landing page of a generated history of 1,000 ops on 5 backends over 30 nights
    (150,000 points; the whole site is written, the landing page is what the test opens)."""
    pytest.importorskip("altair")
    from tests.html_data import build_thousand_op_site

    return build_thousand_op_site(tmp_path_factory.mktemp("site1000"))


@pytest.fixture(scope="session")
def screenshot_dir(pages: dict[str, Path]) -> Path:
    chosen = os.environ.get("HARNESS_SCREENSHOT_DIR")
    path = Path(chosen) if chosen else next(iter(pages.values())).parent / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def timings(screenshot_dir: Path) -> Iterator[dict[str, dict[str, float]]]:
    """What the tests measured (ms), per page: written to timings.json beside the screenshots
    at the end of the session, and printed. No test asserts on them; benchmarks/page_speed.py
    measures the pages against the targets."""
    found: dict[str, dict[str, float]] = {}
    yield found
    (screenshot_dir / "timings.json").write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    print("\nbrowser timings (ms):", json.dumps(found, sort_keys=True))
