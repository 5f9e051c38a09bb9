"""FlagGems' suite mode end to end on the cpu backend, through the one batch executor: stand-in
trees of both layouts (tests/data/fake_flaggems_suite.py), real op processes running their pytest
with the harness plugin; and every refusal of bad input, answered at once, with nothing left behind."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import RunFiles
from harness.options import RunOptions
from harness.results.store import read_json, read_records
from harness.run.execute import execute, prepare_resume
from harness.suite.runner import prepare_suite
from tests.data.fake_flaggems_suite import write_fake_suite

ROOT = Path(__file__).resolve().parents[1]


def env_for(site: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)}


@pytest.mark.slow
def test_the_v53_corpus_runs_through_the_batch_executor_and_resumes(tmp_path: Path) -> None:
    suite = write_fake_suite(tmp_path / "fg")
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("GenericBenchmark: [[2, 4, 8]]\n")  # layer_norm's NormBenchmark derives from it
    run_dir = tmp_path / "run"
    options = RunOptions(backend="cpu", suite=str(suite.benchmark), dtypes=("float32", "int32"),
                         ops=("add", "bitwise_not", "broken_add", "skipped_op", "layer_norm", "needs_vllm"),
                         shapes_file=str(shapes), warmup_ms=1.0, rep_ms=2.0, progress="plain", out=str(run_dir),
                         op_timeout=120.0, prestart="on")
    env = env_for(suite.site)
    out = io.StringIO()
    code = execute(prepare_suite(options, str(suite.benchmark), env), env, out)
    assert code == 1, out.getvalue()  # broken_add fails its check
    status = {o["op"]: o["status"] for o in read_json(run_dir / "run.json")["ops"]}
    assert status == {"add": "PASS", "bitwise_not": "PASS", "broken_add": "FAIL", "skipped_op": "SKIP",
                      "layer_norm": "PASS", "needs_vllm": "SKIP"}, (run_dir / "logs" / "add.log").read_text()[-3000:]
    rows = {r.case_id: r for r in read_records(run_dir / "records.jsonl")}
    assert rows["add[flaggems-suite-float32-64x64]"].status == "pass"
    assert rows["add[flaggems-suite-int32-]"].status == "skip"  # add declares no int32: FlagGems' reason
    assert {r.provider for r in rows.values() if r.op == "add"} == {"flaggems-suite"}  # not test_add_inplace too
    assert rows["bitwise_not[flaggems-suite-int32-8x16]"].status == "pass"  # passed through as asked
    assert "int16" not in {r.dtype for r in rows.values() if r.op == "bitwise_not"}
    assert rows["broken_add[flaggems-suite-float32-8x16]"].status == "fail"
    assert rows["skipped_op[flaggems-suite-any-]"].message == "Issue 1: not on the fake vendor"
    assert "vllm_not_installed_here" in rows["needs_vllm[flaggems-suite-any-]"].message  # a module-level skip
    assert [r.shape for r in rows.values() if r.op == "layer_norm" and r.status == "pass"] == [(2, 4, 8)]  # class chain
    info = read_json(run_dir / "run.json")
    assert info["suite"]["layout"] == "v5.3" and info["suite"]["installed"] == "5.3.4"
    assert info["identity"]["flag_gems"]["vendor"] == "fake"
    assert (run_dir / "junit.xml").is_file() and (run_dir / "summary.csv").is_file()

    # resume: one op lost its marker and its rows; only it runs again
    files = RunFiles(run_dir)
    files.marker("layer_norm").unlink()
    kept = [r for r in read_records(files.records) if r.op != "layer_norm"]
    files.records.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in kept))
    add_log = files.log("add").read_text()
    code = execute(prepare_resume(run_dir, env), env, io.StringIO())
    assert code == 1
    assert files.log("add").read_text() == add_log
    assert [r.shape for r in read_records(files.records) if r.op == "layer_norm"] == [(), (2, 4, 8)]


@pytest.mark.slow
def test_the_v50_layout_runs_by_mark_from_the_command_line(tmp_path: Path) -> None:
    suite = write_fake_suite(tmp_path / "fg", layout="v5.0", version="5.0.2")
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--backend", "cpu", "--suite", str(suite.benchmark), "--ops", "softmax",
         "--warmup-ms", "1", "--rep-ms", "2", "--progress", "plain", "--out", str(run_dir)],
        cwd=tmp_path, env={**env_for(suite.site), "PYTHONPATH": f"{ROOT}:{suite.site}"},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = read_records(run_dir / "records.jsonl")
    assert row.case_id == "softmax[flaggems-suite-float32-32x64]" and row.status == "pass"
    assert row.gbps is not None  # UnaryReductionBenchmark states its bytes (get_gbps)


def test_list_suite_answers_without_importing_torch(tmp_path: Path) -> None:
    suite = write_fake_suite(tmp_path / "fg")
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "cli_probe.py"), "list", "suite", "--suite",
                           str(suite.benchmark), "--csv"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["exit"] == 0 and result["heavy"] == [], result


BAD_INPUT = [
    (("--suite", "{tmp}"), "must be named benchmark"),
    (("--suite", "{bench}", "--ops", "softmx"), "softmx: no such benchmark (closest: softmax"),
    (("--suite", "{bench}", "--node", "test_mm.py::test_nope"), "--node test_mm.py::test_nope: no such benchmark"),
    (("--suite", "{bench}", "--ops", "mm", "--shapes-file", "{shapes}"), "'Blasbenchmark' (closest: BlasBenchmark"),
    (("--suite", "{old}", "--ops", "softmax"), "the tree is FlagGems 5.0 (fake-v5.0.2"),
    (("--suite", "{bench}", "--ops", "mm", "--dtypes", "int33"), "Unknown dtype 'int33'"),
    (("--suite", "{bench}", "--ops", "mm", "--plugins", "+bogus"), "--plugins +bogus: unknown plugin 'bogus'"),
    (("--suite", "{bench}", "--ops", "mm", "--sweep-devices", "2", "--replay-from", "{rec}"), "give one of them"),
]


@pytest.mark.parametrize("args, message", BAD_INPUT, ids=[m.split(":")[0][:30] for _, m in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing_behind(args: tuple[str, ...], message: str,
                                                                 tmp_path: Path) -> None:
    new = write_fake_suite(tmp_path / "new")
    old = write_fake_suite(tmp_path / "old", layout="v5.0", version="5.0.2")
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("Blasbenchmark: [[1, 2, 3, 4]]\n")
    rec = tmp_path / "rec"  # a run directory with recorded autotune configs, for --replay-from
    (rec / "autotune").mkdir(parents=True)
    (rec / "autotune" / "meta.json").write_text(json.dumps({"format_version": 1, "backend": "cpu", "device_name": "",
                                                            "device_arch": "", "triton_version": "3.7.1", "run_id": "r"}))
    work = tmp_path / "work"
    work.mkdir()
    filled = [a.format(tmp=tmp_path, bench=new.benchmark, old=old.benchmark, shapes=shapes, rec=rec) for a in args]
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "cli_probe.py"), "run", "--backend", "cpu", *filled,
                           "--out", str(work / "run")], cwd=work, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{new.site}"})
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["exit"] == 2 and message in result["stderr"], result["stderr"]
    assert result["stderr"].count("\n") == 1 and result["heavy"] == []
    assert not list(work.iterdir()), "a refusal left files behind"
