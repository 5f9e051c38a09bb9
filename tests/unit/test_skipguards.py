"""The MUSA compat shim on a stand-in FlagGems test tree: which guards it drops, which it keeps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.backends import get_backend
from harness.child.plugins.skipguards import decorator_guards, load_rules
from harness.run.plugins import plan_plugins

ROOT = Path(__file__).resolve().parents[2]

STAND_IN = '''
import pytest
import torch

CUDA_AVAILABLE = False


@pytest.mark.embedding
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is required")
@pytest.mark.parametrize("n", [1, 2])
def test_stale(n):
    pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
@pytest.mark.skipif(True, reason="vLLM is not installed")
def test_stale_guard_but_no_vllm():
    pass


@pytest.mark.skipif(not CUDA_AVAILABLE, reason="requires NVIDIA Hopper architecture")
def test_hopper_only():
    pass


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="CUDA device required",
)
def test_stale_multiline():
    pass
'''


def _run(tree: Path, *plugin: str) -> str:
    """pytest's report of the tree (-rA: a line per test with its outcome)."""
    done = subprocess.run([sys.executable, "-m", "pytest", str(tree), "-rA", "-q", "-p", "no:cacheprovider",
                           "-c", "/dev/null", "--rootdir", str(tree), *plugin],
                          capture_output=True, text=True, cwd=tree, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"},
                          timeout=120)
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return done.stdout


def test_the_shim_drops_stale_cuda_guards_and_keeps_the_right_ones(tmp_path: Path) -> None:
    import torch

    assert not torch.cuda.is_available()  # this machine: each guard skips, as on MUSA
    (tmp_path / "test_ops.py").write_text(STAND_IN)
    (tmp_path / "test_cudnn_attention_forward.py").write_text(
        "import pytest, torch\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA is required')\n"
        "def test_cudnn():\n    pass\n")
    before = _run(tmp_path)
    assert "PASSED" not in before  # everything skips without the shim
    after = _run(tmp_path, "-p", "harness.child.plugins.skipguards")
    assert "PASSED test_ops.py::test_stale[1]" in after and "PASSED test_ops.py::test_stale[2]" in after
    assert "PASSED test_ops.py::test_stale_multiline" in after
    assert "vLLM is not installed" in after  # its other guard still holds
    assert "requires NVIDIA Hopper architecture" in after
    assert "PASSED test_cudnn_attention_forward.py" not in after  # kept: cuDNN
    assert "dropped 4 stale CUDA-only skip guard(s)" in after


def test_rules_read_the_decorators_as_written() -> None:
    rules = load_rules()
    assert rules.stale("not torch.cuda.is_available()", "CUDA is required")
    assert rules.stale('flag_gems.device != "cuda"', "requires CUDA")
    assert not rules.stale("not torch.cuda.is_available()", "requires NVIDIA Hopper architecture")
    assert not rules.stale("not HAS_CUDA_FLASHMLA", "CUDA required")
    assert "test_cudnn_attention_forward.py" in rules.keep

    import pytest

    @pytest.mark.skipif(1 > 2, reason="never")
    def sample() -> None:
        return None

    assert decorator_guards(sample) == (("1 > 2", "never"),)


def test_the_shim_is_planned_for_the_suite_where_the_backend_says_so() -> None:
    musa, cuda = plan_plugins(get_backend("musa")), plan_plugins(get_backend("cuda"))
    inputs = ["-p", "harness.child.plugins.device_inputs"]  # on by default on accelerators
    assert musa.suite_pytest_args() == [*inputs, "-p", "harness.child.plugins.skipguards"]
    assert cuda.suite_pytest_args() == inputs and any(line.startswith("skipguards: off") for line in cuda.off)
    forced = plan_plugins(get_backend("cuda"), toggles=("+skipguards",))
    assert forced.has("skipguards") and not plan_plugins(get_backend("musa"), toggles=("-skipguards",)).has("skipguards")
