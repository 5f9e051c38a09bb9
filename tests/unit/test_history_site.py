"""The history site's two figures beyond the trend: each series' smallest detectable slowdown,
derived from `history check`'s own rule and the series' measured spread, and stored bisections
(bisect.json) matched to the regressions they bisected, whose culprit the regressions list shows."""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("altair", reason="the HTML reports need altair (pip install -e .)")
pytest.importorskip("vl_convert", reason="the HTML reports need vl-convert-python (pip install -e .)")

from harness.bisect.plan import Check, Outcome  # noqa: E402
from harness.bisect.report import FORMAT_VERSION, findings_from_json, read_findings, result_json  # noqa: E402
from harness.bisect.session import Answer, BisectResult, Commit  # noqa: E402
from harness.cli import main  # noqa: E402
from harness.errors import UsageError  # noqa: E402
from harness.results.html import render_history_site  # noqa: E402
from harness.results.html.history import (  # noqa: E402
    BisectFinding,
    bisect_for,
    judged_points,
    regression_episodes,
    same_commit,
    series_detection,
)
from harness.results.trend import (  # noqa: E402
    DETECT_CHANCE,
    MIN_MEASURED_SIGMA,
    HistoryRules,
    assess_case,
    detectable_change,
    history_spread,
)
from tests.html_data import nightly_history, record  # noqa: E402
from tests.unit.test_html import Page, _grid, _text  # noqa: E402

# ---------------------------------------------------------------------------------------------
# the smallest change a series can show


def _flag_rate(sigma: float, change: float, rules: HistoryRules, trials: int = 1500, seed: int = 7) -> float:
    """How often `history check`'s rule (assess_case itself) flags a lasting slowdown of
    ``change`` by its ``persist``-th night, on a series whose nightly log median wanders by
    ``sigma``, after ``window`` + 3 quiet nights."""
    rng = random.Random(seed)
    quiet = rules.window + 3
    flagged = 0
    for _ in range(trials):
        nights = [math.exp(rng.gauss(0.0, sigma)) for _ in range(quiet)]
        nights += [(1 + change) * math.exp(rng.gauss(0.0, sigma)) for _ in range(rules.persist)]
        flagged += any(assess_case("c", nights[:k], nights[k], rules).status == "regression"
                       for k in range(quiet, quiet + rules.persist))
    return flagged / trials


@pytest.mark.parametrize("rules", [HistoryRules(), HistoryRules(window=7, threshold=0.03, persist=3),
                                   HistoryRules(window=4, persist=2)])
@pytest.mark.parametrize("sigma", [0.002, 0.01, 0.02])
def test_the_detectable_change_is_flagged_by_the_rule_about_as_often_as_it_says(rules: HistoryRules,
                                                                                 sigma: float) -> None:
    """The figure is what assess_case catches in time 9 times in 10; at the bare threshold the
    rule catches far fewer (each night is a coin toss there)."""
    change = detectable_change(sigma, rules)
    assert change > rules.threshold
    assert 0.86 <= _flag_rate(sigma, change, rules) <= 0.94
    assert _flag_rate(sigma, rules.threshold, rules) < 0.3


def test_the_detectable_change_grows_with_the_spread_from_the_threshold_and_stops_at_large() -> None:
    rules = HistoryRules()
    assert detectable_change(0.0, rules) == pytest.approx(rules.threshold)
    sizes = [detectable_change(s, rules) for s in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05)]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    assert 0.050 < detectable_change(0.002, rules) < 0.056  # an H200-like spread: about the threshold
    # Where the spread is huge, one night beyond `large` is the likelier way to be flagged.
    wander = 0.6 * math.sqrt(1 + math.pi / 10)
    z1 = 1.2815515655446004  # the 90% quantile of a standard normal
    assert detectable_change(0.6, rules) == pytest.approx((1 + rules.large) * math.exp(z1 * wander) - 1)
    assert detectable_change(0.2, rules) < (1 + rules.large) * math.exp(z1 * 0.2 * math.sqrt(1 + math.pi / 10)) - 1
    assert DETECT_CHANCE == 0.9
    # A window too short for the slowdown to persist before it is the baseline: only `large` flags it.
    short = HistoryRules(window=3, persist=3)
    assert detectable_change(0.002, short) > short.large
    assert 0.86 <= _flag_rate(0.002, detectable_change(0.002, short), short)
    for bad in (-0.01, math.nan, math.inf):
        with pytest.raises(ValueError, match="sigma"):
            detectable_change(bad, rules)
    with pytest.raises(ValueError, match="chance"):
        detectable_change(0.01, rules, chance=1.0)


