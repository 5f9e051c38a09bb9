"""Where FlagGems' own benchmark for an op lives, and how its shapes relate to ours (pure data).

FlagGems' suite (benchmark/ in its git repository, v4.x-5.0.x layout) marks each benchmark
with a pytest mark named after the op and builds its inputs from a shape list it reads from
a YAML file. A :class:`SuiteNode` says which file to collect, which mark selects it, the
``op_name`` its results carry, and how a harness shape maps to the shape FlagGems' input
generator takes (``to_suite``) and back from the argument shapes it logs (``from_suite``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.ops.base import Shape
from harness.run.provenance import describe

__all__ = [
    "SUITE_NODES",
    "SuiteLayout",
    "SuiteNode",
    "first_tensor_shape",
    "locate_suite",
    "node_for",
    "tensor_shapes",
]


def tensor_shapes(detail: Any) -> list[Shape]:
    """Every list of integers in a logged ``shape_detail`` (tensor sizes), depth first in order.

    FlagGems logs the benchmark's positional arguments with tensors replaced by their size
    (``[[4096, 4096], 1]`` for softmax(x, 1)); with keyword arguments as well it logs
    ``[[args...], {kwargs}]``.
    """
    found: list[Shape] = []

    def walk(item: Any) -> None:
        if isinstance(item, list):
            if item and all(isinstance(d, int) and not isinstance(d, bool) for d in item):
                found.append(tuple(item))
                return
            for sub in item:
                walk(sub)
        elif isinstance(item, dict):
            for sub in item.values():
                walk(sub)

    walk(detail)
    return found


def first_tensor_shape(detail: Any) -> Shape:
    shapes = tensor_shapes(detail)
    return shapes[0] if shapes else ()


def _same(shape: Sequence[int]) -> list[int]:
    return list(shape)


def _mm_to_suite(shape: Sequence[int]) -> list[int]:
    m, n, k = shape
    return [1, m, n, k]  # BlasBenchmark shapes are (B, M, N, K); B is unused by mm


def _mm_from_suite(detail: Any) -> Shape:
    shapes = tensor_shapes(detail)
    if len(shapes) < 2 or len(shapes[0]) != 2 or len(shapes[1]) != 2:
        return first_tensor_shape(detail)
    (m, k), (_, n) = shapes[0], shapes[1]
    return (m, n, k)


@dataclass(frozen=True)
class SuiteNode:
    op: str  # harness op id
    mark: str  # the pytest mark selecting FlagGems' benchmark (-m)
    op_name: str  # the op_name FlagGems' results carry
    file: str | None = None  # test file under benchmark/; None = collect the whole suite
    shape_desc: str = "M, N"
    # -k terms the mark also selects but that benchmark something else: backward passes (the
    # harness measures forward ops; v5.0.0 marks softmax's backward benchmark "softmax" too)
    exclude: tuple[str, ...] = ("backward",)
    to_suite: Callable[[Sequence[int]], list[int]] = _same
    from_suite: Callable[[Any], Shape] = first_tensor_shape
    note: str = ""

    def pytest_selection(self, suite_dir: Path) -> list[str]:
        target = suite_dir / self.file if self.file else suite_dir
        args = [str(target), "-m", self.mark]
        if self.exclude:
            args += ["-k", " and ".join(f"not {name}" for name in self.exclude)]
        return args


SUITE_NODES: Mapping[str, SuiteNode] = {
    n.op: n
    for n in (
        SuiteNode("softmax", "softmax", "softmax", "test_reduction_perf.py",
                  note="torch.nn.functional.softmax(x, 1); UnaryReductionBenchmark"),
        SuiteNode("sum", "sum", "sum", "test_reduction_perf.py", note="torch.sum(x, 1)"),
        SuiteNode("layer_norm", "layer_norm", "layer_norm", "test_norm_perf.py", "N, C, *",
                  note="torch.layer_norm over shape[1:]; NormBenchmark"),
        SuiteNode("rms_norm", "rms_norm", "rms_norm", "test_norm_perf.py",
                  note="v5.0.2 names its function tes_rms_norm, so pytest does not collect it (v5.0.0 has test_perf_rms_norm)"),
        SuiteNode("gelu", "gelu", "gelu", "test_unary_pointwise_perf.py"),
        SuiteNode("silu_and_mul", "silu_and_mul", "silu_and_mul", "test_fused_perf.py",
                  note="silu(x) * y with x, y of the shape; gems_op=flag_gems.silu_and_mul"),
        SuiteNode("add", "add", "add", "test_binary_pointwise_perf.py"),
        SuiteNode("mm", "mm", "mm", "test_blas_perf.py", "B, M, N, K",
                  exclude=("backward", "test_mm_self_transpose_benchmark"),
                  to_suite=_mm_to_suite, from_suite=_mm_from_suite,
                  note="harness (M, N, K) <-> FlagGems BlasBenchmark (B, M, N, K) with B unused"),
    )
}


def node_for(op: str) -> SuiteNode:
    """The known node, or a generic one: mark and op_name equal to the op id, shapes as given."""
    return SUITE_NODES.get(op) or SuiteNode(op, op, op, note="generic: whole suite collected with -m")


@dataclass(frozen=True)
class SuiteLayout:
    """A FlagGems benchmark directory the harness can drive."""

    suite_dir: Path  # .../benchmark
    root: Path  # its parent: the directory pytest puts on sys.path so `import benchmark` works
    shapes_yaml: Path  # benchmark/core_shapes.yaml
    ref: str  # the FlagGems tag or commit it came from, when known


def locate_suite(path: Path, ref_file: str = "FLAGGEMS_REF") -> SuiteLayout:
    """Validate ``path`` as FlagGems' benchmark/ directory; UsageError saying what is wrong."""
    suite_dir = path.resolve()
    hint = ("Give the benchmark/ directory of a FlagGems checkout at the tag matching the installed "
            "flag_gems (e.g. git clone -b v5.0.2 https://github.com/flagos-ai/FlagGems; --suite FlagGems/benchmark).")
    if not suite_dir.is_dir():
        raise UsageError(f"--suite {path}: no such directory. {hint}")
    if suite_dir.name != "benchmark":
        raise UsageError(f"--suite {path}: FlagGems' benchmarks import themselves as the package "
                         f"'benchmark', so the directory must be named benchmark (got {suite_dir.name!r}). {hint}")
    if not (suite_dir / "conftest.py").is_file():
        raise UsageError(f"--suite {path}: no conftest.py there; this is not FlagGems' benchmark directory. {hint}")
    if not (suite_dir / "performance_utils.py").is_file():
        if (suite_dir / "base.py").is_file():
            raise UsageError(
                f"--suite {path}: this is the FlagGems 5.3+ suite layout (benchmark/base.py, one file per "
                "op), which the harness does not drive yet; use a checkout at v5.0.2 (or v5.0.x, v4.2.x).")
        raise UsageError(f"--suite {path}: no performance_utils.py; not a FlagGems benchmark directory. {hint}")
    shapes_yaml = suite_dir / "core_shapes.yaml"
    if not shapes_yaml.is_file():
        raise UsageError(f"--suite {path}: core_shapes.yaml is missing; the suite reads its shapes from it. {hint}")
    ref_path = suite_dir.parent / ref_file
    ref = ref_path.read_text().strip() if ref_path.is_file() else describe(suite_dir.parent)
    return SuiteLayout(suite_dir=suite_dir, root=suite_dir.parent, shapes_yaml=shapes_yaml, ref=ref)



