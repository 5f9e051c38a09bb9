"""A stand-in for FlagGems' benchmark/ directory (its v5.0.2 interfaces, written for the
harness's tests, no FlagGems code): options, shape-file lookup, do_bench looked up at call
time, ``--record log`` JSON lines. Kept as text and written to a temporary directory by
:func:`write_fake_suite`, so the harness's own pytest run never collects it.
"""

from __future__ import annotations

from pathlib import Path

FILES: dict[str, str] = {
    'FLAGGEMS_REF': 'fake-v5.0.2 (tests/data stand-in)\n',
    'benchmark/__init__.py': '',
}

FILES['benchmark/conftest.py'] = '''\
"""A stand-in for FlagGems' benchmark/conftest.py (v5.0.2 interface, written for the harness's
tests): the same options and the same ``--record log`` file (name from the invocation args,
written to the working directory, lines ``[INFO] <message>``)."""

import logging

import pytest

record_logger = logging.getLogger("fake_flaggems_benchmark")
record_logger.propagate = False


class _Config:
    level = "comprehensive"
    mode = "kernel"
    shape_file = None
    dtypes = None
    record = False


Config = _Config()


def pytest_addoption(parser):
    parser.addoption("--mode", default="kernel", choices=["kernel", "operator", "wrapper"])
    parser.addoption("--level", default="comprehensive", choices=["comprehensive", "core"])
    parser.addoption("--shape_file", default=None)
    parser.addoption("--dtypes", action="append", default=None)
    parser.addoption("--record", default="none", choices=["none", "log"])


def pytest_configure(config):
    Config.level = config.getoption("--level")
    Config.mode = config.getoption("--mode")
    Config.shape_file = config.getoption("--shape_file")
    Config.dtypes = config.getoption("--dtypes")
    Config.record = config.getoption("--record") == "log"
    if Config.record:
        parts = [a.replace(".py", "").replace("=", "_").replace("/", "_") for a in config.invocation_params.args]
        handler = logging.FileHandler(("result_" + "_".join(parts) + ".log").replace("_-", "-"), mode="w")
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
        record_logger.addHandler(handler)
        record_logger.setLevel(logging.INFO)
        record_logger.info("Benchmark record logger enabled")
'''

FILES['benchmark/core_shapes.yaml'] = '''\
common: &common
  shapes:
    - [64, 64]
ReductionLike:
  <<: *common
BlasLike:
  shapes:
    - [2, 32, 32, 32]
  shape_desc: "B, M, N, K"
mm_self_transpose:
  shapes:
    - [1, 8, 8, 8]
'''

FILES['benchmark/performance_utils.py'] = '''\
"""A stand-in for FlagGems' benchmark/performance_utils.py (its interface only): shapes from
the shape file by op name, then by Benchmark class name; latency from
``triton.testing.do_bench`` looked up at call time; one JSON result line per dtype."""

import json

import torch
import triton.testing
import yaml

from .conftest import Config, record_logger


class Benchmark:
    def __init__(self, op_name, torch_op, gems_op, input_fn):
        self.op_name, self.torch_op, self.gems_op, self.input_fn = op_name, torch_op, gems_op, input_fn

    def shapes(self):
        with open(Config.shape_file) as fh:
            table = yaml.safe_load(fh)
        if self.op_name in table:
            return [tuple(s) for s in table[self.op_name]["shapes"]]
        for cls in type(self).__mro__:
            if cls.__name__ in table:
                return [tuple(s) for s in table[cls.__name__]["shapes"]]
        return [(64, 64)]

    def latency(self, op, *args):
        return triton.testing.do_bench(lambda: op(*args), warmup=1000, rep=100, return_mode="median")

    def run(self):
        for name in Config.dtypes or ["float32"]:
            dtype = getattr(torch, name)
            metrics = []
            for shape in self.shapes():
                args = self.input_fn(shape, dtype)
                detail = [list(a.shape) if isinstance(a, torch.Tensor) else a for a in args]
                base = self.latency(self.torch_op, *args)
                gems = self.latency(self.gems_op, *args)
                metrics.append({"legacy_shape": None, "shape_detail": detail, "latency_base": base,
                                "latency": gems, "gbps_base": None, "gbps": None, "speedup": base / gems,
                                "accuracy": None, "tflops": None, "utilization": None,
                                "compared_speedup": None, "error_msg": None})
            result = {"op_name": self.op_name, "dtype": str(dtype), "mode": Config.mode,
                      "level": Config.level, "result": metrics}
            if Config.record:
                record_logger.info(json.dumps(result))


class ReductionLike(Benchmark):
    pass


class BlasLike(Benchmark):
    pass
'''

FILES['benchmark/test_reduction_perf.py'] = '''\
"""Stand-in reduction benchmarks, selected by pytest marks as in FlagGems' suite."""

import pytest
import torch

from benchmark.performance_utils import ReductionLike


def _inputs(shape, dtype):
    return (torch.randn(shape, dtype=dtype), 1)


@pytest.mark.parametrize(
    "name, torch_op",
    [pytest.param("softmax", torch.softmax, marks=pytest.mark.softmax),
     pytest.param("sum", torch.sum, marks=pytest.mark.sum)],
)
def test_general_reduction(name, torch_op):
    ReductionLike(name, torch_op, torch_op, _inputs).run()
'''

FILES['benchmark/test_blas_perf.py'] = '''\
"""Stand-in BLAS benchmarks: shapes are (B, M, N, K); mark mm selects two of them."""

import pytest
import torch

from benchmark.performance_utils import BlasLike


def _inputs(shape, dtype):
    _, m, n, k = shape
    return (torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype))


@pytest.mark.mm
def test_blas_benchmark():
    BlasLike("mm", torch.mm, torch.mm, _inputs).run()


@pytest.mark.mm
def test_mm_self_transpose_benchmark():
    BlasLike("mm_self_transpose", torch.mm, torch.mm, _inputs).run()
'''

FILES['benchmark/test_norm_perf.py'] = '''\
"""Stand-in norm benchmark with FlagGems v5.0.2's misspelt function name."""

import pytest


@pytest.mark.rms_norm
def tes_rms_norm():  # not collected by pytest (no test_ prefix), as in FlagGems v5.0.2
    raise AssertionError("never collected")
'''


def write_fake_suite(root: Path) -> Path:
    """Write the stand-in under ``root``; returns ``root / "benchmark"``."""
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "benchmark"
