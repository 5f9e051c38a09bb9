"""The HTML reports as text: every case is in the page, every chart has data, hostile record
text cannot break out of its element, and the same data gives the same bytes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("altair", reason="the HTML reports need altair (pip install -e .)")
pytest.importorskip("vl_convert", reason="the HTML reports need vl-convert-python (pip install -e .)")

from harness.compare.compare import Comparison  # noqa: E402
from harness.compare.page import compare_rows, render_compare_html  # noqa: E402
from harness.results.html import (  # noqa: E402
    render_across_html,
    render_history_site,
    render_run_html,
)
from harness.results.html.page import clean_text, vega_bundle  # noqa: E402
from harness.results.html.run import split_case_id  # noqa: E402
from tests.html_data import (  # noqa: E402
    CONTROL,
    H200_PEAKS,
    HOSTILE,
    comparison,
    h200_info,
    h200_records,
    history_points,
    musa_like,
    record,
    small_run,
)

_BAD_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


class Page(HTMLParser):
    """What a browser's parser would build, as far as the tests care."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.rows: list[dict[str, str | None]] = []
        self.charts: list[dict[str, str | None]] = []
        self.links: list[str] = []
        self.sources: list[str] = []
        self.text: list[str] = []
        self._script: dict[str, str | None] | None = None
        self._buf: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self._script, self._buf = a, []
        if tag == "tr" and "data-status" in a or tag == "tr" and "data-verdict" in a or (
                tag == "tr" and "data-coverage" in a) or (tag == "tr" and "data-check" in a):
            self.rows.append(a)
        if tag == "div" and "chart" in (a.get("class") or "").split():
            self.charts.append(a)
        if tag == "a" and a.get("href"):
            self.links.append(str(a["href"]))
        for key in ("src", "srcset"):
            if a.get(key):
                self.sources.append(str(a[key]))
        if tag == "link":
            self.sources.append(str(a.get("href")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._buf)))
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._buf.append(data)
        else:
            self.text.append(data)

    def specs(self) -> dict[str, dict[str, Any]]:
        return {str(a["id"]): json.loads(body) for a, body in self.scripts
                if a.get("type") == "application/json"}

    def code_scripts(self) -> list[str]:
        return [body for a, body in self.scripts if a.get("type") != "application/json"]


def _check_page(text: str, expect_charts: int) -> Page:
    """Properties every page has: parses into the expected scripts, nothing fetched from
    anywhere, no raw control character, every chart's spec present and parseable."""
    assert text.startswith("<!DOCTYPE html>")
    assert not _BAD_CHARS.search(text), "a control character or lone surrogate reached the page"
    text.encode("utf-8")  # writable as UTF-8
    page = Page(text)
    assert page.sources == [], "a page must not load anything from outside itself"
    specs = page.specs()
    charts = [c for c in page.charts if c.get("data-spec")]
    assert len(charts) == expect_charts
    for c in charts:
        spec = specs[str(c["data-spec"])]
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
        rows = int(str(c["data-rows"]))
        assert rows > 0
        assert sum(len(v) for v in spec["datasets"].values()) >= rows
    # The Vega bundle once (when there is a chart), the page's own script once, nothing else.
    code = page.code_scripts()
    assert len(code) == (2 if expect_charts else 1)
    assert not any("alert(1)" in c for c in code)
    return page


