"""Stand-ins for FlagGems' benchmark trees and for the flag_gems package, for the harness's tests.

Written for these tests (no FlagGems code): the interfaces the harness relies on, in both
layouts. ``Benchmark`` has FlagGems' method names and call order (``init_user_config`` ->
``set_dtypes``/``set_shapes``; per dtype and input: ``get_latency(torch_op)`` then
``get_latency(gems_op)`` or ``get_latency(torch_op)`` inside ``flag_gems.use_gems()``), shape
lookup by op_name then class chain, ``--level``/``--shape_file``/``--dtypes`` options. The
stand-in ``flag_gems`` runs on the CPU: ``use_gems()`` changes nothing but the flag the real one
sets (``current_work_registrar``), and ``broken_add`` is wrong on purpose. ``flag_gems.tuned`` has
two autotuned kernels for the autotune and sweep tests (``tuned=True`` adds their benchmarks), in
a backend module loaded as FlagGems loads its vendor backends; ``flag_gems.blas`` an mm that picks
its path as FlagGems' Hopper mm does (the cluster path or general_mm), for the mm_cluster tests.

Kept as text and written to a temporary directory by :func:`write_fake_suite`, so the harness's
own pytest run never collects it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# -- the stand-in package ------------------------------------------------------------------------

FLAG_GEMS = '''\
"""Stand-in flag_gems for the harness's tests (CPU only)."""
import contextlib

import torch

__version__ = "{version}"
device = "cpu"
vendor_name = "fake"
current_work_registrar = None


class _DeviceFn:
    @staticmethod
    def synchronize():
        pass

    @staticmethod
    def empty_cache():
        pass


class _Runtime:
    torch_device_fn = _DeviceFn()
    torch_backend_device = torch.backends.cpu


runtime = _Runtime()


@contextlib.contextmanager
def use_gems(exclude=None):
    global current_work_registrar
    current_work_registrar = object()
    try:
        yield
    finally:
        current_work_registrar = None


def broken_add(a, b):
    return a + b + 1
'''

# Two kernels tuned as FlagGems tunes: one by Triton's Autotuner (a dict cache), one by a LibTuner
# stand-in (an Autotuner whose cache has the interface of FlagGems' ConfigCache: table_name, get,
# set, in, [key], [key] = config, over a 'database'), both keyed on the next power of two of n, so
# 100 and 120 share key 128. The made-up benchmarker favours BLOCK $FAKE_GEMS_FAVOUR_<shard> in sweep
# shard <shard> ($HARNESS_SWEEP_SHARD), else $FAKE_GEMS_FAVOUR (32); tuned_fail raises for
# n == $FAKE_GEMS_TUNE_FAIL.
FLAG_GEMS_TUNED = '''\
import os

import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner

_BENCHED = {}


def _note_block(nargs):
    _BENCHED["block"] = nargs["BLOCK"]


def _favour():
    shard = os.environ.get("HARNESS_SWEEP_SHARD")
    if shard is not None and os.environ.get(f"FAKE_GEMS_FAVOUR_{shard}"):
        return int(os.environ[f"FAKE_GEMS_FAVOUR_{shard}"])
    return int(os.environ.get("FAKE_GEMS_FAVOUR", "32"))


def _bench(kernel_call, quantiles=None):
    kernel_call()
    ms = 1.0 if _BENCHED["block"] == _favour() else 2.0
    return [ms, ms, ms]


