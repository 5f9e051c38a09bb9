"""`harness merge` with reruns: a later run of a part supersedes the earlier one op by op, a case
present in two parts is refused, and parts of different plans are refused (run directories made
here, nothing run)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import UsageError
from harness.results.schema import Fallback, Measurement, Timing
from harness.run.decide import OpOutcome
from harness.run.merge import merge_runs
from harness.run.rundir import write_marker

ALL_OPS = ("add", "mul")
OWNER = {"add": 1, "mul": 2}


def _record(op: str, status: str, run_id: str, size: int = 8) -> Measurement:
    timing = Timing.of([1.0, 1.1, 0.9]) if status == "pass" else None
    return Measurement(run_id=run_id, op=op, provider="builtin", dtype="float32", shape=(size,), backend="cpu",
                       device="0", timer="cpu", status=status, baseline=timing, candidate=timing,
                       speedup=1.0 if status == "pass" else None,
                       message="" if status == "pass" else "candidate does not match the reference")


def _part(root: Path, name: str, index: int, started: str, statuses: dict[str, str | None],
          digest: str = "d1", extra_records: tuple[Measurement, ...] = ()) -> Path:
    """A run directory of part ``index``/2: its ops' markers (status None: not ended) and records."""
    run = root / name
    run.mkdir()
    ops = [op for op in ALL_OPS if OWNER[op] == index]
    plan = [{"op": op, "device": "0", "dtypes": ["float32"], "shapes": [[8]], "provider": "builtin"} for op in ops]
    rows = []
    lines = []
    for op in ops:
        status = statuses.get(op)
        if status is None:
            continue
        outcome = OpOutcome(op, "0", status, attempts=1, elapsed_s=1.0, rows=1)
        write_marker(run, outcome)
        rows.append({**outcome.to_json(), "notes": ""})
        lines.append(_record(op, "pass" if status == "PASS" else "fail", name))
    lines.extend(extra_records)
    (run / "records.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in lines))
    info: dict[str, Any] = {
        "schema_version": 1, "run_id": name, "backend": "cpu", "timer": "cpu", "level": "core",
        "status": "complete" if all(statuses.get(op) == "PASS" for op in ops) else "complete-with-failures",
        "identity": {"device_name": "cpu"}, "options": {"cache": "warm", "provider": "builtin"},
        "git_commit": "abc", "devices": ["0"], "plan": plan, "ops": rows, "started_at": started,
        "finished_at": started,
        "shard": {"index": index, "count": 2, "ops": ops, "all_ops": list(ALL_OPS), "plan_digest": digest},
    }
    (run / "run.json").write_text(json.dumps(info))
    return run


def _status(out: Path) -> dict[str, str]:
    return {row["op"]: row["status"] for row in csv.DictReader((out / "ops_status.csv").open())}


def _cases(out: Path) -> list[tuple[str, str]]:
    return sorted((json.loads(x)["case_id"], json.loads(x)["status"])
                  for x in (out / "records.jsonl").read_text().splitlines() if x.strip())


def test_a_later_run_of_a_part_supersedes_the_earlier_one(tmp_path: Path) -> None:
    first = _part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "PASS"})
    failed = _part(tmp_path, "p2", 2, "2026-12-01T00:00:00+00:00", {"mul": "FAIL"})
    rerun = _part(tmp_path, "p2-again", 2, "2026-12-01T03:00:00+00:00", {"mul": "PASS"})
    out = tmp_path / "merged"
    # Given in any order: the rerun is the later one by its start time.
    info = merge_runs([rerun, first, failed], out, "night")
    assert _status(out) == {"add": "PASS", "mul": "PASS"}
    assert _cases(out) == [("add[builtin-float32-8]", "pass"), ("mul[builtin-float32-8]", "pass")]
    assert info["status"] == "complete"
    (line,) = info["superseded"]
    assert line.startswith("mul: FAIL in ") and "superseded by PASS in" in line and "p2-again" in line
    assert {m["run_id"]: m.get("rerun_of") for m in info["merged_from"]} == {"p1": None, "p2-again": None,
                                                                                "p2": "2/2"}