def _dataset(page: Page, chart_id: str, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = page.specs()[f"spec-{chart_id}"]["datasets"][name]
    return rows


# ---------------------------------------------------------------------------------------------
# report.html


def test_run_page_has_every_case_and_every_status() -> None:
    info, records, unreached = small_run()
    page = _check_page(render_run_html(info, records, unreached, H200_PEAKS), expect_charts=3)
    statuses = [r["data-status"] for r in page.rows]
    assert len(statuses) == len(records) + len(unreached)
    assert statuses.count("pass") == 7 and statuses.count("not run") == 1
    assert {"fail", "error", "skip"} <= set(statuses)
    text = "".join(page.text)
    for label, n in (("pass", 7), ("fail", 1), ("error", 1), ("skip", 1), ("not run", 1)):
        assert re.search(rf"{label}\s*{n}", text), label
    assert "0123456789ab" in text  # the commit
    assert "4096x4096x4096" in text and "16384x8192" in text


def test_run_page_charts_carry_the_passing_cases() -> None:
    info, records, unreached = small_run()
    page = _check_page(render_run_html(info, records, unreached, H200_PEAKS), expect_charts=3)
    passing = [r for r in records if r.status == "pass"]
    speed = _dataset(page, "chart-speedup", "cases")
    assert sorted(r["case_id"] for r in speed) == sorted(r.case_id for r in passing)
    assert all(r["speedup"] > 0 for r in speed)
    roof = _dataset(page, "chart-peak", "roofline")
    assert len(roof) == len(passing)
    mm = next(r for r in roof if r["case_id"].startswith("mm["))
    assert mm["ceiling"] == "bf16 matrix rate"  # mm is bound by the matrix rate, not bandwidth
    latency = _dataset(page, "chart-latency", "latency")
    assert {r["who"] for r in latency} == {"candidate", "torch"}
    assert len(latency) == 2 * len(passing)


def test_run_page_roofline_from_peaks_when_records_lack_percentages() -> None:
    info, records, unreached = small_run()
    bare = [replace(r, extra={k: v for k, v in r.extra.items() if not k.startswith(("pct_", "peak_"))})
            for r in records]
    page = _check_page(render_run_html(info, bare, unreached, H200_PEAKS), expect_charts=3)
    with_extra = _dataset(_check_page(render_run_html(info, records, unreached, H200_PEAKS), 3),
                          "chart-peak", "roofline")
    computed = _dataset(page, "chart-peak", "roofline")
    assert [r["pct"] for r in computed] == [r["pct"] for r in with_extra]


def test_run_page_without_peaks_plots_throughput_and_says_why() -> None:
    info, records, unreached = small_run(backend="cpu", device_name="x86_64", peaks=None)
    html = render_run_html({**info, "backend": "cpu"}, records, unreached, None)
    page = _check_page(html, expect_charts=3)
    assert "No datasheet peaks are known for backend" in html
    assert _dataset(page, "chart-peak", "throughput")


def test_run_page_failures_name_their_logs() -> None:
    info, records, unreached = small_run()
    op = "src:my/op"
    odd = record(op, status="error", message="boom")
    page = _check_page(render_run_html(info, [*records, odd], unreached, H200_PEAKS), expect_charts=3)
    assert "logs/add.log" in page.links and "logs/mm.log" in page.links and "logs/gelu.log" in page.links
    assert "logs/src_my_op.log" in page.links  # the same name harness.contract.RunFiles gives the log


def test_hostile_text_stays_text() -> None:
    info, records, unreached = small_run()
    evil_op = HOSTILE + CONTROL
    evil = [record(evil_op, status="fail", message=HOSTILE + CONTROL),
            record(evil_op, dtype="float16", notes=(HOSTILE,))]
    html = render_run_html({**info, "run_id": HOSTILE}, [*records, *evil], unreached, H200_PEAKS)
    page = _check_page(html, expect_charts=3)
    assert "<script>alert(1)" not in html
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown, as text
    text = "".join(page.text)
    assert HOSTILE in text
    assert "bad\\x00byte" in text and "\\ud800lone" in text  # visible escapes
    assert "\x1b" not in text and "[31m" not in text  # colour codes dropped
    assert any(r["case_id"].startswith(HOSTILE) for r in _dataset(page, "chart-speedup", "cases"))


def test_non_finite_numbers_do_not_break_the_page() -> None:
    info, records, unreached = small_run()
    odd = replace(records[0], gbps=float("nan"), extra={**records[0].extra, "pct_peak_bandwidth": float("inf")})
    page = _check_page(render_run_html(info, [odd, *records[1:]], unreached, H200_PEAKS), expect_charts=3)
    row = next(r for r in _dataset(page, "chart-peak", "roofline") if r["case_id"] == odd.case_id)
    assert row["gbps"] is None


def test_clean_text() -> None:
    assert clean_text("a\x1b[1;31mb\x1b[0m") == "ab"
    assert clean_text("tab\tnl\n") == "tab\tnl\n"
    assert clean_text("\x00\x7f\x85\ud800") == "\\x00\\x7f\\x85\\ud800"
    assert clean_text(None) == ""


def test_split_case_id() -> None:
    assert split_case_id("mm", "mm[flag-gems-bfloat16-4x4x4]") == ("flag-gems", "bfloat16", "4x4x4")
    assert split_case_id("mm", "mm") == ("", "", "")


def test_pages_are_deterministic() -> None:
    info, records, unreached = small_run()
    assert render_run_html(info, records, unreached, H200_PEAKS) == render_run_html(info, records, unreached, H200_PEAKS)
    site = render_history_site(history_points())
    assert site == render_history_site(history_points())


def test_h200_core_run_page() -> None:
    info = h200_info()
    records = h200_records(info)
    assert len(records) == 90
    page = _check_page(render_run_html(info, records, [], H200_PEAKS), expect_charts=3)
    assert len(page.rows) == 90
    assert len(_dataset(page, "chart-speedup", "cases")) == 90
    assert len(_dataset(page, "chart-peak", "roofline")) == 90


def test_assets_cannot_end_their_script_element() -> None:
    js = resources.files("harness.results.html").joinpath("assets", "report.js").read_text()
    assert "</script" not in js.lower()
    assert "</script" not in vega_bundle().lower()


# ---------------------------------------------------------------------------------------------
# compare.html


def test_compare_rows_put_regressions_and_failing_first() -> None:
    c = comparison()
    rows = compare_rows(c)
    verdicts = [r["verdict"] for r in rows]
    assert verdicts[:6] == ["regression"] * 4 + ["failing"] * 2  # the case missing in head fails too
    ratios = [r["ratio"] for r in rows[:4]]
    assert ratios == sorted(ratios, reverse=True)
    assert "not compared" not in verdicts
    measured = [r for r in rows if r["ratio"] is not None]
    assert all(r["torch_ratio"] is not None and r["torch_source"] == "compare" for r in measured)
    assert all(1.0 < r["torch_ratio"] < 1.05 for r in measured)  # torch drifted 2% in head


def test_compare_torch_change_falls_back_to_the_records() -> None:
    c = comparison()
    row = next(r for r in c.rows if r.compared)
    bare = replace(row, torch_ratio=None)
    c2 = Comparison(base=c.base, head=c.head, criteria=c.criteria, mismatches=(), rows=(bare,))
    (out,) = compare_rows(c2)
    assert out["torch_source"] == "records"
    assert out["torch_ratio"] == pytest.approx(row.torch_ratio, rel=1e-9)


def test_compare_page() -> None:
    c = comparison()
    html = render_compare_html(c, title="Gate", context=["A/B of " + HOSTILE])
    page = _check_page(html, expect_charts=1)
    assert ">FAIL<" in html and "4 regression(s)" in html and "2 case(s) failing in head" in html
    assert len(page.rows) == len(c.rows)
    assert page.rows[0]["data-verdict"] == "regression"
    forest = _dataset(page, "chart-forest", "rows")
    assert len(forest) == c.compared
    assert all(r["ci_low"] <= r["ratio"] <= r["ci_high"] for r in forest)
    assert "<script>alert(1)" not in html
    assert "b" * 12 + "+dirty" in html


# ---------------------------------------------------------------------------------------------
# across


def _two_vendors() -> list[tuple[Mapping[str, Any], Sequence[Any]]]:
    info = h200_info()
    records = h200_records(info)
    musa_info, musa_records = musa_like(info, records)
    return [(info, records), (musa_info, musa_records)]


def test_across_page_joins_two_backends() -> None:
    runs = _two_vendors()
    html = render_across_html(runs)
    page = _check_page(html, expect_charts=2)
    assert "cuda · NVIDIA H200" in html and "musa · MTT S4000" in html
    assert len(page.rows) == 90
    assert sum(r["data-coverage"] == "gaps" for r in page.rows) == 3  # two missing, one failing
    speed = _dataset(page, "chart-speedup", "across")
    assert {r["run"] for r in speed} == {"cuda · NVIDIA H200", "musa · MTT S4000"}
    musa = [r for r in speed if r["run"].startswith("musa")]
    assert all(r["pct"] is not None and 0 < r["pct"] < 100 for r in musa)  # against MTT S4000 peaks
    assert "Missing (2)" in html and "Not passing (1)" in html


def test_across_labels_runs_of_one_device_apart() -> None:
    info, records, _ = small_run(run_id="night-1")
    info2, records2, _ = small_run(run_id="night-2")
    html = render_across_html([(info, records), (info2, records2)])
    assert "cuda · NVIDIA H200 · night-1" in html and "cuda · NVIDIA H200 · night-2" in html


# ---------------------------------------------------------------------------------------------
# history site


def test_history_site_pages_and_markers() -> None:
    site = render_history_site(history_points(), commit_url="https://example.org/c/{commit}")
    assert sorted(site) == ["index.html", "ops/mm.html", "ops/softmax.html"]
    for text in site.values():
        _check_page(text, expect_charts=1)
    soft = Page(site["ops/softmax.html"])
    points = _dataset(soft, "chart-trend", "points")
    assert len(points) == 2 * 2 * 8  # 2 dtypes x 2 backends x 8 nights
    flagged = [p for p in points if p["check"] == "regression"]
    assert flagged and all(p["series"] == "cuda · NVIDIA H200" and "bfloat16" in p["case_id"] for p in flagged)
    assert all(p["url"].startswith("https://example.org/c/") for p in points)
    index = Page(site["index.html"])
    assert "ops/softmax.html" in index.links and "ops/mm.html" in index.links
    checks = {(r["data-check"], r["data-series"]) for r in index.rows}
    assert ("regression", "cuda · NVIDIA H200") in checks and ("suspect", "musa · MTT S4000") in checks
    assert "../index.html" in soft.links


def test_history_keeps_given_checks_and_refuses_odd_commit_urls() -> None:
    points = [dict(p, check="ok", reason="given") for p in history_points()]
    site = render_history_site(points)
    data = _dataset(Page(site["ops/softmax.html"]), "chart-trend", "points")
    assert {p["check"] for p in data} == {"ok"} and all(p["url"] is None for p in data)
    with pytest.raises(ValueError, match="http"):
        render_history_site(points, commit_url="javascript:alert(1)//{commit}")


def test_history_page_names_stay_apart() -> None:
    points = [dict(p, op="a:b", case_id=p["case_id"].replace("softmax", "a:b")) for p in history_points(ops=("softmax",))]
    points += [dict(p, op="a_b", case_id=p["case_id"].replace("softmax", "a_b")) for p in history_points(ops=("softmax",))]
    site = render_history_site(points)
    assert sorted(site) == ["index.html", "ops/a_b-2.html", "ops/a_b.html"]


def test_history_site_from_the_history_store(tmp_path: Path) -> None:
    """The site takes HistoryStore.export()'s rows as they are, and its markers agree with
    what `harness history check` says of the same nights."""
    from harness.compare.compare import RunData
    from harness.compare.history import HistoryRules, HistoryStore, check_run, run_medians

    store = HistoryStore(tmp_path / "history.sqlite")
    runs = []
    for day in range(1, 9):
        slow = 1.3 if day >= 6 else 1.0  # softmax 30% slower from night 6: flagged at once
        records = (record("softmax", cand_ms=0.01 * slow, run_id=f"night-{day}"),
                   record("add", cand_ms=0.02, run_id=f"night-{day}"))
        info = {"run_id": f"night-{day}", "status": "complete", "backend": "cuda", "timer": "graph",
                "level": "core", "identity": {"device_name": "NVIDIA H200"}, "options": {"cache": "cold"},
                "fingerprint": "fp-h200", "started_at": f"2026-11-{day:02d}T02:00:00+00:00",
                "git_commit": f"{day:040d}"}
        run = RunData(path=tmp_path / f"night-{day}", info=info, records=records)
        store.add(run)
        runs.append(run)
    rows = store.export()
    site = render_history_site(rows, commit_url="https://example.org/commit/{commit}")
    points = _dataset(Page(site["ops/softmax.html"]), "chart-trend", "points")
    assert [p["check"] for p in points][-3:] == ["regression"] * 3
    assert points[-1]["url"] == "https://example.org/commit/" + "8".rjust(40, "0")
    rules = HistoryRules()
    earlier = [run_medians(r) for r in runs[:-1]]
    (softmax_check,) = [c for c in check_run(run_medians(runs[-1]), earlier, rules) if c.case_id.startswith("softmax")]
    assert softmax_check.status == points[-1]["check"]
