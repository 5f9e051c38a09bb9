"""What the op process records for the gate (issue 14), without a device: clocks around each
case's timing, whether samples settled, one timer per row, the small-kernel switch of the
graph timer, the device reader, and the cpu backend's threads and report note."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.backends import get_backend
from harness.backends.state import device_reader
from harness.child.timing.base import Samples
from harness.child.timing.graph import GraphTimer
from harness.results.render import render_markdown
from harness.run.spawn import child_env


@dataclass
class FakeTimer:
    """Samples of a fixed value per call; counts what it was asked."""

    value: float
    name: str = "graph"
    noisy: bool = False
    calls: int = 0
    rows: int = 0

    def begin_row(self) -> None:
        self.rows += 1

    def measure(self, fn: Any) -> Samples:
        self.calls += 1
        fn()
        return Samples((self.value,) * 10, self.name, self.noisy)


def _op() -> Any:
    import torch

    from harness.ops.base import OpSpec

    return OpSpec(id="scale", baseline=lambda x: x * 3.0, candidate=lambda x: x * 3.0,
                  make_inputs=lambda shape, dtype, gen, device: (torch.randn(shape, dtype=dtype, generator=gen),),
                  bytes_moved=lambda shape, size: 2 * math.prod(shape) * size, flops=lambda shape: math.prod(shape))


def test_a_case_records_the_clocks_before_and_after_its_timing_and_whether_it_settled() -> None:
    from harness.child.measure import CaseContext, measure_case
    from harness.contract import Case

    readings = iter([{"sm_clock_mhz": 1980.0, "power_w": 300.0}, {"sm_clock_mhz": 1500.0, "power_w": 700.0}])
    ctx = CaseContext(run_id="r", backend="cuda", device="0", torch_device="cpu", device_name="x",
                      timer_name="graph", cache="cold", read_state=lambda: next(readings))
    timer = FakeTimer(0.002, noisy=True)
    record = measure_case(ctx, _op(), _op().candidate, Case("scale", "builtin", "float32", (8, 8)), timer, seed=1)
    assert record.status == "pass"
    assert record.device_state == ({"start": {"sm_clock_mhz": 1980.0, "power_w": 300.0},
                                    "end": {"sm_clock_mhz": 1500.0, "power_w": 700.0}},)
    assert record.candidate is not None and not record.candidate.settled
    assert timer.rows == 1 and timer.calls == 2  # one row: candidate and baseline on one timer


def test_a_reading_that_fails_never_fails_the_case() -> None:
    from harness.child.measure import CaseContext, measure_case
    from harness.contract import Case

    def broken() -> dict[str, float | None]:
        raise OSError("nvidia-smi vanished")

    ctx = CaseContext(run_id="r", backend="cpu", device="cpu", torch_device="cpu", device_name="x",
                      timer_name="cpu", cache="n/a", read_state=broken)
    record = measure_case(ctx, _op(), _op().candidate, Case("scale", "builtin", "float32", (8,)),
                          FakeTimer(0.01, name="cpu"), seed=1)
    assert record.status == "pass" and record.device_state == ()


def test_a_built_in_case_below_the_timers_resolution_gets_no_speedup() -> None:
    from harness.child.measure import CaseContext, measure_case
    from harness.contract import Case

    ctx = CaseContext(run_id="r", backend="cuda", device="0", torch_device="cpu", device_name="x",
                      timer_name="graph", cache="cold")
    record = measure_case(ctx, _op(), _op().candidate, Case("scale", "builtin", "float32", (8,)),
                          FakeTimer(-3e-6), seed=1)
    assert record.status == "pass" and record.speedup is None and record.gbps is None and record.tflops is None
    assert sum(n.endswith("no speedup, GB/s or TFLOP/s") for n in record.notes) == 2
    assert record.extra["baseline_gbps"] is None


class FakeDevice:
    """A device namespace for the graph timer without a device: a clock that each kernel call
    advances by its duration, events that read the clock, graphs that record the calls made while
    capturing and replay them. Counts replays, to see what a measurement cost."""

    def __init__(self, kernel_ms: float, jitter: float = 0.0) -> None:
        self.kernel_ms, self.now, self.replays, self.jitter = kernel_ms, 0.0, 0, jitter
        self.capturing: list[float] | None = None

    def call(self) -> None:  # one kernel of the op under test
        if self.capturing is not None:
            self.capturing.append(self.kernel_ms)
        else:
            self.now += self.kernel_ms

    def synchronize(self) -> None:
        pass

    def Event(self, enable_timing: bool = True) -> Any:  # noqa: N802 - torch's spelling
        device = self

        class Event:
            at = 0.0

            def record(self) -> None:
                self.at = device.now

            def elapsed_time(self, other: Any) -> float:
                return float(other.at - self.at)

        return Event()

    def CUDAGraph(self) -> Any:  # noqa: N802
        device = self

        class Graph:
            calls: list[float] = []

            def replay(self) -> None:
                device.replays += 1  # replays alternate faster and slower by ``jitter``
                device.now += sum(self.calls) * (1 + device.jitter * (-1) ** device.replays)

        return Graph()

    def graph(self, g: Any) -> Any:
        import contextlib

        @contextlib.contextmanager
        def capture() -> Any:
            self.capturing = []
            yield
            g.calls, self.capturing = self.capturing, None

        return capture()


def _graph(small: Any, device: FakeDevice, threshold: float = 0.005) -> GraphTimer:
    from harness.child.timing.base import DeviceApi

    return GraphTimer(api=DeviceApi(device, "CUDAGraph"), backend=get_backend("cuda"), op_id="add",
                      small_timer=small, small_kernel_ms=threshold)


def test_a_row_of_small_kernels_is_timed_by_the_profiler_candidate_and_baseline_alike() -> None:
    profiler = FakeTimer(0.0011, name="profiler")
    # The row's first side is small, and its graph readings never settle (10% apart): it used to
    # be sampled until the cap (4 batches here), then thrown away for the profiler's.
    device = FakeDevice(kernel_ms=0.0014, jitter=0.1)
    timer = _graph(profiler, device)
    timer.begin_row()
    assert timer.measure(device.call).timer == "profiler"
    deciding = device.replays
    assert deciding == 1 + 200  # the capture's check replay and one batch (100 calls a replay)
    device.jitter = 0.0
    device.kernel_ms = 0.04  # the other side is not small: the row keeps one timer
    assert timer.measure(device.call).timer == "profiler"
    assert device.replays == deciding  # a side of a known-small row samples no graph at all
    timer.begin_row()  # the next row decides afresh
    samples = timer.measure(device.call)
    assert samples.timer == "graph" and not samples.noisy
    assert statistics.median(samples.values) == pytest.approx(0.04)
    device.kernel_ms = 0.0014
    assert timer.measure(device.call).timer == "graph"
    assert profiler.calls == 2


def test_the_small_kernel_switch_off_or_without_a_profiler_keeps_the_graph() -> None:
    device = FakeDevice(kernel_ms=0.0014)
    off = _graph(FakeTimer(0.001, name="profiler"), device, threshold=0.0)
    assert off.measure(device.call).timer == "graph"
    none = _graph(None, device)
    assert none.measure(device.call).timer == "graph"

    class Broken(FakeTimer):
        def measure(self, fn: Any) -> Samples:
            raise RuntimeError("the profiler recorded no kernels")

    broken = _graph(Broken(0.0, name="profiler"), device)
    broken.begin_row()
    readings = [broken.measure(device.call) for _ in range(2)]
    assert [r.timer for r in readings] == ["graph", "graph"]
    assert statistics.median(readings[1].values) == pytest.approx(0.0014)
    # both sides say why a row of small kernels has the graph's reading; the next row says nothing
    assert all(r.note.startswith("small kernels, but the profiler timer failed (RuntimeError: the profiler "
                                 "recorded no kernels)") for r in readings)
    broken.begin_row()
    device.kernel_ms = 0.04
    assert broken.measure(device.call).note == ""
    device.kernel_ms = 0.0014

    class Flaky(FakeTimer):  # times the first side, fails on the second
        def measure(self, fn: Any) -> Samples:
            if self.calls:
                raise RuntimeError("the profiler recorded no kernels")
            return super().measure(fn)

    from harness.child.timing.base import CaptureRefused

    flaky = _graph(Flaky(0.001, name="profiler"), device)
    flaky.begin_row()
    assert flaky.measure(device.call).timer == "profiler"
    with pytest.raises(CaptureRefused, match="small-kernel"):  # not a row of a profiler side and a graph side
        flaky.measure(device.call)


def test_a_capture_is_marked_on_disk_while_it_lasts_and_only_then(tmp_path: Path) -> None:
    """A process that dies inside a capture leaves the mark (RunFiles.capture_mark) and its retry
    captures no graph (harness.run.batch); one that captured and went on leaves none."""
    from harness.child.timing.base import CaptureRefused, DeviceApi

    device = FakeDevice(kernel_ms=0.04)
    mark = tmp_path / "add.capturing"
    seen: list[bool] = []

    def call() -> None:
        if device.capturing is not None:
            seen.append(mark.is_file())
        device.call()

    timer = GraphTimer(api=DeviceApi(device, "CUDAGraph"), backend=get_backend("cuda"), op_id="add", mark=mark)
    timer.begin_row()
    assert timer.measure(call).timer == "graph"
    assert seen and all(seen) and not mark.exists()

    def refused() -> None:
        if device.capturing is not None:
            raise RuntimeError("operation not permitted when stream is capturing")
        device.call()

    with pytest.raises(CaptureRefused):
        timer.measure(refused)
    assert not mark.exists()  # a capture that failed and was handled is not a process that died in one


class FakeNvml:
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0

    def __init__(self) -> None:
        self.index: int | None = None

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self.index = index
        return "h"

    def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:
        return 1980 if kind == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetTemperature(self, handle: str, kind: int) -> int:
        return 41

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        raise RuntimeError("not supported")


def test_the_device_reader_prefers_nvml_then_the_query_cli_and_reads_nothing_on_cpu() -> None:
    cuda = get_backend("cuda")
    nvml = FakeNvml()
    read = device_reader(cuda, "3", import_module=lambda name: nvml)
    assert read is not None and nvml.index == 3
    assert read() == {"sm_clock_mhz": 1980.0, "mem_clock_mhz": 3201.0, "temperature_c": 41.0, "power_w": None}

    def no_module(name: str) -> object:
        raise ImportError(name)

    cli = device_reader(cuda, "1", import_module=no_module,
                        query=lambda b: {"1": {"sm_clock_mhz": 1755.0}, "0": {"sm_clock_mhz": 1.0}})
    assert cli is not None and cli() == {"sm_clock_mhz": 1755.0}
    assert device_reader(get_backend("cpu"), "cpu") is None


def test_the_cpu_op_process_runs_torch_on_one_thread_and_accelerators_keep_their_default() -> None:
    env = child_env(get_backend("cpu"), "cpu", {"OMP_NUM_THREADS": "8"})
    assert env["OMP_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "1"
    cuda = child_env(get_backend("cuda"), "0", {"OMP_NUM_THREADS": "8"})
    assert cuda["OMP_NUM_THREADS"] == "8" and "MKL_NUM_THREADS" not in cuda


@pytest.mark.parametrize(("backend", "warned"), [("cpu", True), ("cuda", False)])
def test_report_md_says_cpu_timings_are_not_for_comparison(backend: str, warned: bool) -> None:
    md = render_markdown([], {"run_id": "r", "backend": backend, "identity": {}})
    assert ("These timings are not for comparison" in md) is warned


class CaptureFailing(FakeDevice):
    """Calls made while capturing raise, the way CUDA refuses an operation during capture."""

    def call(self) -> None:
        if self.capturing is not None:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        super().call()


def test_a_failed_capture_that_broke_the_device_random_numbers_ends_the_op_process() -> None:
    """Seen on the H200 with FlagGems' linalg_lu_factor_ex_out: after a failed capture every later
    random draw raised "Offset increment outside graph capture encountered unexpectedly", which
    failed the benchmark at its next input. The timer checks a draw after a recoverable failure:
    still working -> the row falls back to the direct timer; broken -> the process ends (poisoned)."""
    from harness.child.timing.base import CaptureRefused
    from harness.errors import ContextPoisoned

    device = CaptureFailing(kernel_ms=0.04)
    timer = _graph(None, device)
    timer.rng_probe = lambda: None
    with pytest.raises(CaptureRefused, match="operation not permitted"):
        timer.measure(device.call)

    def broken() -> None:
        raise RuntimeError("Offset increment outside graph capture encountered unexpectedly.")

    timer.rng_probe = broken
    with pytest.raises(ContextPoisoned, match="random number generator unusable outside capture .*Offset increment"):
        timer.measure(device.call)


def test_a_failed_capture_puts_the_generators_copy_back_so_the_row_falls_back_instead_of_ending() -> None:
    """Seen on the H200 (benchmarks/capture_rng.py): the generator's state a failed capture left
    capturing breaks every later draw, and a copy of it taken before the capture, put in its place,
    draws again where the stream was. The timer copies before each capture and puts the copy back
    after one that failed; the probe then passes, and the row falls back to the direct timer,
    saying so. A capture that works puts nothing back."""
    from harness.child.timing.base import CaptureRefused

    generator = {"broken": False, "copies": 0, "put_back": 0}

    class BreaksTheGenerator(CaptureFailing):
        def call(self) -> None:
            if self.capturing is not None:
                generator["broken"] = True
            super().call()

    def keep() -> Any:
        generator["copies"] += 1

        def put_back() -> None:
            generator["put_back"] += 1
            generator["broken"] = False
        return put_back

    def probe() -> None:
        if generator["broken"]:
            raise RuntimeError("Offset increment outside graph capture encountered unexpectedly.")

    device = BreaksTheGenerator(kernel_ms=0.04)
    timer = _graph(None, device)
    timer.rng_keep, timer.rng_probe = keep, probe
    with pytest.raises(CaptureRefused) as refused:
        timer.measure(device.call)
    assert "operation not permitted" in refused.value.detail and "was put back" in refused.value.detail
    assert generator == {"broken": False, "copies": 1, "put_back": 1} and timer.restored == 1

    working = FakeDevice(kernel_ms=0.04)
    timer = _graph(None, working)
    timer.rng_keep = keep
    timer.measure(working.call)
    assert generator["copies"] > 1 and generator["put_back"] == 1 and timer.restored == 0


class StreamsAndPools(FakeDevice):
    """A device namespace that captures the way torch.cuda.graph does, as we read torch: the
    capture's side stream becomes current and the allocator diverts into the capture's pool; a
    capture whose body raised raises again at its end and leaves both as they were (the side
    stream current, the pool's allocations never ended). ``ends_itself``: a capture that ends its
    pool's allocations before it raises (ending them again then raises, as torch's does)."""

    __name__ = "torch.fakedev"

    def __init__(self, kernel_ms: float, fails: bool, ends_itself: bool = False) -> None:
        super().__init__(kernel_ms)
        self.fails, self.ends_itself = fails, ends_itself
        self.current, self.handles = "main", 0
        self.underway: list[tuple[int, int]] = []  # pools the allocator still diverts into
        self.released: list[tuple[int, int]] = []
        self.pools_given: list[Any] = []

    def call(self) -> None:
        if self.capturing is not None and self.fails:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        super().call()

    def current_stream(self) -> str:
        return self.current

    def set_stream(self, stream: str) -> None:
        self.current = stream

    def current_device(self) -> int:
        return 0

    def graph_pool_handle(self) -> tuple[int, int]:
        self.handles += 1
        return (0, self.handles)

    def graph(self, g: Any, pool: Any = None) -> Any:  # type: ignore[override]
        import contextlib

        self.pools_given.append(pool)

        @contextlib.contextmanager
        def capture() -> Any:
            self.capturing, self.current = [], "side"
            self.underway.append(pool)
            try:
                yield
            except BaseException:
                if self.ends_itself:
                    self.underway.remove(pool)
                raise RuntimeError("CUDA error: operation failed due to a previous error during capture") from None
            self.underway.remove(pool)
            g.calls, self.capturing, self.current = self.capturing, None, "main"

        return capture()

    def end(self, device: int, pool: tuple[int, int]) -> None:
        if pool not in self.underway:
            raise RuntimeError("endAllocatePool: not currently recording to mempool_id")
        self.underway.remove(pool)

    def release(self, device: int, pool: tuple[int, int]) -> None:
        self.released.append(pool)


def test_a_failed_capture_gives_back_its_stream_and_ends_its_memory_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.cuda.graph leaves its side stream current when the capture fails, and (as we read
    torch's source) the caching allocator's pool of a capture that failed at its end is never
    ended: the allocator then holds back every freed block a second stream used, for the rest of
    the process (linalg_lu_factor_ex_out's out-of-memory row: 15 GiB in private pools after 14
    failed captures). The graph timer gives each capture a pool of its own, and after a failure
    makes the stream before it current again and ends and releases that pool, saying so in the
    row's fallback; a capture that ended its pool itself is not released twice; a capture that
    works is left to its graph."""
    import torch

    from harness.child.timing.base import CaptureRefused

    failing = StreamsAndPools(kernel_ms=0.04, fails=True)
    monkeypatch.setattr(torch._C, "_fakedev_endAllocateToPool", failing.end, raising=False)
    monkeypatch.setattr(torch._C, "_fakedev_releasePool", failing.release, raising=False)
    timer = _graph(None, failing)
    with pytest.raises(CaptureRefused) as refused:
        timer.measure(failing.call)
    assert failing.pools_given == [(0, 1)]  # a pool of its own
    assert failing.current == "main" and failing.underway == [] and failing.released == [(0, 1)]
    assert timer.pools_ended == 1
    assert refused.value.detail.endswith(
        "after the capture: the stream before it made current again, its memory pool ended and released")

    ended = StreamsAndPools(kernel_ms=0.04, fails=True, ends_itself=True)
    monkeypatch.setattr(torch._C, "_fakedev_endAllocateToPool", ended.end, raising=False)
    monkeypatch.setattr(torch._C, "_fakedev_releasePool", ended.release, raising=False)
    timer = _graph(None, ended)
    with pytest.raises(CaptureRefused) as refused:
        timer.measure(ended.call)
    assert ended.current == "main" and ended.released == [] and timer.pools_ended == 0
    assert refused.value.detail.endswith("after the capture: the stream before it made current again")

    working = StreamsAndPools(kernel_ms=0.04, fails=False)
    monkeypatch.setattr(torch._C, "_fakedev_endAllocateToPool", working.end, raising=False)
    monkeypatch.setattr(torch._C, "_fakedev_releasePool", working.release, raising=False)
    timer = _graph(None, working)
    assert statistics.median(timer.measure(working.call).values) == pytest.approx(0.04)
    assert working.pools_given == [(0, 1)] and working.released == [] and working.current == "main"


