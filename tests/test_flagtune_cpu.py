"""--flagtune reaches the op process as FlagGems' USE_FLAGTUNE and run.json keeps it (cpu backend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness_cli import run_harness

# An op that writes the USE_FLAGTUNE its process sees to $FLAGTUNE_OPS_STATE/seen.
ENV_OPS = '''
import math, os
from pathlib import Path
import torch
from harness.ops.base import OpSpec

def _inputs(shape, dtype, gen, device):
    (Path(os.environ["FLAGTUNE_OPS_STATE"]) / "seen").write_text(os.environ.get("USE_FLAGTUNE", "<unset>"))
    return (torch.randn(shape, dtype=dtype, generator=gen),)

HARNESS_OPS = [OpSpec(id="env_probe", baseline=lambda x: x * 2, candidate=lambda x: x * 2, make_inputs=_inputs,
                      bytes_moved=lambda shape, size: 2 * math.prod(shape) * size, flops=lambda shape: math.prod(shape),
                      description="writes the USE_FLAGTUNE it sees", dtypes=("float32",))]
'''


@pytest.mark.slow
@pytest.mark.parametrize(("args", "inherited", "seen"), [
    (("--flagtune", "on"), "0", "1"),  # the flag wins over the inherited variable
    ((), "1", "1"),  # the old variable, read when no layer sets the mode
    ((), "", "0"),  # the default: off, set explicitly (an empty variable counts as not set)
])
def test_the_op_process_sees_the_run_s_flagtune_mode(tmp_path: Path, args: tuple[str, ...], inherited: str,
                                                     seen: str) -> None:
    (tmp_path / "env_ops.py").write_text(ENV_OPS)
    (tmp_path / "shapes.yaml").write_text("env_probe: [[4]]\n")
    env = {"FLAGTUNE_OPS_STATE": str(tmp_path), "USE_FLAGTUNE": inherited}
    done = run_harness("run", "--backend", "cpu", "--ops-module", "env_ops.py", "--ops", "env_probe",
                       "--shapes-file", "shapes.yaml", "--dtypes", "float32", "--warmup-ms", "1", "--rep-ms", "1",
                       "--progress", "plain", "--out", "run", *args, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "seen").read_text() == seen
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["options"]["flagtune"] == {"1": "on", "0": "off"}[seen]
