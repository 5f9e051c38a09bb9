"""benchmarks/flaggems_stream.py: FlagGems' own runner's results kept as they come (no GPU)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import flaggems_stream  # noqa: E402


def test_each_result_is_written_the_moment_flaggems_records_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded: list[tuple[Any, Any]] = []
    base = types.ModuleType("benchmark.base")  # what FlagGems' base module holds: Benchmark, update_result
    base.Benchmark = type("Benchmark", (), {})  # type: ignore[attr-defined]
    base.update_result = lambda op, data: recorded.append((op, data))  # type: ignore[attr-defined]
    bystander = types.ModuleType("bystander")
    bystander.update_result = lambda op, data: None  # type: ignore[attr-defined]  # no Benchmark: left alone
    monkeypatch.setitem(sys.modules, "benchmark.base", base)
    monkeypatch.setitem(sys.modules, "bystander", bystander)
    stream = tmp_path / "results.jsonl"
    monkeypatch.setenv("FLAGGEMS_STREAM", str(stream))

    flaggems_stream.pytest_collection_finish(None)
    flaggems_stream.pytest_collection_finish(None)  # a second call does not wrap twice
    result = {"op_name": "ceil", "dtype": "torch.bfloat16", "result": [{"speedup": 0.45}]}
    base.update_result("ceil", result)  # type: ignore[attr-defined]
    assert [json.loads(line) for line in stream.read_text().splitlines()] == [result]  # one line, before the end
    assert recorded == [("ceil", result)]  # FlagGems' own bookkeeping still runs
    assert not hasattr(bystander.update_result, "_flaggems_stream")


def test_without_a_stream_file_nothing_is_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    base = types.ModuleType("benchmark.base")
    base.Benchmark = type("Benchmark", (), {})  # type: ignore[attr-defined]
    original = base.update_result = lambda op, data: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "benchmark.base", base)
    monkeypatch.delenv("FLAGGEMS_STREAM", raising=False)
    flaggems_stream.pytest_collection_finish(None)
    assert base.update_result is original  # type: ignore[attr-defined]


def test_a_module_recording_through_its_log_alone_is_streamed_and_json_text_becomes_a_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FlagGems' test_blas_perf_parallel.py records with emit_record_logger(result.to_json()) and
    no update_result; test_convert_weight_to_int4pack.py hands update_result JSON text."""
    logged: list[Any] = []
    parallel = types.ModuleType("benchmark.test_blas_perf_parallel")
    parallel.Benchmark = type("Benchmark", (), {})  # type: ignore[attr-defined]
    parallel.BenchmarkResult = type("BenchmarkResult", (), {})  # type: ignore[attr-defined]
    parallel.emit_record_logger = logged.append  # type: ignore[attr-defined]
    # as FlagGems' module: `from . import base` (no Benchmark of its own), BenchmarkResult from consts
    text_module = types.ModuleType("benchmark.test_convert_weight_to_int4pack")
    text_module.BenchmarkResult = type("BenchmarkResult", (), {})  # type: ignore[attr-defined]
    text_module.update_result = lambda op, data: None  # type: ignore[attr-defined]
    text_module.emit_record_logger = logged.append  # type: ignore[attr-defined]  # called too: not streamed
    conftest = types.ModuleType("benchmark.conftest")  # defines both, records nothing of its own
    conftest.update_result = lambda op, data: None  # type: ignore[attr-defined]
    conftest.emit_record_logger = lambda message: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, conftest.__name__, conftest)
    monkeypatch.setitem(sys.modules, parallel.__name__, parallel)
    monkeypatch.setitem(sys.modules, text_module.__name__, text_module)
    stream = tmp_path / "results.jsonl"
    monkeypatch.setenv("FLAGGEMS_STREAM", str(stream))
    flaggems_stream.pytest_collection_finish(None)
    flaggems_stream.pytest_collection_finish(None)  # wrapped once
    addr = {"op_name": "addr", "result": [{"speedup": 1.1}, {"speedup": 0.9}]}
    parallel.emit_record_logger({"op_name": "addr", "recommended_core_shapes": []})  # type: ignore[attr-defined]
    parallel.emit_record_logger(json.dumps(addr))  # type: ignore[attr-defined]
    packed = {"op_name": "convert_weight_to_int4pack", "result": [{"speedup": 2.0}]}
    text_module.update_result("convert_weight_to_int4pack", json.dumps(packed))  # type: ignore[attr-defined]
    text_module.emit_record_logger(json.dumps(packed))  # type: ignore[attr-defined]
    assert not hasattr(conftest.update_result, "_flaggems_stream")
    assert not hasattr(conftest.emit_record_logger, "_flaggems_stream")
    assert [json.loads(line) for line in stream.read_text().splitlines()] == [addr, packed]  # no attributes line
    assert logged == [{"op_name": "addr", "recommended_core_shapes": []}, json.dumps(addr),
                      json.dumps(packed)]  # FlagGems' log still runs