def test_an_op_a_rerun_did_not_end_is_kept_from_the_earlier_run(tmp_path: Path) -> None:
    first = _part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "FAIL"})
    cut_short = _part(tmp_path, "p1-again", 1, "2026-12-01T05:00:00+00:00", {"add": None})
    second = _part(tmp_path, "p2", 2, "2026-12-01T00:00:00+00:00", {"mul": "PASS"})
    info = merge_runs([first, cut_short, second], tmp_path / "merged", "night")
    assert _status(tmp_path / "merged") == {"add": "FAIL", "mul": "PASS"}
    assert info["status"] == "complete-with-failures" and "superseded" not in info


def test_two_runs_of_one_part_that_cannot_be_ordered_are_refused(tmp_path: Path) -> None:
    same = "2026-12-01T00:00:00+00:00"
    runs = [_part(tmp_path, "p1", 1, same, {"add": "PASS"}), _part(tmp_path, "p2", 2, same, {"mul": "FAIL"}),
            _part(tmp_path, "p2b", 2, same, {"mul": "PASS"})]
    with pytest.raises(UsageError) as err:
        merge_runs(runs, tmp_path / "merged")
    assert "run twice" in err.value.message and "cannot be told" in err.value.message
    assert not (tmp_path / "merged").exists()


def test_a_case_present_in_two_parts_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    stray = _record("mul", "pass", "p1")  # part 2's case, appended to part 1's records
    runs = [_part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "PASS"}, extra_records=(stray,)),
            _part(tmp_path, "p2", 2, "2026-12-01T00:00:00+00:00", {"mul": "PASS"})]
    with pytest.raises(UsageError) as err:
        merge_runs(runs, tmp_path / "merged")
    message = err.value.message
    assert "mul[builtin-float32-8] is present in two parts" in message and "p1" in message
    assert "\n" not in message
    assert not (tmp_path / "merged").exists()


def test_parts_of_different_plans_are_refused_in_one_line(tmp_path: Path) -> None:
    runs = [_part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "PASS"}),
            _part(tmp_path, "p2", 2, "2026-12-01T00:00:00+00:00", {"mul": "PASS"}, digest="d2")]
    with pytest.raises(UsageError) as err:
        merge_runs(runs, tmp_path / "merged")
    assert "different run plans" in err.value.message and "\n" not in err.value.message
    assert err.value.exit_code == 2
    assert not (tmp_path / "merged").exists()


def test_one_run_given_twice_is_still_refused(tmp_path: Path) -> None:
    first = _part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "PASS"})
    second = _part(tmp_path, "p2", 2, "2026-12-01T00:00:00+00:00", {"mul": "PASS"})
    with pytest.raises(UsageError) as err:
        merge_runs([first, second, second], tmp_path / "merged")
    assert "given twice" in err.value.message


def test_each_ops_log_comes_from_the_run_its_row_comes_from(tmp_path: Path) -> None:
    first = _part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "PASS"})
    failed = _part(tmp_path, "p2", 2, "2026-12-01T00:00:00+00:00", {"mul": "FAIL"})
    rerun = _part(tmp_path, "p2-again", 2, "2026-12-01T03:00:00+00:00", {"mul": "PASS"})
    for run, text in ((first, "add in p1"), (failed, "mul in p2"), (rerun, "mul in p2-again")):
        (run / "logs").mkdir()
        op = "add" if run is first else "mul"
        (run / "logs" / f"{op}.log").write_text(text)
    out = tmp_path / "merged"
    merge_runs([first, failed, rerun], out, "night")
    assert (out / "logs" / "add.log").read_text() == "add in p1"
    assert (out / "logs" / "mul.log").read_text() == "mul in p2-again"  # the rerun's row, the rerun's log
    assert sorted(p.name for p in (out / "logs").iterdir()) == ["add.log", "mul.log"]


def test_a_part_that_kept_no_logs_leaves_no_logs_folder(tmp_path: Path) -> None:
    runs = [_part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "PASS"}),
            _part(tmp_path, "p2", 2, "2026-12-01T00:00:00+00:00", {"mul": "PASS"})]
    merge_runs(runs, tmp_path / "merged", "night")
    assert not (tmp_path / "merged" / "logs").exists()


