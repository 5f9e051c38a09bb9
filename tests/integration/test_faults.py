"""Fault injection with real processes on the CPU backend: ops that segfault, hang, raise, return
NaN, exit the interpreter and poison their context, loaded through --ops-module next to good
built-in ops; then a run stopped midway by SIGINT/SIGTERM and resumed.

They need no docker and no GPU, but they are slow (real hangs, real timeouts): marked integration,
they run once in CI, in `nox -s tests -- -m integration` (.ci/run).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.run.decide import STATUS_COLUMNS
from tests.procs import alive, wait_for

ROOT = Path(__file__).resolve().parents[2]
FAULT_OPS = ROOT / "tests" / "data" / "fault_ops.py"
XSD = ROOT / "tests" / "data" / "junit-10.xsd"

pytestmark = [pytest.mark.slow, pytest.mark.integration]

FAST = ("run", "--backend", "cpu", "--ops-module", str(FAULT_OPS), "--warmup-ms", "1", "--rep-ms", "1")


@pytest.fixture(scope="module")
def op_timeout() -> int:
    """An --op-timeout for the hanging op: long enough for a good op's process to start (the
    interpreter and the torch/Triton imports, measured here, on a machine that may be loaded),
    short enough to keep the test fast."""
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch, triton, pytest"], check=True, timeout=300)
    return int(10 + 4 * (time.monotonic() - start))


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env["PYTHONPATH"] = str(ROOT)
    env["FAULT_OPS_STATE"] = str(state)
    return env


def _harness(args: list[str], cwd: Path, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=_env(state),
                          capture_output=True, text=True, timeout=300)


def _start(args: list[str], cwd: Path, state: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, env=_env(state),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _stop_at_gate(args: list[str], cwd: Path, state: Path, sig: signal.Signals) -> tuple[int, str, int]:
    """Start `harness ARGS`, send ``sig`` once fault_gate waits at its gate; the harness's exit
    code, its output and the gate op's pid."""
    parent = _start(args, cwd, state)
    try:
        wait_for(lambda: any(state.glob("gate-*.pid")), "fault_gate to reach its waiting case")
        gate_pid = int(next(state.glob("gate-*.pid")).read_text())
        parent.send_signal(sig)
        output, _ = parent.communicate(timeout=60)
    finally:
        parent.kill()
    return parent.returncode, output, gate_pid


def _status(run: Path) -> dict[str, dict[str, str]]:
    return {row["op"]: row for row in csv.DictReader((run / "ops_status.csv").open())}


def _records(run: Path) -> list[dict[str, Any]]:  # parsed JSON: str, numbers, None, lists
    path = run / "records.jsonl"
    raw = path.read_bytes() if path.exists() else b""
    assert raw == b"" or raw.endswith(b"\n"), "records.jsonl ends in a torn line"
    return [json.loads(line) for line in raw.decode().splitlines()]


def _assert_files_whole(run: Path) -> None:
    leftovers = [p.name for p in run.rglob(".*") if p.is_file()]
    assert leftovers == [], f"temporary files left behind: {leftovers}"
    assert not (run / "run.lock").exists(), "run.lock outlived the run"
    _records(run)
    for name in ("run.json",):
        json.loads((run / name).read_text())
    header = (run / "ops_status.csv").read_text().splitlines()[0]
    assert header == ",".join(STATUS_COLUMNS)


