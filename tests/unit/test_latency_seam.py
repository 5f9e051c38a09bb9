"""The op process's answer to FlagGems' get_latency, in process on the CPU: pairing torch's and
FlagGems' calls, copies for in-place ops, output checks, the graph timer's three capture failures,
dtype narrowing and rescue, resume, and the output comparison itself."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.child.latency_seam import LatencySeam, RowContext, RowWriter, SuiteTimers
from harness.child.outputs import compare_outputs, describe_args, first_tensor_shape
from harness.child.plugins.suite import unasked_dtype_items
from harness.child.timing.base import CaptureFatal, CaptureRefused, Samples
from harness.contract import POISONED_EXIT
from harness.errors import ContextPoisoned
from harness.results.schema import Measurement
from harness.results.store import read_records


class Timer:
    """Calls the function twice; says it took ``ms``; can refuse, break or poison instead."""

    def __init__(self, name: str = "graph", ms: float = 2.0, fail: type[Exception] | None = None,
                 fail_after: int = 0) -> None:
        self.name, self.ms, self.fail, self.fail_after, self.calls = name, ms, fail, fail_after, 0
        self.rows: list[int] = []  # the measure count at each begin_row

    def begin_row(self) -> None:
        self.rows.append(self.calls)

    def measure(self, fn: Callable[[], Any]) -> Samples:
        self.calls += 1
        if self.fail is not None and self.calls > self.fail_after:
            if self.fail is CaptureRefused:
                raise CaptureRefused("capture", "capture-failed", "operation not permitted when stream is capturing")
            raise self.fail("boom")
        fn()
        fn()
        return Samples((self.ms, self.ms * 1.5, self.ms * 0.5), self.name)


class Bench:
    """What the seam reads of FlagGems' Benchmark."""

    def __init__(self, op_name: str, torch_op: Callable[..., Any], gems_op: Callable[..., Any] | None = None,
                 dtypes: list[Any] | None = None, is_inplace: bool = False, is_backward: bool = False) -> None:
        self.op_name, self.torch_op, self.gems_op = op_name, torch_op, gems_op
        self.dtypes = dtypes or [torch.float32]
        self.to_bench_dtypes = self.dtypes
        self.is_inplace, self.is_backward = is_inplace, is_backward
        self.to_bench_metrics = ["latency_base", "latency", "speedup"]

    def set_dtypes(self, wanted: Any) -> None:
        self.to_bench_dtypes = wanted or self.dtypes

    def get_input_iter(self, dtype: Any) -> Iterator[tuple[Any, ...]]:
        yield (torch.randn(8, 4).to(dtype), torch.randn(8, 4).to(dtype))

    def get_tflops(self, op: Any, *args: Any, **kwargs: Any) -> int:
        return 64


class Gems:
    active = False


@contextlib.contextmanager
def use_gems() -> Iterator[None]:
    Gems.active = True
    try:
        yield
    finally:
        Gems.active = False


def seam_for(tmp_path: Path, timer: Timer | None = None, fallback: Timer | None = None, dtypes: tuple[str, ...] = (),
             skip: frozenset[str] = frozenset(), unchecked: str = "", denied: str = "") -> LatencySeam:
    ctx = RowContext(run_id="r", op="add", provider="flaggems-suite", backend="cuda", device="0", device_name="H",
                     cache="cold", seed=0, records=tmp_path / "records.jsonl", skip_cases=skip,
                     notes=("said on every row",), unchecked=unchecked)
    return LatencySeam(RowWriter(ctx), SuiteTimers(timer or Timer(), fallback, denied), dtypes,
                       under_gems=lambda: Gems.active, level="core")


def run(seam: LatencySeam, bench: Bench, gems: Callable[..., Any] | None = None) -> None:
    """FlagGems' run(): per dtype and input, torch's call then FlagGems' (explicit or under use_gems)."""
    seam.set_dtypes(bench, type(bench).set_dtypes, None)
    seam.begin_item("test_x.py::test_x")
    for dtype in bench.to_bench_dtypes:
        for item in bench.get_input_iter(dtype):
            args = list(item)
            seam.get_latency(bench, bench.torch_op, tuple(args), {})
            if bench.gems_op is not None:
                seam.get_latency(bench, bench.gems_op, tuple(args), {})
            else:
                with use_gems():
                    seam.get_latency(bench, gems or bench.torch_op, tuple(args), {})
    seam.end_item()