def test_a_series_spread_is_the_gates_history_spread() -> None:
    """One measure of spread: the gate's `--history` (compare.stats re-exports it) and the site's."""
    from harness.compare.stats import history_spread as gates

    assert gates is history_spread
    medians = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.3, 1.31, 1.29]  # a step at night 7 moves one change only
    sigma, detects = series_detection(medians, HistoryRules())
    assert sigma is not None and sigma == pytest.approx(history_spread(medians)) and 0.005 < sigma < 0.03
    assert detects == pytest.approx(detectable_change(sigma, HistoryRules()))
    assert series_detection([1.0, 1.0, 1.0], HistoryRules()) == (None, None)  # too few nights
    assert series_detection([1.0, None, 1.0, None, 1.0], HistoryRules()) == (None, None)  # failed nights do not count
    quiet, _ = series_detection([1.0] * 6, HistoryRules())
    assert quiet == MIN_MEASURED_SIGMA  # identical medians never claim a zero spread


def test_each_series_row_on_the_op_page_shows_its_spread_and_detectable_change() -> None:
    points = nightly_history(n_ops=8, nights=30)
    site = render_history_site(points)
    page = Page(site["ops/op_0003.html"])
    rows = _grid(page, "latest-grid")
    assert len(rows) == 2 * 2  # 2 cases x 2 backend · device pairs
    rules = HistoryRules()
    for row in rows:
        medians = [p["median_ms"] for p in points
                   if p["case_id"] == row["case_id"] and f"{p['backend']} · {p['device_name']}" == row["series"]]
        sigma = max(float(history_spread(medians) or 0), MIN_MEASURED_SIGMA)
        assert row["spread_pct"] == pytest.approx(sigma * 100)
        assert row["detects_pct"] == pytest.approx(detectable_change(sigma, rules) * 100)
        assert row["detects_pct"] > rules.threshold * 100
    assert "detects: the smallest lasting slowdown" in _text(page)
    short = render_history_site([p for p in points if p["started_at"] < "2026-11-04"])  # 3 nights
    assert all(r["spread_pct"] is None and r["detects_pct"] is None
               for r in _grid(Page(short["ops/op_0003.html"]), "latest-grid"))


# ---------------------------------------------------------------------------------------------
# stored bisections on the regressions list

GOOD, BAD = "a" * 40, "b" * 40
CASE = "softmax[builtin-bfloat16-4096x1024]"


def _episode(**kw: Any) -> dict[str, Any]:
    return {"op": "softmax", "case_id": CASE, "library_good": GOOD, "library_bad": BAD, **kw}


def _finding(**kw: Any) -> BisectFinding:
    base: dict[str, Any] = dict(good=GOOD, bad=BAD, ops=("softmax",), cases=(CASE,), changed=True,
                                culprit_sha="c" * 40, culprit_subject="make softmax slow", origin="x/bisect.json")
    return BisectFinding(**{**base, **kw})


def test_same_commit_takes_an_abbreviation_of_seven_or_more_digits() -> None:
    assert same_commit(GOOD, GOOD) and same_commit(GOOD[:7], GOOD) and same_commit(GOOD.upper(), GOOD[:12])
    assert not same_commit(GOOD[:6], GOOD) and not same_commit("", "") and not same_commit(GOOD, BAD)


