"""FlagGems' suite mode with the autotune toolbox, end to end on the cpu backend: the parallel sweep
(two shards on one fake device), LibTuner and Triton autotuner record/replay through `harness ab`,
the wall timer and an --extra-plugin in FlagGems' pytest.

The stand-in flag_gems (tests/data/fake_flaggems_suite.py, ``tuned=True``) has an op whose two
kernels go through Triton's real Autotuner in the interpreter: one with Triton's dict cache, one
with a LibTuner-like cache (FlagGems' ConfigCache interface). Both are keyed on the next power of
two of n, so n = 100 and 120 share key 128; which BLOCK a process picks is set by the environment
(per sweep shard), so two shards tune that key differently (a conflict).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.data.fake_flaggems_suite import FakeSuite, write_fake_suite

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def harness(suite: FakeSuite, *args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "FAKE_GEMS_"))}
    full.update(env, PYTHONPATH=f"{ROOT}:{suite.site}")
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=300)


def records(run: Path) -> dict[str, dict[str, Any]]:
    return {r["case_id"]: r for r in map(json.loads, (run / "records.jsonl").read_text().splitlines())}


def chosen(run: Path, op: str) -> dict[tuple[str, str], int]:
    """(kernel, first key value) -> BLOCK, from the run's autotune record of ``op``."""
    used = json.loads((run / "autotune" / f"{op}.json").read_text())
    return {(c["kernel"], c["key"][0]): c["kwargs"]["BLOCK"] for c in used["configs"]}


def case(n: int, op: str = "tuned_double") -> str:
    return f"{op}[flaggems-suite-float32-{n}]"


def test_a_suite_op_is_swept_by_call_number_fails_with_its_shard_and_is_measured_replaying(tmp_path: Path) -> None:
    suite = write_fake_suite(tmp_path / "fg", tuned=True)
    mark = tmp_path / "extra-plugin-mark"
    done = harness(suite, "run", "--backend", "cpu", "--suite", str(suite.benchmark), "--ops", "tuned_double",
                   "tuned_fail", "--sweep-devices", "cpu,cpu", "--plugins", "+wall", "--extra-plugin",
                   "tests.data.extra_plugin", "--warmup-ms", "1", "--rep-ms", "2", "--out", "run", "--progress", "plain",
                   cwd=tmp_path, env={"FAKE_GEMS_FAVOUR_0": "32", "FAKE_GEMS_FAVOUR_1": "16",
                                      "FAKE_GEMS_TUNE_FAIL": "300", "EXTRA_PLUGIN_MARK": str(mark)})
    assert done.returncode == 1, done.stdout + done.stderr  # tuned_fail's shard failed
    run = tmp_path / "run"
    status = {r["op"]: r for r in csv.DictReader((run / "ops_status.csv").open())}
    sweep = run / "sweep" / "tuned_double"

    # Shares: FlagGems' calls numbered in the order the benchmark makes them, dealt by number.
    summary = json.loads((sweep / "sweep.json").read_text())
    assert [(s["device"], s["cases"], s["ok"]) for s in summary["shards"]] == [
        ("cpu", ["its calls i with i % 2 == 0"], True), ("cpu", ["its calls i with i % 2 == 1"], True)]
    for index, sizes in ((0, (100, 200)), (1, (120, 300))):
        result = json.loads((sweep / f"shard-{index}.result.json").read_text())
        assert result["cases"] == {case(n): "ok" for n in sizes} and result["calls"] == 4
    # Conflicts: key 128 of both kernels (Triton's dict cache and the LibTuner-like one) tuned by both shards.
    assert summary["keys"] == 6
    assert sorted((c["kernel"], c["key"][0], c["kept"], c["others"]) for c in summary["conflicts"]) == [
        ("copy_kernel", "int:128", 0, [1]), ("double_kernel", "int:128", 0, [1])]
    assert status["tuned_double"]["status"] == "PASS"
    assert "2 key(s) tuned differently" in status["tuned_double"]["notes"]

    # The measurement replayed the merged configs: every row says so, the record holds shard 0's 128.
    rows = records(run)
    assert {c: r["autotune"] for c, r in rows.items() if r["op"] == "tuned_double"} == {
        case(n): "replayed" for n in (100, 120, 200, 300)}
    expected = {"int:128": 32, "int:256": 32, "int:512": 16}
    assert chosen(run, "tuned_double") == {(k, key): b for k in ("copy_kernel", "double_kernel")
                                           for key, b in expected.items()}
    # +wall: each row also has the call timed as a user makes it; --extra-plugin: loaded in FlagGems' pytest.
    assert all(r["candidate_wall"] and r["baseline_wall"] for r in rows.values() if r["op"] == "tuned_double")
    assert mark.read_text().startswith("loaded ")

    # A failed shard discards the sweep, saying why; the op is measured tuning serially, live.
    assert (f"shard 1 on device cpu: {case(300, 'tuned_fail')}: FlagGems' call raised RuntimeError: "
            "no config fits n=300") in status["tuned_fail"]["notes"]
    assert "its configs are discarded and the op tunes serially" in status["tuned_fail"]["notes"]
    assert not (run / "sweep" / "tuned_fail" / "configs.json").exists()
    failed_rows = [r for r in rows.values() if r["op"] == "tuned_fail"]
    assert failed_rows and {r["autotune"] for r in failed_rows} == {"live"}


def test_ab_of_a_suite_op_replays_side_a_configs_and_marks_a_key_it_lacks(tmp_path: Path) -> None:
    suite = write_fake_suite(tmp_path / "fg", tuned=True)
    done = harness(suite, "ab", "--allow-cpu", "--repeats", "1",
                   "--a-env", "FAKE_GEMS_FAVOUR=32", "--a-env", "FAKE_GEMS_SIZES=100,200",
                   "--b-env", "FAKE_GEMS_FAVOUR=16", "--b-env", "FAKE_GEMS_SIZES=100,120,200,1000",
                   "--out", "ab", "--", "--backend", "cpu", "--suite", str(suite.benchmark), "--ops", "tuned_double",
                   "--warmup-ms", "1", "--rep-ms", "2", cwd=tmp_path, env={})
    assert done.returncode == 0, done.stdout + done.stderr
    a, b = tmp_path / "ab" / "repeats" / "a-1", tmp_path / "ab" / "repeats" / "b-1"
    # A tuned live (BLOCK 32) and recorded both kernels' choices.
    assert {c: r["autotune"] for c, r in records(a).items()} == {case(100): "live", case(200): "live"}
    assert set(chosen(a, "tuned_double").values()) == {32}
    # B replayed A's configs although its environment favours 16; 1000 (key 1024) was not in A: tuned live.
    assert {c: r["autotune"] for c, r in records(b).items()} == {
        case(100): "replayed", case(120): "replayed", case(200): "replayed", case(1000): "replay-miss"}
    used = chosen(b, "tuned_double")
    assert {key: block for (_, key), block in used.items()} == {"int:128": 32, "int:256": 32, "int:1024": 16}
    spec = json.loads((b / "specs" / "tuned_double.json").read_text())
    assert spec["replay"]["run_dir"] == str(a.resolve())
    compare_md = (tmp_path / "ab" / "compare.md").read_text()
    assert "configs recorded by a-1 and replayed by every other run" in compare_md
    assert "1 row(s) of side B tuned live while replaying" in compare_md
