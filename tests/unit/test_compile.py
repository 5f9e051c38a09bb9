"""`harness compile`: targets, tracing a built-in op on meta tensors, the gate's rules, and its
workers run as op processes are (a session each, a timeout per variant, the group and strays
ended), with a stand-in worker (tests/data/compile_worker_stub.py) so no compiler runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import harness.compile.cli
from harness.compile.cli import CompileInterrupted, _run_tasks, _worker_env
from harness.compile.gate import Thresholds, judge, render_findings
from harness.compile.targets import Target, parse_targets
from harness.contract import op_file_stem
from harness.errors import UsageError
from tests.procs import alive, wait_for

STUB = Path(__file__).resolve().parents[1] / "data" / "compile_worker_stub.py"


def test_targets_parse_with_their_warp_size() -> None:
    assert parse_targets("cuda:80, hip:gfx942,rocm:gfx1100,cuda:80") == (
        Target("cuda", 80, 32), Target("hip", "gfx942", 64), Target("hip", "gfx1100", 32))
    assert Target("cuda", 90, 32).shared_limit == 227 * 1024
    for bad in ("cuda:sm90", "musa:mp31", "hip:942", ""):
        with pytest.raises(UsageError):
            parse_targets(bad)


def test_mm_traces_to_one_launch_per_autotune_config_with_its_heuristics() -> None:
    from harness.compile.kernels import bind, expand, trace_case
    from harness.ops.registry import load_op

    mm = load_op("mm", ())
    (launch,) = trace_case(mm, (4096, 4096, 4096), "float16")
    variants = expand(launch)
    assert len(variants) == len(launch.obj.configs) == 9
    first = variants[0]
    assert first.kernel == "_mm_kernel" and first.config.startswith("config 1 of 9: BLOCK_M=128, BLOCK_N=256")
    assert (first.kwargs["EVEN_M"], first.kwargs["EVEN_N"], first.kwargs["EVEN_K"]) == (True, True, True)
    assert first.kwargs["num_warps"] == 8 and first.kwargs["num_stages"] == 3
    odd = expand(trace_case(mm, (33, 17, 24), "float16")[0])[0]
    assert odd.kwargs["EVEN_M"] is False  # the shape's specialisation, for the same config
    bound = bind(first, Target("hip", "gfx942", 64))
    assert bound.signature["a_ptr"] == "*fp16" and "BLOCK_M=128" in bound.label and "w8 s3" in bound.label
    assert bind(first, Target("hip", "gfx942", 64)).vid == bound.vid != bind(odd, Target("hip", "gfx942", 64)).vid


def _variant(vid: str, ok: bool = True, **ir: int) -> dict[str, object]:
    return {"op": "mm", "variant": vid, "target": "cuda:90", "label": f"k[{vid}]", "ok": ok,
            "error": "" if ok else "CompilationError: boom", "ir": ir, "fits": ir.get("shared", 0) <= 1000}


def test_the_gate_fails_on_a_kernel_that_stops_compiling_or_grows() -> None:
    base = {"variants": [_variant("a", regs=100, spills=0, shared=500), _variant("b", regs=100, spills=2, shared=0),
                         _variant("c"), _variant("d", regs=100), _variant("e", ok=False), _variant("gone")]}
    head = {"variants": [_variant("a", regs=112, spills=1, shared=2000), _variant("b", regs=103, spills=2, shared=0),
                         _variant("c", ok=False), _variant("d", regs=105), _variant("e"), _variant("new")]}
    findings = judge(base, head, Thresholds(pct=10, regs_abs=4, shared_abs=1024))
    bad = {(f.label, f.kind) for f in findings if f.regression}
    assert bad == {("k[a]", "registers"), ("k[a]", "spills"), ("k[a]", "shared"), ("k[a]", "no-longer-fits"),
                   ("k[c]", "stops-compiling")}  # b: +3 regs, d: +5% are under the thresholds
    info = {(f.label, f.kind) for f in findings if not f.regression}
    assert info == {("k[e]", "fixed"), ("k[new]", "new"), ("k[gone]", "gone")}
    text = render_findings(findings, "base", "head", Thresholds())
    assert text.startswith("# Compile gate: FAIL") and "| REGRESSION | stops-compiling | mm | cuda:90 | k[c]" in text
    assert judge(base, base) == []
    assert render_findings([], "b", "h", Thresholds()).startswith("# Compile gate: pass")


# -- the workers: spawned, timed out and reaped as op processes are --------------------------


def _stub_task(out: Path, steps: list[float], timeout_s: float, stray: bool = False,
               target: str = "cuda:90") -> dict[str, Any]:
    """A task as plan_tasks makes it, with what the stand-in worker does."""
    stem = out / "tasks" / op_file_stem(target)
    return {"target": target, "result": f"{stem}.json", "progress": f"{stem}.progress",
            "variant_timeout_s": timeout_s, "stub": {"pids": str(out / "pids"), "steps": steps, "stray": stray}}


def _pid(out: Path, name: str) -> int:
    return int((out / "pids" / name).read_text())


def _wait_gone(out: Path, name: str) -> None:
    pid = _pid(out, name)
    wait_for(lambda: not alive(pid), f"the stub's {name} process (pid {pid}) to end", timeout=10)


@pytest.fixture
def stub_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness.compile.cli, "WORKER_COMMAND", (str(STUB),))


@pytest.mark.usefixtures("stub_worker")
def test_a_worker_whose_variant_hangs_is_ended_with_its_group_and_what_it_left_elsewhere(tmp_path: Path) -> None:
    out = tmp_path / "out"
    problems = _run_tasks([_stub_task(out, [0.0, -1], timeout_s=1.0, stray=True)],
                          _worker_env(os.environ, out / "cache"), 1, out)
    ended, left = problems
    assert ended.startswith("the worker for cuda:90 was ended: compiling stub variant-1 took over "
                            "--variant-timeout 1 s"), problems
    stray = _pid(out, "stray")
    assert left == f"the worker for cuda:90 left processes running, ended: pid {stray} (sleep 300)"
    for name in ("worker", "group", "stray"):
        _wait_gone(out, name)
    assert not (out / "tasks" / "cuda_90.json").exists()


@pytest.mark.usefixtures("stub_worker")
def test_the_timeout_is_per_variant_a_worker_that_keeps_beginning_variants_runs_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # twelve variants of 0.25 s: longer than the timeout in all, none of them near it
    problems = _run_tasks([_stub_task(out, [0.25] * 12, timeout_s=2.0)], _worker_env(os.environ, out / "c"), 1, out)
    assert problems == []
    assert (out / "tasks" / "cuda_90.json").is_file()
    assert len((out / "tasks" / "cuda_90.progress").read_text().splitlines()) == 12


@pytest.mark.usefixtures("stub_worker")
def test_a_worker_stuck_before_its_first_variant_is_ended_and_a_crashed_one_is_named(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stuck = _stub_task(out, [0.0], timeout_s=0.5)
    stuck["stub"]["start_s"] = -1
    crashed = _stub_task(out, [0.0], timeout_s=30, target="hip:gfx942")
    crashed["stub"]["pids"] = 7  # the stub fails at once: a number is no folder
    problems = _run_tasks([stuck, crashed], _worker_env(os.environ, out / "c"), 2, out)
    ended, crash = problems  # in the tasks' order
    assert crash.startswith("the worker for hip:gfx942 exited with 1: TypeError: "), crash
    assert crash.endswith(f"(log: {out / 'tasks' / 'hip_gfx942.log'})")
    assert ended == ("the worker for cuda:90 was ended: its start (imports, tracing) before any variant took "
                     f"over --variant-timeout 0.5 s (log: {out / 'tasks' / 'cuda_90.log'})")
    _wait_gone(out, "worker")


@pytest.mark.usefixtures("stub_worker")
def test_a_signal_ends_every_worker_and_nothing_is_written(tmp_path: Path) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are installed from the main thread only")
    out = tmp_path / "out"

    def interrupt() -> None:
        wait_for(lambda: (out / "pids" / "group").is_file(), "the stub to start", timeout=60)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    with pytest.raises(CompileInterrupted, match="interrupted [(]SIGINT[)]: the compile workers were ended"):
        _run_tasks([_stub_task(out, [-1], timeout_s=60)], _worker_env(os.environ, out / "c"), 1, out)
    sender.join()
    for name in ("worker", "group"):
        _wait_gone(out, name)


def test_a_worker_ends_itself_and_its_group_when_the_harness_is_gone(tmp_path: Path) -> None:
    """The real worker, held before its first variant (its progress file is a FIFO nobody reads),
    under a stand-in harness that is then killed with SIGKILL."""
    progress = tmp_path / "progress"
    os.mkfifo(progress)
    task = tmp_path / "task.json"
    task.write_text(json.dumps({"target": "cuda:90", "ops": [], "out": str(tmp_path), "progress": str(progress),
                                "result": str(tmp_path / "result.json")}))
    harness = ("import os, subprocess, sys, time\n"
               "env = {**os.environ, 'HARNESS_PARENT_PID': str(os.getpid())}\n"
               "with open(sys.argv[2], 'wb') as log:\n"
               "    worker = subprocess.Popen([sys.executable, '-m', 'harness.compile.worker', sys.argv[1]], env=env,\n"
               "                              stdout=log, stderr=log, start_new_session=True)\n"
               "print(worker.pid, flush=True)\n"
               "time.sleep(600)\n")
    log = tmp_path / "worker.log"
    parent = subprocess.Popen([sys.executable, "-c", harness, str(task), str(log)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(STUB.parents[2])})
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    try:
        wait_for(lambda: "compile.worker" in Path(f"/proc/{worker}/cmdline").read_text(errors="replace"),
                 "the worker to start")
        parent.kill()
        parent.wait()
        wait_for(lambda: not alive(worker), "the worker to end with its harness", timeout=60)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        if alive(worker):
            os.kill(worker, signal.SIGKILL)
    assert "the harness process is gone; ending worker" in log.read_text()
