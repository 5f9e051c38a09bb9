"""harness history: the persistence rule, the SQLite store, check and export."""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.compare.cli import add_parsers, dispatch
from harness.compare.compare import load_run as _load
from harness.compare.history import HistoryRules, HistoryStore, assess_case
from harness.errors import GateFailed, UsageError
from harness.results.schema import Measurement, Timing
from harness.results.store import append_record, write_json

XSD = Path("/work/shared/data/junit-10.xsd")
RULES = HistoryRules()  # window 5, threshold 5%, large 25%, persist 2
CASES = ("softmax", "add", "gelu")


def test_one_slow_run_is_only_suspect() -> None:
    check = assess_case("c", [1.0, 1.01, 0.99, 1.0, 1.0], 1.10, RULES)
    assert check.status == "suspect"
    assert check.ratio == pytest.approx(1.10)
    assert "next run" in check.reason


def test_two_consecutive_slow_runs_are_a_regression() -> None:
    check = assess_case("c", [1.0, 1.01, 0.99, 1.0, 1.0, 1.10], 1.09, RULES)
    assert check.status == "regression"
    assert "2 consecutive runs" in check.reason


def test_a_very_large_slowdown_is_flagged_at_once() -> None:
    check = assess_case("c", [1.0, 1.01, 0.99, 1.0, 1.0], 1.30, RULES)
    assert check.status == "regression"
    assert "at once" in check.reason


def test_a_good_run_between_two_slow_ones_breaks_the_streak() -> None:
    assert assess_case("c", [1.0, 1.0, 1.0, 1.0, 1.1, 1.0], 1.1, RULES).status == "suspect"


def test_a_missing_run_breaks_the_streak() -> None:
    assert assess_case("c", [1.0, 1.0, 1.0, 1.0, 1.1, None], 1.1, RULES).status == "suspect"


def test_the_baseline_is_the_median_of_the_last_window_runs() -> None:
    check = assess_case("c", [9.0, 9.0, 1.0, 1.0, 1.2, 0.9, 1.0], 1.0, RULES)
    assert check.baseline_ms == 1.0 and check.history == 5
    assert check.status == "ok"


def test_too_little_history_gives_no_verdict_and_a_speedup_is_reported() -> None:
    assert assess_case("c", [1.0, 1.0], 2.0, RULES).status == "no baseline"
    assert assess_case("c", [1.0, 1.0, 1.0], 0.8, RULES).status == "improvement"
    assert assess_case("c", [1.0, 1.0, 1.0], None, RULES).status == "not measured"


def test_persist_three_needs_three_slow_runs() -> None:
    rules = HistoryRules(persist=3)
    assert assess_case("c", [1.0] * 5 + [1.1], 1.1, rules).status == "suspect"
    assert assess_case("c", [1.0] * 5 + [1.1, 1.1], 1.1, rules).status == "regression"


# the store and the commands, on run directories written to disk


def _record(op: str, median: float, rng: np.random.Generator, status: str = "pass") -> Measurement:
    timing = Timing.of([float(x) for x in median * rng.lognormal(0.0, 0.01, 50)])
    passed = status == "pass"
    return Measurement(
        run_id="r", op=op, provider="builtin", dtype="float16", shape=(4096, 4096), backend="cuda",
        device="0", timer="direct", status=status, device_name="NVIDIA H200",
        baseline=timing if passed else None, candidate=timing if passed else None,
    )


def _run(root: Path, day: int, slow: dict[str, float] | None = None, fingerprint: str = "fp-a",
         seed: int = 0, failed: Sequence[str] = (), torch: str = "2.13.0") -> Path:
    rng = np.random.default_rng(seed + day)
    slow = slow or {}
    path = root / f"night-{fingerprint}-{day:02d}"
    path.mkdir(parents=True)
    write_json(path / "run.json", {
        "schema_version": 1, "run_id": path.name, "status": "complete", "backend": "cuda", "timer": "direct",
        "level": "core", "identity": {"device_name": "NVIDIA H200", "torch": torch}, "options": {"cache": "cold"},
        "fingerprint": fingerprint, "started_at": f"2026-11-{day:02d}T02:00:00+00:00",
        "git_commit": f"{day:040d}",
    })
    for i, op in enumerate(CASES):
        status = "fail" if op in failed else "pass"
        append_record(path / "records.jsonl", _record(op, (i + 1) * (1 + slow.get(op, 0.0)), rng, status))
    return path