def rows(tmp_path: Path) -> list[Measurement]:
    path = tmp_path / "records.jsonl"
    return read_records(path) if path.exists() else []


def test_a_row_pairs_torch_and_flaggems_checks_outputs_and_keeps_both_timings(tmp_path: Path) -> None:
    seam = seam_for(tmp_path)
    run(seam, Bench("add", torch.add, dtypes=[torch.float32, torch.bfloat16]))
    first, second = rows(tmp_path)
    assert first.case_id == "add[flaggems-suite-float32-8x4]" and second.dtype == "bfloat16"
    assert first.status == "pass" and first.timer == "graph" and first.direction == "forward"
    assert first.correctness is not None and first.correctness.passed and first.correctness.atol == 1e-4
    assert first.baseline is not None and first.candidate is not None and first.speedup == 1.0
    assert first.tflops == pytest.approx(64 / 2e-3 / 1e12) and first.extra["flops"] == 64
    assert first.extra["suite"]["shape_detail"] == [[8, 4], [8, 4]] and "said on every row" in first.notes


def test_a_call_that_launches_no_device_work_gets_no_speedup_and_says_why(tmp_path: Path) -> None:
    # the graph timer subtracts the empty graph's cost: a call with no kernel reads noise around
    # zero, negative too (FlagGems' conj_physical of a real tensor on the H200: a speedup of -1.06)
    seam = seam_for(tmp_path, timer=Timer(ms=-2e-6))
    run(seam, Bench("add", torch.add))
    (row,) = rows(tmp_path)
    assert row.status == "pass" and row.speedup is None and row.tflops is None and row.gbps is None
    assert any(n.startswith("candidate below the timer's resolution") for n in row.notes)
    assert any(n.startswith("baseline below the timer's resolution") for n in row.notes)
    assert row.candidate is not None and row.candidate.summary.median == pytest.approx(-2e-6)  # kept as measured


def test_flaggems_never_gets_a_latency_it_cannot_divide_by(tmp_path: Path) -> None:
    """FlagGems computes speedup = torch's latency / FlagGems' (benchmark/base.py): a call that
    launched no device work (its range benchmark runs on the CPU) read 0 ms on the H200 and ended
    FlagGems' function on a ZeroDivisionError, losing the op's later rows. It gets the timers'
    resolution instead; the harness's row keeps the median as measured and gives no speedup."""
    from harness.child.timing.base import RESOLUTION_MS

    seam = seam_for(tmp_path, timer=Timer(ms=0.0))
    bench = Bench("add", torch.add)
    seam.set_dtypes(bench, type(bench).set_dtypes, None)
    seam.begin_item("test_x.py::test_x")
    args = tuple(next(iter(bench.get_input_iter(torch.float32))))
    base = seam.get_latency(bench, bench.torch_op, args, {})
    with use_gems():
        gems = seam.get_latency(bench, bench.torch_op, args, {})
    seam.end_item()
    assert base == gems == RESOLUTION_MS and base / gems == 1.0
    (row,) = rows(tmp_path)
    assert row.speedup is None and row.candidate is not None and row.candidate.summary.median == 0.0


def test_what_a_timer_says_of_its_samples_is_on_the_row(tmp_path: Path) -> None:
    class Saying(Timer):
        def measure(self, fn: Callable[[], Any]) -> Samples:
            taken = super().measure(fn)
            return Samples(taken.values, taken.timer, note="small kernels, but the profiler timer failed")

    run(seam_for(tmp_path, timer=Saying()), Bench("add", torch.add))
    (row,) = rows(tmp_path)
    assert {"candidate: small kernels, but the profiler timer failed",
            "baseline: small kernels, but the profiler timer failed"} <= set(row.notes)


def test_each_row_begins_a_row_of_the_timer_so_the_small_kernel_choice_is_made_per_row(tmp_path: Path) -> None:
    timer, fallback = Timer(), Timer("direct")
    run(seam_for(tmp_path, timer, fallback), Bench("add", torch.add, dtypes=[torch.float32, torch.bfloat16]))
    assert len(rows(tmp_path)) == 2
    assert timer.rows == [0, 2] and fallback.rows == [0, 0]  # before each row's two measurements


