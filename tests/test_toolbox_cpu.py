"""Plugin toggles, an extra plugin and the wall timer through a real CPU run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness.results.schema import SCHEMA_VERSION
from tests.harness_cli import run_harness

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_toggles_an_extra_plugin_and_the_wall_column(tmp_path: Path) -> None:
    mark = tmp_path / "mark.txt"
    done = run_harness("run", "--backend", "cpu", "--ops", "add", "--dtypes", "fp32", "--out", "run",
                       "--plugins", "-autotune", "+wall", "--extra-plugin", "tests.data.extra_plugin",
                       "--keep-triton-cache", cwd=tmp_path, timeout=300,
                       env={"EXTRA_PLUGIN_MARK": str(mark), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "run"
    assert mark.read_text() == f"loaded {run / 'triton-cache' / 'triton'}\n"  # the run's own cache
    info = json.loads((run / "run.json").read_text())
    assert "harness.child.plugins.wall" in info["plugins"] and "harness.child.plugins.autotune" not in info["plugins"]
    assert info["options"]["plugins"] == ["-autotune", "+wall"]
    assert not (run / "autotune" / "add.json").exists()
    rows = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert rows and all(r["schema_version"] == SCHEMA_VERSION and r["candidate_wall"]["summary"]["median"] > 0 for r in rows)
    summary = list(csv.DictReader((run / "summary.csv").open()))
    assert all(float(r["candidate_wall_ms"]) > 0 and float(r["baseline_wall_ms"]) > 0 for r in summary)
    assert "wall ms torch / cand" in (run / "report.md").read_text()
    assert (run / "triton-cache").is_dir()  # kept


def test_unknown_toggles_and_missing_plugins_are_refused(tmp_path: Path) -> None:
    for args, words in ((["--plugins", "-timing"], "unknown plugin 'timing'"),
                        (["--plugins", "+mm_cluster"], "lacks the capability hopper_cluster_mm"),
                        (["--plugins", "ir"], "is not +NAME or -NAME"),
                        (["--extra-plugin", "no_such_module_here"], "cannot find this module"),
                        (["--sweep-devices", "2", "--replay-from", "x"], "replay")):
        done = run_harness("run", "--backend", "cpu", "--ops", "add", "--out", "r", *args, cwd=tmp_path, timeout=60)
        assert done.returncode == 2, (args, done.stdout + done.stderr)
        assert words in done.stderr, (args, done.stderr)