def _configs():
    return [triton.Config({"BLOCK": b}, num_warps=w, pre_hook=_note_block) for b, w in ((16, 1), (32, 2), (64, 4))]


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, bucket, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def double_kernel(x_ptr, out_ptr, n, bucket, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


class ConfigCache:
    """FlagGems' flag_gems.utils.libentry.ConfigCache interface, over a dict 'database'."""

    def __init__(self, table_name, model):
        self.table_name, self.model = table_name, model

    def __contains__(self, key):
        return self.get(key) is not None

    def __getitem__(self, key):
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __setitem__(self, key, config):
        self.set(key, config)

    def get(self, key):
        return self.model.get((self.table_name, key))

    def set(self, key, config):
        self.model[(self.table_name, key)] = config


DATABASE = {}


class LibTuner(Autotuner):
    def __init__(self, fn, configs, key):
        super().__init__(fn, fn.arg_names, configs, key, None, None, do_bench=_bench)
        self.cache = ConfigCache(f"{fn.__name__}_v1", DATABASE)


copy_tuned = triton.autotune(configs=_configs(), key=["bucket"], do_bench=_bench)(copy_kernel)
double_tuned = LibTuner(double_kernel, _configs(), ["bucket"])


def tuned_double(x):
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    copied, out = torch.empty_like(x), torch.empty_like(x)
    copy_tuned[grid](x, copied, n, triton.next_power_of_2(n))
    double_tuned[grid](copied, out, n, triton.next_power_of_2(n))
    return out


def tuned_fail(x):
    if x.numel() == int(os.environ.get("FAKE_GEMS_TUNE_FAIL", "-1")):
        raise RuntimeError(f"no config fits n={x.numel()}")
    return tuned_double(x)
'''

# flag_gems.tuned and flag_gems.blas load the modules of runtime/backend/_fake/ as FlagGems loads its
# vendor and architecture backends: that folder put on sys.path and a top-level module imported from
# it (FlagGems 5.3.4 on an H200: runtime/backend/_nvidia/ -> ``hopper.ops.mm``, where the mm it
# dispatches to and its LibTuner live). No flag_gems.* module holds an autotuner or the cluster path,
# so the harness must find them by file.
FLAG_GEMS_ARCH_LOADER = '''\
import importlib
import os
import sys

_folder = os.path.join(os.path.dirname(__file__), "runtime", "backend", "_fake")
sys.path.insert(0, _folder)
try:
    _module = importlib.import_module("{module}")
finally:
    sys.path.remove(_folder)

{exports}
'''

# fake_arch.mm (loaded by flag_gems.blas) mirrors how FlagGems 5.3.4's Hopper mm picks a path
# (hopper/ops/mm.py: module-level HAS_TLE and BLOCK_CLUSTER_MESH; mm and mm_out try the cluster
# kernel first when both say so and cluster_remote_mm_scenario accepts the inputs), with torch.mm
# for both kernels. PATHS lists the path each call took. TLE is there unless $FAKE_GEMS_HAS_TLE is
# 0 (stock Triton); its device mesh unless $FAKE_GEMS_MESH is 0.
FLAG_GEMS_CLUSTER_MM = '''\
import os

import torch

HAS_TLE = os.environ.get("FAKE_GEMS_HAS_TLE", "1") == "1"
BLOCK_CLUSTER_MESH = ({"block_cluster": [("cluster_x", 2)]}
                      if HAS_TLE and os.environ.get("FAKE_GEMS_MESH", "1") == "1" else None)
PATHS = []


def cluster_remote_mm_scenario(a, b, c, M, N, K):
    return a.is_contiguous() and b.is_contiguous() and M >= 64 and N >= 256 and K >= 64


def cluster_remote_mm(a, b, c, M, N, K):
    PATHS.append("cluster")
    return torch.mm(a, b, out=c)


def general_mm(a, b, c, M, N, K):
    PATHS.append("general")
    return torch.mm(a, b, out=c)


def _pick(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    if HAS_TLE and BLOCK_CLUSTER_MESH is not None:
        if cluster_remote_mm_scenario(a, b, c, M, N, K):
            return cluster_remote_mm(a, b, c, M, N, K)
    return general_mm(a, b, c, M, N, K)


def mm(a, b):
    return _pick(a, b, torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype))


def mm_out(a, b, *, out):
    return _pick(a, b, out)
'''

FLAG_GEMS_UTILS = '''\
class shape_utils:
    @staticmethod
    def size_in_bytes(t):
        return t.numel() * t.element_size()
'''

# -- the benchmark machinery, shared by both layouts ---------------------------------------------

CONFTEST = '''\
"""Stand-in benchmark/conftest.py: FlagGems' options the harness passes or relies on."""
import os

import pytest

import {package}


class _Config:
    level = "comprehensive"
    shape_file = os.path.join(os.path.dirname(__file__), "core_shapes.yaml")
    dtypes = None


Config = _Config()


def pytest_addoption(parser):
    parser.addoption("--mode", default="kernel", choices=["kernel", "operator", "wrapper"])
    parser.addoption("--level", default="comprehensive", choices=["comprehensive", "core"])
    parser.addoption("--shape_file", default=Config.shape_file)
    parser.addoption("--dtypes", action="append", default=None,
                     choices=["float16", "float32", "bfloat16", "int16", "int32", "bool", "complex64"])


def pytest_configure(config):
    import torch

    Config.level = config.getoption("--level")
    Config.shape_file = config.getoption("--shape_file")
    names = config.getoption("--dtypes")
    Config.dtypes = [getattr(torch, n) for n in names] if names else None
'''

CONSTS = '''\
import torch

FLOAT_DTYPES = [torch.float16, torch.float32, torch.bfloat16]
INT_DTYPES = [torch.int16, torch.int32]
BOOL_DTYPES = [torch.bool]
COMPLEX_DTYPES = [torch.complex64]
'''

BASE = '''\
"""Stand-in of FlagGems' Benchmark (its interface, not its code)."""
import pytest
import torch
import triton.testing
import yaml

import {package}

from . import {consts} as consts
from .conftest import Config


class Benchmark:
    DEFAULT_DTYPES = consts.FLOAT_DTYPES
    DEFAULT_SHAPES = [(64, 64)]

    def __init__(self, op_name, torch_op, dtypes=None, is_backward=False, is_inplace=False, **kwargs):
        self.op_name = op_name + ("_backward" if is_backward and "_backward" not in op_name else "")
        self.torch_op, self.gems_op = torch_op, kwargs.get("gems_op")
        self.is_backward, self.is_inplace = is_backward, is_inplace
        self.dtypes = dtypes if dtypes is not None else self.DEFAULT_DTYPES
        self.to_bench_dtypes = self.dtypes
        self.to_bench_metrics = ["latency_base", "latency", "speedup"]
        self.shapes = self.DEFAULT_SHAPES

    def set_dtypes(self, wanted):
        if wanted and any(d not in self.dtypes for d in wanted):
            raise ValueError(f"Given dtype(s) can't be supported by this op {{self.op_name}}")
        self.to_bench_dtypes = wanted or self.dtypes

    def set_shapes(self, path):
        with open(path) as fh:
            table = yaml.safe_load(fh)
        for key in (self.op_name, *(c.__name__ for c in type(self).__mro__)):
            if key in table:
                self.shapes = [tuple(s) for s in table[key]["shapes"]]
                break
        if Config.level == "comprehensive":
            self.shapes += [s for s in self.set_more_shapes() if s not in self.shapes]

    def set_more_shapes(self):
        return []

    def init_user_config(self):
        self.set_dtypes(Config.dtypes)
        self.set_shapes(Config.shape_file)

    def set_gems(self, gems_op):
        self.gems_op = gems_op

    def get_latency(self, op, *args, **kwargs):
        fn = lambda: op(*args, **kwargs)  # noqa: E731
        return triton.testing.do_bench(fn, warmup=10, rep=10, return_mode="median")

    def get_gbps(self, args, latency=None):
        raise NotImplementedError("no byte count")

    def get_tflops(self, op, *args, **kwargs):
        return 0

    def get_input_iter(self, dtype):
        raise NotImplementedError

    def unpack_to_args_kwargs(self, item):
        args = [a for a in item if not isinstance(a, dict)]
        kwargs = {{k: v for a in item if isinstance(a, dict) for k, v in a.items()}}
        if self.is_backward:
            args = [a.clone().requires_grad_() if torch.is_tensor(a) and a.is_floating_point() else a
                    for a in args]
        return args, kwargs

    def run(self):
        self.init_user_config()
        for dtype in self.to_bench_dtypes:
            for item in self.get_input_iter(dtype):
                args, kwargs = self.unpack_to_args_kwargs(item)
                try:
                    base = self.get_latency(self.torch_op, *args, **kwargs)
                    if self.gems_op:
                        gems = self.get_latency(self.gems_op, *args, **kwargs)
                    else:
                        with {package}.use_gems(exclude=["zero_"]):
                            gems = self.get_latency(self.torch_op, *args, **kwargs)
                    print(self.op_name, dtype, base / gems)
                except Exception as exc:
                    pytest.fail(str(exc))


class GenericBenchmark(Benchmark):
    def __init__(self, *args, input_fn, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_fn = input_fn

    def get_input_iter(self, dtype):
        for shape in self.shapes:
            yield from self.input_fn(shape, dtype, "cpu")


def _tensor(shape, dtype):
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    return torch.randint(-100, 100, shape, dtype=dtype)


class UnaryPointwiseBenchmark(Benchmark):
    def get_input_iter(self, dtype):
        for shape in self.shapes:
            yield (_tensor(shape, dtype),)


class BinaryPointwiseBenchmark(Benchmark):
    def get_input_iter(self, dtype):
        for shape in self.shapes:
            yield _tensor(shape, dtype), _tensor(shape, dtype)


class UnaryReductionBenchmark(Benchmark):
    def get_gbps(self, args, latency=None):
        return 2 * args[0].numel() * args[0].element_size() * 1e-9 / (latency * 1e-3)

    def get_input_iter(self, dtype):
        for shape in self.shapes:
            yield _tensor(shape, dtype), 1

    def set_more_shapes(self):
        return [(16, 128)]


class BlasBenchmark(Benchmark):
    DEFAULT_DTYPES = consts.FLOAT_DTYPES

    def get_tflops(self, op, *args, **kwargs):
        (m, k), n = args[0].shape, args[1].shape[1]
        return 2 * m * n * k

    def get_input_iter(self, dtype):
        for _, m, n, k in self.shapes:
            yield _tensor((m, k), dtype), _tensor((k, n), dtype)
'''

CORE_SHAPES = '''\
Benchmark:
  shapes:
    - [64, 64]
    - [8, 16]
UnaryReductionBenchmark:
  shapes:
    - [32, 64]
BlasBenchmark:
  shapes:
    - [1, 16, 8, 4]
  shape_desc: "B, M, N, K"
NormBenchmark:
  shapes:
    - [4, 8, 16]
  shape_desc: "N, C, *"
'''

# -- v5.3 layout: one file per op ----------------------------------------------------------------

V53_TESTS: dict[str, str] = {
    "test_softmax.py": '''\
import pytest
import torch

from . import base


@pytest.mark.softmax
def test_softmax():
    base.UnaryReductionBenchmark(op_name="softmax", torch_op=torch.nn.functional.softmax).run()


@pytest.mark.softmax_backward
def test_softmax_backward():
    base.UnaryReductionBenchmark(op_name="softmax", torch_op=torch.nn.functional.softmax, is_backward=True).run()
''',
    "test_add.py": '''\
import pytest
import torch

from . import base, consts


@pytest.mark.add
def test_add():
    base.BinaryPointwiseBenchmark(op_name="add", torch_op=torch.add,
                                  dtypes=consts.FLOAT_DTYPES + consts.COMPLEX_DTYPES).run()


@pytest.mark.add_
def test_add_inplace():
    base.BinaryPointwiseBenchmark(op_name="add_", torch_op=torch.Tensor.add_, is_inplace=True).run()
''',
    "test_mm.py": '''\
import pytest
import torch

from . import base


@pytest.mark.mm
def test_mm():
    base.BlasBenchmark(op_name="mm", torch_op=torch.mm).run()
''',
    "test_bitwise_not.py": '''\
import pytest
import torch

from . import base, consts


@pytest.mark.bitwise_not
def test_bitwise_not():
    base.UnaryPointwiseBenchmark(op_name="bitwise_not", torch_op=torch.bitwise_not,
                                 dtypes=consts.INT_DTYPES + consts.BOOL_DTYPES).run()
''',
    "test_layer_norm.py": '''\
import pytest
import torch

from . import base


class NormBenchmark(base.GenericBenchmark):
    pass


def _inputs(shape, dtype, device):
    x = torch.randn(shape, dtype=dtype)
    yield x, list(shape[1:]), torch.ones(shape[1:], dtype=dtype), torch.zeros(shape[1:], dtype=dtype)


@pytest.mark.layer_norm
def test_layer_norm():
    NormBenchmark(op_name="layer_norm", torch_op=torch.layer_norm, input_fn=_inputs).run()
''',
    "test_nextafter.py": '''\
import pytest
import torch

from . import base


@pytest.mark.nextafter_
def test_nextafter_():
    base.BinaryPointwiseBenchmark(op_name="nextafter_", torch_op=torch.Tensor.nextafter_, is_inplace=True,
                                  dtypes=[torch.float32]).run()
''',
    "test_nextafter_.py": '''\
import pytest
import torch

from . import base


@pytest.mark.nextafter_
def test_nextafter_():
    base.BinaryPointwiseBenchmark(op_name="nextafter_", torch_op=torch.Tensor.nextafter_, is_inplace=True,
                                  dtypes=[torch.float32, torch.float64]).run()
''',
    "test_amin.py": '''\
import pytest
import torch

from . import base


@pytest.mark.amin
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_amin(dtype):
    base.UnaryReductionBenchmark(op_name="amin", torch_op=torch.amin, dtypes=[dtype]).run()
''',
    "test_skipped.py": '''\
import pytest
import torch

import flag_gems

from . import base


@pytest.mark.skipif(flag_gems.vendor_name == "fake", reason="Issue 1: not on the fake vendor")
@pytest.mark.skipped_op
def test_skipped_op():
    base.UnaryPointwiseBenchmark(op_name="skipped_op", torch_op=torch.abs).run()
''',
    "test_broken.py": '''\
import pytest
import torch

import flag_gems

from . import base


@pytest.mark.broken_add
def test_broken_add():
    base.BinaryPointwiseBenchmark(op_name="broken_add", torch_op=torch.add, gems_op=flag_gems.broken_add,
                                  dtypes=[torch.float32]).run()
''',
    "test_needs_vllm.py": '''\
import pytest
import torch

pytest.importorskip("vllm_not_installed_here")

from . import base  # noqa: E402


@pytest.mark.needs_vllm
def test_needs_vllm():
    base.UnaryPointwiseBenchmark(op_name="needs_vllm", torch_op=torch.abs).run()
''',
    "test_own_shapes.py": '''\
import pytest
import torch

from . import base


class OwnShapesBenchmark(base.UnaryPointwiseBenchmark):
    def set_shapes(self, path):
        self.shapes = [(3, 5)]


@pytest.mark.own_shapes
def test_own_shapes():
    OwnShapesBenchmark(op_name="own_shapes", torch_op=torch.neg, dtypes=[torch.float32]).run()
''',
}

# Benchmarks of flag_gems.tuned (write_fake_suite(tuned=True)): their own shapes, n = 100, 120, 200,
# 300, or those of $FAKE_GEMS_SIZES (n,n,...).
V53_TUNED_TESTS: dict[str, str] = {
    "test_tuned.py": '''\
import os

import pytest
import torch

from flag_gems import tuned

from . import base


class TunedBenchmark(base.UnaryPointwiseBenchmark):
    def set_shapes(self, path):
        self.shapes = [(int(n),) for n in os.environ.get("FAKE_GEMS_SIZES", "100,120,200,300").split(",")]


def _double(x):
    return x * 2


@pytest.mark.tuned_double
def test_tuned_double():
    TunedBenchmark(op_name="tuned_double", torch_op=_double, gems_op=tuned.tuned_double, dtypes=[torch.float32]).run()


@pytest.mark.tuned_fail
def test_tuned_fail():
    TunedBenchmark(op_name="tuned_fail", torch_op=_double, gems_op=tuned.tuned_fail, dtypes=[torch.float32]).run()
''',
}

# Benchmarks that build their own inputs (write_fake_suite(own_inputs=True)), as FlagGems' conv,
# pool and upsample ones do: conv_like walks a list of its own (DEFAULT_SHAPES: N, C, H, W, out
# channels) through its per-shape input_fn; fixed_inputs makes one tensor of a size written in its
# get_input_iter (no shapes list, no input_fn).
V53_OWN_INPUT_TESTS: dict[str, str] = {
    "test_conv_like.py": '''\
import pytest
import torch

from . import base


class ConvLikeBenchmark(base.GenericBenchmark):
    DEFAULT_SHAPES = [(1, 2, 6, 6, 3)]

    def get_input_iter(self, dtype):
        for shape in self.DEFAULT_SHAPES:
            yield from self.input_fn(shape, dtype, "cpu")


def _conv_inputs(shape, dtype, device):
    n, c, h, w, out = shape
    yield torch.randn(n, c, h, w, dtype=dtype), torch.randn(out, c, 3, 3, dtype=dtype), {"padding": 1}


@pytest.mark.conv_like
def test_conv_like():
    ConvLikeBenchmark(op_name="conv_like", torch_op=torch.nn.functional.conv2d, input_fn=_conv_inputs,
                      dtypes=[torch.float32]).run()


class FixedInputsBenchmark(base.Benchmark):
    def get_input_iter(self, dtype):
        yield (torch.randn(4, 4, dtype=dtype),)


@pytest.mark.fixed_inputs
def test_fixed_inputs():
    FixedInputsBenchmark(op_name="fixed_inputs", torch_op=torch.neg, dtypes=[torch.float32]).run()
''',
}

# -- v5.0 layout: one file per category, ops selected by mark ------------------------------------

V50_TESTS: dict[str, str] = {
    "test_reduction_perf.py": '''\
import pytest
import torch

from benchmark.performance_utils import UnaryReductionBenchmark


@pytest.mark.parametrize("op_name, torch_op", [
    pytest.param("softmax", torch.nn.functional.softmax, marks=pytest.mark.softmax),
    pytest.param("sum", torch.sum, marks=pytest.mark.sum),
])
def test_general_reduction_perf(op_name, torch_op):
    UnaryReductionBenchmark(op_name=op_name, torch_op=torch_op, dtypes=[torch.float32]).run()
''',
    "test_pointwise_perf.py": '''\
import pytest
import torch

from benchmark.performance_utils import UnaryPointwiseBenchmark


# ops by mark on parameters that carry a dtype too: abs's only node is float16
@pytest.mark.parametrize("op_name, torch_op, dtype", [
    pytest.param("abs", torch.abs, torch.float16, marks=pytest.mark.abs),
    pytest.param("neg", torch.neg, torch.float32, marks=pytest.mark.neg),
])
def test_general_pointwise_perf(op_name, torch_op, dtype):
    UnaryPointwiseBenchmark(op_name=op_name, torch_op=torch_op, dtypes=[dtype]).run()
''',
    "test_norm_perf.py": '''\
import pytest
import torch


@pytest.mark.rms_norm
def tes_rms_norm():  # not collected: no test_ prefix (FlagGems v5.0.2 has this typo)
    raise AssertionError("never collected")
''',
}


@dataclass(frozen=True)
class FakeSuite:
    benchmark: Path  # the benchmark/ directory (--suite)
    site: Path  # put on PYTHONPATH: the stand-in package and its metadata


def write_fake_suite(root: Path, layout: str = "v5.3", version: str = "5.3.4", package: str = "flag_gems",
                     ref: str | None = "", tuned: bool = False, own_inputs: bool = False) -> FakeSuite:
    """A stand-in tree of ``layout`` ("v5.3" or "v5.0") under ``root`` and a stand-in ``package`` of
    ``version`` in ``root/site``; ``ref`` (default: ``fake-v<version>``) goes to FLAGGEMS_REF (None: no file).
    ``tuned``: also the benchmarks of the autotuned stand-in kernels (v5.3 layout); ``own_inputs``:
    also those that build their own inputs (v5.3 layout)."""
    bench = root / "benchmark"
    consts_name, base_name, tests = ("consts", "base", V53_TESTS) if layout == "v5.3" else (
        "attri_util", "performance_utils", V50_TESTS)
    if tuned:
        tests = {**tests, **V53_TUNED_TESTS}
    if own_inputs:
        tests = {**tests, **V53_OWN_INPUT_TESTS}
    files = {
        "__init__.py": "",
        "conftest.py": CONFTEST.format(package=package),
        f"{consts_name}.py": CONSTS,
        f"{base_name}.py": BASE.format(package=package, consts=consts_name),
        "core_shapes.yaml": CORE_SHAPES,
        **tests,
    }
    for name, text in files.items():
        path = bench / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if ref is not None:
        (root / "FLAGGEMS_REF").write_text((ref or f"fake-v{version} (tests/data stand-in)") + "\n")
    site = root / "site"
    (site / package / "utils").mkdir(parents=True, exist_ok=True)
    (site / package / "__init__.py").write_text(FLAG_GEMS.format(version=version))
    (site / package / "utils" / "__init__.py").write_text(FLAG_GEMS_UTILS)
    (site / package / "tuned.py").write_text(FLAG_GEMS_ARCH_LOADER.format(
        module="fake_arch.ops", exports="tuned_double = _module.tuned_double\ntuned_fail = _module.tuned_fail"))
    (site / package / "blas.py").write_text(FLAG_GEMS_ARCH_LOADER.format(
        module="fake_arch.mm", exports="mm = _module.mm\nmm_out = _module.mm_out\nPATHS = _module.PATHS"))
    arch = site / package / "runtime" / "backend" / "_fake" / "fake_arch"
    arch.mkdir(parents=True, exist_ok=True)
    (arch / "__init__.py").write_text("")
    (arch / "ops.py").write_text(FLAG_GEMS_TUNED)
    (arch / "mm.py").write_text(FLAG_GEMS_CLUSTER_MM)
    info = site / f"{package}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    return FakeSuite(benchmark=bench, site=site)