def test_a_wrong_flaggems_output_fails_the_row_without_its_timings(tmp_path: Path) -> None:
    timer = Timer()
    run(seam_for(tmp_path, timer), Bench("add", torch.add), gems=lambda a, b: a + b + 1)
    (row,) = rows(tmp_path)
    assert row.status == "fail" and row.speedup is None and row.candidate is None
    assert "FlagGems' output does not match torch's (32 of 32 elements outside" in row.message
    assert timer.calls == 2  # inside use_gems() the call is timed before the comparison, which waits


def test_a_wrong_explicit_gems_op_is_not_timed(tmp_path: Path) -> None:
    timer = Timer()
    run(seam_for(tmp_path, timer), Bench("add", torch.add, gems_op=lambda a, b: a + b + 1))
    (row,) = rows(tmp_path)
    assert row.status == "fail" and "32 of 32 elements" in row.message
    assert timer.calls == 1  # outside use_gems() the comparison comes first: torch's side only


@contextlib.contextmanager
def flaggems_kernels() -> Iterator[None]:
    """What ``flag_gems.use_gems()`` does to the process: a torch.library registration that
    replaces aten kernels for the device's dispatch key until it exits. Here on the CPU, for ops
    FlagGems registers that the harness's comparison calls, with a kernel that fails the way
    FlagGems' boolean-mask ``index`` does on CUDA past 4,194,240 selected elements."""
    import warnings

    def launch_fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Triton Error [CUDA]: invalid argument")

    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel"
        for name in ("abs", "isnan", "index.Tensor"):
            lib.impl(name, launch_fails, "CPU")
    Gems.active = True
    try:
        yield
    finally:
        Gems.active = False
        lib._destroy()


def test_the_output_comparison_does_not_run_on_flaggems_kernels(tmp_path: Path) -> None:
    """H200, flag_gems 5.3.4: greater, atan... raised "Triton Error [CUDA]: invalid argument" from
    16M elements on, under the harness only: the seam compared outputs inside use_gems()."""
    seam = seam_for(tmp_path)
    bench = Bench("add", torch.add, dtypes=[torch.float32, torch.bfloat16])
    seam.set_dtypes(bench, type(bench).set_dtypes, None)
    seam.begin_item("test_add.py::test_add")
    for dtype in bench.to_bench_dtypes:
        for item in bench.get_input_iter(dtype):
            seam.get_latency(bench, bench.torch_op, item, {})
            with flaggems_kernels():
                seam.get_latency(bench, bench.torch_op, item, {})
    seam.end_item()
    first, second = rows(tmp_path)
    assert (first.status, second.status) == ("pass", "pass"), first.message
    assert first.correctness is not None and first.correctness.passed and first.candidate is not None
    assert torch.tensor([-1.0]).abs().item() == 1.0  # the stand-in's kernels are gone


def test_a_comparison_that_raises_is_an_error_row_that_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("out of memory")

    monkeypatch.setattr("harness.child.latency_seam.compare_outputs", broken)
    run(seam_for(tmp_path), Bench("add", torch.add, dtypes=[torch.float32, torch.float16]))
    first, second = rows(tmp_path)
    assert first.status == "error" and second.status == "error" and first.candidate is None
    assert first.message == "comparing FlagGems' outputs with torch's raised RuntimeError: out of memory"


def test_in_place_ops_are_compared_from_copies_taken_before_torch_ran(tmp_path: Path) -> None:
    run(seam_for(tmp_path), Bench("add_", torch.Tensor.add_, is_inplace=True))
    (row,) = rows(tmp_path)
    assert row.status == "pass", row.message  # the timing loops mutated the inputs; the copies did not


def test_backward_benchmarks_compare_gradients_and_say_backward(tmp_path: Path) -> None:
    class Backward(Bench):
        def get_input_iter(self, dtype: Any) -> Iterator[tuple[Any, ...]]:
            yield (torch.randn(8, 4, dtype=dtype).requires_grad_(), 1)

    run(seam_for(tmp_path), Backward("softmax_backward", torch.softmax, is_backward=True))
    (row,) = rows(tmp_path)
    assert row.status == "pass" and row.direction == "backward" and row.correctness is not None
    assert row.correctness.numel == 2 * 32  # the output and the gradient


