"""`harness compile` end to end on this CPU machine: a kernel compiled for an AMD target that is
not here, its IR kept, and the gate against a baseline in which it used fewer registers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness_cli import run_harness

pytestmark = pytest.mark.slow


def test_compile_keeps_ir_and_the_gate_fails_when_registers_grow(tmp_path: Path) -> None:
    common = ["compile", "--ops", "add", "--dtypes", "fp16", "--targets", "hip:gfx942", "--level", "smoke"]
    done = run_harness(*common, "--out", "one", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    one = json.loads((tmp_path / "one" / "compile.json").read_text())
    (variant,) = one["variants"]  # both smoke shapes specialise alike
    assert variant["ok"] and variant["target"] == "hip:gfx942" and len(variant["cases"]) == 2
    assert variant["ir"]["regs"] > 0 and variant["ir"]["num_warps"] == 8
    kept = tmp_path / "one" / variant["dir"]
    assert (kept / "_add_kernel.amdgcn").is_file() and (kept / "_add_kernel.ttgir").is_file()
    assert not (tmp_path / "one" / "triton-cache").exists()
    # the worker named each variant as it began it (what its --variant-timeout watches)
    begun = (tmp_path / "one" / "tasks" / "hip_gfx942.progress").read_text().splitlines()
    assert begun == [f"add {variant['label']}"]

    base = tmp_path / "base"
    base.mkdir()
    variant["ir"]["regs"] -= 10  # the baseline used fewer registers
    (base / "compile.json").write_text(json.dumps(one))
    done = run_harness(*common, "--out", "two", "--against", str(base), cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REGRESSION registers: add hip:gfx942" in done.stdout
    assert "| REGRESSION | registers |" in (tmp_path / "two" / "gate.md").read_text()

    done = run_harness(*common, "--out", "three", "--against", "nowhere", cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "--against nowhere" in done.stderr


@pytest.mark.integration
def test_every_builtin_kernel_compiles_for_the_default_targets(tmp_path: Path) -> None:
    done = run_harness("compile", "--level", "core", "--out", "all", cwd=tmp_path, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "all" / "compile.json").read_text())
    assert result["problems"] == []
    assert [v["label"] for v in result["variants"] if not v["ok"]] == []
