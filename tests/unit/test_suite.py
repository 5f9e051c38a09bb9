"""Upstream-suite mode without a GPU: FlagGems' shape file written from ours, its result log
turned into records, the timer swap, the suite checks, and (slow) the whole mode driving a
stand-in of FlagGems' benchmark directory on the cpu backend.

Synthetic inputs follow FlagGems v5.0.2's formats: benchmark/conftest.py (log file and
``[INFO] <message>`` lines), attri_util.py (BenchmarkResult.to_json / BenchmarkMetrics) and
performance_utils.py (shape lookup: op name, then Benchmark class chain).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.backends import get_backend
from harness.child.plugins.suite import DoBenchSwap
from harness.errors import UsageError
from harness.ops.registry import load_op
from harness.options import RunOptions
from harness.results.store import read_json, read_records
from harness.run.execute import Prepared, execute
from harness.run.plan import OpPlan, RunPlan
from harness.run.plugins import PluginPlan
from harness.suite.convert import (
    SUITE_PROVIDER,
    RecordContext,
    convert_results,
    match_timings,
    parse_record_log,
)
from harness.suite.nodes import SUITE_NODES, first_tensor_shape, locate_suite, node_for
from harness.suite.runner import SuiteRunner, prepare_suite, suite_command
from harness.suite.shapefile import suite_shape_config
from harness.suite.timings import TimingEntry, bench_result, parse_timings
from tests.data.fake_flaggems_suite import write_fake_suite

# -- the shape file -------------------------------------------------------------------------------------

THEIRS = {
    "BlasBenchmark": {"shapes": [[2, 384, 384, 384], [16, 4096, 4096, 4096]], "shape_desc": "B, M, N, K"},
    "UnaryReductionBenchmark": {"shapes": [[1048576], [64, 64]]},
    "mm_self_transpose": {"shapes": [[257, 96]]},
}


def flaggems_lookup(config: dict[str, Any], op_name: str, class_chain: list[str]) -> list[tuple[int, ...]]:
    """How FlagGems' Benchmark.set_shapes picks shapes: the op's key, else the first class in the chain."""
    for key in [op_name, *class_chain]:
        if key in config:
            return [tuple(s) for s in config[key]["shapes"]]
    return []


def test_our_shapes_win_over_flaggems_class_level_shapes_and_the_rest_is_kept() -> None:
    node = SUITE_NODES["mm"]
    ours = [(4096, 11008, 4096), (8, 16, 32)]
    config = suite_shape_config(THEIRS, {"mm": [node.to_suite(s) for s in ours]}, {"mm": node.shape_desc})
    text = yaml.safe_dump(config, sort_keys=False)  # what write_shape_file writes (after a header)
    loaded = yaml.safe_load(text)
    assert flaggems_lookup(loaded, "mm", ["BlasBenchmark", "Benchmark"]) == [(1, 4096, 11008, 4096), (1, 8, 16, 32)]
    assert loaded["mm"]["shape_desc"] == "B, M, N, K"
    # another benchmark the same mark selects keeps FlagGems' own shapes
    assert flaggems_lookup(loaded, "mm_self_transpose", ["Benchmark"]) == [(257, 96)]
    assert flaggems_lookup(loaded, "addmm", ["BlasBenchmark"]) == [(2, 384, 384, 384), (16, 4096, 4096, 4096)]
    assert "mm" not in THEIRS  # the input is left alone


def test_mm_shapes_round_trip_between_harness_and_flaggems_conventions() -> None:
    node = SUITE_NODES["mm"]
    m, n, k = 128, 64, 32
    b, m2, n2, k2 = node.to_suite((m, n, k))
    logged = [[m2, k2], [k2, n2]]  # mm_input_fn yields A (M, K) and B (K, N); sizes logged
    assert node.from_suite(logged) == (m, n, k)


def test_shape_of_a_logged_call_is_its_first_tensor() -> None:
    assert first_tensor_shape([[4096, 1024], 1]) == (4096, 1024)  # softmax(x, 1)
    assert first_tensor_shape([[[8, 32], [32]], {"eps": 1e-5}]) == (8, 32)  # args and kwargs
    assert first_tensor_shape([1, 2.0]) == ()


def test_a_shape_entry_without_shapes_is_refused() -> None:
    with pytest.raises(ValueError):
        suite_shape_config(THEIRS, {"mm": []})


# -- the result log --------------------------------------------------------------------------------------


def metric(shape: list[int], base: float | None, gems: float | None, **more: Any) -> dict[str, Any]:
    data = {"legacy_shape": None, "shape_detail": [shape, 1], "latency_base": base, "latency": gems,
            "gbps_base": None, "gbps": None, "speedup": (base / gems) if base and gems else None,
            "accuracy": None, "tflops": None, "utilization": None, "compared_speedup": None, "error_msg": None}
    data.update(more)
    return data


def result_line(op: str, dtype: str, metrics: list[dict[str, Any]]) -> str:
    body = {"op_name": op, "dtype": f"torch.{dtype}", "mode": "kernel", "level": "core", "result": metrics}
    return "[INFO] " + json.dumps(body)


LOG = "\n".join([
    "[INFO] Benchmark record logger enabled",
    result_line("softmax", "float16", [metric([4096, 1024], 0.020, 0.010), metric([8192, 4096], 0.090, 0.060)]),
    "[INFO] {'op_name': 'softmax', 'recommended_core_shapes': [(64, 64)], 'shape_desc': 'M, N'}",  # query mode
    "[INFO] [",  # an indented JSON dump of op attributes follows
    '  {"op_name": "softmax"}',
    "]",
    result_line("softmax", "bfloat16", [metric([4096, 1024], 0.021, None, error_msg="CUDA error: boom")]),
]) + "\n"


def test_result_lines_are_read_and_other_lines_skipped() -> None:
    parsed = parse_record_log(io.StringIO(LOG))
    assert [(r.op_name, r.dtype, len(r.metrics)) for r in parsed.results] == [
        ("softmax", "float16", 2), ("softmax", "bfloat16", 1)]
    assert parsed.skipped == 1  # the query-mode dict repr


def entries(*results: float, samples: int = 5) -> list[TimingEntry]:
    return [TimingEntry(i + 1, r, tuple(r * (1 + 0.01 * j) for j in range(samples)), "direct")
            for i, r in enumerate(results)]


def test_each_latency_is_paired_with_the_timing_that_returned_it_in_order() -> None:
    timings = entries(0.5, 0.020, 0.010, 0.010, 0.7)  # 0.5: a call whose result never got logged
    got = match_timings([0.020, 0.010, 0.010, None, 0.9], timings)
    assert [e.seq if e else None for e in got] == [2, 3, 4, None, None]


CTX = RecordContext(run_id="r1", backend="cuda", device="0", device_name="NVIDIA H200", cache="cold")


def test_conversion_gives_harness_records_with_raw_samples_and_our_byte_model() -> None:
    parsed = parse_record_log(io.StringIO(LOG))
    spec = load_op("softmax")
    conv = convert_results(parsed.results, entries(0.020, 0.010, 0.090, 0.060), node_for("softmax"), CTX,
                           bytes_moved=spec.bytes_moved, flops=spec.flops)
    first, second, failed = conv.records
    assert first.case_id == "softmax[flaggems-suite-float16-4096x1024]"  # what the plan expects
    assert first.status == "pass" and first.timer == "direct" and first.provider == SUITE_PROVIDER
    assert first.candidate is not None and first.candidate.summary.n == 5
    assert first.speedup == pytest.approx(2.0, rel=1e-6)
    assert first.gbps == pytest.approx(2 * 4096 * 1024 * 2 / (first.candidate.summary.median * 1e-3) / 1e9)
    assert first.correctness is None and "correctness not checked" in first.notes[0]
    assert first.extra["suite"]["latency"] == 0.010
    assert second.shape == (8192, 4096)
    assert failed.status == "error" and "CUDA error: boom" in failed.message and failed.speedup is None
    assert conv.unmatched == 0


def test_a_latency_flaggems_timed_itself_becomes_one_sample_and_says_so() -> None:
    parsed = parse_record_log(io.StringIO(result_line("softmax", "float32", [metric([64, 64], 0.004, 0.002)])))
    (record,) = convert_results(parsed.results, [], node_for("softmax"), CTX).records
    assert record.candidate is not None and record.candidate.samples_ms == (0.002,)
    assert record.speedup == pytest.approx(2.0)
    assert any("FlagGems' own timer" in n for n in record.notes)


def test_rows_of_other_benchmarks_the_mark_selects_are_reported_not_recorded() -> None:
    lines = [result_line("mm", "float16", [{**metric([], 1.0, 0.5), "shape_detail": [[64, 32], [32, 16]]}]),
             result_line("mm_self_transpose", "float16", [metric([257, 96], 0.3, 0.2)])]
    conv = convert_results(parse_record_log(lines).results, entries(1.0, 0.5, 0.3, 0.2), node_for("mm"), CTX)
    assert [r.case_id for r in conv.records] == ["mm[flaggems-suite-float16-64x16x32]"]
    assert conv.other_ops == ("mm_self_transpose",)


def test_several_inputs_of_one_shape_stay_apart() -> None:
    line = result_line("softmax", "float16", [metric([64, 64], 0.004, 0.002), metric([64, 64], 0.005, 0.002)])
    records = convert_results(parse_record_log([line]).results, [], node_for("softmax"), CTX).records
    assert [r.provider for r in records] == ["flaggems-suite", "flaggems-suite.v2"]


# -- the timer swap ------------------------------------------------------------------------------------


def test_do_bench_returns_what_flaggems_asks_for_from_our_samples() -> None:
    values = [3.0, 1.0, 2.0, 4.0]
    assert bench_result(values, return_mode="median") == 2.5
    assert bench_result(values, return_mode="min") == 1.0
    assert bench_result(values, quantiles=[0.5]) == 2.5
    assert bench_result(values, quantiles=[0.0, 1.0]) == [1.0, 4.0]
    assert bench_result(values, return_mode="all") == values
    with pytest.raises(ValueError):
        bench_result(values, return_mode="p99")


class FixedTimer:
    name = "direct"

    def measure(self, fn: Any) -> Any:
        from harness.child.timing.base import Samples

        fn()
        return Samples((0.3, 0.1, 0.2), "direct", noisy=True)


def test_the_swap_replaces_tritons_do_bench_records_samples_and_restores_it(tmp_path: Path) -> None:
    import triton.testing

    original = triton.testing.do_bench
    swap = DoBenchSwap(timer=FixedTimer(), sidecar=tmp_path / "timings.jsonl")
    calls: list[int] = []
    swap.install()
    try:
        got = triton.testing.do_bench(lambda: calls.append(1), warmup=1000, rep=100, return_mode="median")
    finally:
        swap.restore()
    assert triton.testing.do_bench is original
    assert got == 0.2 and calls
    (entry,) = parse_timings((tmp_path / "timings.jsonl").read_text().splitlines())
    assert entry.result == 0.2 and entry.samples_ms == (0.3, 0.1, 0.2) and entry.noisy


# -- checks and commands -------------------------------------------------------------------------------


def test_suite_directory_is_checked_with_the_fix_in_the_message(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such directory"):
        locate_suite(tmp_path / "nope")
    other = tmp_path / "bench"
    other.mkdir()
    with pytest.raises(UsageError, match="must be named benchmark"):
        locate_suite(other)
    new = tmp_path / "new" / "benchmark"
    new.mkdir(parents=True)
    (new / "conftest.py").write_text("")
    (new / "base.py").write_text("")
    with pytest.raises(UsageError, match="5.3\\+ suite layout"):
        locate_suite(new)
    suite = locate_suite(write_fake_suite(tmp_path / "fg"))
    assert suite.ref.startswith("fake-v5.0.2") and suite.root == (tmp_path / "fg").resolve()


def test_the_op_process_selects_by_mark_excludes_other_benchmarks_and_injects_shapes(tmp_path: Path) -> None:
    suite = locate_suite(write_fake_suite(tmp_path / "fg"))
    work = tmp_path / "run" / "suite" / "mm"
    cmd = suite_command(node_for("mm"), suite, work, Path("/w/spec.json"), ("float16", "bfloat16"))
    assert cmd.args == ["../../../fg/benchmark/test_blas_perf.py",
                        "-m", "mm", "-k", "not backward and not test_mm_self_transpose_benchmark",
                        "--shape_file", "shapes.yaml"]
    addopts = " ".join(cmd.addopts)
    for part in ("--record log", "--level core", "--mode kernel", "--dtypes float16 --dtypes bfloat16",
                 "-p harness.child.plugins.suite --harness-suite-spec /w/spec.json", f"--rootdir {suite.root}"):
        assert part in addopts
    assert cmd.env()["PYTEST_ADDOPTS"].startswith("--level core")


def test_flaggems_log_file_name_stays_under_the_file_name_limit(tmp_path: Path) -> None:
    """FlagGems names the log after the invocation arguments ("/" -> "_"); it must stay a legal name."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    suite = locate_suite(write_fake_suite(deep / "FlagGems"))
    work = deep / "reports" / "20261129T120000Z-cuda-abc123" / "suite" / "mm"
    cmd = suite_command(node_for("mm"), suite, work, work / "spec.json", ("float16", "bfloat16", "float32"))
    args = cmd.args
    name = "result_{}.log".format("_".join(a.replace(".py", "").replace("=", "_").replace("/", "_") for a in args))
    assert len(name.replace("_-", "-").encode()) < 255


