"""The parallel autotune sweep end to end on the CPU backend, two fake devices.

tests/data/sweep_ops.py tunes through Triton's real Autotuner in the interpreter; which BLOCK a
process picks is set per sweep shard by the environment, and shapes 100 and 120 share key 128,
so the two shards tune that key differently (a conflict). swept_fail raises while tuning n=300.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.harness_cli import run_harness

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "tests" / "data" / "sweep_ops.py"

pytestmark = pytest.mark.slow


def test_a_sweep_tunes_shares_in_parallel_counts_conflicts_fails_an_op_and_replays(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("swept_copy: [[100], [120], [200], [300]]\nswept_fail: [[100], [120], [200], [300]]\n")
    done = run_harness("run", "--backend", "cpu", "--ops-module", str(OPS), "--ops", "swept_copy", "swept_fail",
                       "--dtypes", "fp32", "--shapes-file", str(shapes), "--sweep-devices", "0,1", "--out", "run",
                       "--progress", "plain", cwd=tmp_path, timeout=300,
                       env={"SWEEP_OPS_FAVOUR_0": "32", "SWEEP_OPS_FAVOUR_1": "16", "SWEEP_OPS_FAIL": "300"})
    assert done.returncode == 1, done.stdout + done.stderr  # swept_fail failed
    run = tmp_path / "run"
    status = {r["op"]: r for r in csv.DictReader((run / "ops_status.csv").open())}

    # Shares: cases dealt round-robin, shard 0 on device 0 and shard 1 on device 1.
    summary = json.loads((run / "sweep" / "swept_copy" / "sweep.json").read_text())
    assert [(s["device"], s["cases"]) for s in summary["shards"]] == [
        ("0", ["swept_copy[builtin-float32-100]", "swept_copy[builtin-float32-200]"]),
        ("1", ["swept_copy[builtin-float32-120]", "swept_copy[builtin-float32-300]"]),
    ]
    # Conflict: key 128 tuned by both (BLOCK 32 in shard 0, 16 in shard 1); shard 0's is kept.
    assert summary["keys"] == 3
    assert [(c["key"][0], c["kept"], c["others"]) for c in summary["conflicts"]] == [("int:128", 0, [1])]
    assert status["swept_copy"]["status"] == "PASS"
    assert "1 key(s) tuned differently" in status["swept_copy"]["notes"]

    # Replay: the measurement tuned nothing; it ran the merged configs.
    rows = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert {r["case_id"]: r["autotune"] for r in rows if r["op"] == "swept_copy"} == {
        f"swept_copy[builtin-float32-{n}]": "replayed" for n in (100, 120, 200, 300)}
    used = json.loads((run / "autotune" / "swept_copy.json").read_text())
    assert {c["key"][0]: c["kwargs"]["BLOCK"] for c in used["configs"]} == {"int:128": 32, "int:256": 32,
                                                                             "int:512": 16}

    # A failed shard discards the sweep, saying why, and the op is measured tuning serially, live,
    # as without --sweep-devices: its other cases pass; the case that raises errors there too.
    assert status["swept_fail"]["status"] != "PASS"
    assert "shard 1 on device 1" in status["swept_fail"]["notes"]
    assert "no config fits n=300" in status["swept_fail"]["notes"]
    assert "its configs are discarded and the op tunes serially" in status["swept_fail"]["notes"]
    assert {r["case_id"]: (r["status"], r["autotune"]) for r in rows if r["op"] == "swept_fail"} == {
        **{f"swept_fail[builtin-float32-{n}]": ("pass", "live") for n in (100, 120, 200)},
        "swept_fail[builtin-float32-300]": ("error", "live")}
    assert not (run / "sweep" / "swept_fail" / "configs.json").exists()
    assert "no config fits n=300" in (run / "junit.xml").read_text()
    # The run's own Triton cache is gone once the run ended.
    assert not (run / "triton-cache").exists()
