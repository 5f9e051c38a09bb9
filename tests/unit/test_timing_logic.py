"""Timer logic that needs no device: sample extraction, unrolling, adaptive stopping."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

from harness.child.timing.base import Budget, adaptive_samples, rel_spread, reps_for
from harness.child.timing.flush import FLUSH_KERNEL_NAME, MARKER_KERNEL_NAME, flush_bytes
from harness.child.timing.graph import unroll_for
from harness.child.timing.profiler import kernel_samples


def test_kernel_samples_exclude_flush_and_group_per_iteration() -> None:
    kernels = [
        ("warmup_leftover", 0.0, 9.0),  # before the first boundary: ignored
        (FLUSH_KERNEL_NAME, 10.0, 30.0),
        ("softmax_kernel", 41.0, 2.0),
        (FLUSH_KERNEL_NAME, 50.0, 30.0),
        ("gemm_part1", 81.0, 3.0),
        ("gemm_part2", 85.0, 1.0),  # two kernels of one call are summed
        (FLUSH_KERNEL_NAME, 90.0, 30.0),  # trailing boundary with nothing after it
    ]
    assert kernel_samples(kernels) == [0.002, 0.004]


def test_kernel_samples_with_markers_and_unsorted_input() -> None:
    kernels = [("k", 21.0, 5.0), (MARKER_KERNEL_NAME, 20.0, 0.5), (MARKER_KERNEL_NAME, 30.0, 0.5), ("k", 31.0, 7.0)]
    assert kernel_samples(kernels) == [0.005, 0.007]


def test_flush_buffer_is_at_least_twice_l2() -> None:
    assert flush_bytes(60 * 2**20) == 256 * 2**20  # H200's 60 MiB L2: the 256 MiB floor wins
    assert flush_bytes(256 * 2**20) == 512 * 2**20
    assert flush_bytes(None) == 256 * 2**20


def test_unroll_and_reps_scale_with_estimate() -> None:
    assert unroll_for(0.001) == 100  # 1 us kernels: the cap
    assert unroll_for(0.1) == 20
    assert unroll_for(5.0) == 1
    assert reps_for(100.0, 0.01, 5, 1000) == 1000
    assert reps_for(100.0, 50.0, 5, 1000) == 5


def test_adaptive_sampling_stops_when_settled() -> None:
    calls = []

    def take(n: int) -> list[float]:
        calls.append(n)
        return [1.0] * n

    values, noisy = adaptive_samples(take, 1.0, Budget(rep_ms=10.0, min_reps=5))
    assert not noisy and len(calls) == 1 and len(values) == 10


def test_adaptive_sampling_marks_rows_that_never_settle() -> None:
    wild = itertools.cycle([1.0, 3.0, 0.5, 8.0])

    def take(n: int) -> list[float]:
        return [next(wild) for _ in range(n)]

    values, noisy = adaptive_samples(take, 1.0, Budget(rep_ms=8.0, min_reps=5, max_reps=8, cap_ms=1e9))
    assert noisy
    assert len(values) >= 32  # kept sampling up to the repetition cap before giving up
    assert rel_spread(values) > 0.01


def test_the_cap_option_reaches_every_timer_of_an_op_process() -> None:
    """``--cap-ms`` (options) -> the child spec -> each timer's budget; the cpu timer keeps its
    lower cap of 200 ms."""
    from harness.backends import get_backend
    from harness.child.plugins.timing import timers_for
    from harness.contract import ChildSpec
    from harness.options import resolve_run_options

    options = resolve_run_options({"cap_ms": 300.0}, {})
    assert options.cap_ms == 300.0 and resolve_run_options({}, {"HARNESS_CAP_MS": "250"}).cap_ms == 250.0
    spec = ChildSpec(run_id="r", run_dir="/tmp/r", backend="cuda", device="0", op="add", provider="builtin",
                     dtypes=("float32",), shapes=((8,),), seed=0, timer="graph", cache="warm", cap_ms=options.cap_ms)
    timers = timers_for(spec, get_backend("cuda"), "cuda:0", None)
    small = getattr(timers.primary, "small_timer", None)
    assert [t.budget.cap_ms for t in (timers.primary, small, timers.fallback)] == [300.0] * 3  # type: ignore[union-attr]
    cpu = timers_for(ChildSpec(**{**spec.__dict__, "backend": "cpu", "timer": "cpu", "cap_ms": 5000.0}),
                     get_backend("cpu"), "cpu", None)
    assert cpu.primary.budget.cap_ms == 200.0  # type: ignore[attr-defined]
    assert timers_for(ChildSpec(**{**spec.__dict__, "backend": "cpu", "timer": "cpu", "cap_ms": 50.0}),
                      get_backend("cpu"), "cpu", None).primary.budget.cap_ms == 50.0  # type: ignore[attr-defined]


def test_a_batch_taken_before_counts_against_the_cap() -> None:
    """The graph timer's deciding batch is handed in with the time it began: a row that does not
    settle stops at the cap, not the cap plus that batch."""
    import time

    calls: list[int] = []

    def take(n: int) -> list[float]:
        calls.append(n)
        return [1.0, 2.0] * (n // 2)  # never settles

    budget = Budget(rep_ms=10.0, min_reps=4, max_reps=8, cap_ms=50.0)
    values, noisy = adaptive_samples(take, 1.0, budget, first=[1.0, 2.0] * 4, started=time.perf_counter() - 0.06)
    assert noisy and calls == [] and len(values) == 8  # the cap was spent by the first batch
    values, noisy = adaptive_samples(take, 1.0, budget, first=[1.0, 2.0] * 4, started=time.perf_counter())
    assert noisy and calls  # within the cap: more batches


def test_the_cap_option_is_in_the_specs_of_measuring_and_sweep_processes(tmp_path: Path) -> None:
    """The harness's own op processes and their sweep shards (the suite's are checked in
    tests/unit/test_suite.py) get ``--cap-ms`` in their child spec."""
    from harness.backends import get_backend
    from harness.contract import ChildSpec
    from harness.options import RunOptions
    from harness.run.batch import CaseRunner
    from harness.run.context import BatchContext
    from harness.run.plan import OpPlan, RunPlan
    from harness.run.plugins import plan_plugins
    from harness.run.spawn import StopToken
    from harness.run.sweep import SweepFiles, case_sweep_launch

    options = RunOptions(cap_ms=250.0)
    cpu = get_backend("cpu")
    op_plan = OpPlan("add", "cpu", ("float32",), ((8,),), "builtin")
    plan = RunPlan(run_id="r", backend=cpu, level="smoke", plugins=plan_plugins(cpu, "auto", (), (), "on"),
                   devices=("cpu",), ops=(op_plan,), options=options)
    ctx = BatchContext(plan, tmp_path, {}, StopToken(), None, CaseRunner())  # type: ignore[arg-type]
    CaseRunner().launch(ctx, op_plan, 1, ())
    assert ChildSpec.load(ctx.files.spec("add")).cap_ms == 250.0
    case_sweep_launch(ctx, op_plan, 0, "cpu", ("add[builtin-float32-8]",))
    assert ChildSpec.load(SweepFiles(tmp_path, "add").process_spec(0)).cap_ms == 250.0
    shard = ChildSpec.load(SweepFiles(tmp_path, "add").process_spec(0))
    assert shard.sweep is not None and shard.sweep.configs_out == str(SweepFiles(tmp_path, "add").process_configs(0))
    assert shard.skip_cases == () and ChildSpec.load(ctx.files.spec("add")).sweep is None
    assert ChildSpec.load(ctx.files.spec("add")).capture_off == ""
    CaseRunner().launch(ctx, op_plan, 2, (), capture_off="poisoned earlier")  # a retry after a poisoned attempt
    assert ChildSpec.load(ctx.files.spec("add")).capture_off == "poisoned earlier"


class _Profiled:
    """A device without a device for the profiler timer: the boundary and the op's call each add
    their kernel to the open profiler session (none when the call launches nothing), and a fake
    ``torch.profiler.profile`` hands each session's kernels to the timer."""

    def __init__(self, kernel_us: float | None) -> None:
        self.kernel_us, self.sessions, self.now = kernel_us, 0, 0.0
        self.session: list[tuple[str, float, float]] | None = None

    def _add(self, name: str, us: float) -> None:
        self.now += us + 1.0
        if self.session is not None:
            self.session.append((name, self.now, us))

    def boundary(self) -> None:
        self._add(FLUSH_KERNEL_NAME, 30.0)

    def call(self) -> None:
        if self.kernel_us is not None:
            self._add("op_kernel", self.kernel_us)

    def synchronize(self) -> None:
        pass

    def Event(self, enable_timing: bool = True) -> object:  # noqa: N802 - torch's spelling
        device = self

        class Event:
            at = 0.0

            def record(self) -> None:
                self.at = device.now / 1e3

            def elapsed_time(self, other: Event) -> float:
                return other.at - self.at

        return Event()

    def patch(self, monkeypatch: object) -> None:
        import contextlib

        import torch.profiler

        from harness.child.timing import profiler

        @contextlib.contextmanager
        def profile(activities: object = None) -> Iterator[list[tuple[str, float, float]]]:
            self.session, self.sessions = [], self.sessions + 1
            yield self.session
            self.session = None

        monkeypatch.setattr(torch.profiler, "profile", profile)  # type: ignore[attr-defined]
        monkeypatch.setattr(profiler, "_device_kernels", lambda prof: list(prof))  # type: ignore[attr-defined]


