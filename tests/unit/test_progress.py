from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from harness.contract import CaseProgress, RunFiles
from harness.run.decide import OpOutcome
from harness.run.progress import PlainProgress, ProgressState, choose_display, make_progress


@pytest.mark.parametrize(
    "mode, tty, have_rich, kind, noted",
    [
        ("auto", True, True, "rich", False),
        ("auto", False, True, "plain", False),  # CI logs
        ("auto", True, False, "plain", False),
        ("plain", True, True, "plain", False),
        ("rich", False, True, "rich", False),
        ("rich", True, False, "plain", True),  # asked for, not installed: said so, then plain lines
    ],
)
def test_choose_display(mode: str, tty: bool, have_rich: bool, kind: str, noted: bool) -> None:
    chosen, note = choose_display(mode, tty, have_rich)
    assert chosen == kind
    assert bool(note) == noted
    if noted:
        assert "triton-op-harness[progress]" in note


def test_state_counts_done_failures_and_shows_each_device() -> None:
    state = ProgressState(total=4, devices=("0", "1"), started_at=100.0)
    state.start("0", "softmax", 1, now=100.0)
    state.start("1", "mm", 1, now=101.0)
    state.start("1", "mm", 2, now=105.0)  # a retry keeps the op's start time
    assert state.device_lines(now=112.0) == ["device 0: softmax (0:12)", "device 1: mm (0:11, attempt 2)"]
    state.finish(OpOutcome("mm", "1", "CRASH", 2, 11.0, 0, ("killed by SIGSEGV",)))
    state.finish(OpOutcome("softmax", "0", "PASS", 1, 13.0, 6))
    assert state.headline(now=3700.0 + 100.0) == "2/4 ops done, 1 failed, elapsed 1:01:40"
    assert state.device_lines(now=120.0) == ["device 0: idle", "device 1: idle"]


def test_plain_lines_for_ci_logs() -> None:
    out = io.StringIO()
    with PlainProgress(out, ProgressState(total=2, devices=("0",), started_at=0.0)) as progress:
        progress.attempt_started("0", "mm", 1)
        progress.attempt_started("0", "mm", 2)
        progress.op_finished(OpOutcome("mm", "0", "CRASH", 2, 3.0, 1, ("killed by SIGSEGV",)))
    lines = out.getvalue().splitlines()
    assert lines[0] == "[0/2] device 0: mm started"
    assert lines[1] == "[0/2] device 0: mm retry, attempt 2"
    assert lines[2] == "[1/2] device 0: mm CRASH, 1 row(s), 3.0s, 2 attempts (killed by SIGSEGV)"
    assert lines[3].startswith("1/2 ops done, 1 failed")


def test_auto_on_a_pipe_is_plain_and_counts_ops_done_before_a_resume() -> None:
    out = io.StringIO()
    progress = make_progress("auto", out, 3, ["0"], done=[OpOutcome("a", "0", "FAIL", 1)])
    assert isinstance(progress, PlainProgress)
    assert progress.state.done == 1 and progress.state.failed == 1


def test_rich_display_prints_finished_ops() -> None:
    pytest.importorskip("rich")
    out = io.StringIO()
    with make_progress("rich", out, 1, ["0", "1"]) as progress:
        progress.attempt_started("1", "gelu", 1)
        progress.op_finished(OpOutcome("gelu", "1", "TIMEOUT", 1, 30.0, 0, ("no exit within --op-timeout 30s",)))
    text = out.getvalue()
    assert "[1/1] device 1: gelu TIMEOUT" in text
    assert "1/1 ops done, 1 failed" in text


def test_the_running_ops_case_shows_on_the_device_line() -> None:
    state = ProgressState(total=2, devices=("0", "1"), started_at=0.0)
    state.start("0", "mm", 1, now=0.0)
    state.case_seen("0", CaseProgress(op="mm", case_id="mm[builtin-bfloat16-64x64x64]", done=2, total=29, pid=1))
    state.case_seen("1", CaseProgress(op="softmax", case_id="softmax[x]", done=0, total=6, pid=2))  # not running there
    assert state.device_lines(now=151.0) == ["device 0: mm (2:31, case 3/29 mm[builtin-bfloat16-64x64x64])",
                                              "device 1: idle"]
    state.start("0", "gelu", 1, now=160.0)  # the next op: the old case is gone
    assert state.device_lines(now=161.0)[0] == "device 0: gelu (0:01)"


def test_plain_heartbeat_repeats_each_running_ops_case_when_nothing_else_was_printed(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = PlainProgress(out, ProgressState(total=1, devices=("0",), started_at=0.0), tmp_path, heartbeat_s=0.0)
    progress.attempt_started("0", "mm", 1)
    CaseProgress(op="mm", case_id="mm[builtin-float16-8x8x8]", done=1, total=4, pid=os.getpid()).dump(
        RunFiles(tmp_path).progress("mm"))
    progress.ticker.read()
    progress.heartbeat()
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("[0/1] device 0: mm (") and last.endswith("case 2/4 mm[builtin-float16-8x8x8]), running")
    progress.heartbeat_s = 3600.0
    progress.heartbeat()  # printed a moment ago: nothing new
    assert out.getvalue().splitlines()[-1] == last and len(out.getvalue().splitlines()) == 2


def test_case_progress_survives_a_missing_or_damaged_file(tmp_path: Path) -> None:
    path = RunFiles(tmp_path).progress("x")
    assert CaseProgress.load(path) is None
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert CaseProgress.load(path) is None