def test_a_backward_benchmarks_autograd_call_is_never_captured_but_timed_direct_both_sides(tmp_path: Path) -> None:
    """autograd.grad runs its kernels on the forward's stream, outside a capture: on the H200
    every such benchmark's first capture poisoned the context. Both sides go to the direct timer."""
    from harness.child.latency_seam import AUTOGRAD_NOT_CAPTURED

    class Backward(Bench):
        def get_input_iter(self, dtype: Any) -> Iterator[tuple[Any, ...]]:
            yield (torch.randn(8, 4, dtype=dtype).requires_grad_(), 1)

    graph, direct = Timer("graph"), Timer("direct")
    run(seam_for(tmp_path, graph, direct), Backward("softmax_backward", torch.softmax, is_backward=True))
    (row,) = rows(tmp_path)
    assert graph.calls == 0 and direct.calls == 2 and row.timer == "direct" and row.status == "pass"
    assert row.fallback is not None and (row.fallback.reason, row.fallback.detail) == ("autograd", AUTOGRAD_NOT_CAPTURED)
    forward = tmp_path / "forward"
    forward.mkdir()
    run(seam_for(forward, graph, direct), Bench("add", torch.add))  # a forward benchmark is captured as before
    assert graph.calls == 2 and rows(forward)[0].fallback is None


def test_different_inputs_to_the_two_sides_are_timed_but_not_compared(tmp_path: Path) -> None:
    seam = seam_for(tmp_path)
    bench = Bench("pack", torch.neg, gems_op=lambda x: -x)
    seam.begin_item("test_pack.py::test_pack")
    seam.get_latency(bench, bench.torch_op, (torch.ones(4),), {})
    seam.get_latency(bench, bench.gems_op, (torch.ones(4) * 2,), {})  # type: ignore[arg-type]
    seam.end_item()
    (row,) = rows(tmp_path)
    assert row.status == "pass" and row.correctness is None and any("different inputs" in n for n in row.notes)


def test_random_ops_are_timed_without_comparison(tmp_path: Path) -> None:
    run(seam_for(tmp_path, unchecked="outputs not compared: random output ('uniform_')"),
        Bench("uniform_", lambda a, b: a.uniform_(), is_inplace=True))
    (row,) = rows(tmp_path)
    assert row.status == "pass" and row.correctness is None and "random output" in " ".join(row.notes)


def test_a_refused_capture_times_the_whole_row_with_the_direct_timer(tmp_path: Path) -> None:
    graph, direct = Timer("graph", fail=CaptureRefused, fail_after=1), Timer("direct", ms=3.0)
    run(seam_for(tmp_path, graph, direct), Bench("add", torch.add))
    (row,) = rows(tmp_path)
    # torch's side was captured, FlagGems' was refused: torch's is timed again by direct, outside use_gems
    assert row.status == "pass" and row.timer == "direct" and direct.calls == 2
    assert row.fallback is not None and row.fallback.reason == "capture-failed"
    assert row.baseline is not None and row.baseline.summary.median == 3.0


def test_a_deny_listed_op_is_timed_direct_and_says_why(tmp_path: Path) -> None:
    graph, direct = Timer("graph"), Timer("direct")
    run(seam_for(tmp_path, graph, direct, denied="'add' is on the musa capture deny list"), Bench("add", torch.add))
    (row,) = rows(tmp_path)
    assert graph.calls == 0 and row.timer == "direct" and row.fallback is not None
    assert row.fallback.reason == "denied" and "deny list" in row.fallback.detail


def test_a_fatal_capture_errors_the_row_and_the_loop_goes_on(tmp_path: Path) -> None:
    run(seam_for(tmp_path, Timer("graph", fail=CaptureFatal, fail_after=1), Timer("direct")),
        Bench("add", torch.add, dtypes=[torch.float32, torch.float16]))
    first, second = rows(tmp_path)
    assert first.status == "error" and "fatal device error" in first.message and "fatal" in first.notes
    assert second.status == "error"  # every later capture is fatal too in this stand-in


def test_a_poisoned_context_writes_its_row_and_ends_the_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr("harness.child.latency_seam.os._exit", fake_exit)
    with pytest.raises(SystemExit):
        run(seam_for(tmp_path, Timer("graph", fail=ContextPoisoned), Timer("direct")), Bench("add", torch.add))
    (row,) = rows(tmp_path)
    assert exits == [POISONED_EXIT] and row.status == "error" and "poisoned" in row.notes