def _crashed_in_capture(root: Path, name: str, log: str) -> Path:
    """Part 2 of a run made before the capture mark: mul ended CRASH with cause unknown, its log as given."""
    run = _part(root, name, 2, "2026-12-01T00:00:00+00:00", {"mul": "CRASH"})
    crash = OpOutcome("mul", "0", "CRASH", attempts=2, elapsed_s=3.0, rows=1,
                      notes=("attempt 1 CRASH: killed by SIGABRT (log: logs/mul.log)",), cause="unknown",
                      evidence="the op's process ended early")
    write_marker(run, crash)
    info = json.loads((run / "run.json").read_text())
    info["ops"] = [{**crash.to_json(), "notes": crash.notes[0]}]
    (run / "run.json").write_text(json.dumps(info))
    (run / "logs").mkdir()
    (run / "logs" / "mul.log").write_text(log)
    return run


_FATAL = ("Fatal Python error: Aborted\n\nCurrent thread 0x7f56 (most recent call first):\n"
          '  File "/w/harness/child/timing/graph.py", line 233 in _capture_graph\n'
          '  File "/w/harness/child/latency_seam.py", line 514 in measure\n\nExtension modules: numpy\n')


def test_a_crash_whose_log_died_inside_a_capture_is_the_harnesss_in_the_merged_rows(tmp_path: Path) -> None:
    first = _part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "PASS"})
    crashed = _crashed_in_capture(tmp_path, "p2", "attempt 1\n" + _FATAL)
    merge_runs([first, crashed], tmp_path / "merged", "night")
    row = next(r for r in csv.DictReader((tmp_path / "merged" / "ops_status.csv").open()) if r["op"] == "mul")
    assert row["status"] == "CRASH" and row["cause"] == "harness"
    assert "inside the harness's graph capture" in row["evidence"]
    assert row["notes"].endswith("its log ends in a fatal error while the harness captured a graph of the op's calls")


def test_a_crash_whose_log_died_elsewhere_keeps_its_cause(tmp_path: Path) -> None:
    first = _part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "PASS"})
    crashed = _crashed_in_capture(tmp_path, "p2", "attempt 1\n" + _FATAL.replace("_capture_graph", "run_case"))
    merge_runs([first, crashed], tmp_path / "merged", "night")
    row = next(r for r in csv.DictReader((tmp_path / "merged" / "ops_status.csv").open()) if r["op"] == "mul")
    assert (row["status"], row["cause"]) == ("CRASH", "unknown")


def test_an_op_a_rerun_did_not_end_keeps_the_earlier_runs_log(tmp_path: Path) -> None:
    first = _part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "FAIL"})
    cut_short = _part(tmp_path, "p1-again", 1, "2026-12-01T05:00:00+00:00", {"add": None})
    second = _part(tmp_path, "p2", 2, "2026-12-01T00:00:00+00:00", {"mul": "PASS"})
    for run, text in ((first, "add failed in p1"), (cut_short, "add cut short in p1-again")):
        (run / "logs").mkdir()
        (run / "logs" / "add.log").write_text(text)
    merge_runs([first, cut_short, second], tmp_path / "merged", "night")
    assert _status(tmp_path / "merged")["add"] == "FAIL"
    assert (tmp_path / "merged" / "logs" / "add.log").read_text() == "add failed in p1"  # its row's run


def test_the_merged_ops_status_repeats_the_run_facts_on_every_row_as_a_run_writes_them(tmp_path: Path) -> None:
    """backend, timer and out_dir on every row (the merged run's own directory, not a part's), and
    the notes a run adds from its records (rows timed without capture)."""
    fallback = Measurement(run_id="p1", op="add", provider="builtin", dtype="float32", shape=(16,), backend="cpu",
                           device="0", timer="cpu", status="pass", baseline=Timing.of([1.0, 1.1, 0.9]),
                           candidate=Timing.of([1.0, 1.1, 0.9]), speedup=1.0,
                           fallback=Fallback("capture", "refused"))
    first = _part(tmp_path, "p1", 1, "2026-12-01T00:00:00+00:00", {"add": "PASS"}, extra_records=(fallback,))
    second = _part(tmp_path, "p2", 2, "2026-12-01T00:00:00+00:00", {"mul": "PASS"})
    out = tmp_path / "merged"
    merge_runs([first, second], out, "night")
    rows = {row["op"]: row for row in csv.DictReader((out / "ops_status.csv").open())}
    assert {(r["backend"], r["timer"], r["out_dir"]) for r in rows.values()} == {("cpu", "cpu", str(out))}
    assert "1 row(s) timed without capture" in rows["add"]["notes"] and not rows["mul"]["notes"]