def test_a_bisection_matches_a_regression_by_its_library_range_op_and_case() -> None:
    found = _finding()
    assert bisect_for(_episode(), [found]) is found
    assert bisect_for(_episode(library_good=GOOD[:7], library_bad=BAD[:9]), [found]) is found  # describe's -gHASH
    assert bisect_for(_episode(), [_finding(ops=())]) is not None  # run arguments that named no ops
    assert bisect_for(_episode(), [_finding(cases=())]) is not None  # nothing tracked: any case of the op
    assert bisect_for(_episode(op="mm"), [found]) is None
    assert bisect_for(_episode(case_id="softmax[builtin-float32-4096x1024]"), [found]) is None
    assert bisect_for(_episode(library_good=BAD, library_bad=GOOD), [found]) is None  # not its range
    assert bisect_for(_episode(library_bad="d" * 40), [found]) is None
    assert bisect_for(_episode(library_good="", library_bad=""), [found]) is None  # no range recorded


def test_a_named_culprit_comes_first_and_the_last_given_wins_among_equals() -> None:
    left = _finding(culprit_sha="", culprit_subject="", remaining=("1" * 40, "2" * 40))
    first, second = _finding(culprit_sha="e" * 40), _finding(culprit_sha="f" * 40)
    assert bisect_for(_episode(), [first, left]) is first
    assert bisect_for(_episode(), [left, first]) is first
    assert bisect_for(_episode(), [first, second]) is second
    assert bisect_for(_episode(), [left]) is left


def _history(nights: int = 10, step_from: int = 6) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """softmax bf16 on one H200, 30% slower from ``step_from`` (a regression at once), each night
    with its library commit; add stays flat."""
    library = {n: hashlib.sha1(f"lib {n}".encode()).hexdigest() for n in range(nights)}
    points = []
    for n in range(nights):
        for op, case, base in (("softmax", CASE, 0.01), ("add", "add[builtin-bfloat16-4096x1024]", 0.02)):
            slow = 1.3 if op == "softmax" and n >= step_from else 1.0
            median = base * slow * (1 + 0.002 * ((n * 5) % 3 - 1))
            points.append({"case_id": case, "op": op, "fingerprint": "fp", "backend": "cuda",
                           "device_name": "NVIDIA H200", "run_id": f"night-{n}",
                           "started_at": f"2026-11-{n + 1:02d}T02:00:00+00:00", "git_commit": f"{n:040d}",
                           "library_commit": library[n], "status": "pass", "median_ms": median})
    return points, library


def test_the_regressions_list_shows_a_stored_culprit_with_its_link() -> None:
    points, library = _history()
    (episode,) = regression_episodes(judged_points(points))
    assert (episode["library_good"], episode["library_bad"]) == (library[5], library[6])
    culprit = hashlib.sha1(b"culprit").hexdigest()
    hostile = "</td><script>alert(1)</script> slow softmax"
    found = _finding(good=library[5][:10], bad=library[6], culprit_sha=culprit, culprit_subject=hostile,
                     culprit_link=f"https://github.com/org/lib/commit/{culprit}")
    elsewhere = _finding(good=library[1], bad=library[2], culprit_sha="9" * 40, culprit_subject="elsewhere",
                         origin="other/bisect.json")
    site = render_history_site(points, bisects=[found, elsewhere])
    for name in ("regressions.html", "index.html", "ops/softmax.html"):
        page = Page(site[name])
        text = _text(page)
        assert f"culprit {culprit[:12]} {hostile}" in text, name
        assert f"https://github.com/org/lib/commit/{culprit}" in page.links
        assert "<script>alert(1)" not in site[name]
        assert "harness bisect --repo" not in text  # bisected: the command gives way to the culprit
    regressions = _text(Page(site["regressions.html"]))
    assert "Bisections that match no regression" in regressions
    assert f"{library[1][:12]} .. {library[2][:12]} softmax: culprit 999999999999 elsewhere" in regressions
    # Without a stored bisection the list offers the command, as before.
    plain = _text(Page(render_history_site(points)["regressions.html"]))
    assert f"culprit {culprit[:12]}" not in plain and f"--good {library[5]} --bad {library[6]}" in plain