def _history(argv: Sequence[str], db: Path | None, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run `harness history ARGV` with HARNESS_HISTORY_DB=db (when db is given) added to ``env``."""
    parser = argparse.ArgumentParser(prog="harness")
    add_parsers(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    environ = dict(env or {}) | ({"HARNESS_HISTORY_DB": str(db)} if db is not None else {})
    code = dispatch(parser.parse_args(["history", *argv]), environ, out)
    assert code is not None
    return code, out.getvalue()


def _night(root: Path, db: Path, day: int, slow: dict[str, float] | None = None) -> tuple[int, str]:
    """One night of the workflow: add the run, then check it (exit 1 on a regression)."""
    run = _run(root, day, slow=slow)
    assert _history(["add", str(run)], db)[0] == 0
    try:
        return _history(["check", str(run), "--out", str(run / "history")], db)
    except GateFailed as failed:
        return failed.exit_code, failed.message


def test_nightly_sequence_flags_a_regression_only_when_it_persists(tmp_path: Path) -> None:
    db = tmp_path / "state" / "history.sqlite"
    for day in range(1, 6):
        code, text = _night(tmp_path, db, day)
        assert code == 0, text
    code, text = _night(tmp_path, db, 6, slow={"softmax": 0.12})
    assert code == 0
    assert "Suspect" in text and "`softmax[builtin-float16-4096x4096]`" in text
    code, text = _night(tmp_path, db, 7, slow={"softmax": 0.12})
    assert code == 1
    assert "1 regression(s)" in text
    md = (tmp_path / "night-fp-a-07" / "history" / "history-check.md").read_text()
    assert md.startswith("## History check: FAIL (1 regression(s))")
    assert "2 consecutive runs" in md


def test_nightly_sequence_flags_a_huge_slowdown_the_first_night(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    for day in range(1, 5):
        _night(tmp_path, db, day)
    code, text = _night(tmp_path, db, 5, slow={"gelu": 0.40})
    assert code == 1


def test_history_survives_reopening_and_keeps_fingerprints_apart(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    for day in range(1, 5):
        HistoryStore(db).add(_load(_run(tmp_path, day)))
        HistoryStore(db).add(_load(_run(tmp_path, day, fingerprint="fp-other", slow={"add": 1.0})))
    target = _load(_run(tmp_path, 9))
    earlier = HistoryStore(db).earlier_runs(target)
    assert len(earlier) == 4  # the other fingerprint's runs are not a baseline
    assert all(run["add[builtin-float16-4096x4096]"] == pytest.approx(2.0, rel=0.02) for run in earlier)


def test_a_part_of_a_split_run_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    run = _run(tmp_path, 1)
    info = json.loads((run / "run.json").read_text())
    info["shard"] = {"index": 1, "count": 2, "ops": [], "all_ops": [], "plan_digest": "d"}
    (run / "run.json").write_text(json.dumps(info))
    with pytest.raises(UsageError, match=r"is part 1/2 of a split run .* merge the parts first"):
        _history(["add", str(run)], db)
    assert not db.exists()
    info["shard"] = {**info["shard"], "count": 1}  # --shard 1/1: the whole run
    (run / "run.json").write_text(json.dumps(info))
    assert _history(["add", str(run)], db)[0] == 0


def test_adding_a_run_twice_replaces_it(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    run = _run(tmp_path, 1)
    assert "added" in _history(["add", str(run)], db)[1]
    assert "replaced" in _history(["add", str(run)], db)[1]
    _, text = _history(["export"], db)
    assert len(list(csv.DictReader(io.StringIO(text)))) == len(CASES)


def test_failed_cases_are_stored_but_never_make_a_baseline(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    for day in range(1, 5):
        _history(["add", str(_run(tmp_path, day, failed=["gelu"]))], db)
    code, text = _history(["check", str(_run(tmp_path, 5))], db)
    assert code == 0
    assert "no baseline 1" in text
    assert "1 case(s) not judged: no baseline yet (at most 0 earlier run(s)" in text  # gelu never passed
    assert "## History check: PASS\n" in text  # the other cases were judged


def test_a_check_with_too_few_runs_stored_says_nothing_was_judged_and_why(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    for day in (1, 2):
        _history(["add", str(_run(tmp_path, day))], db)
    code, text = _history(["check", str(_run(tmp_path, 3))], db)
    assert code == 0
    assert "## History check: PASS (nothing judged yet: no baseline)" in text
    assert f"{len(CASES)} case(s) not judged: no baseline yet (at most 2 earlier run(s)" in text
    assert "3 needed" in text and "harness history add" in text
    assert "Backend cpu" not in text
    cpu = _run(tmp_path, 4)
    info = json.loads((cpu / "run.json").read_text())
    (cpu / "run.json").write_text(json.dumps({**info, "backend": "cpu"}))
    assert "Backend cpu: the Triton interpreter's times say nothing of a device's speed" in _history(
        ["check", str(cpu)], db)[1]


def test_export_writes_each_case_trend_in_time_order(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    for day in (3, 1, 2):  # added out of order
        _history(["add", str(_run(tmp_path, day, slow={"add": day / 10}))], db)
    out = tmp_path / "trend.csv"
    _history(["export", "--case", "add[builtin-float16-4096x4096]", "--out", str(out)], db)
    rows = list(csv.DictReader(out.open()))
    assert [r["run_id"] for r in rows] == ["night-fp-a-01", "night-fp-a-02", "night-fp-a-03"]
    medians = [float(r["median_ms"]) for r in rows]
    assert medians == sorted(medians)
    assert rows[0]["git_commit"] == f"{1:040d}"


def test_history_check_junit_validates(tmp_path: Path) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    db = tmp_path / "history.sqlite"
    for day in range(1, 5):
        _night(tmp_path, db, day)
    _night(tmp_path, db, 5, slow={"gelu": 0.40})
    junit = tmp_path / "night-fp-a-05" / "history" / "history-check-junit.xml"
    schema = xmlschema.XMLSchema(str(XSD))
    schema.validate(str(junit))
    assert int(schema.to_dict(str(junit))["@failures"]) == 1


def test_checking_against_a_missing_database_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="history add"):
        _history(["check", str(_run(tmp_path, 1))], tmp_path / "none.sqlite")


def test_a_file_that_is_not_a_database_is_a_usage_error(tmp_path: Path) -> None:
    bogus = tmp_path / "history.sqlite"
    bogus.write_text("not sqlite at all, just text " * 100)
    with pytest.raises(UsageError, match="not a usable history database"):
        _history(["add", str(_run(tmp_path, 1))], bogus)



def test_the_database_is_resolved_by_the_options_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--db over HARNESS_HISTORY_DB over history-db in ./pyproject.toml (harness.options.resolve_history_db)."""
    (tmp_path / "pyproject.toml").write_text('[tool.harness]\nhistory-db = "project.sqlite"\n')
    monkeypatch.chdir(tmp_path)
    run = str(_run(tmp_path, 1))
    assert "in project.sqlite" in _history(["add", run], None)[1]
    assert f"in {tmp_path / 'env.sqlite'}" in _history(["add", run], tmp_path / "env.sqlite")[1]
    assert "in cli.sqlite" in _history(["add", run, "--db", "cli.sqlite"], tmp_path / "env.sqlite")[1]
    assert all((tmp_path / name).is_file() for name in ("project.sqlite", "env.sqlite", "cli.sqlite"))


def test_a_run_made_with_other_software_than_its_baseline_is_refused_unless_allowed(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    for day in range(1, 5):
        _night(tmp_path, db, day)
    upgraded = _run(tmp_path, 5, torch="2.14.0")
    _history(["add", str(upgraded)], db)
    with pytest.raises(UsageError) as refused:
        _history(["check", str(upgraded)], db)
    assert refused.value.exit_code == 2
    assert "torch '2.14.0' in this run, '2.13.0' in 4 earlier run(s)" in refused.value.message
    assert "--allow-mismatch" in refused.value.message
    code, text = _history(["check", str(upgraded), "--allow-mismatch"], db)
    assert code == 0
    assert text.splitlines()[2].startswith("- **warning**: baseline measured with other software")


def test_a_database_of_the_first_version_gains_the_software_column(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE runs (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE,
            fingerprint TEXT NOT NULL, backend TEXT, device_name TEXT, timer TEXT, level TEXT,
            git_commit TEXT, started_at TEXT NOT NULL, added_at TEXT NOT NULL);
        CREATE TABLE rows (run_seq INTEGER NOT NULL REFERENCES runs(seq) ON DELETE CASCADE,
            case_id TEXT NOT NULL, op TEXT NOT NULL, status TEXT NOT NULL, median_ms REAL, p10_ms REAL,
            p90_ms REAL, n INTEGER, torch_median_ms REAL, PRIMARY KEY (run_seq, case_id));
        INSERT INTO runs (run_id, fingerprint, started_at, added_at)
            VALUES ('old-night', 'fp-a', '2026-10-01T02:00:00+00:00', '2026-10-01T03:00:00+00:00');
        PRAGMA user_version = 1;
    """)
    conn.close()
    run = _run(tmp_path, 2)
    assert _history(["add", str(run)], db)[0] == 0
    assert HistoryStore(db).window_environments(_load(_run(tmp_path, 3)), 5) == [
        ("night-fp-a-02", {"driver": "", "flag_gems": "", "harness": "", "torch": "2.13.0", "triton": ""})]


def test_the_cause_of_a_case_that_did_not_pass_is_kept_and_exported(tmp_path: Path) -> None:
    import sqlite3

    from harness.results.schema import Measurement

    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE runs (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE,
            fingerprint TEXT NOT NULL, backend TEXT, device_name TEXT, timer TEXT, level TEXT,
            git_commit TEXT, started_at TEXT NOT NULL, added_at TEXT NOT NULL, environment TEXT);
        CREATE TABLE rows (run_seq INTEGER NOT NULL REFERENCES runs(seq) ON DELETE CASCADE,
            case_id TEXT NOT NULL, op TEXT NOT NULL, status TEXT NOT NULL, median_ms REAL, p10_ms REAL,
            p90_ms REAL, n INTEGER, torch_median_ms REAL, PRIMARY KEY (run_seq, case_id));
        PRAGMA user_version = 2;
    """)
    conn.close()
    run = _load(_run(tmp_path, 2))
    failed = Measurement(run_id=run.run_id, op="sdpa", provider="flaggems-suite", dtype="bfloat16", shape=(4,),
                         backend="cuda", device="0", timer="graph", status="skip",
                         message="torch side returned None: nothing to compare")
    HistoryStore(db).add(replace(run, records=(*run.records, failed)))
    rows = {r["case_id"]: r for r in HistoryStore(db).export()}
    assert rows[failed.case_id]["cause"] == "benchmark: torch side returned None: nothing to compare"
    assert all(r["cause"] is None for k, r in rows.items() if k != failed.case_id)


# software versions and the library commit of each night


def _suite_night(root: Path, day: int, ref: str, torch: str = "2.13.0") -> Path:
    """A night of a FlagGems suite run: run.json with the tree's ref and every software version."""
    import json

    path = _run(root, day, torch=torch)
    info = json.loads((path / "run.json").read_text())
    info["identity"].update(triton="3.7.1", driver="580.159.04", flag_gems={"version": "5.3.4", "vendor": "nvidia"})
    info.update(harness_version="0.1.0", suite={"ref": ref, "layout": "v5.3", "package": "flag_gems"})
    write_json(path / "run.json", info)
    return path


@pytest.mark.parametrize("ref,commit", [
    (f"v5.3.4 (v5.3.4-2-gf7c55cb, {'f7c55cb2fe1fb90fc713eafa6f63d7cbb73453a9'})",
     "f7c55cb2fe1fb90fc713eafa6f63d7cbb73453a9"),  # benchmarks/fetch_flaggems.sh's FLAGGEMS_REF
    ("v5.3.4-166-g1a2b3c4d", "1a2b3c4d"),  # git describe of a checkout
    ("5.3.5.dev166+g1a2b3c4.d20261201", "1a2b3c4"),  # setuptools-scm's version
    ("v5.3.4", ""),  # a tag alone names no commit
    ("5.3.4", ""),
])
def test_the_library_commit_is_read_from_the_suite_tree_ref(ref: str, commit: str) -> None:
    from harness.results.runinfo import library_commit

    assert library_commit({"run_id": "r", "suite": {"ref": ref}}) == commit
    assert library_commit({"run_id": "r"}) == ""  # built-in ops: no library tree


def test_each_night_keeps_its_versions_and_commits_and_export_gives_them(tmp_path: Path) -> None:
    import json

    db = tmp_path / "history.sqlite"
    _history(["add", str(_suite_night(tmp_path, 1, f"v5.3.4 (v5.3.4, {'a' * 40})"))], db)
    _history(["add", str(_suite_night(tmp_path, 2, f"v5.3.4 (v5.3.4-3-gbbbbbbb, {'b' * 40})", torch="2.14.0"))], db)
    rows = [r for r in HistoryStore(db).export() if str(r["case_id"]).startswith("softmax")]
    assert [r["library_commit"] for r in rows] == ["a" * 40, "b" * 40]
    assert [r["git_commit"] for r in rows] == [f"{1:040d}", f"{2:040d}"]
    assert json.loads(str(rows[1]["environment"])) == {
        "torch": "2.14.0", "triton": "3.7.1", "driver": "580.159.04", "flag_gems": "5.3.4", "harness": "0.1.0"}
    _, text = _history(["export"], db)
    written = list(csv.DictReader(io.StringIO(text)))
    assert written[0]["library_commit"] == "a" * 40 and json.loads(written[0]["environment"])["torch"] == "2.13.0"


def test_a_schema_3_database_gains_the_library_commit_and_keeps_its_runs(tmp_path: Path) -> None:
    import sqlite3

    from harness.compare.history import APPLICATION_ID

    db = tmp_path / "v3.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE runs (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE,
            fingerprint TEXT NOT NULL, backend TEXT, device_name TEXT, timer TEXT, level TEXT,
            git_commit TEXT, started_at TEXT NOT NULL, added_at TEXT NOT NULL, environment TEXT);
        CREATE TABLE rows (run_seq INTEGER NOT NULL REFERENCES runs(seq) ON DELETE CASCADE,
            case_id TEXT NOT NULL, op TEXT NOT NULL, status TEXT NOT NULL, median_ms REAL, p10_ms REAL,
            p90_ms REAL, n INTEGER, torch_median_ms REAL, cause TEXT, PRIMARY KEY (run_seq, case_id));
        INSERT INTO runs (run_id, fingerprint, git_commit, started_at, added_at, environment)
            VALUES ('old-night', 'fp-a', 'c0ffee', '2026-10-01T02:00:00+00:00', '2026-10-01T03:00:00+00:00',
                    '{"torch": "2.12.0"}');
        INSERT INTO rows (run_seq, case_id, op, status, median_ms) VALUES (1, 'softmax[x]', 'softmax', 'pass', 1.0);
        PRAGMA user_version = 3;
    """)
    conn.close()
    (old,) = HistoryStore(db).export()  # read as it is: no library commit recorded then
    assert old["library_commit"] is None and old["environment"] == '{"torch": "2.12.0"}' and old["git_commit"] == "c0ffee"
    _history(["add", str(_suite_night(tmp_path, 2, "v5.3.4-1-gabcdef0"))], db)
    commits = {r["run_id"]: r["library_commit"] for r in HistoryStore(db).export()}
    assert commits == {"old-night": None, "night-fp-a-02": "abcdef0"}
    # git_dirty (schema 5): unknown for the run the old file held and for a run.json that does not say
    assert {r["run_id"]: r["git_dirty"] for r in HistoryStore(db).export()} == {"old-night": None, "night-fp-a-02": None}
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


def test_a_run_of_a_changed_tree_is_stored_dirty_and_the_site_says_so(tmp_path: Path) -> None:
    import json

    from harness.results.html.history import judged_points

    db = tmp_path / "history.sqlite"
    clean, edited = _suite_night(tmp_path, 1, "v5.3.4"), _suite_night(tmp_path, 2, "v5.3.4")
    info = json.loads((edited / "run.json").read_text())
    info["git_dirty"] = True
    write_json(edited / "run.json", info)
    info = json.loads((clean / "run.json").read_text())
    info["git_dirty"] = False
    write_json(clean / "run.json", info)
    for night in (clean, edited):
        _history(["add", str(night)], db)
    rows = [r for r in HistoryStore(db).export() if str(r["case_id"]).startswith("softmax")]
    assert [(r["git_commit"], r["git_dirty"]) for r in rows] == [(f"{1:040d}", 0), (f"{2:040d}", 1)]
    _, text = _history(["export"], db)
    assert [r["git_dirty"] for r in csv.DictReader(io.StringIO(text)) if r["case_id"] == rows[0]["case_id"]] == ["0", "1"]
    shown = {p["run_id"]: p["commit_short"] for p in judged_points(rows)}
    assert shown == {rows[0]["run_id"]: f"{1:040d}"[:12], rows[1]["run_id"]: f"{2:040d}"[:12] + "+dirty"}
    # points from the CSV export: "0" and "" are clean
    as_text = [{**r, "git_dirty": v} for r, v in zip(rows, ("0", "1"), strict=True)]
    assert [p["commit_short"].endswith("+dirty") for p in judged_points(as_text)] == [False, True]
    assert not judged_points([{**rows[0], "git_dirty": ""}])[0]["commit_short"].endswith("+dirty")


def test_a_regression_names_the_library_commits_around_where_its_slowdown_began() -> None:
    from harness.results.trend import CaseCheck, RegressionRange, regression_ranges

    # the streak is counted whole: four slow runs in a row, the baseline not yet moved by them
    rules = HistoryRules(window=9, persist=2)
    check = assess_case("c", [1.0] * 6 + [1.1, 1.1, 1.1], 1.1, rules)
    assert (check.status, check.streak, check.began) == ("regression", 4, (5, 6))
    assert assess_case("c", [1.0] * 5, 1.3, RULES).began == (4, 5)  # flagged at once: slow tonight only
    # a night that did not measure the case is stepped over: good is the last night measured
    # and judged not slow, bad the first slow one after it
    assert assess_case("c", [1.0] * 5 + [None], 1.3, RULES).began == (4, 6)
    assert assess_case("c", [1.0] * 5 + [None, 1.1], 1.1, HistoryRules(persist=1)).began == (4, 6)
    # slow since before the history could judge it: no night before the slowdown is known
    assert assess_case("c", [1.0, 1.0, 1.0, 1.4], 1.4, RULES).began is None
    assert assess_case("c", [1.0] * 5, 1.04, RULES).began is None  # not a regression
    commits = ["a" * 40, "a" * 40, "b" * 40, "c" * 40, "c" * 40]  # the checked run's last
    ops = {"mm[x]": "mm", "mm[y]": "mm", "softmax[x]": "softmax", "odd[x]": "--ops-module"}
    checks = [CaseCheck("mm[x]", "regression", "", began=(2, 3)), CaseCheck("mm[y]", "regression", "", began=(2, 3)),
              CaseCheck("softmax[x]", "regression", "", began=(3, 4)), CaseCheck("add[x]", "suspect", "", streak=1),
              CaseCheck("sum[x]", "regression", ""), CaseCheck("exp[x]", "ok", ""),
              CaseCheck("odd[x]", "regression", "", began=(0, 3))]
    ranges, unnamed = regression_ranges(checks, ops, commits)
    assert ranges == [RegressionRange("b" * 40, "c" * 40, ("mm",), ("mm[x]", "mm[y]"))]
    assert len(unnamed) == 3
    assert unnamed[0].startswith("softmax[x]: the library commit (cccccccccccc) is the same before and after")
    assert unnamed[1].startswith("sum[x]: no run before the slowdown is judged not slow")
    assert unnamed[2] == "odd[x]: its op id is not one a command line can take as it is"
    # a short and a long id of one commit are one commit
    assert regression_ranges([checks[0]], ops, ["a", "a", "c" * 7, "c" * 40, "c"])[0] == []
    _, missing = regression_ranges([CaseCheck("mm[x]", "regression", "", began=(0, 1))], ops, ["a" * 40, ""])
    assert missing == ["mm[x]: no library commit recorded for the run where it began"]
    assert regression_ranges(checks, ops, ["", "", ""]) == ([], [])  # built-in ops: no library at all


def _gems_night(root: Path, day: int, commit: str, slow: dict[str, float] | None = None) -> Path:
    """A night of FlagGems at ``commit`` (its tree ref names it)."""
    import json

    path = _run(root, day, slow=slow)
    info = json.loads((path / "run.json").read_text())
    info["suite"] = {"ref": f"main ({commit[:7]}, {commit})", "layout": "v5.3", "package": "flag_gems"}
    write_json(path / "run.json", info)
    return path


def test_history_check_writes_the_range_to_bisect_and_the_command(tmp_path: Path) -> None:
    import json

    from harness.compare.history import RANGES_FILE, read_ranges

    db = tmp_path / "history.sqlite"
    good, bad = "1" * 40, "2" * 40
    for day in range(1, 6):
        _history(["add", str(_gems_night(tmp_path, day, good))], db)
    _history(["add", str(_gems_night(tmp_path, 6, bad, slow={"softmax": 0.15}))], db)
    night = _gems_night(tmp_path, 7, bad, slow={"softmax": 0.15})
    _history(["add", str(night)], db)
    with pytest.raises(GateFailed):
        _history(["check", str(night), "--out", str(night / "history")], db)
    (found,), left_out = read_ranges(night / "history" / RANGES_FILE)
    assert left_out == []
    assert (found.good, found.bad, found.ops) == (good, bad, ("softmax",))
    md = (night / "history" / "history-check.md").read_text()
    assert f"`harness bisect --repo LIBRARY_GIT --good {good} --bad {bad} -- --suite TREE --ops softmax`" in md
    # a quiet night writes the file too, with no range
    quiet = _gems_night(tmp_path, 8, bad)
    _history(["add", str(quiet)], db)
    _history(["check", str(quiet), "--out", str(quiet / "history")], db)
    assert read_ranges(quiet / "history" / RANGES_FILE) == ([], [])
    # what a workflow puts on a command line is checked: a bad range is left out, said so
    bad_file = tmp_path / "ranges.json"
    fine = {"good": good, "bad": bad, "ops": ["sub/test_x.py::add"], "cases": ["c"]}
    bad_file.write_text(json.dumps({"format_version": 1, "ranges": [
        {"good": "HEAD; rm -rf /", "bad": bad, "ops": ["x"]}, {"good": good, "bad": bad, "ops": ["mm $(id)"]},
        {"good": good, "bad": bad, "ops": ["add", "--ops-module", "os"]}, "not a range", fine]}))
    kept, left_out = read_ranges(bad_file)
    assert [r.ops for r in kept] == [("sub/test_x.py::add",)]
    assert [line.split(" left out: ")[1][:24] for line in left_out] == [
        "good and bad must be hex", "ops must be plain op ids", "ops must be plain op ids", "good and bad must be hex"]
    for data, problem in (({"format_version": 2}, "format_version 2"), ({"format_version": 1, "ranges": {}},
                                                                        "ranges: expected a list")):
        bad_file.write_text(json.dumps(data))
        with pytest.raises(UsageError, match=re.escape(problem)):
            read_ranges(bad_file)


def test_a_case_id_with_a_line_break_stays_in_its_row_of_history_check_md(tmp_path: Path) -> None:
    """history-check.md is printed in workflow logs: a case id must not start a line of its own
    (a line starting `::` would be a workflow command)."""
    from harness.compare.compare import load_run
    from harness.compare.render import render_history_markdown
    from harness.results.trend import CaseCheck

    check = CaseCheck("mm[x]\n::error::forged", "regression", "r\n::x", 1.0, 1.0, 1.3, 5, 1)
    md = render_history_markdown(load_run(_run(tmp_path, 1)), [check], RULES, "db")
    assert not any(line.startswith("::") for line in md.splitlines())
    assert "`mm[x] ::error::forged`" in md
