"""The HTML reports as text: every case is in the page, every chart has data, the first screen
of a run says what a corpus needs, hostile record text cannot break out of its element, the
history site shares its assets and lists its regressions, and the same data gives the same bytes."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
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
from harness.errors import UsageError  # noqa: E402
from harness.results.html import (  # noqa: E402
    render_across_html,
    render_history_site,
    render_run_html,
)
from harness.results.html.devices import choose_peaks, device_peaks  # noqa: E402
from harness.results.html.page import clean_text, vega_bundle  # noqa: E402
from harness.results.html.run import split_case_id  # noqa: E402
from tests.html_data import (  # noqa: E402
    CONTROL,
    FIVE_BACKENDS,
    H200_PEAKS,
    HOSTILE,
    ROOT,
    comparison,
    corpus_run,
    generated_run,
    h200_info,
    h200_records,
    history_points,
    musa_like,
    nightly_history,
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


def _check_page(text: str, expect_charts: int, assets: str | None = None) -> Page:
    """Properties every page has: parses into the expected scripts, nothing fetched from
    anywhere (a site page: only its site's shared assets, under ``assets``), no raw control
    character, every chart's spec present and parseable."""
    assert text.startswith("<!DOCTYPE html>")
    assert not _BAD_CHARS.search(text), "a control character or lone surrogate reached the page"
    text.encode("utf-8")  # writable as UTF-8
    page = Page(text)
    if assets is None:
        assert page.sources == [], "a page must not load anything from outside itself"
    else:
        wanted = [f"{assets}report.css", *([f"{assets}vega.js"] if expect_charts else []), f"{assets}report.js"]
        assert page.sources == wanted, "a site page loads its site's shared assets and nothing else"
        assert [c for c in page.code_scripts() if c.strip()] == [], "a site page inlines no script"
    specs = page.specs()
    charts = [c for c in page.charts if c.get("data-spec")]
    assert len(charts) == expect_charts
    for c in charts:
        spec = specs[str(c["data-spec"])]
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
        rows = int(str(c["data-rows"]))
        assert rows > 0
        assert sum(len(v) for v in spec["datasets"].values()) >= rows
    if assets is None:
        # The Vega bundle once (when there is a chart), the page's own script once, nothing else.
        code = page.code_scripts()
        assert len(code) == (2 if expect_charts else 1)
        assert not any("alert(1)" in c for c in code)
    return page


def _dataset(page: Page, chart_id: str, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = page.specs()[f"spec-{chart_id}"]["datasets"][name]
    return rows


def _grid(page: Page, grid_id: str) -> list[dict[str, Any]]:
    """A grid's rows as dicts of column key -> value (what the page's script draws)."""
    data = page.specs()[f"data-{grid_id}"]
    return [dict(zip(data["keys"], row, strict=True)) for row in data["rows"]]


def _text(page: Page) -> str:
    return re.sub(r"\s+", " ", "".join(page.text))


# ---------------------------------------------------------------------------------------------
# report.html


def test_run_page_has_every_case_and_every_status() -> None:
    info, records, unreached = small_run()
    page = _check_page(render_run_html(info, records, unreached, H200_PEAKS), expect_charts=3)
    cases = _grid(page, "case-grid")
    assert len(cases) == len(records) + len(unreached)
    statuses = [r["status"] for r in cases]
    assert statuses.count("pass") == 7 and statuses.count("not run") == 1
    assert {"fail", "error", "skip"} <= set(statuses)
    text = _text(page)
    for label, n in (("pass", 7), ("fail", 1), ("error", 1), ("skip", 1), ("not run", 1)):
        assert re.search(rf"cases.*{label}\s*{n}", text), label
    assert "0123456789ab" in text  # the commit
    assert {"4096x4096x4096", "16384x8192"} <= {r["shape"] for r in cases}
    ops = {r["op"]: r for r in _grid(page, "op-grid")}
    assert set(ops) == {"softmax", "add", "mm", "gelu"}
    assert ops["add"]["status"] == "fail" and ops["add"]["failing"] == 1 and ops["softmax"]["status"] == "pass"


def test_run_page_charts_carry_the_passing_cases() -> None:
    info, records, unreached = small_run()
    page = _check_page(render_run_html(info, records, unreached, H200_PEAKS), expect_charts=3)
    passing = [r for r in records if r.status == "pass"]
    per_op = {r["op"]: r for r in _dataset(page, "chart-speedup", "ops")}
    assert set(per_op) == {"softmax", "add", "mm"}  # one point per op with a timed case
    soft = [r.speedup for r in passing if r.op == "softmax" and r.speedup]
    assert per_op["softmax"]["geomean"] == pytest.approx(math.prod(soft) ** (1 / len(soft)))
    assert per_op["softmax"]["n"] == 4 and per_op["mm"]["band"] == "0.5 to 1"
    roof = _dataset(page, "chart-peak", "roofline")
    assert len(roof) == len(passing)
    mm = next(r for r in roof if r["case_id"].startswith("mm["))
    assert mm["ceiling"] == "bf16 matrix rate"  # mm is bound by the matrix rate, not bandwidth
    latency = _dataset(page, "chart-latency", "latency")
    assert sorted(r["case_id"] for r in latency) == sorted(r.case_id for r in passing)


def test_run_page_roofline_from_the_device_table_when_records_lack_percentages() -> None:
    info, records, unreached = small_run()
    bare = [replace(r, extra={k: v for k, v in r.extra.items() if not k.startswith(("pct_", "peak_"))})
            for r in records]
    computed = _dataset(_check_page(render_run_html(info, bare, unreached, None), 3), "chart-peak", "roofline")
    with_extra = _dataset(_check_page(render_run_html(info, records, unreached, H200_PEAKS), 3),
                          "chart-peak", "roofline")
    assert [r["pct"] for r in computed] == [r["pct"] for r in with_extra]


def test_device_table_names_its_sources_and_refuses_unknown_devices() -> None:
    for name, device in (("NVIDIA H200", "H200 SXM"), ("NVIDIA H200 NVL", "H200 NVL"),
                         ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
                         ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"), ("AMD Instinct MI300X", "MI300X")):
        entry, reason = device_peaks(name)
        assert entry is not None and entry.peaks.device == device and entry.source and not reason, name
    entry, reason = device_peaks("NVIDIA GeForce RTX 4090")
    assert entry is None and "not in the table of known devices" in reason
    # A backend's representative peaks apply only where they name the device that ran.
    assert choose_peaks("MTT S4000", replace(H200_PEAKS, device="MTT S4000")).peaks is not None
    assert choose_peaks("NVIDIA GeForce RTX 4090", H200_PEAKS).peaks is None


def test_run_page_of_an_unknown_device_draws_no_roofline_and_says_why() -> None:
    # Records that stored percentages against the H200 (the cuda backend's peaks) on another card.
    info, records, unreached = small_run(device_name="NVIDIA GeForce RTX 4090")
    page = _check_page(render_run_html(info, records, unreached, H200_PEAKS), expect_charts=3)
    assert "No roofline: 'NVIDIA GeForce RTX 4090' is not in the table of known devices" in _text(page)
    assert _dataset(page, "chart-peak", "throughput")
    assert all(r["pct"] is None for r in _grid(page, "case-grid"))


def test_run_page_uses_the_peaks_of_the_device_that_ran() -> None:
    info, records, unreached = small_run(device_name="NVIDIA A100-SXM4-80GB")
    page = _check_page(render_run_html(info, records, unreached, H200_PEAKS), expect_charts=3)
    add = next(r for r in records if r.op == "add" and r.status == "pass")
    row = next(r for r in _grid(page, "case-grid") if r["op"] == "add" and r["status"] == "pass"
               and r["shape"] == "1024x1024")
    assert add.gbps is not None and row["pct"] == pytest.approx(100 * add.gbps / 2039.0, abs=0.01)
    assert "A100 80GB SXM: 2039 GB/s" in _text(page)


def test_run_page_warns_on_impossible_values() -> None:
    info, records, unreached = small_run()
    soft = records[0]
    assert soft.baseline is not None and soft.gbps is not None
    negative = replace(soft, dtype="float64", baseline=replace(soft.baseline, summary=replace(
        soft.baseline.summary, median=-0.001)), speedup=-0.5)
    too_fast = replace(records[1], shape=(2048, 1024), gbps=6000.0)
    page = _check_page(render_run_html(info, [*records, negative, too_fast], unreached, H200_PEAKS), 3)
    warned = {r["case_id"]: r["warning"] for r in _grid(page, "case-grid") if r["warning"]}
    assert set(warned) == {negative.case_id, too_fast.case_id}
    assert "at or below zero" in warned[negative.case_id] and "over 100%" in warned[too_fast.case_id]
    assert "2 case(s) with values that cannot be right" in _text(page)
    # A median at or below zero leaves the case out of the geometric mean; a throughput over
    # the peak does not (the time may be right where the byte count is not).
    per_op = {r["op"]: r for r in _dataset(page, "chart-speedup", "ops")}
    assert per_op["softmax"]["n"] == 5


def test_run_page_counts_and_lists_ops_that_ended_badly() -> None:
    info, records, unreached = small_run()
    ops = [{"op": "softmax", "status": "TIMEOUT", "attempts": 1, "rows": 4,
            "notes": "no exit within --op-timeout 600s"},
           {"op": "add", "status": "FAIL"}, {"op": "mm", "status": "FAIL"}, {"op": "gelu", "status": "CRASH"}]
    page = _check_page(render_run_html({**info, "ops": ops}, records, unreached, H200_PEAKS), 3)
    text = _text(page)
    assert re.search(r"ops.*TIMEOUT\s*1.*CRASH\s*1", text)
    assert "TIMEOUT softmax" in text and "no exit within --op-timeout 600s" in text  # its cases all passed
    assert "CRASH gelu" in text
    assert {r["op"]: r["status"] for r in _grid(page, "op-grid")}["softmax"] == "timeout"


def test_run_page_groups_failures_by_cause() -> None:
    info, records, unreached = small_run()
    page = _check_page(render_run_html(info, records, unreached, H200_PEAKS), 3)
    causes = {r["case_id"]: r["cause"] for r in _grid(page, "case-grid") if r["status"] in ("fail", "error")}
    assert all(causes.values())
    text = _text(page)
    for cause in set(causes.values()):
        assert re.search(rf"{cause}: \d+ case\(s\) in \d+ op\(s\)", text)


def test_run_page_lists_the_ops_slower_than_torch() -> None:
    info, records, unreached = small_run()
    slow = record("slow_op", base_ms=0.01, cand_ms=0.04)  # a quarter of torch's speed
    page = _check_page(render_run_html(info, [*records, slow], unreached, H200_PEAKS), 3)
    text = _text(page)
    assert "Slower than torch: 3 of 4 timed op(s)" in text  # add, mm and slow_op
    below = text.split("Below 0.5 (1)")[1].split("0.5 to 1 (2)")[0]
    assert "slow_op 0.25" in below and "add" not in below


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
    assert any(r["op"].startswith(HOSTILE) for r in _grid(page, "case-grid"))
    assert any(r["op"].startswith(HOSTILE) for r in _dataset(page, "chart-speedup", "ops"))


def test_non_finite_numbers_do_not_break_the_page() -> None:
    info, records, unreached = small_run()
    odd = replace(records[0], gbps=float("nan"), extra={**records[0].extra, "pct_peak_bandwidth": float("inf")})
    page = _check_page(render_run_html(info, [odd, *records[1:]], unreached, H200_PEAKS), expect_charts=3)
    row = next(r for r in _grid(page, "case-grid") if r["op"] == odd.op and r["shape"] == "4096x1024"
               and r["dtype"] == odd.dtype)
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
    assert len(_grid(page, "case-grid")) == 90
    assert len(_dataset(page, "chart-latency", "latency")) == 90
    assert len(_dataset(page, "chart-peak", "roofline")) == 90


def test_corpus_run_page_first_screen() -> None:
    """The committed 206-op corpus run: what its first screen must say (the counts the issue
    counted from the same records)."""
    info, records = corpus_run()
    assert len(records) == 1428
    html = render_run_html(info, records, [], H200_PEAKS)
    page = _check_page(html, expect_charts=3)
    text = _text(page)
    assert re.search(r"ops.*TIMEOUT\s*1", text) and "TIMEOUT linalg_lu_factor" in text
    assert "Slower than torch: 83 of 182 timed op(s)" in text and "Below 0.5 (14)" in text
    assert "30 case(s) with values that cannot be right: 25 at or below zero; 5 over 100%" in text
    assert len(_grid(page, "op-grid")) == 206 and len(_grid(page, "case-grid")) == 1428


def test_run_page_at_corpus_scale_has_fixed_width_charts() -> None:
    """5,000+ cases over 900+ ops: charts of a fixed width (no width step per op or case) and
    grid rows as data, so the page's size does not grow with its op count."""
    info, records, unreached = generated_run()
    assert len(records) + len(unreached) >= 5000 and len({r.op for r in records}) >= 900
    page = _check_page(render_run_html(info, records, unreached, H200_PEAKS), expect_charts=3)
    for spec in (v for k, v in page.specs().items() if k.startswith("spec-")):
        assert "step" not in json.dumps({k: v for k, v in spec.items() if k != "datasets"})
    assert len(_grid(page, "case-grid")) == len(records) + len(unreached)
    assert re.search(r"TIMEOUT\s*2.*CRASH\s*1", _text(page))


def test_a_run_with_nothing_timed_renders_without_charts() -> None:
    info, _, _ = small_run()
    for records in ([], [record("a", status="fail", message="x")]):
        page = _check_page(render_run_html(info, records, [], H200_PEAKS), expect_charts=0)
        assert len(_grid(page, "case-grid")) == len(records)
        assert "Nothing to plot" in _text(page)
    assert sorted(render_history_site([])) == ["assets/report.css", "assets/report.js", "assets/vega.js",
                                               "index.html", "regressions.html"]


def test_assets_cannot_end_their_script_element() -> None:
    js = resources.files("harness.results.html").joinpath("assets", "report.js").read_text()
    assert "</script" not in js.lower()
    assert "</script" not in vega_bundle().lower()


def test_report_refuses_a_folder_without_records(tmp_path: Path) -> None:
    from harness.run.report import load_run, render_report

    (tmp_path / "run.json").write_text((ROOT / "benchmarks/results/h200-core-2026-11-29/run.json").read_text())
    (tmp_path / "summary.csv").write_text("case_id\n")
    for call in (lambda: render_report(tmp_path, "md"), lambda: render_report(tmp_path, "html"),
                 lambda: load_run(tmp_path)):
        with pytest.raises(UsageError, match="has no records.jsonl") as err:
            call()
        assert err.value.exit_code == 2 and "\n" not in str(err.value)


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
    cases = _grid(page, "case-grid")
    assert len(cases) == 90
    assert sum(r["coverage"] == "gaps" for r in cases) == 3  # two not run there, one failing
    assert [r["s1"] for r in cases].count("not run") == 2 and [r["s1"] for r in cases].count("fail") == 1
    speed = _dataset(page, "chart-speedup", "across")
    assert {r["run"] for r in speed} == {"cuda · NVIDIA H200", "musa · MTT S4000"}
    musa = [r for r in speed if r["run"].startswith("musa")]
    assert all(r["pct"] is not None and 0 < r["pct"] < 100 for r in musa)  # against MTT S4000 peaks
    assert "Not run (2)" in html and "Ran and did not pass (1)" in html


def test_across_gives_the_time_ratio_per_case() -> None:
    runs = _two_vendors()
    page = Page(render_across_html(runs))
    by_id = {r.case_id: r for r in runs[0][1]}
    other = {r.case_id: r for r in runs[1][1]}
    rows = _grid(page, "case-grid")
    ratios = [r["r1"] for r in rows if r.get("r1") is not None]
    assert len(ratios) == 87 and all(r == pytest.approx(8.0, rel=0.02) for r in ratios)  # 8x slower there
    assert len(by_id) - len(other) == 2


def test_across_says_not_run_apart_from_failing() -> None:
    info, records, _ = small_run(run_id="night-1")
    info2, records2, _ = small_run(run_id="night-2")
    only_softmax = [r for r in records2 if r.op == "softmax"]
    html = render_across_html([(info, records), (info2, only_softmax)])
    page = Page(html)
    per_op = re.sub(r"\s+", " ", html.split('id="per-op"')[1].split("</section>")[0])
    assert per_op.count('class="status-not-run" colspan="3">not run<') == 2  # add and mm on night-2
    assert "1 failing" in per_op  # add's float32 case on night-1: ran and failed
    statuses = {(r["op"], r["dtype"]): r["s1"] for r in _grid(page, "case-grid")}
    assert statuses[("add", "float32")] == "not run" and "fail" not in set(statuses.values())


def test_across_labels_runs_of_one_device_apart() -> None:
    info, records, _ = small_run(run_id="night-1")
    info2, records2, _ = small_run(run_id="night-2")
    html = render_across_html([(info, records), (info2, records2)])
    assert "cuda · NVIDIA H200 · night-1" in html and "cuda · NVIDIA H200 · night-2" in html


def test_regression_and_failing_read_apart_without_colour() -> None:
    """Greyscale: each verdict carries a shape of its own (the stylesheet's icons), not only a colour."""
    css = resources.files("harness.results.html").joinpath("assets", "report.css").read_text()
    icons = {name: icon for selectors, icon in re.findall(r"([^{}]+)\{ content: \"(.) \"; \}", css)
             for name in re.findall(r"\.status-([a-z-]+)::before", selectors)}
    assert icons["regression"] != icons["failing"] and icons["not-run"] not in (icons["fail"], icons["failing"])
    html = render_compare_html(comparison())
    assert 'class="status-regression"' in html and 'class="status-failing"' in html


# ---------------------------------------------------------------------------------------------
# history site


def _site(points: Sequence[Mapping[str, Any]], **kw: Any) -> dict[str, str]:
    site = render_history_site(points, **kw)
    assert {"assets/report.css", "assets/report.js", "assets/vega.js"} <= set(site)
    return site


def test_history_site_pages_share_one_asset_bundle() -> None:
    site = _site(history_points(), commit_url="https://example.org/c/{commit}")
    assert sorted(k for k in site if k.endswith(".html")) == [
        "index.html", "ops/mm.html", "ops/softmax.html", "regressions.html"]
    _check_page(site["index.html"], expect_charts=0, assets="assets/")
    _check_page(site["regressions.html"], expect_charts=0, assets="assets/")
    for op in ("mm", "softmax"):
        _check_page(site[f"ops/{op}.html"], expect_charts=1, assets="../assets/")
        assert len(site[f"ops/{op}.html"]) < 100_000  # the bundle is not inlined
    assert site["assets/vega.js"] == vega_bundle()


def test_history_site_markers_and_links() -> None:
    site = _site(history_points(), commit_url="https://example.org/c/{commit}")
    soft = Page(site["ops/softmax.html"])
    points = _dataset(soft, "chart-trend", "points")
    assert len(points) == 2 * 2 * 8  # 2 dtypes x 2 backends x 8 nights
    flagged = [p for p in points if p.get("check") == "regression"]
    assert flagged and all(p["series"] == "cuda · NVIDIA H200" and "bfloat16" in p["case_id"] for p in flagged)
    assert all(p["url"].startswith("https://example.org/c/") for p in points)
    index = Page(site["index.html"])
    assert "regressions.html" in index.links
    assert {r["href"] for r in _grid(index, "op-grid")} == {"ops/softmax.html", "ops/mm.html"}
    assert "../index.html" in soft.links


def test_history_series_are_keyed_by_case_backend_and_device() -> None:
    """A software change (here torch 2.11 -> 2.12 with a new fingerprint) is a marker saying
    what changed, not a new series; failing nights stay in the series."""
    site = _site(nightly_history(n_ops=8, nights=30))
    points = _dataset(Page(site["ops/op_0007.html"]), "chart-trend", "points")
    assert {p["series"] for p in points} == {"cuda · NVIDIA H200", "cuda · NVIDIA A100-SXM4-80GB"}
    assert len(points) == 2 * 2 * 30
    changes = {p["change"] for p in points if p.get("change")}
    assert changes == {"torch 2.11.0 → 2.12.0"}
    assert sum(bool(p.get("change")) for p in points) == 4  # once per series
    h200 = [p for p in points if p["series"] == "cuda · NVIDIA H200" and "1024x1024" in p["case_id"]]
    assert [p["t"][:10] for p in h200] == sorted(p["t"][:10] for p in h200)
    assert {p.get("check") for p in h200[-8:]} >= {"regression"} or any(p.get("check") == "regression" for p in h200)
    failing = [p for p in _dataset(Page(site["ops/op_0000.html"]), "chart-trend", "points") if p["status"] != "pass"]
    assert len(failing) == 4 and all(p["t"].startswith("2026-11-13") for p in failing)  # night 12, drawn
    assert all("torch_median_ms" in p for p in points)


def test_history_regressions_page_lists_every_episode_with_its_ranges() -> None:
    from harness.results.html.history import judged_points, regression_episodes

    points = nightly_history(n_ops=15, nights=30)
    episodes = regression_episodes(judged_points(points))
    stepped = {f"op_{k:04d}" for k in range(15) if k % 7 == 0}
    assert {e["op"] for e in episodes} == stepped and all(e["series"] == "cuda · NVIDIA H200" for e in episodes)
    sizes = [e["size"] for e in episodes]
    assert sizes == sorted(sizes, reverse=True) and all(s == pytest.approx(1.35, rel=0.03) for s in sizes)
    e = episodes[0]
    assert e["first_bad"].startswith("2026-11-21") and e["last_good"].startswith("2026-11-20")
    lib_good, lib_bad = (hashlib.sha1(f"library {n}".encode()).hexdigest() for n in (19, 20))
    assert e["library_range"] == f"{lib_good[:12]} .. {lib_bad[:12]}"
    assert e["harness_range"].count("..") == 1
    assert e["bisect"] == (f"harness bisect --repo GIT_DIR --good {lib_good} --bad {lib_bad} "
                           f"-- --suite TREE --ops {e['op']}")
    assert e["now"] == "ok"  # the baseline moved to the new level after the window of nights
    site = _site(points)
    text = _text(Page(site["regressions.html"]))
    assert f"{len(episodes)} regression(s), largest first" in text and e["bisect"] in text
    index = _text(Page(site["index.html"]))
    assert index.index("Regressions") < index.index("Ops")  # regressions first on the landing page
    assert e["bisect"] in index


def test_history_landing_page_weight_at_a_thousand_ops() -> None:
    """The landing page of 1,000 ops on 5 backends over 30 nights, apart from the shared bundle,
    stays under 150 KB compressed (its op index is data for the grid, no chart)."""
    from harness.results.html.history import judged_points, regression_episodes  # noqa: F401

    site = render_history_site(nightly_history(n_ops=1000, nights=30, cases_per_op=1, backends=FIVE_BACKENDS))
    index = site["index.html"].encode()
    assert len(gzip.compress(index)) < 150_000
    assert len(_grid(Page(site["index.html"]), "op-grid")) == 1000
    assert "vega" not in site["index.html"].split("<footer>")[0].lower()


def test_history_keeps_given_checks_and_refuses_odd_commit_urls() -> None:
    points = [dict(p, check="ok", reason="given") for p in history_points()]
    site = render_history_site(points)
    data = _dataset(Page(site["ops/softmax.html"]), "chart-trend", "points")
    assert {p["check"] for p in data} == {"ok"} and all("url" not in p for p in data)
    with pytest.raises(ValueError, match="http"):
        render_history_site(points, commit_url="javascript:alert(1)//{commit}")


def test_history_page_names_stay_apart() -> None:
    points = [dict(p, op="a:b", case_id=p["case_id"].replace("softmax", "a:b")) for p in history_points(ops=("softmax",))]
    points += [dict(p, op="a_b", case_id=p["case_id"].replace("softmax", "a_b")) for p in history_points(ops=("softmax",))]
    site = render_history_site(points)
    assert sorted(k for k in site if k.startswith("ops/")) == ["ops/a_b-2.html", "ops/a_b.html"]


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
    text = _text(Page(site["regressions.html"]))
    assert "library commits" in text and "not recorded" in text  # the export has no library commit
    assert "the nights recorded no library commit: no range to bisect" in text
    assert "harness bisect --repo" not in text  # the harness's commits are no range of the library


def test_history_site_from_the_store_marks_upgrades_and_bisects_the_library_range(tmp_path: Path) -> None:
    """Nights stored with their software versions and library commit (run.json's identity and
    suite ref): the site draws the torch upgrade as a marker on the one series, and the
    regressions page gives the library's commit range and the command that bisects it."""
    from harness.compare.compare import RunData
    from harness.compare.history import HistoryStore
    from harness.results.html.history import judged_points, regression_episodes

    store = HistoryStore(tmp_path / "history.sqlite")
    library = {day: hashlib.sha1(f"library {day}".encode()).hexdigest() for day in range(1, 9)}
    for day in range(1, 9):
        slow = 1.3 if day >= 6 else 1.0
        run_id = f"night-{day}"
        info = {"run_id": run_id, "status": "complete", "backend": "cuda", "timer": "graph", "level": "core",
                "identity": {"device_name": "NVIDIA H200", "torch": "2.11.0" if day < 4 else "2.12.0",
                             "triton": "3.6.0", "driver": "580.159.04", "flag_gems": {"version": "5.3.4"}},
                "options": {"cache": "cold"}, "fingerprint": "fp-h200", "harness_version": "0.1.0",
                "started_at": f"2026-11-{day:02d}T02:00:00+00:00", "git_commit": f"{day:040d}",
                "suite": {"ref": f"v5.3.4 (v5.3.4-{day}-g{library[day][:7]}, {library[day]})"}}
        store.add(RunData(path=tmp_path / run_id, info=info, records=(
            record("softmax", cand_ms=0.01 * slow, run_id=run_id), record("add", cand_ms=0.02, run_id=run_id))))
    site = render_history_site(store.export())
    points = _dataset(Page(site["ops/softmax.html"]), "chart-trend", "points")
    assert {p["series"] for p in points} == {"cuda · NVIDIA H200"}  # the upgrade starts no series
    assert [p["change"] for p in points if p.get("change")] == ["torch 2.11.0 → 2.12.0"]
    assert [p["run_id"] for p in points if p.get("change")] == ["night-4"]
    (episode,) = [e for e in regression_episodes(judged_points(store.export())) if e["op"] == "softmax"]
    assert (episode["first_bad_run"], episode["last_good_run"]) == ("night-6", "night-5")
    assert episode["library_range"] == f"{library[5][:12]} .. {library[6][:12]}"
    assert episode["bisect"] == (f"harness bisect --repo GIT_DIR --good {library[5]} --bad {library[6]} "
                                 "-- --suite TREE --ops softmax")
    text = _text(Page(site["regressions.html"]))
    assert episode["bisect"] in text and "not recorded" not in text
