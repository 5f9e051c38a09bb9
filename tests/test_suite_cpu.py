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
from harness.run.execute import execute
from harness.sources import prepare, prepare_resume
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
                         ops=("add", "bitwise_not", "broken_add", "skipped_op", "layer_norm", "needs_vllm", "amin"),
                         shapes_file=str(shapes), warmup_ms=1.0, rep_ms=2.0, progress="plain", out=str(run_dir),
                         op_timeout=120.0, prestart="on")
    env = env_for(suite.site)
    out = io.StringIO()
    code = execute(prepare(options, env), env, out)
    assert code == 1, out.getvalue()  # broken_add fails its check
    status = {o["op"]: o["status"] for o in read_json(run_dir / "run.json")["ops"]}
    assert status == {"add": "PASS", "bitwise_not": "PASS", "broken_add": "FAIL", "skipped_op": "SKIP",
                      "layer_norm": "PASS", "needs_vllm": "SKIP", "amin": "PASS"}, (run_dir / "logs" / "add.log").read_text()[-3000:]
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
    # amin's node per dtype: only the float32 node ran (int32: FlagGems' skip), without a rescue; its
    # float16 node was not asked for
    assert {(r.dtype, r.status) for r in rows.values() if r.op == "amin"} == {("float32", "pass"), ("int32", "skip")}
    assert not any(n.startswith("dtype rescue") for r in rows.values() if r.op == "amin" for n in r.notes)
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

    # abs is selected by its mark among nodes that carry a dtype: neg's float32 node (another op's)
    # does not make abs's float16 node "not asked for"; abs runs its own dtype (the rescue)
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--backend", "cpu", "--suite", str(suite.benchmark), "--ops", "abs",
         "--dtypes", "float32", "--warmup-ms", "1", "--rep-ms", "2", "--progress", "plain", "--out", str(tmp_path / "abs")],
        cwd=tmp_path, env={**env_for(suite.site), "PYTHONPATH": f"{ROOT}:{suite.site}"},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = read_records(tmp_path / "abs" / "records.jsonl")
    assert {(r.op, r.dtype, r.status) for r in rows} == {("abs", "float16", "pass")}
    assert any(n.startswith("dtype rescue") for n in rows[0].notes)


@pytest.mark.slow
def test_suite_shards_on_two_machines_merge_into_one_run_holding_every_op_once(tmp_path: Path) -> None:
    suite = write_fake_suite(tmp_path / "fg")
    env = {**env_for(suite.site), "PYTHONPATH": f"{ROOT}:{suite.site}"}
    selection = ("add", "softmax")

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)

    # The two machines of the matrix side by side, and a third machine with part 2 of another plan (its
    # dtypes differ). Each part is a run directory of its own.
    parts = [tmp_path / "part1", tmp_path / "part2"]
    other = tmp_path / "other2"
    running = [subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "--backend", "cpu", "--suite", str(suite.benchmark), "--ops",
         *selection, "--dtypes", *dtypes, "--warmup-ms", "1", "--rep-ms", "2", "--progress", "plain",
         "--shard", f"{k}/2", "--out", str(out)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for k, out, dtypes in ((1, parts[0], ["float32"]), (2, parts[1], ["float32"]), (2, other, ["bfloat16"]))]
    outputs = [process.communicate(timeout=300)[0] for process in running]
    assert [process.returncode for process in running] == [0, 0, 0], "\n".join(o[-3000:] for o in outputs)
    shards = [read_json(p / "run.json")["shard"] for p in parts]
    assert shards[0]["ops"] and shards[1]["ops"] and not set(shards[0]["ops"]) & set(shards[1]["ops"])
    assert sorted(shards[0]["ops"] + shards[1]["ops"]) == sorted(selection)
    assert shards[0]["plan_digest"] == shards[1]["plan_digest"]
    assert prepare_resume(parts[0], env).part == shards[0]  # a resumed part stays that part

    assert "2/2 missing" in harness("merge", str(parts[0]), "--out", str(tmp_path / "half")).stderr
    refused = harness("merge", str(parts[0]), str(other), "--out", str(tmp_path / "mixed"))
    assert refused.returncode == 2 and "parts of different run plans" in refused.stderr, refused.stderr
    assert not (tmp_path / "half").exists() and not (tmp_path / "mixed").exists()
    merged = tmp_path / "merged"
    done = harness("merge", str(parts[1]), str(parts[0]), "--out", str(merged), "--run-id", "night")
    assert done.returncode == 0, done.stderr
    rows = read_records(merged / "records.jsonl")
    assert sorted({r.op for r in rows}) == sorted(selection)
    for op in selection:  # every op's rows come from exactly one part, each row once
        mine = [r.case_id for r in rows if r.op == op]
        assert mine and len(mine) == len(set(mine))
        assert [k for k, part in enumerate(parts) if any(r.op == op for r in read_records(part / "records.jsonl"))] == [
            0 if op in shards[0]["ops"] else 1]
    assert {r.run_id for r in rows} == {"night"} and {r.provider for r in rows} == {"flaggems-suite"}
    info = read_json(merged / "run.json")
    assert [o["op"] for o in info["ops"]] == list(selection) and {o["status"] for o in info["ops"]} == {"PASS"}
    assert info["suite"]["layout"] == "v5.3" and info["plan_digest"] == shards[0]["plan_digest"]


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
    (("--suite", "{bench}", "--ops", "mm", "--shard", "3/2"), "--shard: shard 3/2: K must be between 1 and N"),
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


@pytest.mark.slow
def test_a_shapes_file_reaches_benchmarks_that_build_their_own_inputs(tmp_path: Path) -> None:
    """conv_like walks a shapes list of its own through its input_fn, own_shapes sets its shapes in
    its own set_shapes: both measure the file's shapes; fixed_inputs cannot take any, and says so."""
    suite = write_fake_suite(tmp_path / "fg", own_inputs=True)
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("conv_like: [[2, 2, 5, 5, 4], [1, 3, 4, 4, 2]]\nown_shapes: [[3, 3]]\nfixed_inputs: [[8, 8]]\n")
    run_dir = tmp_path / "run"
    options = RunOptions(backend="cpu", suite=str(suite.benchmark), dtypes=("float32",),
                         ops=("conv_like", "own_shapes", "fixed_inputs"), shapes_file=str(shapes),
                         warmup_ms=1.0, rep_ms=2.0, progress="plain", out=str(run_dir), op_timeout=120.0)
    env = env_for(suite.site)
    code = execute(prepare(options, env), env, io.StringIO())
    assert code == 0, (run_dir / "logs" / "conv_like.log").read_text()[-3000:]
    rows = read_records(run_dir / "records.jsonl")
    by_op: dict[str, list[tuple[int, ...]]] = {}
    for row in rows:
        assert row.status == "pass", row
        by_op.setdefault(row.op, []).append(row.shape)
    assert by_op == {"conv_like": [(2, 2, 5, 5), (1, 3, 4, 4)], "own_shapes": [(3, 3)], "fixed_inputs": [(4, 4)]}
    notes = {row.op: " ".join(row.notes) for row in rows}
    assert "given to conv_like where it builds its inputs (its input_fn" in notes["conv_like"]
    assert "given to own_shapes where it builds its inputs (self.shapes" in notes["own_shapes"]
    assert "not applied to fixed_inputs: its get_input_iter makes its inputs from sizes of its own" \
        in notes["fixed_inputs"]