def test_a_bisection_that_named_no_culprit_says_so_and_keeps_the_command() -> None:
    points, library = _history()
    left = _finding(good=library[5], bad=library[6], culprit_sha="", culprit_subject="",
                    culprit_link="javascript:alert(1)", remaining=("1" * 40, "2" * 40, "3" * 40))
    text = _text(Page(render_history_site(points, bisects=[left])["regressions.html"]))
    assert "bisected: no single culprit, 3 commit(s) left (111111111111 .. 333333333333)" in text
    assert f"--good {library[5]} --bad {library[6]}" in text
    unsafe = _finding(good=library[5], bad=library[6], culprit_link="javascript:alert(1)")
    page = Page(render_history_site(points, bisects=[unsafe])["regressions.html"])
    assert "javascript:alert(1)" not in page.links and "culprit cccccccccccc" in _text(page)


# ---------------------------------------------------------------------------------------------
# bisect.json read back


def _bisect_json(good: str, bad: str, ops: tuple[str, ...] = ("softmax",), tracked: tuple[str, ...] = (CASE,),
                 culprit: int | None = 2) -> dict[str, Any]:
    """bisect.json as `harness bisect` writes it (result_json), for a range of four commits."""
    commits = tuple(Commit(hashlib.sha1(f"c{i}".encode()).hexdigest(), f"commit {i}", f"t{i}") for i in range(4))
    outcome = Outcome(culprit=commits[culprit].sha if culprit is not None else None,
                      first=1 if culprit is None else culprit, last=3 if culprit is None else culprit,
                      skipped=(commits[2].sha,) if culprit is None else ())
    result = BisectResult(commits=commits, check=Check(True, "regression", tracked, 1.3, "slower"), threshold=0.1,
                          steps=[], outcome=outcome, rounds=2, runs=8, seconds=60.0,
                          answers=(Answer(tracked, outcome),))
    facts = {"repo": "lib", "good": "v1", "bad": "v2", "good_sha": good, "bad_sha": bad, "metric": "speed",
             "threshold_given": None, "source_path": "src", "run_args": ["--suite", "TREE", "--ops", *ops],
             "devices": [], "repo_url": "https://github.com/org/lib"}
    return result_json(result, facts, "https://github.com/org/lib")


def test_bisect_json_is_read_back_as_written() -> None:
    data = _bisect_json(GOOD, BAD, ops=("softmax,mm", "add"))
    (found,) = findings_from_json(json.loads(json.dumps(data)), "here")
    assert (found.good, found.bad, found.ops, found.cases, found.changed) == (GOOD, BAD, ("softmax", "mm", "add"),
                                                                             (CASE,), True)
    assert found.culprit_sha == data["culprit"]["sha"] and found.culprit_subject == "commit 2"
    assert found.culprit_link == f"https://github.com/org/lib/commit/{found.culprit_sha}"
    (left,) = findings_from_json(_bisect_json(GOOD, BAD, culprit=None), "here")
    assert not left.culprit_sha and len(left.remaining) == 3
    # format 1 (no answers): one finding for every case the check tracked
    (old,) = findings_from_json({k: v for k, v in data.items() if k != "answers"} | {"format_version": 1}, "here")
    assert old.cases == (CASE,) and old.culprit_sha == data["culprit"]["sha"]


def test_a_bisection_with_two_culprits_gives_a_finding_for_each_with_its_cases() -> None:
    commits = tuple(Commit(hashlib.sha1(f"c{i}".encode()).hexdigest(), f"commit {i}", f"t{i}") for i in range(6))
    first, second = Outcome(commits[1].sha, 1, 1, ()), Outcome(commits[4].sha, 4, 4, ())
    result = BisectResult(commits=commits, check=Check(True, "regression", ("a[1]", "b[2]"), 1.3, "slower"),
                          threshold=0.1, steps=[], outcome=first, rounds=4, runs=16, seconds=60.0,
                          answers=(Answer(("a[1]",), first), Answer(("b[2]",), second)))
    facts = {"repo": "lib", "good": "v1", "bad": "v2", "good_sha": GOOD, "bad_sha": BAD, "metric": "speed",
             "threshold_given": None, "source_path": "src", "run_args": ["--ops", "a", "b"], "devices": [],
             "repo_url": ""}
    data = result_json(result, facts, "")
    assert data["culprit"]["sha"] == commits[1].sha  # the first answer's, where format 1 had it
    found = findings_from_json(json.loads(json.dumps(data)), "here")
    assert [(f.cases, f.culprit_sha) for f in found] == [(("a[1]",), commits[1].sha), (("b[2]",), commits[4].sha)]
    from harness.bisect.report import named_every_case, render_markdown, summary_line

    assert named_every_case(data)
    line = summary_line(data)
    assert line.startswith("bisect: 2 answers: ") and commits[1].sha[:12] in line and commits[4].sha[:12] in line
    md = render_markdown(data)
    assert "## Culprit for `a[1]`" in md and "## Culprit for `b[2]`" in md
    left = {**data, "answers": [data["answers"][0], {**data["answers"][1], "culprit": None,
                                                     "remaining": [data["answers"][0]["culprit"]], "skipped": []}]}
    assert not named_every_case(left) and "no single culprit (1 case(s))" in summary_line(left)


