"""The device_inputs compat plugin: FlagGems' integer and bool inputs drawn where the op runs.

A stand-in benchmark tree holds FlagGems' helper as v5.3.4 writes it (``base.py`` and
``utils.py``: floats on the device, integers and bools on the CPU, then copied), used by module
attribute (``utils.generate_tensor_input``), through a module global (``base.binary_input_fn``)
and by a name imported into the test module. The device is torch's ``meta`` device, so a draw
made on the CPU and copied is told from one made on the device by the stand-in's own counter of
its CPU branch.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.backends import get_backend
from harness.child.plugins.device_inputs import PREFIX, DeviceInputs, device_draw, helpers_in
from harness.options import RunOptions
from harness.run.plugins import plan_plugins
from harness.suite.runner import suite_plugins

ROOT = Path(__file__).resolve().parents[2]
MODULE = "harness.child.plugins.device_inputs"

CONSTS = "import torch\nINT_DTYPES = [torch.int16, torch.int32]\nBOOL_DTYPES = [torch.bool]\n"

# FlagGems v5.3.4's helper, with a counter of its CPU branch.
HELPER = '''
import torch

from . import consts

CPU_DRAWS = []


def generate_tensor_input(shape, dtype, device):
    if dtype in consts.FLOAT_DTYPES if hasattr(consts, "FLOAT_DTYPES") else dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype, device=device)
    elif dtype in consts.INT_DTYPES:
        CPU_DRAWS.append(dtype)
        return torch.randint(torch.iinfo(dtype).min, torch.iinfo(dtype).max, shape, dtype=dtype,
                             device="cpu").to(device)
    elif dtype in consts.BOOL_DTYPES:
        CPU_DRAWS.append(dtype)
        return torch.randint(0, 2, size=shape, dtype=dtype, device="cpu").to(device)


def binary_input_fn(shape, cur_dtype, device):
    yield generate_tensor_input(shape, cur_dtype, device), generate_tensor_input(shape, cur_dtype, device)
'''

TEST = '''
import torch

from . import base, utils
from .base import generate_tensor_input

DEVICE = "meta"


def test_draws():
    drawn = [utils.generate_tensor_input((4, 8), torch.int16, DEVICE),
             *next(base.binary_input_fn((1 << 20,), torch.int32, DEVICE)),
             generate_tensor_input((3,), torch.bool, DEVICE),
             generate_tensor_input((3,), torch.float32, DEVICE)]
    print("drawn:", ";".join(f"{t.device.type},{t.dtype},{tuple(t.shape)}" for t in drawn))
    print("cpu draws:", len(base.CPU_DRAWS) + len(utils.CPU_DRAWS))
'''


def _tree(root: Path, helper: str = HELPER) -> Path:
    bench = root / "benchmark"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "__init__.py").write_text("")
    (bench / "consts.py").write_text(CONSTS)
    (bench / "base.py").write_text(helper)
    (bench / "utils.py").write_text(helper)
    (bench / "test_draws.py").write_text(TEST)
    return root


def _pytest(tree: Path, *plugin: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pytest", "benchmark/test_draws.py", "-q", "-s", "-p",
                           "no:cacheprovider", "-c", "/dev/null", "--rootdir", str(tree), *plugin],
                          capture_output=True, text=True, cwd=tree, timeout=120,
                          env={"PYTHONPATH": f"{ROOT}:{tree}", "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(PREFIX)]


DRAWN = ("drawn: meta,torch.int16,(4, 8);meta,torch.int32,(1048576,);meta,torch.int32,(1048576,);"
         "meta,torch.bool,(3,);meta,torch.float32,(3,)")


def test_without_the_plugin_flaggems_draws_integers_and_bools_on_the_cpu(tmp_path: Path) -> None:
    out = _pytest(_tree(tmp_path))
    assert DRAWN in out and "cpu draws: 4" in out and not _lines(out)


def test_the_plugin_draws_them_on_the_device_in_every_module_that_uses_the_helper(tmp_path: Path) -> None:
    out = _pytest(_tree(tmp_path), "-p", MODULE)
    assert DRAWN in out  # the same dtypes, shapes and device
    assert "cpu draws: 0" in out
    assert _lines(out) == [
        f"{PREFIX} benchmark.base.generate_tensor_input draws integer and bool inputs on the device (2 module(s) "
        "use it; --plugins -device_inputs: FlagGems' CPU draw)",
        f"{PREFIX} benchmark.utils.generate_tensor_input draws integer and bool inputs on the device (1 module(s) "
        "use it; --plugins -device_inputs: FlagGems' CPU draw)",
        f"{PREFIX} 4 integer or bool input(s) drawn on the device",
    ]


def test_a_tree_that_draws_on_the_device_already_is_left_alone(tmp_path: Path) -> None:
    on_device = HELPER.replace('device="cpu").to(device)', "device=device)").replace(
        'dtype=dtype, device="cpu")', "dtype=dtype, device=device)")
    assert 'device="cpu"' not in on_device
    out = _pytest(_tree(tmp_path, on_device), "-p", MODULE)
    assert DRAWN in out and "cpu draws: 4" in out  # its own branch, now on the device
    assert len(_lines(out)) == 1 and "no generate_tensor_input drawing on the CPU was loaded" in _lines(out)[0]


class _Consts:
    INT_DTYPES = [torch.int16, torch.int32]
    BOOL_DTYPES = [torch.bool]


def _original(calls: list[Any]) -> Any:
    def generate_tensor_input(shape: Any, dtype: Any, device: Any) -> Any:
        calls.append(dtype)
        return torch.zeros(shape, dtype=dtype, device=device)
    return generate_tensor_input


def test_the_values_keep_flaggems_range_and_other_dtypes_run_its_code() -> None:
    calls: list[Any] = []
    counter = [0]
    draw = device_draw(_original(calls), _Consts, counter, lambda exc: None)
    torch.manual_seed(0)
    ints = draw((1 << 16,), torch.int16, "cpu")
    assert ints.dtype == torch.int16 and int(ints.min()) < -30000 and int(ints.max()) > 30000
    bools = draw((1 << 10,), torch.bool, "cpu")
    assert bools.dtype == torch.bool and 0 < int(bools.sum()) < 1 << 10
    assert draw((2,), torch.int64, "cpu").dtype == torch.int64  # not FlagGems' INT_DTYPES: its own code
    assert calls == [torch.int64] and counter == [2]
    torch.manual_seed(0)
    assert torch.equal(draw((1 << 16,), torch.int16, "cpu"), ints)  # the seeded generator decides


def test_a_draw_the_device_refuses_runs_flaggems_code(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("random_ not implemented for this dtype\nmore")

    monkeypatch.setattr(torch, "randint", refuse)
    state = DeviceInputs()
    draw = device_draw(_original(calls), _Consts, state.drawn, state._refused)
    assert draw((2,), torch.int32, "cpu").shape == (2,) and draw((2,), torch.bool, "cpu").shape == (2,)
    assert calls == [torch.int32, torch.bool] and state.drawn == [0]
    assert state.summary() == ("0 integer or bool input(s) drawn on the device; a draw the device refused ran "
                               "FlagGems' code (RuntimeError: random_ not implemented for this dtype)")


def _loaded(name: str, path: Path, source: str, consts: bool = True) -> Any:
    import types

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(("consts = object()\n" if consts else "") + source)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), vars(module))
    vars(module)["generate_tensor_input"].__module__ = name
    return module


def test_only_cpu_drawing_helpers_loaded_from_the_tree_with_flaggems_consts_are_found(tmp_path: Path) -> None:
    cpu = "def generate_tensor_input(shape, dtype, device):\n    return torch.randint(0, 2, shape, device=\"cpu\")\n"
    modules = {
        "benchmark.base": _loaded("benchmark.base", tmp_path / "tree" / "benchmark" / "base.py", cpu),
        "elsewhere": _loaded("elsewhere", tmp_path / "site" / "elsewhere.py", cpu),
        "benchmark.dev": _loaded("benchmark.dev", tmp_path / "tree" / "benchmark" / "dev.py",
                                 cpu.replace('"cpu"', "device")),
        "benchmark.bare": _loaded("benchmark.bare", tmp_path / "tree" / "benchmark" / "bare.py", cpu, consts=False),
    }
    assert [name for name, _ in helpers_in(modules, tmp_path / "tree")] == ["benchmark.base"]


def test_planned_for_flaggems_pytest_on_accelerators_and_toggled_off_by_name() -> None:
    assert "harness.child.plugins.device_inputs" in suite_plugins(get_backend("cuda"), RunOptions()).suite_modules
    assert "harness.child.plugins.device_inputs" not in suite_plugins(get_backend("cpu"), RunOptions()).suite_modules
    off = plan_plugins(get_backend("cuda"), toggles=("-device_inputs",))
    assert "harness.child.plugins.device_inputs" not in off.suite_modules
    assert any(line.startswith("device_inputs: off (--plugins -device_inputs)") for line in off.off)
