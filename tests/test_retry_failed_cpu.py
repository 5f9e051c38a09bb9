"""`harness run --resume RUN --retry-failed` on the cpu backend: the ops that did not pass run
again from their first case (their records replaced, not added to), the ops that passed are left
as they were; a plain --resume runs none of them; --retry-failed without --resume is refused."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from harness.contract import RunFiles
from harness.run.decide import OpOutcome
from harness.run.rundir import reopen_failed
from tests.harness_cli import run_harness
from tests.html_data import record

ROOT = Path(__file__).resolve().parents[1]
FAULT_OPS = ROOT / "tests" / "data" / "fault_ops.py"

# An op that fails while $MEND_OPS_STATE/broken exists: a fix made between a run and its retry.
MEND_OPS = '''
import math, os
from pathlib import Path
import torch
from harness.ops.base import OpSpec

def _candidate(x):
    if (Path(os.environ["MEND_OPS_STATE"]) / "broken").exists():
        raise RuntimeError("not fixed yet")
    return x * 2

HARNESS_OPS = [OpSpec(id="mend", baseline=lambda x: x * 2, candidate=_candidate,
                      make_inputs=lambda shape, dtype, gen, device: (torch.randn(shape, dtype=dtype, generator=gen),),
                      bytes_moved=lambda shape, size: 2 * math.prod(shape) * size, flops=lambda shape: math.prod(shape),
                      description="fails until it is fixed", dtypes=("float32",))]
'''


def _status(run: Path) -> dict[str, dict[str, str]]:
    return {row["op"]: row for row in csv.DictReader((run / "ops_status.csv").open())}


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def _lines(run: Path, op: str) -> list[str]:
    return [line for line in (run / "records.jsonl").read_text().splitlines() if json.loads(line)["op"] == op]


@pytest.mark.slow
def test_retry_failed_runs_again_exactly_the_ops_that_did_not_pass(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "broken").write_text("")
    (tmp_path / "mend_ops.py").write_text(MEND_OPS)
    (tmp_path / "shapes.yaml").write_text("add: [[4]]\nfault_raise: [[4], [8]]\nmend: [[4]]\n")
    env = {"MEND_OPS_STATE": str(state)}
    run = tmp_path / "run"
    first = run_harness("run", "--backend", "cpu", "--ops-module", str(FAULT_OPS), "--ops-module", "mend_ops.py",
                        "--ops", "add", "fault_raise", "mend", "--shapes-file", "shapes.yaml", "--dtypes", "float32",
                        "--warmup-ms", "1", "--rep-ms", "1", "--progress", "plain", "--out", "run",
                        cwd=tmp_path, env=env, timeout=300)
    assert first.returncode == 1, first.stdout + first.stderr
    before = {op: row["status"] for op, row in _status(run).items()}
    assert before["add"] == "PASS" and before["fault_raise"] != "PASS" and before["mend"] != "PASS", before
    add_lines = _lines(run, "add")
    raise_count = len(_lines(run, "fault_raise"))
    add_marker = RunFiles(run).marker("add").read_bytes()
    raise_log = len((run / "logs" / "fault_raise.log").read_bytes())

    plain = run_harness("run", "--resume", "run", "--progress", "plain", cwd=tmp_path, env=env, timeout=300)
    assert plain.returncode == 1, plain.stdout + plain.stderr
    assert len((run / "logs" / "fault_raise.log").read_bytes()) == raise_log  # a plain resume runs none again
    assert _status(run)["mend"]["status"] == before["mend"]

    (state / "broken").unlink()  # the fix
    again = run_harness("run", "--resume", "run", "--retry-failed", "--progress", "plain",
                        cwd=tmp_path, env=env, timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr  # fault_raise still fails
    assert "running again 2 op(s) that did not pass: fault_raise, mend" in again.stdout
    after = _status(run)
    assert after["mend"]["status"] == "PASS"
    assert after["fault_raise"]["status"] == before["fault_raise"]
    assert after["add"]["status"] == "PASS"
    assert len((run / "logs" / "fault_raise.log").read_bytes()) > raise_log  # it ran again
    assert len(_lines(run, "fault_raise")) == raise_count  # its records replaced, not duplicated
    assert _lines(run, "add") == add_lines  # the op that passed is left as it was
    assert RunFiles(run).marker("add").read_bytes() == add_marker
    assert [r["status"] for r in _records(run) if r["op"] == "mend"] == ["pass"]


def test_reopen_failed_drops_the_failed_ops_records_and_markers_only(tmp_path: Path) -> None:
    files = RunFiles(tmp_path)
    (tmp_path / "done").mkdir()
    done = {op: OpOutcome(op, "cpu", status) for op, status in
            (("a", "PASS"), ("b", "FAIL"), ("c", "CRASH"), ("d", "SKIP"), ("e", "TIMEOUT"), ("f", "ERROR"))}
    for outcome in done.values():
        files.marker(outcome.op).write_text(json.dumps(outcome.to_json()))
    lines = [json.dumps(record(op=op).to_dict()) for op in "abcdef"]
    files.records.write_text("\n".join([*lines[:3], "not json at all", *lines[3:]]) + "\n")
    kept = reopen_failed(tmp_path, done)
    assert sorted(kept) == ["a", "d"]
    assert sorted(p.stem for p in (tmp_path / "done").glob("*.json")) == ["a", "d"]
    assert files.records.read_text().splitlines() == [lines[0], "not json at all", lines[3]]


def test_reopen_failed_leaves_a_run_without_failures_untouched(tmp_path: Path) -> None:
    files = RunFiles(tmp_path)
    files.records.write_bytes(b"torn")
    done = {"a": OpOutcome("a", "cpu", "PASS")}
    assert reopen_failed(tmp_path, done) == done
    assert files.records.read_bytes() == b"torn"
