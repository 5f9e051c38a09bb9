"""A real browser for the HTML report tests: Playwright for Python driving Debian's chromium.

Playwright's own browser download cannot be used here, so the tests launch the system
chromium (``apt-get install -y chromium``; HARNESS_CHROMIUM names another binary). Without
playwright or chromium the tests skip and say why, unless HARNESS_REQUIRE_BROWSER=1 (set
where the browser tests must run, as in CI), which turns the skip into a failure.

The pages are built once per session into a temporary directory. Screenshots, and
timings.json with what the tests measured, go to HARNESS_SCREENSHOT_DIR when set
(``HARNESS_SCREENSHOT_DIR=docs/img`` refreshes the documentation's), else next to the pages.
"""

from __future__ import annotations

import json
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


def _write_site(site: dict[str, str], folder: Path) -> Path:
    for rel, text in site.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder / "index.html"


@pytest.fixture(scope="session")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every kind of page, built from the test data: name -> file. Besides the small pages,
    at corpus scale: the committed 206-op FlagGems corpus run on the H200 (``run-corpus``), a
    generated run of 5,520 cases over 920 ops (``run-generated``) and a history of 30 nights
    of 40 ops on two devices (``site30-*``)."""
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
        corpus_run,
        generated_run,
        h200_info,
        h200_records,
        history_points,
        musa_like,
        nightly_history,
        small_run,
    )

    out = tmp_path_factory.mktemp("pages")
    info = h200_info()
    records = h200_records(info)
    musa_info, musa_records = musa_like(info, records)
    small_info, small_records, small_unreached = small_run()
    corpus_info, corpus_records = corpus_run()
    gen_info, gen_records, gen_unreached = generated_run()
    texts = {
        "run-h200": render_run_html(info, records, [], H200_PEAKS),
        "run-failures": render_run_html(small_info, small_records, small_unreached, H200_PEAKS),
        "run-corpus": render_run_html(corpus_info, corpus_records, [], H200_PEAKS),
        "run-generated": render_run_html(gen_info, gen_records, gen_unreached, H200_PEAKS),
        "compare": render_compare_html(comparison(), title="Performance comparison (gate)"),
        "across": render_across_html([(info, records), (musa_info, musa_records)]),
    }
    files = {}
    for name, text in texts.items():
        path = out / f"{name}.html"
        path.write_text(text, encoding="utf-8")
        files[name] = path
    site = render_history_site(history_points(), commit_url="https://example.org/commit/{commit}")
    files["small-site-index"] = _write_site(site, out / "site")
    files["small-site-op"] = out / "site" / "ops" / "softmax.html"
    site30 = render_history_site(nightly_history(n_ops=40, nights=30),
                                 commit_url="https://example.org/commit/{commit}")
    files["history-index"] = _write_site(site30, out / "site30")
    files["history-regressions"] = out / "site30" / "regressions.html"
    files["history-op"] = out / "site30" / "ops" / "op_0007.html"
    return files


@pytest.fixture(scope="session")
def thousand_op_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The landing page of a generated history of 1,000 ops on 5 backends over 30 nights
    (150,000 points; the whole site is written, the landing page is what the test opens)."""
    from harness.results.html import render_history_site
    from tests.html_data import FIVE_BACKENDS, nightly_history

    site = render_history_site(nightly_history(n_ops=1000, nights=30, cases_per_op=1, backends=FIVE_BACKENDS))
    return _write_site(site, tmp_path_factory.mktemp("site1000"))


@pytest.fixture(scope="session")
def screenshot_dir(pages: dict[str, Path]) -> Path:
    chosen = os.environ.get("HARNESS_SCREENSHOT_DIR")
    path = Path(chosen) if chosen else next(iter(pages.values())).parent / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def timings(screenshot_dir: Path) -> Iterator[dict[str, dict[str, float]]]:
    """What the tests measured (ms), per page: written to timings.json beside the screenshots
    at the end of the session, and printed, so a run on a quiet machine can be reported."""
    found: dict[str, dict[str, float]] = {}
    yield found
    (screenshot_dir / "timings.json").write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    print("\nbrowser timings (ms):", json.dumps(found, sort_keys=True))
