"""`harness gate-run --container`: both sides of the gate in the backend's image, on a real engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def test_gate_runs_each_side_in_the_same_confined_image(  # type: ignore[no-untyped-def]
        cpu_image, container_env: dict[str, str], tmp_path: Path, no_leftovers) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    for side in (base, head):  # two trees, as the PR gate mounts the default branch and the merge
        subprocess.run(["git", "worktree", "add", "--detach", str(side), "HEAD"], cwd=ROOT, check=True,
                       capture_output=True)
    out = tmp_path / "gate"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "harness", "gate-run", "--container", "cpu", "--base-ref", str(base),
             "--head-ref", str(head), "--repeats", "1", "--threshold", "500", "--allow-cpu", "--out", str(out), "--",
             "--ops", "add", "--dtypes", "fp32"],
            cwd=ROOT, capture_output=True, text=True, env={**container_env, "PYTHONPATH": str(ROOT)}, timeout=900,
        )
    finally:
        for side in (base, head):
            subprocess.run(["git", "worktree", "remove", "--force", str(side)], cwd=ROOT, capture_output=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "in the cpu container" in done.stdout and "both sides run in triton-op-harness-cpu:" in done.stderr
    assert (out / "compare.md").is_file() and (out / "base" / "run.json").is_file()
    infos = {side: json.loads((out / "repeats" / f"{side}-1" / "run.json").read_text()) for side in ("base", "head")}
    assert infos["base"]["container"] == infos["head"]["container"]
    assert infos["base"]["container"]["image"] == cpu_image.ref
    for path in out.rglob("*"):  # handed back to the caller after each side
        assert path.stat().st_uid == os.getuid(), path