@pytest.mark.parametrize(("change", "why"), [
    ({"format_version": 3}, "format_version 3; this harness reads 1, 2"),
    ({"answers": [{"cases": "a", "culprit": None, "remaining": []}]}, "answers.0..cases is not a list of case ids"),
    ({"answers": [{"cases": [], "culprit": None, "remaining": []}]}, "answers.0..cases is not a list of case ids"),
    ({"answers": [{"cases": [1], "culprit": None, "remaining": []}]}, "answers.0..cases is not a list of case ids"),
    ({"answers": [{"cases": ["a"], "culprit": None, "remaining": []}]}, "names neither a culprit nor the range left"),
    ({"answers": "x"}, "answers is not a list"),
    ({"answers": None}, "answers is not a list"),
    ({"answers": {}}, "answers is not a list"),
    ({"answers": []}, "answers is empty though the check found a change"),
    ({"check": {"changed": False, "tracked": []}}, "answers are given though the check found no change"),
    ({"format_version": None}, "format_version None"),
    ({"good_sha": None}, "good_sha"),
    ({"run_args": "--ops softmax"}, "run_args"),
    ({"run_args": ["--no-such-option"]}, "not `harness run` arguments"),
    ({"check": {"changed": True}}, "tracked"),
    ({"culprit": {"sha": "c", "subject": "s", "link": "javascript:x"}}, "not a web address"),
    ({"remaining": None}, "remaining"),
])
def test_a_bisect_json_not_as_written_is_refused_naming_what(change: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        findings_from_json({**_bisect_json(GOOD, BAD), **change}, "here")
    with pytest.raises(ValueError, match="not a JSON object"):
        findings_from_json([1], "here")


def test_read_finding_takes_the_file_or_its_folder_and_refuses_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "bisect.json").write_text(json.dumps(_bisect_json(GOOD, BAD)))
    assert read_findings(tmp_path / "run")[0].origin == str(tmp_path / "run")
    assert read_findings(tmp_path / "run" / "bisect.json")[0].good == GOOD
    (tmp_path / "bad.json").write_text("{not json")
    for path in (tmp_path / "missing", tmp_path / "bad.json", tmp_path):
        with pytest.raises(UsageError) as caught:
            read_findings(path)
        assert "\n" not in caught.value.message and "--bisect" in caught.value.message


def _store_with_a_regression(tmp_path: Path, slowed: tuple[str, ...] = ("softmax",)) -> tuple[Path, dict[int, str]]:
    """Eight nights of softmax and add, the ops ``slowed`` 30% slower from night 6."""
    from harness.compare.compare import RunData
    from harness.compare.history import HistoryStore

    db = tmp_path / "history.sqlite"
    store = HistoryStore(db)
    library = {day: hashlib.sha1(f"library {day}".encode()).hexdigest() for day in range(1, 9)}
    for day in range(1, 9):
        run_id = f"night-{day}"
        info = {"run_id": run_id, "status": "complete", "backend": "cuda", "timer": "graph", "level": "core",
                "identity": {"device_name": "NVIDIA H200"}, "options": {"cache": "cold"}, "fingerprint": "fp-h200",
                "started_at": f"2026-11-{day:02d}T02:00:00+00:00", "git_commit": f"{day:040d}",
                "suite": {"ref": f"v5.3.4 (v5.3.4-{day}-g{library[day][:7]}, {library[day]})"}}
        slow = {op: 1.3 if day >= 6 and op in slowed else 1.0 for op in ("softmax", "add")}
        store.add(RunData(path=tmp_path / run_id, info=info, records=(
            record("softmax", cand_ms=0.01 * slow["softmax"], run_id=run_id),
            record("add", cand_ms=0.02 * slow["add"], run_id=run_id))))
    return db, library