def _profiler_timer(device: _Profiled) -> object:
    from harness.child.timing.base import DeviceApi
    from harness.child.timing.profiler import ProfilerTimer

    return ProfilerTimer(api=DeviceApi(device), device="cpu", flush=device.boundary,  # type: ignore[arg-type]
                         budget=Budget(warmup_ms=0.1, rep_ms=1.0, min_reps=10, max_reps=50, cap_ms=50.0))


def test_a_call_that_launches_no_device_work_reads_zero_after_one_batch(monkeypatch: object) -> None:
    """The profiler saw every boundary and nothing between them: 0 ms per call, settled, with a
    note that says so, from the first batch (it used to fail, and the graph sampled to the cap)."""
    from harness.child.timing.base import resolved_medians
    from harness.child.timing.profiler import boundaries

    nothing = _Profiled(kernel_us=None)
    nothing.patch(monkeypatch)
    samples = _profiler_timer(nothing).measure(nothing.call)  # type: ignore[attr-defined]
    assert nothing.sessions == 1 and not samples.noisy and samples.timer == "profiler"
    assert set(samples.values) == {0.0} and len(samples.values) >= 10  # one batch, at least min_reps
    assert samples.note == (f"no device work: the profiler recorded the boundaries of {len(samples.values)} calls "
                            "and no kernel between them")
    assert resolved_medians(0.0, 0.0)[2]  # the row then gets no speedup, and says why
    assert boundaries([(FLUSH_KERNEL_NAME, 0.0, 1.0), ("k", 2.0, 1.0), (MARKER_KERNEL_NAME, 4.0, 1.0)]) == 2

    working = _Profiled(kernel_us=2.0)
    working.patch(monkeypatch)
    samples = _profiler_timer(working).measure(working.call)  # type: ignore[attr-defined]
    assert set(samples.values) == {0.002} and samples.note == ""


