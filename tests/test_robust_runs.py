"""Real runs on the cpu backend with the ops of tests/data/robust_ops.py (issue 17): whatever an
op does (changes directory, leaves a process in a session of its own, raises with control
characters or lone surrogates in its message, returns float64, None or NaN, crashes), every
result is recorded, true and readable in every output format; and a closed stdout never fails a
run. About 15 s on two cores (three op processes, then one more run)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.procs import alive

ROOT = Path(__file__).resolve().parents[1]
ROBUST_OPS = ROOT / "tests" / "data" / "robust_ops.py"
XSD = ROOT / "tests" / "data" / "junit-10.xsd"
SHAPES = ("rb_mixed: [[1, 4], [2, 4], [3, 4], [4, 4], [5, 4], [6, 4], [7, 4], [8, 4]]\n"
          "rb_setsid: [[4, 4]]\nrb_hang_exit: [[4, 4]]\nrb_crash_fp32: [[4, 4]]\n")
FAST = ("--backend", "cpu", "--warmup-ms", "1", "--rep-ms", "1", "--progress", "plain")

pytestmark = pytest.mark.slow


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(PYTHONPATH=str(ROOT), ROBUST_OPS_STATE=str(state))
    return env


def _harness(args: list[str], cwd: Path, state: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=_env(state),
                          capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def robust_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str], Path]:
    """One run of rb_mixed, rb_setsid and rb_crash_fp32 (float32 first, so the crash comes before
    the float16 case the op does not support), plus a dismissed add."""
    work = tmp_path_factory.mktemp("robust")
    state = work / "state"
    state.mkdir()
    (work / "shapes.yaml").write_text(SHAPES)
    (work / "dismiss.yaml").write_text("add: not needed here\n")
    run = work / "run"
    done = _harness(["run", *FAST, "--ops-module", str(ROBUST_OPS), "--shapes-file", "shapes.yaml",
                     "--ops", "rb_mixed", "rb_setsid", "rb_crash_fp32", "add", "--dismiss", "dismiss.yaml",
                     "--dtypes", "float32,float16", "--out", "run"], work, state)
    return run, done, state


def _status(run: Path) -> dict[str, dict[str, str]]:
    return {row["op"]: row for row in csv.DictReader((run / "ops_status.csv").open())}


def _summary(run: Path) -> dict[str, dict[str, str]]:
    return {row["case_id"]: row for row in csv.DictReader((run / "summary.csv").open(encoding="utf-8"))}


def test_the_run_ends_and_says_what_failed(robust_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    run, done, _ = robust_run
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "complete-with-failures"
    status = {op: row["status"] for op, row in _status(run).items()}
    assert status == {"rb_mixed": "ERROR", "rb_setsid": "PASS", "rb_crash_fp32": "CRASH", "add": "SKIP"}


def test_every_output_parses_whatever_the_messages_hold(
        robust_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    """Issue 17: control characters made junit.xml ill-formed; a lone surrogate lost every output."""
    run, _, _ = robust_run
    junit = (run / "junit.xml").read_text(encoding="utf-8")
    root = ET.fromstring(junit)
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(str(run / "junit.xml"))
    planned = sum(len(o["shapes"]) * len(o["dtypes"]) for o in json.loads((run / "run.json").read_text())["plan"])
    assert len(root.findall(".//testcase")) == planned  # every planned case, none dropped
    for name in ("run.json", *(str(p.relative_to(run)) for p in (run / "done").glob("*.json"))):
        json.loads((run / name).read_text(encoding="utf-8"))
    for line in (run / "records.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line)
    for name in ("summary.csv", "ops_status.csv"):
        text = (run / name).read_text(encoding="utf-8")
        assert "\x00" not in text
        list(csv.reader(io.StringIO(text)))
    (run / "report.md").read_text(encoding="utf-8")
    rows = _summary(run)
    ctrl = rows["rb_mixed[builtin-float32-2x4]"]
    assert ctrl["status"] == "error" and "\\x1b[31mcompiler error" in ctrl["message"] and "\\x00" in ctrl["message"]
    surrogate = rows["rb_mixed[builtin-float32-3x4]"]
    assert "kernel-\\udcff\\udcfe.py" in surrogate["message"]
    assert "kernel-\\udcff\\udcfe.py" in junit and "\\x1b[31mcompiler error" in junit


def test_an_op_that_changes_directory_keeps_its_records(
        robust_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    run, _, _ = robust_run
    rows = _summary(run)
    # the first case changed directory; it and every later case still have their record
    assert rows["rb_mixed[builtin-float32-1x4]"]["status"] == "pass"
    assert sum(1 for case in rows if case.startswith("rb_mixed[")) == 16


def test_wrong_results_say_what_is_wrong(robust_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    rows = _summary(robust_run[0])
    f64 = rows["rb_mixed[builtin-float32-4x4]"]
    assert f64["status"] == "fail" and "output dtype differs: candidate float64, baseline float32" in f64["message"]
    none = rows["rb_mixed[builtin-float32-5x4]"]
    assert none["status"] == "error" and "the candidate returned NoneType, not a tensor" in none["message"]
    nan = rows["rb_mixed[builtin-float32-6x4]"]
    assert nan["status"] == "fail" and "NaN in the output" in nan["message"] and "max abs err 0" not in nan["message"]
    not_tuple = rows["rb_mixed[builtin-float32-7x4]"]
    assert not_tuple["status"] == "error" and "make_inputs returned Tensor, not a tuple" in not_tuple["message"]


def test_processes_left_in_other_sessions_are_ended_and_named(
        robust_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    run, _, state = robust_run
    stray = int((state / "setsid.pid").read_text())
    assert not alive(stray)
    note = _status(run)["rb_setsid"]["notes"]
    assert f"left processes running outside its process group; ended them: pid {stray} (sleep 600)" in note


def test_a_crashed_op_points_at_its_log_and_unreached_cases_are_true(
        robust_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    run, _, _ = robust_run
    assert "(log: logs/rb_crash_fp32.log)" in _status(run)["rb_crash_fp32"]["notes"]
    report = (run / "report.md").read_text()
    # the unsupported dtype is a skip even though the op never reached it; the shape column holds a shape
    assert "| rb_crash_fp32 | builtin | float16 | 4x4 | | SKIP (not run) |" in report
    assert "| rb_crash_fp32 | builtin | float32 | 4x4 | | NOT RUN |" in report
    junit = ET.parse(run / "junit.xml").getroot()
    skipped = junit.find(".//testcase[@name='rb_crash_fp32[builtin-float16-4x4]']/skipped")
    assert skipped is not None and "does not support dtype float16" in (skipped.get("message") or "")


def test_markers_and_run_json_keep_numbers_as_numbers_and_dismissed_ops_have_one(
        robust_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    run, _, _ = robust_run
    marker = json.loads((run / "done" / "add.json").read_text())
    assert marker["status"] == "SKIP" and marker["notes"] == ["dismissed: not needed here"]
    for row in [json.loads(p.read_text()) for p in (run / "done").glob("*.json")] + json.loads(
            (run / "run.json").read_text())["ops"]:
        assert isinstance(row["attempts"], int) and isinstance(row["rows"], int)
        assert isinstance(row["elapsed_s"], int | float)


def test_harness_report_reproduces_every_output(
        robust_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    """Issue 17: `report --format junit` dropped op_status and so did not reproduce junit.xml."""
    run, _, state = robust_run
    for fmt, name in (("junit", "junit.xml"), ("md", "report.md"), ("csv", "summary.csv")):
        done = _harness(["report", str(run), "--format", fmt], run.parent, state)
        assert done.returncode == 0, done.stderr
        assert done.stdout == (run / name).read_text(encoding="utf-8"), name


def test_resume_and_report_read_a_run_whose_messages_held_anything(
        robust_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    """Issue 17: `--resume` and `harness report` crashed on a run with a lone surrogate in a message."""
    run, _, state = robust_run
    junit = (run / "junit.xml").read_text(encoding="utf-8")
    done = _harness(["run", "--resume", str(run), "--progress", "plain"], run.parent, state)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr  # the same failures, ended again
    assert json.loads((run / "run.json").read_text())["status"] == "complete-with-failures"
    assert (run / "junit.xml").read_text(encoding="utf-8") == junit


def test_a_closed_stdout_or_stderr_never_fails_the_run(tmp_path: Path) -> None:
    """`harness run ... | head -1`: the reader goes away after one line; the run still ends,
    complete, with every file."""
    state = tmp_path / "state"
    state.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", *FAST, "--ops", "add", "--dtypes", "fp32",
                             "--out", "run"], cwd=tmp_path, env=_env(state), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    proc.stderr.close()
    assert proc.wait(timeout=300) == 0
    run = tmp_path / "run"
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
    for name in ("summary.csv", "junit.xml", "report.md", "ops_status.csv", "records.jsonl"):
        assert (run / name).is_file(), name
