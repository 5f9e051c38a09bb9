"""The corpus nightly's publish step with a shard whose `harness run --budget` ran out: the bench
and publish steps of .github/workflows/corpus-nightly.yml as written, on cpu, with the stand-in
FlagGems repository of tests/test_corpus_workflow.py. The cut shard's run folder is merged
(`harness merge`), held against history and stored whole; the night is marked partial naming
that shard, and the ops it never started are in the stored run as not run, cause environment,
budget, where `harness report` and `harness history add` read them."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from harness.results.causes import BUDGET_NOTE
from tests.harness_cli import run_harness
from tests.test_corpus_workflow import (
    _bash,
    _env,
    _flaggems_repo,
    _nights,
    _prepare,
    _publish,
    _same_commit,
    _step,
)


def _bench(tmp_path: Path, inputs: Path, site: Path, shard: int, store: Path, budget_s: str) -> Path:
    """One bench job of two shards with the workflow's budget input set to ``budget_s``: its
    Benchmark step as written, then its upload (the shard's folder without logs)."""
    work = tmp_path / f"bench-{shard}"
    shutil.copytree(inputs, work / "inputs")
    env = _env(work, "bench", site, BACKEND="cpu", SHARD=str(shard), SHARDS="2", NAME="v5.3.4",
               CORPUS_CACHE_ROOT=str(tmp_path / "runner-cache"), BUDGET_S=budget_s)
    done = _bash(str(_step("bench", "Benchmark")["run"]), work, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shutil.copytree(work / "reports" / "corpus" / f"cpu-{shard}", store / f"cpu-{shard}",
                    ignore=shutil.ignore_patterns("logs"))
    return store / f"cpu-{shard}"


@pytest.mark.slow
def test_a_shard_cut_by_its_budget_is_stored_whole_its_ops_not_run_named_and_the_night_partial(
        tmp_path: Path) -> None:
    repo, site = _flaggems_repo(tmp_path / "fg")
    prep = tmp_path / "prepare"
    (prep / "data").mkdir(parents=True)
    done, _ = _prepare(prep, repo, "v5.3.4")
    assert done.returncode == 0, done.stdout + done.stderr
    store = tmp_path / "artifacts"
    _bench(tmp_path, prep / "inputs", site, 1, store, "3600")
    cut = _bench(tmp_path, prep / "inputs", site, 2, store, "1")  # no op starts after its first second
    _same_commit(store)
    info = json.loads((cut / "run.json").read_text())
    assert info["status"] == "interrupted" and info["options"]["budget"] == 1.0
    unstarted = {r["op"] for r in csv.DictReader((cut / "ops_status.csv").open()) if r["status"] == "PENDING"}
    assert unstarted, "the shard's first op took under a second: nothing was left for the budget to cut"

    pub = tmp_path / "publish"
    (pub / "data").mkdir(parents=True)
    record = _publish(pub, store, ["cpu-1", "cpu-2"], "2026-12-04", "1001")
    assert record.returncode == 1, record.stdout[-3000:] + record.stderr[-3000:]
    assert "::error::cpu: night 2026-12-04 partial: shard(s) 2/2 ran out of --budget" in record.stdout
    assert "does not load" not in record.stdout and "failed or partial: cpu" in record.stdout
    night = _nights(pub)[-1]
    assert (night["status"], night["missing"]) == ("partial", "2/2") and night["software"]
    (stored,) = (pub / "data" / "corpus" / "cpu" / night["software"]).iterdir()
    assert stored.name == "2026-12-04-1001"
    for name in ("run.json", "records.jsonl", "ops_status.csv", "report.md", "summary.csv", "junit.xml"):
        assert (stored / name).is_file(), name
    merged = json.loads((stored / "run.json").read_text())
    assert merged["status"] == "interrupted" and sorted(m["shard"] for m in merged["merged_from"]) == ["1/2", "2/2"]
    rows = {r["op"]: r for r in csv.DictReader((stored / "ops_status.csv").open())}
    assert {op for op, r in rows.items() if r["status"] == "PENDING"} == unstarted
    for op in unstarted:  # not run, and why: the budget, as the cause and its evidence
        assert BUDGET_NOTE in rows[op]["notes"] and rows[op]["cause"] == "environment"
        assert "budget" in rows[op]["evidence"]
    recorded = {json.loads(line)["op"] for line in (stored / "records.jsonl").read_text().splitlines() if line}
    assert not recorded & unstarted and recorded  # shard 1's cases are there; none of the ops not run

    report = run_harness("report", str(stored), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert f"# Run {merged['run_id']}" in report.stdout and all(op in report.stdout for op in unstarted)
    added = run_harness("history", "add", str(stored), "--db", str(tmp_path / "h.sqlite"), cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assert (pub / "site" / "index.html").is_file() and "2/2" in (pub / "site" / "nights.csv").read_text()