def _held_children(run: Path) -> list[int]:
    """Pre-started op processes (harness.child --hold) of the run in ``run`` still alive."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, PermissionError, NotADirectoryError, ProcessLookupError):
            continue
        if b"--hold" in argv and any(str(run).encode() in a for a in argv) and alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def test_faulty_ops_cost_one_op_each_and_are_classified(tmp_path: Path, op_timeout: int) -> None:
    """The nine-op matrix, once, with pre-started op processes (the path with more moving parts;
    the resume tests below run with pre-start on and off)."""
    prestart = "on"
    state = tmp_path / "state"
    state.mkdir()
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("\n".join(f"{op}: [[4]]" for op in (
        "add", "fault_segv", "fault_hang", "fault_raise", "fault_nan", "fault_exit",
        "fault_poison", "fault_flaky", "fault_fp32_only")) + "\n")
    ops = tmp_path / "ops.txt"
    ops.write_text("# a nightly list: one good op among the broken ones\nadd\nfault_segv fault_hang\n"
                   "fault_raise\nfault_nan\nfault_exit\nfault_poison\nfault_flaky\nfault_fp32_only\n"
                   "builtin:softmax\n")
    dismiss = tmp_path / "dismiss.yaml"
    dismiss.write_text("builtin:softmax: too slow in the interpreter for this test\n")
    run = tmp_path / "run"
    done = _harness([*FAST, "--dtypes", "fp32", "fp16", "--ops-file", str(ops), "--dismiss", str(dismiss), "--shapes-file", str(shapes),
                     "--op-timeout", str(op_timeout), "--prestart", prestart, "--out", str(run)], tmp_path, state)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _held_children(run) == []
    status = _status(run)
    got = {op: (row["status"], row["attempts"], row["rows"]) for op, row in status.items()}
    assert got == {
        "add": ("PASS", "1", "2"),
        "fault_segv": ("CRASH", "2", "0"),  # retried once, then the same failure again: stopped
        "fault_hang": ("TIMEOUT", "1", "0"),  # never retried
        "fault_raise": ("ERROR", "1", "2"),
        "fault_nan": ("FAIL", "1", "2"),
        "fault_exit": ("CRASH", "2", "0"),
        "fault_poison": ("CRASH", "2", "2"),  # the retry ran the case the poisoned process never reached
        "fault_flaky": ("PASS", "2", "2"),  # crashed once, passed on the retry
        "fault_fp32_only": ("PASS", "1", "2"),
        "softmax": ("SKIP", "0", "0"),
    }
    assert "killed by SIGSEGV" in status["fault_segv"]["notes"]
    assert "same failure again" in status["fault_segv"]["notes"]
    assert f"--op-timeout {op_timeout}s" in status["fault_hang"]["notes"]
    assert "exited with code 3 before pytest finished" in status["fault_exit"]["notes"]
    assert "poisoned" in status["fault_poison"]["notes"]
    assert "attempt 1 CRASH: killed by SIGSEGV" in status["fault_flaky"]["notes"]
    assert status["softmax"]["notes"] == "dismissed: too slow in the interpreter for this test"

    # the hung op's stray process went with its process group
    stray = int((state / "hang-stray.pid").read_text())
    wait_for(lambda: not alive(stray), "the hung op's stray child to be gone", timeout=10)

    records = _records(run)
    by_case = {(r["op"], r["dtype"]): r for r in records}
    assert {by_case["add", d]["status"] for d in ("float32", "float16")} == {"pass"}
    assert by_case["fault_nan", "float32"]["status"] == "fail" and by_case["fault_nan", "float32"]["speedup"] is None
    assert "injected failure" in by_case["fault_raise", "float16"]["message"]
    assert by_case["fault_fp32_only", "float16"]["status"] == "skip"
    assert "does not support dtype float16" in by_case["fault_fp32_only", "float16"]["message"]
    assert len({r["case_id"] for r in records}) == len(records), "a case was recorded twice"
    assert len(list(csv.DictReader((run / "summary.csv").open()))) == len(records)

    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "complete-with-failures"
    assert info["dismissed"] == {"softmax": "too slow in the interpreter for this test"}

    junit = (run / "junit.xml").read_text()
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(str(run / "junit.xml"))
    # unreached cases are reported, with the signal or the timeout in the message
    assert 'name="fault_segv[builtin-float32-4]"' in junit and 'name="fault_segv[builtin-float16-4]"' in junit
    assert "op CRASH during this case after 2 attempts" in junit and "killed by SIGSEGV" in junit
    assert f"op TIMEOUT during this case: no exit within --op-timeout {op_timeout}s" in junit
    softmax = next(o for o in info["plan"] if o["op"] == "softmax")
    planned = len(softmax["shapes"]) * len(softmax["dtypes"])
    assert planned > 0 and junit.count('message="op skipped: dismissed: too slow') == planned
    _assert_files_whole(run)
    # with pre-start, every op after the first started held; retries start fresh
    logs = "".join(p.read_text() for p in (run / "logs").glob("*.log"))
    assert ("(pre-started)" in logs) == (prestart == "on")
    assert "attempt 2 on device cpu (pre-started)" not in logs


def _digest(lines: list[bytes]) -> str:
    return hashlib.sha256(b"".join(lines)).hexdigest()


def _lines_of(run: Path, op: str) -> list[bytes]:
    return [line for line in (run / "records.jsonl").read_bytes().splitlines(keepends=True)
            if json.loads(line)["op"] == op]


@pytest.mark.parametrize("prestart", ["off", "on"])
def test_sigint_midway_then_resume_finishes_without_redoing_anything(tmp_path: Path, prestart: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shapes = tmp_path / "shapes.yaml"
    # fault_gate: its one-element case passes at once, its two-element case waits for the gate
    shapes.write_text("add: [[64]]\nfault_gate: [[1], [2]]\nfault_nan: [[4]]\n")
    run = tmp_path / "run"
    args = [*FAST, "--dtypes", "fp32", "--shapes-file", str(shapes),
            "--ops", "add", "fault_gate", "fault_nan", "--prestart", prestart, "--out", str(run)]
    returncode, output, gate_pid = _stop_at_gate(args, tmp_path, state, signal.SIGINT)
    assert returncode == 130, output
    assert "--resume" in output
    assert not alive(gate_pid), "the op's process outlived the interrupted run"
    assert _held_children(run) == [], "a pre-started op process outlived the interrupted run"
    if prestart == "on":  # fault_nan was pre-started (two ahead, with the default depth 2), then cancelled
        assert "(pre-started)" in (run / "logs" / "fault_nan.log").read_text()

    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "interrupted"
    status = _status(run)
    assert [status[op]["status"] for op in ("add", "fault_gate", "fault_nan")] == ["PASS", "INTERRUPTED", "PENDING"]
    assert "not run: the run was interrupted first" in (run / "junit.xml").read_text()
    _assert_files_whole(run)
    before = (run / "records.jsonl").read_bytes()
    add_lines, gate_lines = _lines_of(run, "add"), _lines_of(run, "fault_gate")
    assert len(add_lines) == 1 and len(gate_lines) == 1  # the gate op's first case finished before the stop
    add_marker = (run / "done" / "add.json").read_bytes()
    add_log = (run / "logs" / "add.log").read_bytes()

    (state / "gate-open").write_text("")
    resumed = _harness(["run", "--resume", str(run)], tmp_path, state)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # fault_nan fails: the run's verdict
    assert "resuming (1 op(s) already complete)" in resumed.stdout

    after = (run / "records.jsonl").read_bytes()
    assert after.startswith(before), "records written before the interruption changed"
    assert _digest(_lines_of(run, "add")) == _digest(add_lines)
    assert _lines_of(run, "fault_gate")[0] == gate_lines[0]  # the partial op kept its finished case
    assert (run / "done" / "add.json").read_bytes() == add_marker
    assert (run / "logs" / "add.log").read_bytes() == add_log  # add was not run again
    records = _records(run)
    assert sorted(r["case_id"] for r in records) == sorted({r["case_id"] for r in records})
    assert [(r["op"], r["status"]) for r in records[2:]] == [("fault_gate", "pass"), ("fault_nan", "fail")]
    status = _status(run)
    assert [status[op]["status"] for op in ("add", "fault_gate", "fault_nan")] == ["PASS", "PASS", "FAIL"]
    assert json.loads((run / "run.json").read_text())["status"] == "complete-with-failures"
    _assert_files_whole(run)


def test_sigterm_stops_the_op_processes_and_leaves_a_resumable_run(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("fault_gate: [[2]]\n")
    run = tmp_path / "run"
    returncode, output, gate_pid = _stop_at_gate(
        [*FAST, "--dtypes", "fp32", "--shapes-file", str(shapes), "--ops", "fault_gate", "--out", str(run)],
        tmp_path, state, signal.SIGTERM)
    assert returncode == 130, output
    assert "SIGTERM" in output
    assert not alive(gate_pid)
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"
    assert _status(run)["fault_gate"]["status"] == "INTERRUPTED"
    assert not (run / "done").exists() or not any((run / "done").iterdir())
    _assert_files_whole(run)

    (state / "gate-open").write_text("")
    resumed = _harness(["run", "--resume", str(run)], tmp_path, state)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _status(run)["fault_gate"]["status"] == "PASS"
    assert [r["status"] for r in _records(run)] == ["pass"]


@pytest.mark.parametrize("op", ["fault_gate", "fault_hang"])
def test_a_sigkilled_harness_takes_its_op_processes_with_it_and_resumes(tmp_path: Path, op: str) -> None:
    """SIGKILL (or the OOM killer) gives the harness no chance to end its op processes: each
    one notices its parent is gone and ends its own group (harness.child.watch_parent). The
    run.lock left behind locks nothing, so the resume goes ahead, and removes it when done."""
    state = tmp_path / "state"
    state.mkdir()
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(f"{op}: [[2]]\n")
    run = tmp_path / "run"
    parent = _start([*FAST, "--dtypes", "fp32", "--shapes-file", str(shapes), "--ops", op, "--op-timeout", "120",
                     "--out", str(run)], tmp_path, state)
    pid_file = "gate-*.pid" if op == "fault_gate" else "hang-stray.pid"
    try:
        wait_for(lambda: any(p.read_text() for p in state.glob(pid_file)), f"{op} to start waiting")
        watched = [int(next(state.glob(pid_file)).read_text())]
        if op == "fault_hang":  # the stray's parent: the op's process
            watched.append(int(Path(f"/proc/{watched[0]}/stat").read_text().rsplit(")", 1)[1].split()[1]))
        assert all(alive(pid) for pid in watched)
        parent.kill()
        parent.wait(timeout=10)
        wait_for(lambda: not any(alive(pid) for pid in watched), "the op's processes to end with the harness",
                  timeout=10)
    finally:
        parent.kill()
        if parent.stdout is not None:
            parent.stdout.close()
    assert parent.returncode == -signal.SIGKILL
    assert (run / "run.lock").exists(), "a SIGKILLed run cannot remove its lock file"
    assert json.loads((run / "run.json").read_text())["status"] == "running"
    assert "the harness process is gone" in (run / "logs" / f"{op}.log").read_text()

    if op == "fault_hang":
        return  # it hangs again on resume; the gate op shows the resume
    (state / "gate-open").write_text("")
    resumed = _harness(["run", "--resume", str(run)], tmp_path, state)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _status(run)["fault_gate"]["status"] == "PASS"
    assert [r["status"] for r in _records(run)] == ["pass"]
    assert not (run / "run.lock").exists()
    _assert_files_whole(run)