def test_the_generator_copy_is_the_devices_own_and_none_where_there_is_no_generator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from harness.child.plugins.timing import rng_keep

    class FakeGenerator:
        def __init__(self) -> None:
            self.state = "live"
            self.set: list[str] = []

        def clone_state(self) -> str:
            return f"copy of {self.state}"

        def graphsafe_set_state(self, state: str) -> None:
            self.set.append(state)

    class FakeCuda:
        default_generators = (FakeGenerator(), FakeGenerator())

        @staticmethod
        def current_device() -> int:
            return 0

    cuda = FakeCuda()
    monkeypatch.setattr(torch, "cuda", cuda)
    keep = rng_keep("cuda:1", "cuda")
    assert keep is not None
    put_back = keep()
    cuda.default_generators[1].state = "capturing"
    put_back()
    assert cuda.default_generators[1].set == ["copy of live"] and cuda.default_generators[0].set == []
    keep = rng_keep("cuda", "cuda")  # no index: the current device's
    assert keep is not None
    keep()()
    assert cuda.default_generators[0].set == ["copy of live"]

    class OldCuda:  # generators without clone_state / graphsafe_set_state: nothing to put back
        default_generators = (object(),)

    monkeypatch.setattr(torch, "cuda", OldCuda())
    keep = rng_keep("cuda:0", "cuda")
    assert keep is not None
    assert keep()() is None
    monkeypatch.setattr(torch, "cuda", object())
    assert rng_keep("cuda:0", "cuda") is None
    assert rng_keep("cpu", "cpu") is None


