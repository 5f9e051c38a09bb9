"""`harness run --shard K/N` and `harness merge` end to end on the CPU backend: the merged run has
the case set of the same run made unsharded, and every output a run has."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.harness_cli import run_harness

ROOT = Path(__file__).resolve().parents[1]
XSD = ROOT / "tests" / "data" / "junit-10.xsd"
ARGS = ("run", "--backend", "cpu", "--ops", "add", "softmax", "--dtypes", "fp32",
        "--progress", "plain")
OUTPUTS = ("run.json", "records.jsonl", "summary.csv", "junit.xml", "report.md", "report.html", "ops_status.csv")


def _cases(run: Path) -> list[tuple[str, str]]:
    lines = (run / "records.jsonl").read_text().splitlines()
    return sorted((json.loads(x)["case_id"], json.loads(x)["status"]) for x in lines if x.strip())


@pytest.mark.parametrize("spec", ["0/3", "4/3", "abc"])
def test_bad_shard_specs_exit_2_before_anything_runs(spec: str, tmp_path: Path) -> None:
    done = run_harness("run", "--backend", "cpu", "--ops", "add", "--shard", spec, "--out",
                       str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "--shard:" in done.stderr and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_shards_merged_equal_the_unsharded_run(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    assert run_harness(*ARGS, "--out", str(whole), cwd=tmp_path).returncode == 0
    parts = []
    for k in (1, 2):
        part = tmp_path / f"part{k}"
        done = run_harness(*ARGS, "--shard", f"{k}/2", "--out", str(part), cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert f"part {k}/2 of a split: 1 of its 2 op(s)" in done.stdout.splitlines()[0]
        parts.append(part)
    ops = [set(json.loads((p / "run.json").read_text())["shard"]["ops"]) for p in parts]
    assert ops[0] and ops[1] and not ops[0] & ops[1]  # both parts got work, none twice
    assert ops[0] | ops[1] == {"add", "softmax"}

    # A missing part is named, and nothing is written.
    missing = run_harness("merge", str(parts[0]), "--out", str(tmp_path / "half"), cwd=tmp_path)
    assert missing.returncode == 2 and "2/2 missing" in missing.stderr
    assert not (tmp_path / "half").exists()

    merged = tmp_path / "merged"
    done = run_harness("merge", str(parts[1]), str(parts[0]), "--out", str(merged), "--run-id", "night",
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "merged 2 part(s)" in done.stdout
    for name in OUTPUTS:
        assert (merged / name).is_file(), name
    assert _cases(merged) == _cases(whole)

    info = json.loads((merged / "run.json").read_text())
    whole_info = json.loads((whole / "run.json").read_text())
    assert info["run_id"] == "night" and info["status"] == "complete"
    assert info["fingerprint"] == whole_info["fingerprint"]
    assert [p["op"] for p in info["plan"]] == [p["op"] for p in whole_info["plan"]]
    assert sorted(m["shard"] for m in info["merged_from"]) == ["1/2", "2/2"]
    assert {json.loads(x)["run_id"] for x in (merged / "records.jsonl").read_text().splitlines()} == {"night"}
    rows = list(csv.DictReader((merged / "ops_status.csv").open()))
    assert sorted(r["op"] for r in rows) == ["add", "softmax"]
    assert {r["status"] for r in rows} == {"PASS"}
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(str(merged / "junit.xml"))

    # The merged directory is a run to every reader: report, compare, history.
    report = run_harness("report", str(merged), cwd=tmp_path)
    assert report.returncode == 0 and "# Run night" in report.stdout
    compare = run_harness("compare", str(whole), str(merged), "--allow-cpu", cwd=tmp_path)
    assert compare.returncode == 0, compare.stderr
    db = str(tmp_path / "h.sqlite")
    added = run_harness("history", "add", str(merged), "--db", db, cwd=tmp_path)
    assert added.returncode == 0 and "added run night" in added.stdout
