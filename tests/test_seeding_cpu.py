"""Two runs draw the same inputs from Python's `random`, numpy and torch: the op process seeds all
three per case, for the harness's own cases and for a suite's benchmark functions."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy
import pytest
import torch

from harness.child.plugins.seeding import seed_generators
from harness.child.plugins.suite import SuitePlugin
from tests.harness_cli import run_harness

ROOT = Path(__file__).resolve().parents[1]
SEED_OPS = ROOT / "tests" / "data" / "seed_ops.py"


def _draws() -> dict[str, list[float]]:
    return {"random": [random.random() for _ in range(4)], "numpy": numpy.random.rand(4).tolist(),
            "torch": torch.rand(4).tolist()}


def test_seed_generators_seeds_random_numpy_and_torch() -> None:
    seed_generators(1234)
    first = _draws()
    _draws()  # moves every generator on
    seed_generators(1234)
    assert _draws() == first
    seed_generators(1235)
    other = _draws()
    assert all(other[name] != first[name] for name in first)


def test_a_seed_beyond_32_bits_is_accepted_by_numpy() -> None:
    seed_generators(2**40 + 7)
    assert len(_draws()["numpy"]) == 4


def test_the_suite_plugin_seeds_all_three_before_each_benchmark_function() -> None:
    begun: list[str] = []
    plugin: Any = SuitePlugin.__new__(SuitePlugin)
    plugin.spec = SimpleNamespace(seed=7)
    plugin.seam = SimpleNamespace(begin_item=begun.append)
    item: Any = SimpleNamespace(nodeid="benchmark/test_x.py::test_add")
    plugin.pytest_runtest_setup(item)
    first = _draws()
    plugin.pytest_runtest_setup(item)
    assert _draws() == first
    assert begun == [item.nodeid, item.nodeid]
    other: Any = SimpleNamespace(nodeid="benchmark/test_x.py::test_mul")
    plugin.pytest_runtest_setup(other)
    assert _draws()["random"] != first["random"]


def _run(work: Path, name: str, *extra: str) -> dict[str, Any]:
    state = work / f"state-{name}"
    state.mkdir()
    (work / "shapes.yaml").write_text("seed_draws: [[4], [2, 3]]\n")
    done = run_harness("run", "--backend", "cpu", "--ops-module", str(SEED_OPS), "--ops", "seed_draws",
                       "--shapes-file", "shapes.yaml",
                       "--dtypes", "float32", "--warmup-ms", "1", "--rep-ms", "1", "--progress", "plain",
                       "--out", name, *extra, cwd=work, env={"SEED_OPS_STATE": str(state)}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    files = sorted(state.glob("*.json"))
    assert len(files) == 2, f"the op made inputs for {files}: {done.stdout}"
    return {f.name: json.loads(f.read_text()) for f in files}


@pytest.mark.slow
def test_two_runs_draw_the_same_inputs_from_every_generator(tmp_path: Path) -> None:
    first = _run(tmp_path, "a")
    second = _run(tmp_path, "b")
    assert first == second
    reseeded = _run(tmp_path, "c", "--seed", "1")  # the draws follow the run's seed
    assert first.keys() == reseeded.keys()
    for case, draws in first.items():
        assert all(draws[name] != reseeded[case][name] for name in draws), case
