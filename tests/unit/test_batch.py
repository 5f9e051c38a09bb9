"""The batch's decisions, without processes: how an op ended, whether to retry, which device,
what ops_status.csv says, and the per-device scheduling (with a stand-in for the op runner)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from harness.backends import get_backend
from harness.child.process import preload
from harness.contract import CANCELLED_EXIT, GO, POISONED_EXIT
from harness.ops.registry import BUILTIN as BUILTIN_OPS
from harness.options import RunOptions
from harness.run.batch import run_batch
from harness.run.decide import (
    MAX_ATTEMPTS,
    AttemptExit,
    OpOutcome,
    Verdict,
    classify_exit,
    failure_key,
    render_status,
    should_retry,
)
from harness.run.plan import OP_START_COST, OpPlan, RunPlan, plan_run, share_ops
from harness.run.plugins import plan_plugins
from harness.run.rundir import read_markers, repair_records_tail, write_marker
from harness.run.spawn import StopToken

BUILTIN = ("softmax", "layer_norm", "rms_norm", "gelu", "silu_and_mul", "add", "sum", "mm")


# -- classify_exit ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "end, statuses, poisoned, status, needle",
    [
        (AttemptExit(-9, timed_out=True), [], False, "TIMEOUT", "--op-timeout 30s"),
        (AttemptExit(-11), [], False, "CRASH", "killed by SIGSEGV"),
        (AttemptExit(-6), ["pass"], False, "CRASH", "killed by SIGABRT"),
        (AttemptExit(POISONED_EXIT), ["error"], True, "CRASH", "poisoned"),
        (AttemptExit(3), [], False, "CRASH", "exited with code 3 before pytest finished"),
        (AttemptExit(0), ["pass"], False, "CRASH", "exited with code 0 before pytest finished"),
        (AttemptExit(0, pytest_exit=0), ["pass", "pass"], False, "PASS", ""),
        (AttemptExit(1, pytest_exit=1), ["pass", "fail"], False, "FAIL", "1 case(s) failed"),
        (AttemptExit(1, pytest_exit=1), ["error", "fail"], False, "ERROR", "1 case(s) raised"),
        # a case that raised in an earlier attempt still counts after a clean retry
        (AttemptExit(0, pytest_exit=0), ["error", "pass"], False, "ERROR", "raised"),
        (AttemptExit(1, pytest_exit=1), [], False, "ERROR", "outside the cases"),
        (AttemptExit(4, pytest_exit=4), [], False, "ERROR", "usage error"),
        (AttemptExit(3, pytest_exit=3), [], False, "ERROR", "internal error"),
        (AttemptExit(5, pytest_exit=5), [], False, "SKIP", "no cases"),
        (AttemptExit(0, pytest_exit=0), ["skip", "skip"], False, "SKIP", "every case skipped"),
        (AttemptExit(0, pytest_exit=0), ["pass", "skip"], False, "PASS", "1 case(s) skipped"),
        # the retry after a poisoned attempt ran to its end: still CRASH, saying whose row it was
        (AttemptExit(0, pytest_exit=0), ["error", "pass"], True, "CRASH", "earlier attempt measured poisoned"),
        # every case measured, then the interpreter died on the way out: the rows stand, noted
        (AttemptExit(-11, pytest_exit=0), ["pass"], False, "PASS", "killed by SIGSEGV at interpreter exit"),
    ],
)
def test_classify_exit(end: AttemptExit, statuses: list[str], poisoned: bool, status: str, needle: str) -> None:
    verdict = classify_exit(end, statuses, poisoned, timeout_s=30)
    assert verdict.status == status
    assert needle in verdict.note
    if not needle:
        assert verdict.note == ""


def test_unknown_signal_number_is_still_named() -> None:
    assert "signal 99" in classify_exit(AttemptExit(-99), []).note


# -- retries ------------------------------------------------------------------------------------


def test_crash_is_retried_until_it_repeats_itself() -> None:
    crash = Verdict("CRASH", "killed by SIGSEGV")
    missing = ["op[a]", "op[b]"]
    assert should_retry(crash, 1, missing, earlier=set())
    assert not should_retry(crash, 2, missing, earlier={failure_key(crash, missing)})


def test_crash_further_along_is_progress_and_retried() -> None:
    crash = Verdict("CRASH", "killed by SIGSEGV")
    first = failure_key(crash, ["op[a]", "op[b]"])
    assert should_retry(crash, 2, ["op[b]"], earlier={first})


def test_at_most_two_retries() -> None:
    crash = Verdict("CRASH", "killed by SIGSEGV")
    assert MAX_ATTEMPTS == 3
    assert not should_retry(crash, MAX_ATTEMPTS, ["op[c]"], earlier=set())


@pytest.mark.parametrize("status", ["TIMEOUT", "FAIL", "PASS", "SKIP"])
def test_timeouts_and_verdicts_from_records_are_not_retried(status: str) -> None:
    assert not should_retry(Verdict(status, "x"), 1, ["op[a]"], earlier=set())


def test_nothing_left_to_run_is_not_retried() -> None:
    assert not should_retry(Verdict("CRASH", "poisoned"), 1, [], earlier=set())


# -- sharding -----------------------------------------------------------------------------------


def _plans(ops: tuple[str, ...] = BUILTIN, shapes: int = 2, device: str = "?") -> list[OpPlan]:
    return [OpPlan(op, device, ("float32",), tuple((i + 1,) for i in range(shapes)), "builtin") for op in ops]


def test_sharding_ignores_the_order_ops_and_devices_were_given_in() -> None:
    forward = {o.op: o.device for o in share_ops(_plans(), ["0", "1", "2"])}
    backward = {o.op: o.device for o in share_ops(_plans(BUILTIN[::-1]), ["2", "1", "0"])}
    assert forward == backward


def test_sharding_keeps_plan_order_and_everything_else() -> None:
    plans = _plans()
    sharded = share_ops(plans, ["0", "1"])
    assert [o.op for o in sharded] == list(BUILTIN)
    assert all(s.shapes == p.shapes and s.dtypes == p.dtypes for s, p in zip(sharded, plans, strict=True))


@pytest.mark.parametrize("devices", [["0", "1"], ["0", "1", "2", "3"], ["5", "6"]])
def test_sharding_balances_equal_ops_evenly(devices: list[str]) -> None:
    counts = Counter(o.device for o in share_ops(_plans(), devices))
    assert set(counts) == set(devices)
    assert max(counts.values()) - min(counts.values()) <= 1


def test_sharding_balances_weight_not_op_counts() -> None:
    heavy = [OpPlan("big", "?", ("float32",), tuple((i + 1,) for i in range(6)), "builtin")]
    light = _plans(("a", "b", "c", "d", "e", "f"), shapes=1)
    load: defaultdict[str, float] = defaultdict(float)  # weights are float: case_cost
    for o in share_ops(heavy + light, ["0", "1"]):
        load[o.device] += OP_START_COST + len(o.cases()) * o.case_cost
    # weights: big 1 + 6 = 7, each light op 1 + 1 = 2; the best split is 9 against 10
    assert sorted(load.values()) == [9, 10]


def test_sharding_weighs_an_expensive_op_by_its_case_cost() -> None:
    """The H200 core batch in bf16: mm (4 cases, autotuned) and seven memory-bound ops of 3-4 cases.
    Counting cases alone put mm with three other ops on one device (about 1.5x the other's wall
    time on the H200); weighted, the two loads differ by less than one light op."""
    shapes = {"softmax": 4, "layer_norm": 4, "rms_norm": 4, "gelu": 3, "silu_and_mul": 3, "add": 4, "sum": 4}
    plans = [OpPlan(op, "?", ("bfloat16",), tuple((i + 1,) for i in range(n)), "builtin") for op, n in shapes.items()]
    plans.append(OpPlan("mm", "?", ("bfloat16",), tuple((i + 1, 1, 1) for i in range(4)), "builtin", case_cost=4.5))
    sharded = share_ops(plans, ["0", "1"])
    load: defaultdict[str, float] = defaultdict(float)  # weights are float: case_cost
    for o in sharded:
        load[o.device] += OP_START_COST + len(o.cases()) * o.case_cost
    mm_device = next(o.device for o in sharded if o.op == "mm")
    assert sum(o.device == mm_device for o in sharded) <= 3
    assert set(load) == {"0", "1"}
    assert abs(load["0"] - load["1"]) < OP_START_COST + 4  # the lightest-but-one op: 1 + 4 cases


def test_plan_carries_the_ops_case_cost() -> None:
    ops = BUILTIN_OPS
    assert ops["mm"].case_cost > 1.0 and ops["add"].case_cost == 1.0
    plan = plan_run(RunOptions(ops=("mm", "add")), get_backend("cpu"), [ops["mm"], ops["add"]], "smoke",
                    {"mm": [(8, 8, 8)], "add": [(8,)]}, None, ["0"], "r")
    assert {o.op: o.case_cost for o in plan.ops} == {"mm": ops["mm"].case_cost, "add": 1.0}


def test_one_device_takes_everything_and_duplicates_are_ignored() -> None:
    assert {o.device for o in share_ops(_plans(), ["0"])} == {"0"}
    assert {o.device for o in share_ops(_plans(), ["0", "0", "1"])} <= {"0", "1"}
    with pytest.raises(ValueError):
        share_ops(_plans(), [])


# -- status file and markers --------------------------------------------------------------------


def test_status_csv_has_one_row_per_op_and_survives_awkward_notes() -> None:
    outcomes = [
        OpOutcome("add", "0", "PASS", 1, 1.234, 6),
        OpOutcome("mm", "1", "CRASH", 2, 9.5, 1, ("attempt 1 CRASH: killed by SIGSEGV", 'a "quoted", note'),
                  compile_s=3.25),
    ]
    rows = list(csv.DictReader(io.StringIO(render_status(outcomes))))
    assert [r["op"] for r in rows] == ["add", "mm"]
    assert rows[0] == {"op": "add", "device": "0", "status": "PASS", "attempts": "1",
                       "elapsed_s": "1.23", "rows": "6", "notes": "", "compile_s": "", "cause": "", "evidence": "",
                       "backend": "", "timer": "", "returncode": "", "out_dir": ""}
    assert rows[1]["compile_s"] == "3.25"
    # compile_s is the last column: a reader of the older seven columns by position reads on.
    assert render_status(outcomes).splitlines()[0].split(",")[:7] == [
        "op", "device", "status", "attempts", "elapsed_s", "rows", "notes"]
    assert rows[1]["notes"] == 'attempt 1 CRASH: killed by SIGSEGV; a "quoted", note'


def test_markers_round_trip_and_only_ended_ops_count(tmp_path: Path) -> None:
    ended = OpOutcome("builtin:mm", "1", "TIMEOUT", 1, 30.0, 0, ("no exit within --op-timeout 30s",))
    write_marker(tmp_path, ended)
    write_marker(tmp_path, OpOutcome("add", "0", "INTERRUPTED", 1))
    assert read_markers(tmp_path) == {"builtin:mm": ended}
    assert ended.done and ended.failed
    assert not OpOutcome("x", "0", "INTERRUPTED").done


def test_torn_last_record_line_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": ')
    assert repair_records_tail(path) == len(b'{"c": ')
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    assert repair_records_tail(path) == 0
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'


# -- scheduling (a stand-in runner, real threads) ------------------------------------------------


class _Events:
    def __init__(self) -> None:
        self.finished: list[OpOutcome] = []
        self.lock = threading.Lock()

    def attempt_started(self, device: str, op: str, attempt: int) -> None:
        pass

    def op_finished(self, outcome: OpOutcome) -> None:
        with self.lock:
            self.finished.append(outcome)

    def note(self, text: str) -> None:
        pass


def _run_plan(ops: list[OpPlan], devices: tuple[str, ...]) -> RunPlan:
    cpu = get_backend("cpu")
    return RunPlan(run_id="r", backend=cpu, level="smoke", plugins=plan_plugins(cpu), devices=devices,
                   ops=tuple(ops), options=RunOptions())


def test_devices_run_in_parallel_but_each_device_one_op_at_a_time(tmp_path: Path) -> None:
    ops = [OpPlan(f"op{i}", str(i % 2), ("float32",), ((1,),), "builtin") for i in range(6)]
    both_devices_busy = threading.Barrier(2, timeout=10)
    busy: Counter[str] = Counter()
    worst: Counter[str] = Counter()
    lock = threading.Lock()
    seen_running: list[str] = []

    def runner(batch, op_plan, on_attempt):  # type: ignore[no-untyped-def]
        on_attempt(1)
        rows = {r["op"]: r for r in csv.DictReader((tmp_path / "ops_status.csv").open())}
        seen_running.append(rows[op_plan.op]["status"])
        with lock:
            busy[op_plan.device] += 1
            worst[op_plan.device] = max(worst[op_plan.device], busy[op_plan.device])
        if op_plan.op in ("op0", "op1"):  # the first op of each device: both must be running at once
            both_devices_busy.wait()
        with lock:
            busy[op_plan.device] -= 1
        return OpOutcome(op_plan.op, op_plan.device, "PASS", 1, 0.0, 1)

    events = _Events()
    result = run_batch(_run_plan(ops, ("0", "1")), tmp_path, {}, events, run_one=runner)
    assert [o.status for o in result.outcomes] == ["PASS"] * 6
    assert result.interrupted == ""
    assert dict(worst) == {"0": 1, "1": 1}
    assert seen_running == ["RUNNING"] * 6  # ops_status.csv showed each op running while it ran
    assert set(read_markers(tmp_path)) == {f"op{i}" for i in range(6)}
    final = list(csv.DictReader((tmp_path / "ops_status.csv").open()))
    assert [r["status"] for r in final] == ["PASS"] * 6


def test_ops_already_done_are_not_run_again(tmp_path: Path) -> None:
    ops = [OpPlan(name, "0", ("float32",), ((1,),), "builtin") for name in ("a", "b", "c")]
    ran: list[str] = []

    def runner(batch, op_plan, on_attempt):  # type: ignore[no-untyped-def]
        ran.append(op_plan.op)
        return OpOutcome(op_plan.op, op_plan.device, "PASS", 1, 0.0, 1)

    done = {"b": OpOutcome("b", "0", "CRASH", 2, 1.0, 0, ("killed by SIGSEGV",))}
    result = run_batch(_run_plan(ops, ("0",)), tmp_path, {}, _Events(), already_done=done, run_one=runner)
    assert ran == ["a", "c"]
    assert result.outcomes[1] == done["b"]


def test_a_stop_leaves_later_ops_pending_and_unmarked(tmp_path: Path) -> None:
    ops = [OpPlan(name, "0", ("float32",), ((1,),), "builtin") for name in ("a", "b", "c")]
    stop = StopToken()

    def runner(batch, op_plan, on_attempt):  # type: ignore[no-untyped-def]
        stop.request("SIGINT")  # arrives while "a" runs; "a" still ends normally
        return OpOutcome(op_plan.op, op_plan.device, "PASS", 1, 0.0, 1)

    result = run_batch(_run_plan(ops, ("0",)), tmp_path, {}, _Events(), stop=stop, run_one=runner)
    assert result.interrupted == "SIGINT"
    assert [o.status for o in result.outcomes] == ["PASS", "PENDING", "PENDING"]
    assert result.outcomes[1].notes == ("not started: the run was stopped (SIGINT)",)
    assert set(read_markers(tmp_path)) == {"a"}


def test_a_harness_fault_costs_one_op(tmp_path: Path) -> None:
    ops = [OpPlan(name, "0", ("float32",), ((1,),), "builtin") for name in ("a", "b")]

    def runner(batch, op_plan, on_attempt):  # type: ignore[no-untyped-def]
        if op_plan.op == "a":
            raise OSError(28, "No space left on device")
        return OpOutcome(op_plan.op, op_plan.device, "PASS", 1, 0.0, 1)

    result = run_batch(_run_plan(ops, ("0",)), tmp_path, {}, _Events(), run_one=runner)
    assert [o.status for o in result.outcomes] == ["ERROR", "PASS"]
    assert "No space left on device" in result.outcomes[0].notes[0]
    assert set(read_markers(tmp_path)) == {"b"}  # no marker: a resume runs "a" again


# -- pre-started op processes ---------------------------------------------------------------------


def _held_child(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    exit_path = tmp_path / "op.exit"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    child = subprocess.Popen([sys.executable, "-m", "harness.child", str(exit_path), "--hold", "--", "--version"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    return child, exit_path


@pytest.mark.slow
def test_a_held_child_runs_pytest_only_after_go(tmp_path: Path) -> None:
    child, exit_path = _held_child(tmp_path)
    time.sleep(0.5)
    assert child.poll() is None and not exit_path.exists()  # imported, waiting
    out, _ = child.communicate(f"{GO}\n".encode(), timeout=120)
    assert child.returncode == 0 and exit_path.read_text() == "0\n", out.decode()
    assert b"pytest" in out


@pytest.mark.slow
def test_a_held_childs_timeline_says_when_the_parent_asked_it_to_run(tmp_path: Path) -> None:
    """release() sends the time with the go line: the timeline tells a wait for the op's own
    imports (asked before preloaded) from a process that was ready and waiting."""
    from harness.child.process import times_path
    from harness.run.spawn import release

    child, exit_path = _held_child(tmp_path)
    before = time.time()
    release(child)  # writes the line and closes stdin
    assert child.wait(timeout=120) == 0, child.stdout.read().decode() if child.stdout else ""
    times = json.loads(times_path(exit_path).read_text())
    assert before <= times["asked"] <= times["go"] <= times["pytest"]
    assert times["started"] <= times["preloaded"] <= times["go"]


def test_a_go_lines_time_is_kept_only_when_it_is_a_finite_number() -> None:
    from harness.child.process import asked_time

    assert asked_time(["1796162913.25"]) == 1796162913.25
    assert asked_time([]) is None  # a bare go (a parent before the time was sent)
    assert asked_time(["soon"]) is None and asked_time(["nan"]) is None and asked_time(["inf"]) is None


@pytest.mark.slow
def test_a_held_child_ends_without_running_when_stdin_closes(tmp_path: Path) -> None:
    child, exit_path = _held_child(tmp_path)
    out, _ = child.communicate(b"", timeout=120)
    assert child.returncode == CANCELLED_EXIT and not exit_path.exists(), out.decode()
    assert b"initialised CUDA" not in out


def test_preload_reports_modules_it_could_not_import() -> None:
    assert preload(("json", "harness_no_such_module")) == ["harness_no_such_module"]


@pytest.mark.parametrize(("mode", "accelerator", "expected"),
                         [("auto", True, True), ("auto", False, False), ("on", False, True), ("off", True, False)])
def test_prestart_mode(mode: str, accelerator: bool, expected: bool) -> None:
    assert RunOptions(prestart=mode).prestart_for(accelerator) is expected


def test_the_profiler_is_warmed_only_where_the_backend_measured_it_safe_and_the_timer_may_use_it() -> None:
    from harness.run.plan import warm_profiler_for

    cuda, rocm, cpu = (get_backend(name).capabilities for name in ("cuda", "rocm", "cpu"))
    assert warm_profiler_for(cuda, "graph") and warm_profiler_for(cuda, "profiler")
    assert not warm_profiler_for(cuda, "direct")  # never hands a row to the profiler
    assert not warm_profiler_for(rocm, "graph")  # an empty roctracer session is reported to leave it blind
    assert not warm_profiler_for(cpu, "cpu")


def test_only_a_held_process_is_told_to_warm_the_profiler(tmp_path: Path) -> None:
    from harness.run.spawn import Launch

    launch = Launch(pytest_args=("t.py",), exit_path=tmp_path / "x.exit", preload=("flag_gems",))
    held = launch.command(hold=True, warm_profiler=True)
    assert held[held.index("--hold"):held.index("--")] == ["--hold", "--preload", "flag_gems", "--warm-profiler"]
    assert "--warm-profiler" not in launch.command(hold=False, warm_profiler=True)
    assert "--warm-profiler" not in launch.command(hold=True)


def test_a_warm_up_that_worked_is_in_the_timeline_and_one_that_failed_is_said(monkeypatch: pytest.MonkeyPatch,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import harness.child.timing.profiler as profiler
    from harness.child.process import warm_profiler

    times: dict[str, float] = {}
    monkeypatch.setattr(profiler, "warm_up", lambda: 0.01)
    warm_profiler(times)
    assert "warmed" in times and not capsys.readouterr().err

    def fails() -> float:
        raise AssertionError("No activities specified for the profiler")

    times = {}
    monkeypatch.setattr(profiler, "warm_up", fails)
    warm_profiler(times)
    assert "warmed" not in times
    assert "the profiler's warm-up failed (AssertionError: No activities" in capsys.readouterr().err


@pytest.mark.slow
def test_a_held_child_warms_the_profiler_only_where_its_imports_opened_the_device(tmp_path: Path) -> None:
    """The CPU torch here opens no device: no warm-up (it would open one), and the op runs."""
    from harness.child.process import times_path
    from harness.run.spawn import release

    exit_path = tmp_path / "op.exit"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    child = subprocess.Popen([sys.executable, "-m", "harness.child", str(exit_path), "--hold", "--warm-profiler",
                              "--", "--version"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    release(child)
    assert child.wait(timeout=120) == 0
    out = child.stdout.read().decode() if child.stdout else ""
    times = json.loads(times_path(exit_path).read_text())
    assert times["preloaded"] <= times["held"] <= times["go"], out
    assert "warmed" not in times and "warm-up" not in out, out
    assert exit_path.read_text() == "0\n"


@pytest.mark.parametrize(("depth", "expected"), [
    (1, {"a": ["b"], "b": ["c"], "c": ["d"], "d": []}),
    (2, {"a": ["b", "c"], "b": ["d"], "c": [], "d": []}),  # c was already held when b started
])
def test_each_op_start_holds_the_next_ops_up_to_the_depth_once_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, depth: int, expected: dict[str, list[str]]) -> None:
    import harness.run.batch as batch

    ops = [OpPlan(name, "0", ("float32",), ((1,),), "builtin") for name in "abcd"]
    started: dict[str, list[str]] = {}
    current: list[str] = []

    def fake_prestart(ctx, op_plan):  # type: ignore[no-untyped-def]
        started[current[-1]].append(op_plan.op)
        ctx.held[op_plan.op] = None  # held (a real one is a process; cancel_held is faked too)

    def runner(ctx, op_plan, on_attempt):  # type: ignore[no-untyped-def]
        current.append(op_plan.op)
        started[op_plan.op] = []
        ctx.held.pop(op_plan.op, None)  # run_op takes its own held process
        on_attempt(1)
        return OpOutcome(op_plan.op, op_plan.device, "PASS", 1, 0.0, 1)

    monkeypatch.setattr(batch, "prestart_op", fake_prestart)
    monkeypatch.setattr(batch, "cancel_held", lambda ctx, names: [ctx.held.pop(n, None) for n in names])
    result = run_batch(_run_plan(ops, ("0",)), tmp_path, {}, _Events(), run_one=runner, prestart=True,
                       prestart_depth=depth)
    assert [o.status for o in result.outcomes] == ["PASS"] * 4
    assert started == expected


@pytest.mark.slow
def test_a_held_child_whose_imports_opened_the_device_warms_the_profiler(tmp_path: Path) -> None:
    """A preloaded module stands in for FlagGems' import (which opens the device) and for the
    profiler's session: the held process warms it, says the device was opened, then runs its op."""
    from harness.child.process import times_path
    from harness.run.spawn import release

    (tmp_path / "opens_device.py").write_text(
        "import torch\nimport harness.child.timing.profiler as profiler\n"
        "torch.cuda.is_initialized = lambda: True\n"
        f"profiler.warm_up = lambda: open({str(tmp_path / 'warmed')!r}, 'w').close() or 0.0\n")
    exit_path = tmp_path / "op.exit"
    env = dict(os.environ, PYTHONPATH=f"{Path(__file__).resolve().parents[2]}{os.pathsep}{tmp_path}")
    child = subprocess.Popen([sys.executable, "-m", "harness.child", str(exit_path), "--hold", "--preload",
                              "opens_device", "--warm-profiler", "--", "--version"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    release(child)
    assert child.wait(timeout=120) == 0
    out = child.stdout.read().decode() if child.stdout else ""
    times = json.loads(times_path(exit_path).read_text())
    assert (tmp_path / "warmed").exists() and times["preloaded"] <= times["warmed"] <= times["held"], out
    assert "initialised CUDA" in out