def test_a_benchmark_that_fails_on_a_generator_left_capturing_ends_its_process_as_poisoned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FlagGems' next input after a failed capture could not be drawn (the generator was left
    registered as capturing): the suite plugin's report hook writes the function's row marked
    poisoned and ends the process under POISONED_EXIT (the parent retries with no capture), where
    any other failure, or the same words in a process that never captured, is an error row and
    the process goes on."""
    from types import SimpleNamespace

    from harness.child.plugins.suite import SuitePlugin

    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr("harness.child.latency_seam.os._exit", fake_exit)
    seam = seam_for(tmp_path)
    broken = "Failed: Offset increment outside graph capture encountered unexpectedly."

    def report(message: str) -> Any:
        return SimpleNamespace(skipped=False, failed=True, when="call", longrepr=("test_amp.py", 50, message))

    plugin: Any = SimpleNamespace(seam=seam, spec=SimpleNamespace(backend="cuda"))
    seam.begin_item("benchmark/test_amp.py::test_amp")
    SuitePlugin.pytest_runtest_logreport(plugin, report(broken))  # nothing captured here: an error row
    seam.timers.primary.captured = True  # type: ignore[attr-defined]  # as GraphTimer._capture sets it
    seam.begin_item("benchmark/test_amp.py::test_amp_1")
    SuitePlugin.pytest_runtest_logreport(plugin, report("Failed: shapes do not match"))
    assert exits == []
    seam.begin_item("benchmark/test_amp.py::test_amp_2")
    with pytest.raises(SystemExit):
        SuitePlugin.pytest_runtest_logreport(plugin, report(broken))
    uncaptured, plain, poisoned = rows(tmp_path)
    assert uncaptured.status == plain.status == "error" and "poisoned" not in uncaptured.notes + plain.notes
    assert exits == [POISONED_EXIT] and poisoned.status == "error" and "poisoned" in poisoned.notes
    assert poisoned.message.startswith("poisoned: Failed: Offset increment") and "random number generator" in poisoned.message
    # its case id is numbered apart: the retry, which writes no poisoned row, numbers its other
    # rows as the first attempt did, so a later function's row is not taken for a recorded one
    assert poisoned.case_id == "add[flaggems-suite.poisoned-any-]"
    assert (uncaptured.case_id, plain.case_id) == ("add[flaggems-suite-any-]", "add[flaggems-suite.v2-any-]")
    plugin.spec.backend = "cpu"  # a backend without the wording: an error row, as before
    seam.begin_item("benchmark/test_amp.py::test_amp_3")
    SuitePlugin.pytest_runtest_logreport(plugin, report(broken))
    assert exits == [POISONED_EXIT] and len(rows(tmp_path)) == 4


def test_a_retry_after_a_poisoned_function_writes_every_later_row(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Attempt 1: function A wrote a row of no input, then its process was poisoned (its poisoned
    row written); B never ran. The retry, with the recorded rows skipped, writes A's row again
    (skipped: recorded) and B's error row, which must not take the poisoned row's case id."""
    def fake_exit(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr("harness.child.latency_seam.os._exit", fake_exit)
    first = seam_for(tmp_path)
    first.begin_item("t.py::test_a")
    first.writer.other("error", "A's first failure", "graph", {})
    with pytest.raises(SystemExit):
        first.item_poisoned("Failed: Offset increment outside graph capture encountered unexpectedly.")
    recorded = frozenset(r.case_id for r in rows(tmp_path))
    retry = seam_for(tmp_path, skip=recorded)
    retry.begin_item("t.py::test_a")
    retry.writer.other("error", "A's first failure", "graph", {})
    retry.begin_item("t.py::test_b")
    retry.item_outcome("error", "B failed")
    written = rows(tmp_path)
    assert len(written) == 3 and written[-1].message == "B failed"
    assert len({r.case_id for r in written}) == 3


def test_requested_dtypes_narrow_the_benchmark_and_missing_ones_skip(tmp_path: Path) -> None:
    seam = seam_for(tmp_path, dtypes=("bfloat16", "int32"))
    run(seam, Bench("add", torch.add, dtypes=[torch.float16, torch.bfloat16, None]))
    skipped, passed = rows(tmp_path)
    assert (skipped.status, skipped.dtype) == ("skip", "int32") and "does not declare int32" in skipped.message
    assert (passed.status, passed.dtype) == ("pass", "bfloat16")


def test_a_benchmark_declaring_none_of_the_dtypes_runs_its_own_and_says_so(tmp_path: Path) -> None:
    run(seam_for(tmp_path, dtypes=("bfloat16",)), Bench("bitwise_not", torch.bitwise_and, dtypes=[torch.int32]))
    (row,) = rows(tmp_path)
    assert row.status == "pass" and row.dtype == "int32"
    assert "dtype rescue: FlagGems' bitwise_not benchmark declares none of bfloat16; ran its own dtypes (int32)" in row.notes


def test_a_function_parametrized_by_dtype_runs_only_the_nodes_of_the_asked_dtypes() -> None:
    amin = [("test_amin.py::test_amin", frozenset({d})) for d in ("float16", "float32", "bfloat16")]
    ints = [("test_gcd.py::test_gcd", frozenset({d})) for d in ("int16", "int32")]
    plain = [("test_abs.py::test_abs", frozenset()), ("test_cat.py::test_cat", frozenset({"bfloat16", "float16"}))]
    items = amin + ints + plain
    assert unasked_dtype_items(items, ("bfloat16",)) == {0, 1}  # amin's float16 and float32 nodes
    assert unasked_dtype_items(items, ("bfloat16", "float16")) == {1}
    assert unasked_dtype_items(items, ("int32",)) == {3}  # gcd's int16; amin has no int32 node: all three stay
    assert unasked_dtype_items(items, ("float64",)) == set()  # no function has the asked one: each is rescued
    assert unasked_dtype_items(items, ()) == set()  # every dtype each benchmark declares


def test_a_dtype_another_node_of_the_function_runs_gets_no_skip_row(tmp_path: Path) -> None:
    seam = seam_for(tmp_path, dtypes=("float32", "float16", "int32"))
    seam.sibling_dtypes["test_amin.py::test_amin"] = {"float32", "float16"}  # its kept nodes (collection)
    for node, dtype in (("test_amin.py::test_amin[dtype0]", torch.float32), ("test_amin.py::test_amin[dtype1]", torch.float16)):
        seam.begin_item(node)
        bench = Bench("amin", torch.neg, dtypes=[dtype])
        seam.set_dtypes(bench, type(bench).set_dtypes, None)
        assert bench.to_bench_dtypes == [dtype]
    skipped = rows(tmp_path)
    assert [(r.status, r.dtype) for r in skipped] == [("skip", "int32"), ("skip", "int32")]  # neither node has int32


def test_rows_recorded_by_an_earlier_attempt_are_not_measured_again(tmp_path: Path) -> None:
    timer = Timer()
    run(seam_for(tmp_path, timer, skip=frozenset({"add[flaggems-suite-float32-8x4]"})),
        Bench("add", torch.add, dtypes=[torch.float32, torch.float16]))
    (row,) = rows(tmp_path)
    assert row.dtype == "float16" and timer.calls == 2


def test_a_second_input_of_the_same_dtype_and_shape_gets_its_own_case(tmp_path: Path) -> None:
    class Twice(Bench):
        def get_input_iter(self, dtype: Any) -> Iterator[tuple[Any, ...]]:
            yield (torch.randn(8, 4), torch.randn(8, 4))
            yield (torch.randn(8, 4), torch.randn(4))

    run(seam_for(tmp_path), Twice("add", torch.add))
    assert [r.provider for r in rows(tmp_path)] == ["flaggems-suite", "flaggems-suite.v2"]


def test_a_raising_call_is_an_error_row_and_a_failed_function_gets_one_too(tmp_path: Path) -> None:
    def broken(a: Any, b: Any) -> Any:
        raise RuntimeError("triton compile failed")

    seam = seam_for(tmp_path)
    run(seam, Bench("add", torch.add), gems=broken)
    seam.begin_item("test_y.py::test_y")
    seam.item_outcome("skip", "Issue 1: not on this vendor")
    error, skipped = rows(tmp_path)
    assert error.status == "error" and "FlagGems' call raised RuntimeError: triton compile failed" in error.message
    assert (skipped.status, skipped.dtype, skipped.shape) == ("skip", "any", ())


# -- the output comparison ---------------------------------------------------------------------------


def test_outputs_compare_leaf_by_leaf_with_the_tolerance_of_their_dtype() -> None:
    x = torch.randn(16, 8)
    values, indices = torch.sort(x, dim=1)
    assert compare_outputs((values, indices.flip(1)), (values, indices)).correctness.passed  # indices beside values
    assert not compare_outputs(torch.arange(4), torch.arange(4).flip(0)).correctness.passed  # integers: exact
    c = torch.randn(4, dtype=torch.complex64)
    assert compare_outputs(c, c.clone()).correctness.passed
    assert not compare_outputs(c, c * 2).correctness.passed
    assert compare_outputs(x.bfloat16() * 1.001, x.bfloat16()).correctness.atol == 1.6e-2
    assert compare_outputs([True, 3, 2.0], [True, 3, 2.0 + 1e-9]).correctness.passed
    mismatch = compare_outputs((x, x), x).correctness
    assert not mismatch.passed and mismatch.shape_mismatch == "2 outputs vs 1 from torch"
    assert not compare_outputs(x, x[:4]).correctness.passed


def test_argument_pictures_and_row_shapes() -> None:
    x = torch.zeros(4, 8)
    assert describe_args((x, 1, [x], torch.float16), {"eps": 1e-5}) == [[[4, 8], 1, [[4, 8]], "float16"], {"eps": 1e-5}]
    assert first_tensor_shape(([1, (x,)],), {}) == (4, 8) and first_tensor_shape((1,), {"w": x}) == (4, 8)
    assert first_tensor_shape((1, 2), {}) == ()


def test_equal_infinities_match_and_opposite_ones_do_not() -> None:
    ref = torch.tensor([float("inf"), -float("inf"), 1.0, float("nan")])
    assert compare_outputs(ref.clone(), ref).correctness.passed  # lgamma at the poles: inf on both sides
    opposite = compare_outputs(torch.tensor([-float("inf"), -float("inf"), 1.0, float("nan")]), ref).correctness
    assert not opposite.passed and opposite.mismatched == 1


def test_a_floating_output_of_lower_precision_inputs_gets_the_inputs_tolerance() -> None:
    """bf16 inputs, fp32 output (a GEMM accumulating in fp32): bf16's rounding holds, not fp32's."""
    import torch

    from harness.child.outputs import compare_outputs

    ref = torch.full((64,), 1.0, dtype=torch.float32)
    cand = ref + 4e-3  # bf16-sized difference
    assert not compare_outputs(cand, ref).correctness.passed
    assert compare_outputs(cand, ref, "bfloat16").correctness.passed
    assert not compare_outputs(cand + 1.0, ref, "bfloat16").correctness.passed
    exact = torch.tensor([True, False])
    assert not compare_outputs(~exact, exact, "bfloat16").correctness.passed  # bool stays exact


class Hook:
    """A RowHook that numbers the rows it saw begin and says so on each record."""

    def __init__(self) -> None:
        self.begun = self.saved = 0

    def begin(self) -> None:
        self.begun += 1

    def fields(self, case: str) -> dict[str, Any]:
        return {"autotune": "replayed" if self.begun % 2 else "replay-miss", "ir": {"case": case}}

    def written(self) -> None:
        self.saved += 1


def test_row_hooks_begin_with_each_row_and_add_to_its_record(tmp_path: Path) -> None:
    seam = seam_for(tmp_path, dtypes=("float32", "float16", "int8"))
    hook = Hook()
    seam.writer.hooks.append(hook)
    run(seam, Bench("add", torch.add, dtypes=[torch.float32, torch.float16]))
    written = rows(tmp_path)
    # the int8 skip row (written by set_dtypes), then the float32 and float16 rows
    assert [(r.dtype, r.status, r.autotune) for r in written] == [
        ("int8", "skip", "replayed"), ("float32", "pass", "replay-miss"), ("float16", "pass", "replayed")]
    assert [r.ir for r in written] == [{"case": r.case_id} for r in written]
    assert hook.begun == hook.saved == 3


def test_rows_recorded_earlier_do_not_begin_a_hook(tmp_path: Path) -> None:
    seam = seam_for(tmp_path, skip=frozenset({"add[flaggems-suite-float32-8x4]"}))
    hook = Hook()
    seam.writer.hooks.append(hook)
    run(seam, Bench("add", torch.add))
    assert rows(tmp_path) == [] and hook.begun == hook.saved == 0


def test_the_wall_timer_times_both_sides_again_when_it_is_on(tmp_path: Path) -> None:
    wall = Timer("wall", ms=7.0)
    ctx_seam = seam_for(tmp_path)
    seam = LatencySeam(ctx_seam.writer, SuiteTimers(Timer(), None, wall=wall), (), under_gems=lambda: Gems.active)
    run(seam, Bench("add", torch.add))
    (row,) = rows(tmp_path)
    assert row.candidate_wall is not None and row.baseline_wall is not None
    assert row.candidate_wall.summary.median == row.baseline_wall.summary.median == 7.0 and wall.calls == 2
    assert row.candidate is not None and row.candidate.summary.median == 2.0  # the device time is its own


def test_without_the_wall_timer_rows_have_device_times_only(tmp_path: Path) -> None:
    run(seam_for(tmp_path), Bench("add", torch.add))
    (row,) = rows(tmp_path)
    assert row.candidate_wall is None and row.baseline_wall is None



class Sizes(Bench):
    def get_input_iter(self, dtype: Any) -> Iterator[tuple[Any, ...]]:
        for n in (1, 2, 3, 4, 5):
            yield (torch.full((n,), float(n)), torch.ones(n))


def test_a_sweep_shard_runs_its_share_of_flaggems_calls_once_and_writes_nothing(tmp_path: Path) -> None:
    from harness.child.suite_tune import TuneSeam

    seen: list[int] = []

    def gems(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        seen.append(a.numel())
        if a.numel() == 4:
            raise RuntimeError("no config fits n=4")
        return a + b

    def torch_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        raise AssertionError("torch's calls are not run in a sweep shard")

    timer = Timer()
    ctx = seam_for(tmp_path).writer.ctx
    recorder = Hook()
    shard = TuneSeam(ctx, SuiteTimers(timer, None), (), index=1, count=2, recorder=recorder,
                     under_gems=lambda: Gems.active)
    run(shard, Sizes("add", torch_add, gems_op=gems))
    assert seen == [2, 4]  # FlagGems' calls 1 and 3 (of 0..4): i % 2 == 1
    assert shard.calls == 5 and timer.calls == 0 and rows(tmp_path) == []
    assert shard.outcomes == {"add[flaggems-suite-float32-2]": "ok",
                              "add[flaggems-suite-float32-4]": "error: FlagGems' call raised RuntimeError: no config "
                                                               "fits n=4"}
    assert recorder.begun == recorder.saved == 2

    # The other shard takes the rest; under use_gems() (no explicit gems_op) alike.
    seen.clear()
    other = TuneSeam(ctx, SuiteTimers(timer, None), (), index=0, count=2, recorder=None, under_gems=lambda: Gems.active)
    run(other, Sizes("add", torch.add), gems=gems)
    assert other.calls == 5 and sorted(other.outcomes) == [f"add[flaggems-suite-float32-{n}]" for n in (1, 3, 5)]
    other.item_outcome("error", "setup: an input generator raised")
    assert other.outcomes["test_x.py::test_x"] == "error: setup: an input generator raised"


@pytest.mark.parametrize("unchecked", ["", "outputs not compared: random output"])
def test_launches_are_watched_around_flaggems_untimed_call_and_never_while_timing(tmp_path: Path,
                                                                                   unchecked: str) -> None:
    """The IR capture's launch watch: a kernel launched there is kept for the row (IrCapture.watching)."""
    watching = [False]
    calls: list[tuple[str, bool]] = []  # (side, watched) for each call of each side
    timer = Timer()

    @contextlib.contextmanager
    def watch() -> Iterator[None]:
        watching[0] = True
        try:
            yield
        finally:
            watching[0] = False

    def gems(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        calls.append(("gems", watching[0]))
        return a + b

    seam = seam_for(tmp_path, timer=timer, unchecked=unchecked)
    seam.watch_launches = watch
    run(seam, Bench("add", torch.add, gems_op=gems))
    (row,) = rows(tmp_path)
    assert row.status == "pass"
    assert calls[0] == ("gems", True)  # the untimed call: its outputs, or one made to see what it launches
    assert calls[1:] and not any(w for _, w in calls[1:])  # the timer's calls: not watched
