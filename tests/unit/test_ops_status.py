"""ops_status.csv's run columns (backend, timer, return code, output folder) and the per-op counts
its notes add up from the records (rows timed without capture, replay misses), after the old
columns, which keep their order."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

from harness.results.schema import Fallback
from harness.results.store import RecordsFile
from harness.run.decide import STATUS_COLUMNS, OpOutcome, StatusFacts, record_counts, render_status
from harness.run.outputs import OUTPUT_FILES, render_outputs
from tests.html_data import record

OLD_COLUMNS = ("op", "device", "status", "attempts", "elapsed_s", "rows", "notes", "compile_s", "cause", "evidence")


def _rows(text: str) -> dict[str, dict[str, str]]:
    return {row["op"]: row for row in csv.DictReader(io.StringIO(text))}


def test_the_old_columns_come_first_in_their_order() -> None:
    assert STATUS_COLUMNS[:len(OLD_COLUMNS)] == OLD_COLUMNS
    assert STATUS_COLUMNS[len(OLD_COLUMNS):] == ("backend", "timer", "returncode", "out_dir")


def test_every_row_repeats_the_run_facts_and_its_own_return_code() -> None:
    outcomes = [OpOutcome("add", "0", "PASS", 1, 1.0, 4, returncode=0),
                OpOutcome("mm", "1", "CRASH", 2, 3.0, 0, returncode=-11), OpOutcome("never", "0")]
    rows = _rows(render_status(outcomes, StatusFacts("cuda", "graph", "20261203T000000Z-cuda-ab12")))
    assert {r["backend"] for r in rows.values()} == {"cuda"}
    assert {r["timer"] for r in rows.values()} == {"graph"}
    assert {r["out_dir"] for r in rows.values()} == {"20261203T000000Z-cuda-ab12"}
    assert [rows[op]["returncode"] for op in ("add", "mm", "never")] == ["0", "-11", ""]


def test_the_return_code_survives_the_completion_marker() -> None:
    outcome = OpOutcome("mm", "1", "CRASH", 2, 3.0, 0, returncode=-11)
    assert OpOutcome.from_json(outcome.to_json()) == outcome
    older = {k: v for k, v in outcome.to_json().items() if k != "returncode"}  # a marker of an older harness
    assert OpOutcome.from_json(older).returncode is None


def test_notes_add_up_rows_timed_without_capture_and_replay_misses() -> None:
    fell_back = Fallback(phase="capture", reason="capture refused")
    records = [record(op="mm", shape=(s, s), fallback=fell_back) for s in (8, 16)]
    records += [replace(record(op="mm", shape=(32, 32)), autotune="replay-miss")]
    records += [replace(record(op="add", shape=(s,)), autotune="replay-miss") for s in (4, 8, 12)]
    records += [record(op="softmax")]
    counts = record_counts(records)
    assert counts == {"mm": ("2 row(s) timed without capture", "1 replay miss(es)"),
                      "add": ("3 replay miss(es)",)}
    outcomes = [OpOutcome("mm", "0", "PASS", 1, 1.0, 3, ("attempt 1 PASS",)), OpOutcome("add", "0", "PASS"),
                OpOutcome("softmax", "0", "PASS")]
    rows = _rows(render_status(outcomes, counts=counts))
    assert rows["mm"]["notes"] == "attempt 1 PASS; 2 row(s) timed without capture; 1 replay miss(es)"
    assert rows["add"]["notes"] == "3 replay miss(es)"
    assert rows["softmax"]["notes"] == ""


def test_the_rendered_run_fills_the_columns_from_run_json_and_the_records() -> None:
    records = [replace(record(op="mm"), autotune="replay-miss")]
    info = {"backend": "cuda", "timer": "graph", "run_id": "r1", "level": "core", "identity": {}, "ops": [],
            "options": {"reports_dir": "reports", "out": None}}
    text = render_outputs([], info, RecordsFile(Path("records.jsonl"), records=tuple(records)), [OpOutcome("mm", "0", "PASS", 1, 1.0, 1,
                                                                                     returncode=0)])
    (row,) = _rows(text[OUTPUT_FILES["status"]]).values()
    assert (row["backend"], row["timer"], row["out_dir"], row["returncode"]) == ("cuda", "graph", "reports/r1", "0")
    assert row["notes"] == "1 replay miss(es)"
    given = render_outputs([], {**info, "options": {"out": "nightly/part-1"}}, RecordsFile(Path("r")),
                           [OpOutcome("mm", "0", "PASS")])
    (row,) = _rows(given[OUTPUT_FILES["status"]]).values()
    assert row["out_dir"] == "nightly/part-1"