def test_history_site_shows_the_culprit_of_a_stored_bisection(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    db, library = _store_with_a_regression(tmp_path)
    softmax = str(record("softmax").case_id)
    data = _bisect_json(library[5], library[6], tracked=(softmax,))
    (tmp_path / "bisect").mkdir()
    (tmp_path / "bisect" / "bisect.json").write_text(json.dumps(data))
    out = tmp_path / "site"
    assert main(["history", "site", "--db", str(db), "--out", str(out), "--bisect", str(tmp_path / "bisect")]) == 0
    text = _text(Page((out / "regressions.html").read_text(encoding="utf-8")))
    assert f"culprit {data['culprit']['sha'][:12]} commit 2" in text
    assert "Bisections that match no regression" not in text
    pages = len(list(out.rglob("*.html")))
    shared = len([p for p in out.rglob("*") if p.is_file() and p.suffix != ".html"])
    assert f"history site: {pages} page(s) and {shared} shared file(s) in {out}" in capsys.readouterr().out


def test_history_site_shows_each_regression_the_culprit_of_its_own_answer(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """One bisection of a night's range in which two commits slowed two ops (bisect.json format 2,
    two answers): each op's regression shows its own culprit."""
    db, library = _store_with_a_regression(tmp_path, slowed=("softmax", "add"))
    softmax, add = str(record("softmax").case_id), str(record("add").case_id)
    commits = tuple(Commit(hashlib.sha1(f"c{i}".encode()).hexdigest(), f"commit {i}", f"t{i}") for i in range(6))
    first, second = Outcome(commits[1].sha, 1, 1, ()), Outcome(commits[4].sha, 4, 4, ())
    result = BisectResult(commits=commits, check=Check(True, "regression", (softmax, add), 1.3, "slower"),
                          threshold=0.1, steps=[], outcome=first, rounds=4, runs=16, seconds=60.0,
                          answers=(Answer((softmax,), first), Answer((add,), second)))
    facts = {"repo": "lib", "good": "v1", "bad": "v2", "good_sha": library[5], "bad_sha": library[6],
             "metric": "speed", "threshold_given": None, "source_path": "src",
             "run_args": ["--suite", "TREE", "--ops", "softmax", "add"], "devices": [],
             "repo_url": "https://github.com/org/lib"}
    (tmp_path / "bisect.json").write_text(json.dumps(result_json(result, facts, "https://github.com/org/lib")))
    out = tmp_path / "site"
    assert main(["history", "site", "--db", str(db), "--out", str(out), "--bisect", str(tmp_path / "bisect.json")]) == 0
    html = (out / "regressions.html").read_text(encoding="utf-8")
    text = _text(Page(html))
    assert f"culprit {commits[1].sha[:12]} commit 1" in text and f"culprit {commits[4].sha[:12]} commit 4" in text
    assert "Bisections that match no regression" not in text
    # each op's row holds its own answer's culprit, not the other's
    row_of = {case: next(r for r in html.split("<tr")[1:] if case in r) for case in (softmax, add)}
    assert commits[1].sha[:12] in row_of[softmax] and commits[4].sha[:12] not in row_of[softmax]
    assert commits[4].sha[:12] in row_of[add] and commits[1].sha[:12] not in row_of[add]


def test_history_site_refuses_a_bisect_json_of_another_version(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    db, library = _store_with_a_regression(tmp_path)
    data = {**_bisect_json(library[5], library[6]), "format_version": FORMAT_VERSION + 1}
    (tmp_path / "bisect.json").write_text(json.dumps(data))
    out = tmp_path / "site"
    assert main(["history", "site", "--db", str(db), "--out", str(out), "--bisect", str(tmp_path / "bisect.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"format_version {FORMAT_VERSION + 1}" in err
    assert not out.exists()  # nothing written
