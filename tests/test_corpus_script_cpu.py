"""benchmarks/flaggems_corpus.py end to end on cpu with a stand-in FlagGems tree: the sample's
parts cut by their budget in one call, resumed by the next calls until they end, then joined by
the script's merge (`harness merge`, causes, corpus.json) into a run every reader takes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data.fake_flaggems_suite import write_fake_suite
from tests.harness_cli import run_harness

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "flaggems_corpus.py"


def _script(*args: str, **knobs: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(knobs)
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def _status(run: Path) -> str:
    return str(json.loads((run / "run.json").read_text())["status"])


@pytest.mark.slow
def test_parts_cut_by_their_budget_are_resumed_by_later_calls_and_merge_into_one_run(tmp_path: Path) -> None:
    suite = write_fake_suite(tmp_path / "tree")
    runs = tmp_path / "runs"
    knobs = {"SUITE": str(suite.benchmark), "SITE": str(suite.site), "BACKEND": "cpu", "DEVICES": "cpu",
             "SKIP_SETUP": "1", "SAMPLE_SIZE": "8", "PARTS": "2", "STEPS": "sample1 sample2", "RUNS": str(runs),
             "ARCHIVE": "0", "SAMPLE_BUDGET_S": "2"}
    calls = 0
    while calls < 12:  # each call starts the ops of the first 2 s of a part
        calls += 1
        done = _script("run", "--out", str(tmp_path / f"call{calls}"), **knobs)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        if calls == 1:
            assert "--ops-file" in done.stdout and "--resume" not in done.stdout
            cut = [r for r in csv.DictReader((runs / "sample-1" / "ops_status.csv").open()) if r["status"] == "PENDING"]
            assert cut and all("--budget" in r["notes"] for r in cut)  # not started: the budget, named
        else:
            assert done.stdout.count("--resume") == 2
        if all(_status(runs / f"sample-{k}") != "interrupted" for k in (1, 2)):
            break
    assert 1 < calls < 12
    summary = json.loads((tmp_path / f"call{calls}" / "corpus.json").read_text())
    assert summary["runs"] == ["sample-1", "sample-2"] and summary["ops_ended"] == summary["ops_planned"]

    merged = tmp_path / "merged"
    done = _script("merge", str(runs), "--out", str(merged), **knobs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    info = json.loads((merged / "run.json").read_text())
    assert sorted(m["shard"] for m in info["merged_from"]) == ["1/2", "2/2"]
    ops = list(csv.DictReader((merged / "ops_status.csv").open()))
    sample = (runs / "sample.txt").read_text().split()
    assert sorted(r["op"] for r in ops) == sorted(sample) and not {r["status"] for r in ops} & {"PENDING", "RUNNING"}
    causes = list(csv.DictReader((merged / "causes.csv").open()))
    assert {r["op"] for r in causes if not r["case"]} == {r["op"] for r in ops if r["status"] not in ("PASS",)}
    assert all(r["cause"] for r in causes)
    assert json.loads((merged / "corpus.json").read_text())["ops_ended"] == len(sample)
    report = run_harness("report", str(merged), cwd=tmp_path)
    assert report.returncode == 0 and f"# Run {info['run_id']}" in report.stdout