def test_suite_mode_refuses_the_cpu_backend_and_missing_ops(tmp_path: Path) -> None:
    path = str(write_fake_suite(tmp_path))
    with pytest.raises(UsageError, match="need a GPU FlagGems supports"):
        prepare_suite(RunOptions(backend="cpu", ops=("softmax",)), path, {})
    with pytest.raises(UsageError, match="--timer graph"):
        prepare_suite(RunOptions(backend="cuda", ops=("softmax",), timer="graph"), path, {})
    with pytest.raises(UsageError, match="needs --ops"):
        prepare_suite(RunOptions(backend="cuda"), path, {})


# -- the whole mode, on a stand-in suite ---------------------------------------------------------------


@pytest.mark.slow
def test_suite_mode_runs_flaggems_style_benchmarks_into_records(tmp_path: Path) -> None:
    suite = locate_suite(write_fake_suite(tmp_path / "FlagGems"))
    options = RunOptions(backend="cpu", ops=("softmax", "mm", "rms_norm"), dtypes=("float32",),
                         provider=SUITE_PROVIDER, timer="cpu", progress="plain", op_timeout=300.0)
    ops = tuple(OpPlan(op=op, device="cpu", dtypes=("float32",), shapes=shapes, provider=SUITE_PROVIDER)
                for op, shapes in (("softmax", ((32, 64), (16, 8))), ("mm", ((16, 8, 4),)), ("rms_norm", ((8, 8),))))
    plan = RunPlan(run_id="r1", backend=get_backend("cpu"), level="smoke",
                   plugins=PluginPlan(("harness.child.plugins.suite",), "cpu", ("suite",)),
                   devices=("cpu",), ops=ops, options=options)
    run_dir = tmp_path / "run"
    out = io.StringIO()
    code = execute(Prepared(plan=plan, run_dir=run_dir, runner=SuiteRunner(suite)), {"PATH": "/usr/bin:/bin"}, out)
    assert code == 0, out.getvalue() + (run_dir / "logs" / "mm.log").read_text()
    records = {r.case_id: r for r in read_records(run_dir / "records.jsonl")}
    assert set(records) == {"softmax[flaggems-suite-float32-32x64]", "softmax[flaggems-suite-float32-16x8]",
                            "mm[flaggems-suite-float32-16x8x4]"}  # our shapes, not the suite's
    assert all(r.status == "pass" and r.timer == "cpu" and r.candidate and r.candidate.summary.n >= 3
               for r in records.values())
    info = read_json(run_dir / "run.json")
    assert info["suite"]["ref"].startswith("fake-v5.0.2") and info["status"] == "complete"
    ops_status = {o["op"]: o for o in info["ops"]}
    assert ops_status["rms_norm"]["status"] == "SKIP" and "mark 'rms_norm'" in ops_status["rms_norm"]["notes"]
    assert "mm_self_transpose" not in (run_dir / "logs" / "mm.log").read_text().split("===")[-1].split("\n", 1)[1]
    rows = list(csv.DictReader(io.StringIO((run_dir / "summary.csv").read_text())))
    assert sorted(r["provider"] for r in rows) == ["flaggems-suite"] * 3
