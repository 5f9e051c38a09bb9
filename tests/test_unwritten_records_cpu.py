"""A real run on the cpu backend whose op process cannot write its records whole (a full disk,
a file size limit, a quota; tests/data/short_write_plugin.py cuts the second record short): the
op is ERROR naming why in every attempt, the run exits 1, and no output counts the case whose record was lost as
passed. About 20 s on two cores (two attempts)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.harness_cli import run_harness

pytestmark = pytest.mark.slow


def test_a_record_written_in_part_fails_the_op_and_the_run(tmp_path: Path) -> None:
    (tmp_path / "shapes.yaml").write_text("add: [[4, 4], [8, 8]]\n")
    done = run_harness("run", "--backend", "cpu", "--ops", "add", "--dtypes", "fp32", "--shapes-file", "shapes.yaml",
                       "--warmup-ms", "1", "--rep-ms", "1", "--progress", "plain", "--out", "run",
                       "--extra-plugin", "tests.data.short_write_plugin", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    with open(tmp_path / "run" / "ops_status.csv", newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["status"] == "ERROR"
    assert "could not be written whole to records.jsonl" in row["notes"]
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [o["status"] for o in info["ops"]] == ["ERROR"]
    log = (tmp_path / "run" / "logs" / "add.log").read_text()
    assert "the record of add[builtin-float32-8x8] could not be written whole" in log
    summary = list(csv.DictReader((tmp_path / "run" / "summary.csv").open(newline="")))
    assert [r["shape"] for r in summary] == ["4x4"]  # the case whose record was cut short is not counted
