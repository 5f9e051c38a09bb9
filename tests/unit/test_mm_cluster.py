"""The mm_cluster compat plugin: what it changes in FlagGems' process, and when it is planned.

The stand-in flag_gems of tests/data/fake_flaggems_suite.py has ``flag_gems.blas``, whose mm
picks its path as FlagGems 5.3.4's Hopper mm does (the cluster kernel when HAS_TLE and
BLOCK_CLUSTER_MESH say so, else general_mm) from a module loaded by file, as ``hopper.ops.mm``.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from harness.backends import get_backend
from harness.child.plugins.mm_cluster import PREFIX, cluster_modules, turn_off
from harness.cli import main as harness_main
from harness.errors import UsageError
from harness.options import RunOptions
from harness.run.plugins import plan_plugins
from harness.suite.runner import suite_plugins
from tests.data.fake_flaggems_suite import FakeSuite, write_fake_suite

ROOT = Path(__file__).resolve().parents[2]
MODULE = "harness.child.plugins.mm_cluster"

# Imported at collection, as FlagGems' conftest and benchmarks import flag_gems.
AT_COLLECTION = '''
import torch

from flag_gems import blas


def test_mm():
    a, b = torch.ones(64, 64), torch.ones(64, 256)
    assert bool((blas.mm(a, b) == 64).all())
    blas.mm_out(a, b, out=torch.empty(64, 256))
    print("paths:", ",".join(blas.PATHS), "HAS_TLE:", blas._module.HAS_TLE,
          "mesh:", blas._module.BLOCK_CLUSTER_MESH is not None)
'''

# Imported in the first test's body: the plugin meets the module before the second test.
LATE = '''
import torch


def test_first():
    from flag_gems import blas
    blas.mm(torch.ones(64, 64), torch.ones(64, 256))


def test_second():
    from flag_gems import blas
    blas.mm(torch.ones(64, 64), torch.ones(64, 256))
    print("paths:", ",".join(blas.PATHS))
'''


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> FakeSuite:
    return write_fake_suite(tmp_path_factory.mktemp("gems"))


def _pytest(tree: Path, fake: FakeSuite, text: str, *plugin: str, **env: str) -> str:
    (tree / "test_stand_in.py").write_text(text)
    done = subprocess.run([sys.executable, "-m", "pytest", "test_stand_in.py", "-q", "-s", "-p", "no:cacheprovider",
                           "-c", "/dev/null", "--rootdir", str(tree), *plugin],
                          capture_output=True, text=True, cwd=tree, timeout=120,
                          env={"PYTHONPATH": f"{ROOT}:{fake.site}", "PATH": "/usr/bin", **env})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(PREFIX)]


def test_without_the_plugin_the_stand_ins_mm_takes_the_cluster_path(tmp_path: Path, fake: FakeSuite) -> None:
    out = _pytest(tmp_path, fake, AT_COLLECTION)
    assert "paths: cluster,cluster HAS_TLE: True mesh: True" in out and not _lines(out)


def test_the_plugin_turns_a_live_cluster_path_off_and_says_so_once(tmp_path: Path, fake: FakeSuite) -> None:
    out = _pytest(tmp_path, fake, AT_COLLECTION, "-p", MODULE)
    assert "paths: general,general HAS_TLE: True mesh: False" in out
    assert _lines(out) == [f"{PREFIX} fake_arch.mm: cluster path off (was live: HAS_TLE, mesh set); mm and mm_out "
                           "take split-K or general_mm"]


def test_without_tle_the_plugin_changes_nothing_and_says_why(tmp_path: Path, fake: FakeSuite) -> None:
    out = _pytest(tmp_path, fake, AT_COLLECTION, "-p", MODULE, FAKE_GEMS_HAS_TLE="0")
    assert "paths: general,general HAS_TLE: False mesh: False" in out  # as it is without the plugin
    assert _lines(out) == [f"{PREFIX} fake_arch.mm: not applicable: HAS_TLE is False (stock Triton; the cluster "
                           "path is dead code)"]


def test_a_module_imported_after_collection_is_handled_before_the_next_test(tmp_path: Path, fake: FakeSuite) -> None:
    out = _pytest(tmp_path, fake, LATE, "-p", MODULE)
    assert "paths: cluster,general" in out  # the first test imported it and ran before the plugin saw it
    assert len(_lines(out)) == 1 and "fake_arch.mm: cluster path off" in _lines(out)[0]


def test_a_process_without_such_a_module_says_so_at_its_end(tmp_path: Path, fake: FakeSuite) -> None:
    out = _pytest(tmp_path, fake, "def test_nothing():\n    pass\n", "-p", MODULE)
    assert _lines(out) == [f"{PREFIX} no FlagGems module with a cluster path loaded"]
    late = _pytest(tmp_path, fake, LATE, "-p", MODULE, "-k", "second")  # imported in the only test
    assert "paths: cluster" in late
    assert _lines(late) == [f"{PREFIX} fake_arch.mm: cluster path live and left on: imported during the last test, "
                            "after the plugin's last check"]


def _module(name: str, **fields: object) -> ModuleType:
    module = ModuleType(name)
    vars(module).update(fields)
    return module


def test_each_state_of_the_names_is_reported_and_only_a_live_path_is_changed() -> None:
    mesh = object()
    live = _module("m", HAS_TLE=True, BLOCK_CLUSTER_MESH=mesh)
    assert turn_off("m", live).changed and live.BLOCK_CLUSTER_MESH is None
    no_mesh = _module("m", HAS_TLE=True, BLOCK_CLUSTER_MESH=None)
    assert "not applicable: BLOCK_CLUSTER_MESH is None" in turn_off("m", no_mesh).line
    no_tle = _module("m", HAS_TLE=False, BLOCK_CLUSTER_MESH=mesh)
    assert not turn_off("m", no_tle).changed and no_tle.BLOCK_CLUSTER_MESH is mesh
    imported_late = _module("m", HAS_TLE=True, BLOCK_CLUSTER_MESH=mesh)
    assert not turn_off("m", imported_late, late=True).changed and imported_late.BLOCK_CLUSTER_MESH is mesh
    other = _module("m", HAS_TLE=True)
    assert "left alone" in turn_off("m", other).line and not hasattr(other, "BLOCK_CLUSTER_MESH")


def test_the_modules_are_found_by_file_and_a_re_export_is_not_one(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def scenario(*args: object) -> bool:
        return True

    scenario.__module__ = "arch.ops.mm"
    package = _module("gems_pkg", __path__=[str(tmp_path)])
    defining = _module("arch.ops.mm", __file__=str(tmp_path / "arch" / "ops" / "mm.py"),
                       cluster_remote_mm_scenario=scenario, HAS_TLE=False, BLOCK_CLUSTER_MESH=None)
    re_export = _module("arch.ops", __file__=str(tmp_path / "arch" / "ops" / "__init__.py"),
                        cluster_remote_mm_scenario=scenario)
    outside = _module("elsewhere", __file__="/elsewhere.py", cluster_remote_mm_scenario=scenario)
    for module in (package, defining, re_export, outside):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    assert cluster_modules("gems_pkg") == [("arch.ops.mm", defining)]


# -- planning ----------------------------------------------------------------------------------


def test_mm_cluster_is_off_by_default_and_says_why() -> None:
    cuda = plan_plugins(get_backend("cuda"))
    assert not cuda.has("mm_cluster")
    assert any(line.startswith("mm_cluster: off by default") for line in cuda.off)
    cpu = plan_plugins(get_backend("cpu"))
    assert any(line.startswith("mm_cluster: off: FlagGems' Hopper cluster mm does not run") for line in cpu.off)


def test_plus_mm_cluster_loads_it_into_both_kinds_of_flaggems_process_on_cuda() -> None:
    cuda = get_backend("cuda")
    plan = plan_plugins(cuda, toggles=("+mm_cluster",))
    assert plan.has("mm_cluster") and MODULE in plan.modules  # the op process (--provider flaggems)
    inputs = ["-p", "harness.child.plugins.device_inputs"]  # on by default on accelerators
    assert plan.suite_pytest_args() == [*inputs, "-p", MODULE]  # FlagGems' pytest (--suite)
    suite = suite_plugins(cuda, RunOptions(plugins=("+mm_cluster",)))
    assert suite.suite_pytest_args() == [*inputs, "-p", MODULE] and MODULE not in suite.modules
    assert any(line.startswith("mm_cluster: off by default") for line in suite_plugins(cuda, RunOptions()).off)
    assert not plan_plugins(cuda, toggles=("+mm_cluster", "-mm_cluster")).has("mm_cluster")


@pytest.mark.parametrize("name", ["cpu", "musa", "rocm", "ascend"])
def test_plus_mm_cluster_is_refused_where_the_backend_lacks_the_capability(name: str) -> None:
    with pytest.raises(UsageError, match="lacks the capability hopper_cluster_mm"):
        plan_plugins(get_backend(name), toggles=("+mm_cluster",))
    assert not plan_plugins(get_backend(name), toggles=("-mm_cluster",)).has("mm_cluster")


def test_harness_plugins_lists_it_with_its_reason() -> None:
    def listing(*args: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert harness_main(["plugins", *args]) == 0
        return out.getvalue()

    assert "mm_cluster: off by default" in listing("--backend", "cuda")
    assert "mm_cluster: off by default" in listing("--backend", "cuda", "--suite")
    on = listing("--backend", "cuda", "--suite", "--plugins", "+mm_cluster")
    assert f"{MODULE} " in on and "mm_cluster: on (--plugins +mm_cluster)" in on
    assert "mm_cluster: off: FlagGems' Hopper cluster mm does not run" in listing("--backend", "rocm")
