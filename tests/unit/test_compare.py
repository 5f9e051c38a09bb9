"""harness compare / gate / gate-run on synthetic run directories (no device, fixed seeds)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import subprocess
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from harness.compare.cli import add_parsers, dispatch
from harness.compare.compare import compare_records, load_run, pair_records
from harness.compare.gate import interleaved_order, merge_records
from harness.compare.spread import SpreadTable, parse_spread
from harness.compare.stats import Criteria
from harness.errors import GateFailed, UsageError
from harness.results.schema import Correctness, Measurement, Timing
from harness.results.store import append_record, write_json

XSD = Path("/work/shared/data/junit-10.xsd")
OPS = ("softmax", "add", "rms_norm", "gelu")
SHAPES = ((1024, 1024), (4096, 4096), (8192, 8192))
DTYPES = ("float16", "bfloat16", "float32")


def record(op: str, dtype: str, shape: Sequence[int], samples: Sequence[float], *,
           status: str = "pass", timer: str = "direct", torch: Sequence[float] | None = None,
           message: str = "") -> Measurement:
    passed = status == "pass"
    cand = Timing.of([float(x) for x in samples]) if passed else None
    base = Timing.of([float(x) for x in (samples if torch is None else torch)]) if passed else None
    return Measurement(
        run_id="r", op=op, provider="builtin", dtype=dtype, shape=tuple(shape), backend="cuda",
        device="0", timer=timer, status=status, device_name="NVIDIA H200",
        correctness=Correctness(passed=passed, max_abs=0.0, max_rel=0.0, atol=1e-3, rtol=1e-3),
        baseline=base, candidate=cand,
        speedup=base.summary.median / cand.summary.median if base and cand and cand.summary.median else None,
        message=message,
    )


def write_run(path: Path, records: Sequence[Measurement], **identity: Any) -> Path:
    info = {
        "schema_version": 1, "run_id": identity.get("run_id", path.name), "status": "complete",
        "backend": identity.get("backend", "cuda"), "timer": identity.get("timer", "direct"),
        "level": identity.get("level", "core"),
        "identity": {"device_name": identity.get("device_name", "NVIDIA H200")},
        "options": {"cache": identity.get("cache", "cold"), "level": "auto", "timer": "auto"},
        "fingerprint": identity.get("fingerprint", "fp-h200-core"),
        "started_at": identity.get("started_at", "2026-11-29T00:00:00+00:00"),
        "git_commit": identity.get("git_commit", "0" * 40),
    }
    path.mkdir(parents=True)
    write_json(path / "run.json", info)
    for r in records:
        append_record(path / "records.jsonl", r)
    return path


def suite(rng: np.random.Generator, shift: dict[str, float] | None = None, n: int = 200,
          drift: float = 0.02) -> list[Measurement]:
    """Every op x dtype x shape, 2-5% noise, a run-to-run wander up to +-drift,
    and the ops named in ``shift`` slowed by that fraction."""
    shift = shift or {}
    out = []
    for i, (op, dtype, shape) in enumerate((o, d, s) for o in OPS for d in DTYPES for s in SHAPES):
        level = 0.01 * (shape[0] // 1024) ** 2 * (1 + i % 3)
        noise = 0.02 + 0.01 * (i % 4)
        factor = (1 + shift.get(op, 0.0)) * (1 + rng.uniform(-drift, drift))
        samples = level * factor * rng.lognormal(0.0, noise, n)
        torch = level * rng.lognormal(0.0, noise, n)
        out.append(record(op, dtype, shape, samples.tolist(), torch=torch.tolist()))
    return out


# The synthetic runs wander up to +-2% from run to run (uniform: about 1.2% sd): their "device"
# is calibrated as such, as benchmarks/gate_calibration.py would measure it.
SPREAD = """
format_version: 1
default: {source: conservative default (not measured), classes: [{sigma_pct: 2.0}]}
devices:
  - {device_name: NVIDIA H200, backend: cuda, source: synthetic wander of these tests,
     classes: [{sigma_pct: 1.2}]}