def test_a_profile_without_its_boundaries_is_still_a_failure(monkeypatch: object) -> None:
    """No CUPTI: the session records nothing, boundaries included; that is no reading of 0."""
    import pytest

    from harness.child.timing import profiler

    blind = _Profiled(kernel_us=2.0)
    blind.patch(monkeypatch)
    monkeypatch.setattr(profiler, "_device_kernels", lambda prof: [])  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="recorded no kernels"):
        _profiler_timer(blind).measure(blind.call)  # type: ignore[attr-defined]


def test_an_empty_batch_after_batches_with_kernels_is_no_reading_of_zero(monkeypatch: object) -> None:
    """A measurement whose first batch had kernels and a later one none did not stop launching
    work: that is the profiler's failure (as before), not 0 ms."""
    import pytest

    flaky = _Profiled(kernel_us=2.0)
    flaky.patch(monkeypatch)
    calls = {"n": 0}

    def call() -> None:
        calls["n"] += 1
        if flaky.sessions <= 1:  # kernels in the first profiler batch (and the warm-up), none later
            flaky._add("op_kernel", 2.0 + calls["n"] % 3)  # spread out: the first batch does not settle

    timer = _profiler_timer(flaky)
    with pytest.raises(RuntimeError, match="recorded no kernels"):
        timer.measure(call)  # type: ignore[attr-defined]
    assert flaky.sessions == 2
