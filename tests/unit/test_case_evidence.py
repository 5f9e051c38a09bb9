"""What the op process records for the gate (issue 14), without a device: clocks around each
case's timing, whether samples settled, one timer per row, the small-kernel switch of the
graph timer, the device reader, and the cpu backend's threads and report note."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
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


@dataclass
class _Graph(GraphTimer):
    """The graph timer's row logic with the device part replaced by fixed readings."""

    readings: list[float] = field(default_factory=list)

    def measure(self, fn: Any) -> Samples:
        value = self.readings.pop(0)
        return self._small(Samples((value,) * 10, "graph"), fn)


def _graph(small: Any, readings: list[float], threshold: float = 0.005) -> _Graph:
    return _Graph(api=None, backend=get_backend("cuda"), op_id="add", small_timer=small,  # type: ignore[arg-type]
                  small_kernel_ms=threshold, readings=readings)


def test_a_row_of_small_kernels_is_timed_by_the_profiler_candidate_and_baseline_alike() -> None:
    profiler = FakeTimer(0.0011, name="profiler")
    timer = _graph(profiler, [0.0014, 0.0400])  # the candidate is small, torch's kernel is not
    timer.begin_row()
    assert timer.measure(lambda: None).timer == "profiler"
    assert timer.measure(lambda: None).timer == "profiler"  # the row keeps one timer
    timer.readings = [0.0400, 0.0014]
    timer.begin_row()
    assert [timer.measure(lambda: None).timer for _ in range(2)] == ["graph", "graph"]
    assert profiler.calls == 2


def test_the_small_kernel_switch_off_or_without_a_profiler_keeps_the_graph() -> None:
    off = _graph(FakeTimer(0.001, name="profiler"), [0.0014], threshold=0.0)
    assert off.measure(lambda: None).timer == "graph"
    none = _graph(None, [0.0014])
    assert none.measure(lambda: None).timer == "graph"

    class Broken(FakeTimer):
        def measure(self, fn: Any) -> Samples:
            raise RuntimeError("the profiler recorded no kernels")

    broken = _graph(Broken(0.0), [0.0014, 0.0014])
    broken.begin_row()
    assert [broken.measure(lambda: None).timer for _ in range(2)] == ["graph", "graph"]


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