"""
_SPREAD_FILE: list[Path] = []


def spread_table() -> SpreadTable:
    return parse_spread(yaml.safe_load(SPREAD), "tests")


@pytest.fixture(autouse=True, scope="module")
def _spread_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("spread") / "spread.yaml"
    path.write_text(SPREAD)
    _SPREAD_FILE[:] = [path]


def cli(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """A compare command as `harness` runs it; compare/gate/gate-run get this module's spread table."""
    argv = list(argv)
    if argv[0] in ("compare", "gate", "gate-run", "ab") and not any(a.startswith("--spread") for a in argv):
        cut = argv.index("--") if "--" in argv else len(argv)
        argv[cut:cut] = ["--spread", str(_SPREAD_FILE[0])]
    parser = argparse.ArgumentParser(prog="harness")
    add_parsers(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    code = dispatch(parser.parse_args(argv), env or {}, out)
    assert code is not None
    return code, out.getvalue()


def validate_junit(path: Path) -> Any:
    xmlschema = pytest.importorskip("xmlschema")
    schema = xmlschema.XMLSchema(str(XSD))
    schema.validate(str(path))
    return schema


@pytest.fixture()
def aa_runs(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(20261129)
    return write_run(tmp_path / "base", suite(rng)), write_run(tmp_path / "head", suite(rng))


@pytest.fixture()
def shifted_runs(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(4242)
    return (write_run(tmp_path / "base", suite(rng)),
            write_run(tmp_path / "head", suite(rng, shift={"softmax": 0.10})))


def test_gate_passes_an_unchanged_tree(aa_runs: tuple[Path, Path], tmp_path: Path) -> None:
    base, head = aa_runs
    code, printed = cli(["gate", str(base), str(head), "--out", str(tmp_path / "cmp")])
    assert code == 0
    assert "PASS" in printed
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert md.startswith("## Performance comparison: PASS")
    assert f"over {len(OPS) * len(DTYPES) * len(SHAPES)} compared row(s)" in md


def test_gate_fails_on_a_ten_percent_slowdown_and_names_the_cases(
    shifted_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    base, head = shifted_runs
    out = tmp_path / "cmp"
    with pytest.raises(GateFailed) as failed:
        cli(["gate", str(base), str(head), "--out", str(out)])
    assert failed.value.exit_code == 1
    assert "9 regression(s)" in failed.value.message
    md = (out / "compare.md").read_text()
    assert "FAIL (9 regression(s))" in md
    assert "`softmax[builtin-float16-8192x8192]`" in md.split("### Regressions")[1]
    rows = list(csv.DictReader((out / "compare.csv").open()))
    flagged = {r["case_id"] for r in rows if r["verdict"] == "regression"}
    assert flagged == {r["case_id"] for r in rows if r["op"] == "softmax"}
    assert all(5.0 < float(r["change_pct"]) < 16.0 for r in rows if r["op"] == "softmax")


def test_the_harness_command_exits_1_on_a_regression_and_2_on_unlike_runs(
    shifted_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    base, head = shifted_runs
    spread = ["--spread", str(_SPREAD_FILE[0])]
    assert main(["gate", str(base), str(head), *spread], env={}) == 1
    assert "9 regression(s)" in capsys.readouterr().err
    assert main(["compare", str(base), str(head)], env={}) == 0
    other = write_run(tmp_path / "other", [], device_name="NVIDIA A100")
    assert main(["gate", str(base), str(other)], env={}) == 2
    assert "device model" in capsys.readouterr().err


def test_compare_reports_the_same_slowdown_but_exits_zero(shifted_runs: tuple[Path, Path]) -> None:
    code, printed = cli(["compare", *map(str, shifted_runs)])
    assert code == 0
    assert printed.startswith("## Performance comparison: FAIL")


def test_threshold_decides_what_counts(shifted_runs: tuple[Path, Path]) -> None:
    code, printed = cli(["gate", *map(str, shifted_runs), "--threshold", "15%"])
    assert code == 0
    assert "regression 0" in printed


def test_compare_junit_validates_and_each_regression_is_a_failing_testcase(
    shifted_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    with pytest.raises(GateFailed):
        cli(["gate", *map(str, shifted_runs), "--out", str(tmp_path / "cmp")])
    junit = tmp_path / "cmp" / "compare-junit.xml"
    schema = validate_junit(junit)
    data = schema.to_dict(str(junit))
    assert int(data["@failures"]) == 9
    assert int(data["@tests"]) == len(OPS) * len(DTYPES) * len(SHAPES)
    failed = [tc["@name"] for s in data["testsuite"] for tc in s["testcase"] if "failure" in tc]
    assert failed and all(name.startswith("softmax[") for name in failed)


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [("device_name", "AMD Instinct MI300X", "device model"), ("timer", "graph", "timer"),
     ("level", "comprehensive", "level"), ("backend", "musa", "backend")],
)
def test_unlike_runs_are_refused_unless_allowed(
    tmp_path: Path, key: str, value: str, shown: str
) -> None:
    rng = np.random.default_rng(1)
    base = write_run(tmp_path / "base", suite(rng))
    head = write_run(tmp_path / "head", suite(rng), **{key: value})
    with pytest.raises(UsageError) as refused:
        cli(["compare", str(base), str(head)])
    assert shown in refused.value.message and "--allow-mismatch" in refused.value.message
    assert refused.value.exit_code == 2
    code, printed = cli(["compare", str(base), str(head), "--allow-mismatch"])
    assert code == 0
    assert f"**warning**: unlike runs compared (--allow-mismatch): {shown}" in printed


def test_rows_that_did_not_pass_are_reported_not_compared() -> None:
    rng = np.random.default_rng(2)
    good = list(rng.lognormal(0, 0.02, 100))
    base = [
        record("add", "float16", (8, 8), good),
        record("add", "float32", (8, 8), good, status="fail", message="mismatch 3 of 64"),
        record("gelu", "float16", (8, 8), good),
        record("sum", "float16", (8, 8), good),
        record("mm", "float16", (8, 8, 8), good),
    ]
    head = [
        record("add", "float16", (8, 8), good),
        record("add", "float32", (8, 8), good),
        record("gelu", "float16", (8, 8), good, status="error", message="CUDA error: illegal address\nmore"),
        record("mm", "float16", (8, 8, 8), good, timer="graph"),
        record("silu_and_mul", "float16", (8, 8), good),
    ]
    rows = {r.case_id: r for r in compare_records(base, head, Criteria(), spread=spread_table())}
    assert rows["add[builtin-float16-8x8]"].verdict == "unchanged"
    assert rows["add[builtin-float32-8x8]"].verdict == "not compared"
    assert rows["add[builtin-float32-8x8]"].reason == "fail in base, pass in head"
    assert rows["gelu[builtin-float16-8x8]"].verdict == "failing"
    assert rows["gelu[builtin-float16-8x8]"].reason.endswith("error in head: CUDA error: illegal address")
    assert rows["sum[builtin-float16-8x8]"].verdict == "failing"  # passed in base, missing in head
    assert rows["sum[builtin-float16-8x8]"].reason.startswith("passed in base; absent in head")
    assert rows["silu_and_mul[builtin-float16-8x8]"].verdict == "not compared"
    assert rows["silu_and_mul[builtin-float16-8x8]"].reason.startswith("only in head")
    assert rows["mm[builtin-float16-8x8x8]"].reason == "timed with direct in base, graph in head"
    assert [r.compared for r in rows.values()].count(True) == 1


def test_a_case_with_no_device_time_on_either_side_is_not_compared_and_page_json_has_no_infinity() -> None:
    """FlagGems' transpose and resize_ on the H200: 0 ms both sides (no kernel); their interval
    came out [inf, inf], read noisy, and compare.html failed on the infinite numbers."""
    from harness.results.html.page import script_json

    zero = [0.0] * 50
    rows = compare_records([record("transpose", "bfloat16", (64, 64), zero)],
                           [record("transpose", "bfloat16", (64, 64), zero)], Criteria(), spread=spread_table())
    (row,) = rows
    assert row.verdict == "not compared" and row.reason.startswith("no device time on either side")
    assert str(script_json({"ratio": math.inf, "rows": [math.nan, 1.5]})) == '{"ratio":null,"rows":[null,1.5]}'


def test_a_case_that_breaks_in_head_fails_the_gate(tmp_path: Path) -> None:
    samples = list(np.random.default_rng(3).lognormal(0, 0.02, 50))
    base = write_run(tmp_path / "base", [record("add", "float16", (8, 8), samples)])
    head = write_run(tmp_path / "head", [record("add", "float16", (8, 8), samples, status="fail",
                                                message="max abs error 0.5")])
    with pytest.raises(GateFailed, match="1 case\\(s\\) failing in head"):
        cli(["gate", str(base), str(head)])


def test_a_gate_that_compared_nothing_fails(tmp_path: Path) -> None:
    samples = [1.0, 1.1, 0.9]
    base = write_run(tmp_path / "base", [record("add", "float16", (8, 8), samples, status="error",
                                                message="device lost")])
    head = write_run(tmp_path / "head", [record("add", "float16", (8, 8), samples)])
    with pytest.raises(GateFailed, match="no row could be compared"):
        cli(["gate", str(base), str(head)])


def test_pairing_keeps_base_order_then_new_cases() -> None:
    s = [1.0, 1.1, 0.9]
    base = [record("b", "float16", (1,), s), record("a", "float16", (1,), s)]
    head = [record("c", "float16", (1,), s), record("a", "float16", (1,), s)]
    assert [p.case_id for p in pair_records(base, head)] == [
        "b[builtin-float16-1]", "a[builtin-float16-1]", "c[builtin-float16-1]"]


def test_a_directory_that_is_not_a_run_is_a_clear_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no run.json"):
        load_run(tmp_path)
    unfinished = write_run(tmp_path / "r", [])
    info = json.loads((unfinished / "run.json").read_text())
    info["status"] = "running"
    write_json(unfinished / "run.json", info)
    with pytest.raises(UsageError, match="--resume"):
        load_run(unfinished)


def test_bad_threshold_is_rejected_by_the_parser(aa_runs: tuple[Path, Path]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli(["compare", *map(str, aa_runs), "--threshold", "five"])
    assert stopped.value.code == 2


# gate-run: interleaving, pooling, and two versions of the code really measured apart


def test_repeats_are_interleaved_abba() -> None:
    assert interleaved_order(2) == [("base", 1), ("head", 1), ("head", 2), ("base", 2)]
    assert interleaved_order(1) == [("base", 1), ("head", 1)]
    with pytest.raises(UsageError):
        interleaved_order(0)


def test_pooling_repeats_keeps_every_sample_and_carries_failures() -> None:
    one = [record("add", "float16", (8,), [1.0, 1.2]), record("gelu", "float16", (8,), [2.0, 2.0])]
    two = [record("add", "float16", (8,), [1.1, 1.3, 0.9]),
           record("gelu", "float16", (8,), [2.0], status="fail", message="nan")]
    merged = {r.op: r for r in merge_records([one, two], run_id="gate-base")}
    assert merged["add"].candidate is not None
    assert sorted(merged["add"].candidate.samples_ms) == [0.9, 1.0, 1.1, 1.2, 1.3]
    assert merged["add"].candidate.summary.median == 1.1
    assert merged["add"].run_id == "gate-base"
    assert merged["gelu"].status == "fail"


def test_pooling_never_mixes_samples_of_different_timers() -> None:
    from dataclasses import replace as _replace

    from harness.results.schema import Fallback

    graph = [record("add", "float16", (8,), [1.0] * 10, timer="graph")]
    fell_back = [_replace(record("add", "float16", (8,), [2.0] * 10, timer="direct"),
                          fallback=Fallback(phase="capture", reason="capture-failed"))]
    also_graph = [record("add", "float16", (8,), [1.1] * 10, timer="graph")]
    (merged,) = merge_records([graph, fell_back, also_graph], run_id="gate-head")
    assert merged.timer == "graph" and merged.fallback is None
    assert merged.candidate is not None and max(merged.candidate.samples_ms) == 1.1  # no 2.0
    assert merged.candidate.summary.n == 20
    assert any("left out of the pool" in n for n in merged.notes)


_FAKE_HARNESS = '''
"""A stand-in `harness` package: `python -m harness run --out D --run-id I` writes a run
whose candidate takes MEDIAN ms, so each version of the code has its own speed."""
import json, os, random, sys
MEDIAN = {median}
args = sys.argv[1:]
out, run_id = args[args.index("--out") + 1], args[args.index("--run-id") + 1]
os.makedirs(out)
rng = random.Random(run_id)
with open(os.path.join(out, "records.jsonl"), "w") as fh:
    def timing(median):
        samples = [median * rng.lognormvariate(0, 0.02) for _ in range(100)]
        s = sorted(samples)
        summary = dict(median=s[50], p10=s[10], p90=s[90], iqr=s[75] - s[25], mean=sum(s) / 100,
                       min=s[0], n=100)
        return dict(samples_ms=samples, summary=summary)
    for i, op in enumerate(["softmax", "add", "gelu"]):
        # torch's time does not depend on the version under test
        fh.write(json.dumps(dict(schema_version=1, run_id=run_id, op=op, provider="builtin",
                 dtype="float16", shape=[64], backend="cuda", device="0", timer="graph",
                 status="pass", baseline=timing(1 + i), candidate=timing(MEDIAN * (1 + i)))) + "\\n")
info = dict(schema_version=1, run_id=run_id, status="complete", backend="cuda", timer="graph", level="core",
            identity=dict(device_name="NVIDIA H200"), options=dict(cache="cold"), fingerprint="fp",
            args=args, cwd=os.getcwd())
json.dump(info, open(os.path.join(out, "run.json"), "w"))
'''


def _fake_tree(path: Path, median: float) -> Path:
    (path / "harness").mkdir(parents=True)
    (path / "harness" / "__init__.py").write_text("")
    (path / "harness" / "__main__.py").write_text(textwrap.dedent(_FAKE_HARNESS.format(median=median)))
    return path


def _as_cuda_runs(argv: Sequence[str]) -> list[str]:
    """The stand-in harness writes cuda runs: its run arguments say so, as a real gate's would
    (gate-run and ab refuse runs on the cpu backend before they start)."""
    argv = list(argv)
    if "--" not in argv:
        argv.append("--")
    return argv + ["--backend", "cuda"] if "--backend" not in argv[argv.index("--"):] else argv


def _gate_run(argv: Sequence[str]) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return cli(["gate-run", *_as_cuda_runs(argv)], env)


def test_gate_run_measures_each_version_in_its_own_tree(tmp_path: Path) -> None:
    base = _fake_tree(tmp_path / "v1", median=1.0)
    head = _fake_tree(tmp_path / "v2", median=1.25)
    out = tmp_path / "gate"
    with pytest.raises(GateFailed, match="3 regression"):
        _gate_run(["--base-ref", str(base), "--head-ref", str(head), "--out", str(out),
                   "--", "--ops", "softmax", "--level", "smoke"])
    runs = {p.name: json.loads((p / "run.json").read_text()) for p in (out / "repeats").iterdir()}
    assert sorted(runs) == ["base-1", "base-2", "head-1", "head-2"]
    assert runs["head-2"]["cwd"] == str(head.resolve())
    assert runs["base-1"]["args"][-6:] == ["--ops", "softmax", "--level", "smoke", "--backend", "cuda"]
    pooled = load_run(out / "head")
    assert pooled.info["merged_from"] == ["gate-head-1", "gate-head-2"]
    assert all(r.candidate is not None and r.candidate.summary.n == 200 for r in pooled.records)
    assert (out / "compare.md").read_text().startswith("## Performance comparison: FAIL")


def test_gate_run_passes_when_both_versions_are_equally_fast(tmp_path: Path) -> None:
    code, printed = _gate_run(["--base-ref", str(_fake_tree(tmp_path / "a", 1.0)),
                               "--head-ref", str(_fake_tree(tmp_path / "b", 1.0)),
                               "--out", str(tmp_path / "gate"), "--repeats", "1"])
    assert code == 0
    assert "PASS" in printed


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def test_gate_run_checks_out_git_refs_and_cleans_up(tmp_path: Path) -> None:
    repo = _fake_tree(tmp_path / "repo", median=1.0)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "v1")
    _git(repo, "tag", "v1")
    main = repo / "harness" / "__main__.py"
    main.write_text(main.read_text().replace("MEDIAN = 1.0", "MEDIAN = 1.3"))
    _git(repo, "commit", "-q", "-am", "v2")
    with pytest.raises(GateFailed):
        _gate_run(["--base-ref", "v1", "--head-ref", "HEAD", "--repo", str(repo),
                   "--out", str(tmp_path / "gate"), "--repeats", "1"])
    assert _git(repo, "worktree", "list").count("\n") == 0  # temporary worktrees removed
    with pytest.raises(UsageError, match="neither a directory nor a commit"):
        _gate_run(["--base-ref", "no-such-ref", "--head-ref", "HEAD", "--repo", str(repo),
                   "--out", str(tmp_path / "gate2")])


def test_gate_run_refuses_a_used_output_directory(tmp_path: Path) -> None:
    (tmp_path / "gate").mkdir()
    (tmp_path / "gate" / "old.txt").write_text("x")
    with pytest.raises(UsageError, match="not empty"):
        _gate_run(["--base-ref", str(tmp_path), "--head-ref", str(tmp_path), "--out", str(tmp_path / "gate")])