class CaptureFailingChained(FakeDevice):
    """The way a failed capture looks from torch: a generic outer error, the first one beneath it."""

    def call(self) -> None:
        if self.capturing is not None:
            footer = ("\nCUDA kernel errors might be asynchronously reported at some other API call, so the "
                      "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                      "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
            try:
                raise RuntimeError("CUDA error: operation not permitted when stream is capturing (.item())" + footer)
            except RuntimeError as first:
                raise RuntimeError("CUDA error: operation failed due to a previous error during capture"
                                   + footer) from first
        super().call()


def test_a_failed_captures_row_keeps_the_first_error_beneath_torchs_generic_one() -> None:
    """Triage needs the capture's first error: torch's outer one only says there was one."""
    from harness.errors import ContextPoisoned

    device = CaptureFailingChained(kernel_ms=0.04)
    timer = _graph(None, device)

    def broken() -> None:
        raise RuntimeError("Offset increment outside graph capture encountered unexpectedly.")

    timer.rng_probe = broken
    with pytest.raises(ContextPoisoned) as caught:
        timer.measure(device.call)
    # the runtime's footer lines are left out, so the first error is whole
    assert ("a previous error during capture <- RuntimeError: CUDA error: operation not permitted when stream is "
            "capturing (.item())) and left") in str(caught.value)
    assert "CUDA_LAUNCH_BLOCKING" not in str(caught.value) and "asynchronously" not in str(caught.value)


def test_the_random_probe_draws_without_moving_the_process_random_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib

    import torch

    from harness.child.plugins.timing import rng_probe

    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    probe = rng_probe("cpu", "cpu")
    assert probe is not None
    probe()
    assert torch.equal(torch.rand(3), expected)

    # On a device: the device's generator is the one forked, and the draw is made on the device.
    forked: list[tuple[list[int], str]] = []
    drawn: list[str] = []

    @contextlib.contextmanager
    def fork_rng(devices: list[int], device_type: str) -> Any:
        forked.append((devices, device_type))
        yield

    class FakeCuda:
        default_generators = (object(),)

        def get_rng_state(self) -> None:
            pass

    monkeypatch.setattr(torch, "cuda", FakeCuda())
    monkeypatch.setattr(torch.random, "fork_rng", fork_rng)
    monkeypatch.setattr(torch, "randn", lambda *size, device: drawn.append(device))
    probe = rng_probe("cuda:1", "cuda")
    assert probe is not None
    probe()
    assert forked == [([1], "cuda")] and drawn == ["cuda:1"]
    monkeypatch.setattr(torch, "cuda", object())  # a device module without generator state: no probe
    assert rng_probe("cuda:0", "cuda") is None


def test_an_op_process_told_to_capture_nothing_refuses_every_capture_with_the_parents_reason() -> None:
    """The retry of an op whose earlier attempt poisoned the context (harness.run.batch.capture_off_reason):
    the row falls back to the direct timer, saying why, and no graph is captured."""
    from dataclasses import replace

    from harness.child.timing.base import CaptureRefused

    device = FakeDevice(kernel_ms=0.04)
    timer = replace(_graph(None, device), denied="an earlier attempt of this op poisoned the device context")
    with pytest.raises(CaptureRefused) as refused:
        timer.measure(device.call)
    assert (refused.value.phase, refused.value.reason) == ("capture", "denied")
    assert "poisoned" in refused.value.detail and device.replays == 0


def test_the_graph_timer_says_whether_its_process_began_a_capture() -> None:
    """What the suite plugin reads before taking an error for a generator a capture left behind."""
    device = FakeDevice(kernel_ms=0.04)
    timer = _graph(None, device)
    assert not timer.captured
    timer.measure(device.call)
    assert timer.captured


def test_a_small_row_with_no_device_work_keeps_the_profilers_zero_reading() -> None:
    """The graph's first batch reads about 0 (small), the profiler timer finds no device work
    and reads 0 ms with its note: the row has that reading on both sides, not the graph's."""
    from harness.child.timing.profiler import NO_DEVICE_WORK

    nothing = Samples((0.0,) * 12, "profiler", False, NO_DEVICE_WORK.format(n=12))

    class NoWork(FakeTimer):
        def measure(self, fn: Any) -> Samples:
            self.calls += 1
            return nothing

    device = FakeDevice(kernel_ms=0.0)
    timer = _graph(NoWork(0.0, name="profiler"), device)
    timer.begin_row()
    sides = [timer.measure(device.call), timer.measure(device.call)]
    assert sides == [nothing, nothing]
