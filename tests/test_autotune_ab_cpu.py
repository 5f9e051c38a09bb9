"""Autotune record/replay and `harness ab` through the real pipeline on the CPU backend.

tests/data/autotuned_ops.py launches its kernel through Triton's real Autotuner (in the
interpreter, with a made-up benchmarker): the config it picks is set by the environment
variable AUTOTUNED_OPS_FAVOUR, so a run that replays can be told from one that tuned.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.harness_cli import run_harness

ROOT = Path(__file__).resolve().parents[1]
TUNED_OPS = ROOT / "tests" / "data" / "autotuned_ops.py"

pytestmark = pytest.mark.slow


def harness(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_harness(*args, cwd=cwd, env=env, timeout=300)


def rows(run: Path) -> dict[str, dict[str, Any]]:
    return {r["case_id"]: r for r in map(json.loads, (run / "records.jsonl").read_text().splitlines())}


def chosen_blocks(run: Path) -> dict[int, int]:
    data = json.loads((run / "autotune" / "tuned_copy.json").read_text())
    return {int(c["key"][0].removeprefix("int:")): c["kwargs"]["BLOCK"] for c in data["configs"]}


def test_a_replayed_run_uses_the_recorded_configs_and_marks_a_missing_key(tmp_path: Path) -> None:
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text("tuned_copy: [[100]]\n")
    two.write_text("tuned_copy: [[100], [200]]\n")
    common = ["run", "--backend", "cpu", "--ops-module", str(TUNED_OPS), "--ops", "tuned_copy", "--dtypes", "fp32"]
    done = harness(*common, "--shapes-file", str(one), "--out", "a", cwd=tmp_path,
                   env={"AUTOTUNED_OPS_FAVOUR": "32"})
    assert done.returncode == 0, done.stdout + done.stderr
    a = tmp_path / "a"
    assert chosen_blocks(a) == {100: 32}
    meta = json.loads((a / "autotune" / "meta.json").read_text())
    assert meta["backend"] == "cpu" and meta["triton_version"] not in ("", "absent")
    assert {r["autotune"] for r in rows(a).values()} == {"live"}

    # B would choose BLOCK 16 if it tuned; the replayed key keeps A's 32, the new one is tuned.
    done = harness(*common, "--shapes-file", str(two), "--out", "b", "--replay-from", "a", cwd=tmp_path,
                   env={"AUTOTUNED_OPS_FAVOUR": "16"})
    assert done.returncode == 0, done.stdout + done.stderr
    b = tmp_path / "b"
    assert chosen_blocks(b) == {100: 32, 200: 16}
    marks = {case: r["autotune"] for case, r in rows(b).items()}
    assert marks == {"tuned_copy[builtin-float32-100]": "replayed", "tuned_copy[builtin-float32-200]": "replay-miss"}
    spec = json.loads((b / "specs" / "tuned_copy.json").read_text())
    assert spec["replay"]["run_dir"] == str(a.resolve())
    assert json.loads((b / "run.json").read_text())["options"]["replay_from"] == str(a.resolve())


def test_ab_runs_the_sides_interleaved_with_side_a_configs_and_compares(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("add: [[4, 64]]\ntuned_copy: [[100]]\n")
    done = harness("ab", "--allow-cpu", "--a-env", "AUTOTUNED_OPS_FAVOUR=32", "--b-env", "AUTOTUNED_OPS_FAVOUR=16",
                   "--out", "ab", "--", "--backend", "cpu", "--ops-module", str(TUNED_OPS),
                   "--ops", "add", "tuned_copy", "--dtypes", "fp32", "--shapes-file", str(shapes),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "ab"
    for name in ("compare.md", "compare.csv", "compare-junit.xml", "ab.json"):
        assert (out / name).is_file(), name
    order = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("ab: ")]
    assert order == ["a-1", "b-1", "b-2", "a-2"]
    # Every B run kept A's choice although B's environment favours BLOCK 16.
    for run in ("b-1", "b-2", "a-2"):
        assert chosen_blocks(out / "repeats" / run) == {100: 32}
        marks = {case: r["autotune"] for case, r in rows(out / "repeats" / run).items()}
        assert marks == {"add[builtin-float32-4x64]": "none", "tuned_copy[builtin-float32-100]": "replayed"}
    pooled_b = rows(out / "b")
    assert all(r["candidate"]["summary"]["n"] >= 2 * 3 for r in pooled_b.values())  # two runs pooled
    compare_md = (out / "compare.md").read_text()
    assert compare_md.startswith("## A/B comparison (B against A):")
    assert "head is side B (AUTOTUNED_OPS_FAVOUR=16)" in compare_md
    assert "configs recorded by a-1 and replayed by every other run" in compare_md
    assert "replay-miss" not in compare_md
    compared = {line.split(",")[0] for line in (out / "compare.csv").read_text().splitlines()[1:]}
    assert compared == {"add[builtin-float32-4x64]", "tuned_copy[builtin-float32-100]"}
