"""What a gate must get right across independent runs, on synthetic run directories (issue 14):
crashes, hangs and missing cases in head, damaged records, other software, cpu runs, drift,
clocks, autotune choices, and the pooling of repeats."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.autotune.store import OpAutotune, TunedConfig, op_autotune_path
from harness.compare.cli import add_parsers, dispatch
from harness.compare.compare import compare_runs, load_run
from harness.compare.configs import config_change, key_matches
from harness.compare.gate import merge_records, merged_ops, pool_side, side_replay
from harness.compare.spread import parse_spread
from harness.compare.stats import Criteria
from harness.errors import GateFailed, UsageError
from harness.results.schema import Correctness, Measurement, Timing
from harness.results.store import append_record, write_json

SPREAD = parse_spread({"format_version": 1, "default": {"source": "tests", "classes": [{"sigma_pct": 1.0}]}},
                      "tests")
VERSIONS = {"torch": "2.13.0", "triton": "3.7.1", "driver": "580.1"}


def _timing(level: float, n: int, rng: np.random.Generator, settled: bool = True, runs: int = 1) -> Timing:
    samples = [float(x) for _ in range(runs) for x in level * rng.lognormal(0.0, 0.01, n)]
    return Timing.of(samples, blocks=[n] * runs, settled=settled)


def record(op: str, level: float = 1.0, *, torch: float = 1.0, status: str = "pass", seed: int = 0,
           settled: bool = True, runs: int = 1, shape: Sequence[int] = (1024, 1024), dtype: str = "bfloat16",
           states: Sequence[dict[str, Any]] = (), backend: str = "cuda", message: str = "") -> Measurement:
    rng = np.random.default_rng(seed)
    passed = status == "pass"
    cand = _timing(level, 60, rng, settled, runs) if passed else None
    base = _timing(torch, 60, rng, True, runs) if passed else None
    return Measurement(
        run_id="r", op=op, provider="builtin", dtype=dtype, shape=tuple(shape), backend=backend, device="0",
        timer="graph", status=status, device_name="NVIDIA H200",
        correctness=Correctness(passed=passed, max_abs=0.0, max_rel=0.0, atol=1e-3, rtol=1e-3),
        baseline=base, candidate=cand, speedup=1.0 if passed else None, message=message,
        device_state=tuple(states),
    )


def write_run(path: Path, records: Sequence[Measurement], *, status: str = "complete",
              ops: Sequence[dict[str, str]] = (), versions: dict[str, str] | None = None,
              backend: str = "cuda", harness_version: str = "0.1.0") -> Path:
    info = {
        "schema_version": 1, "run_id": path.name, "status": status, "backend": backend, "timer": "graph",
        "level": "core", "identity": {"device_name": "NVIDIA H200", **(versions or VERSIONS)},
        "options": {"cache": "cold"}, "harness_version": harness_version, "ops": list(ops),
        "started_at": "2026-12-01T00:00:00+00:00",
    }
    path.mkdir(parents=True)
    write_json(path / "run.json", info)
    (path / "records.jsonl").touch()
    for r in records:
        append_record(path / "records.jsonl", r)
    return path


def cli(argv: Sequence[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="harness")
    add_parsers(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    code = dispatch(parser.parse_args(list(argv)), {}, out)
    assert code is not None
    return code, out.getvalue()


def judge(base: Path, head: Path, **kw: Any) -> dict[str, Any]:
    comparison = compare_runs(base, head, Criteria(), spread=SPREAD, **kw)
    return {r.op: r for r in comparison.rows}


# -- crashes, hangs and missing cases count ----------------------------------------------------------


@pytest.mark.parametrize("status", ["CRASH", "TIMEOUT", "ERROR"])
def test_a_case_whose_op_crashed_or_hung_in_head_fails_the_gate_with_status_and_log(
    tmp_path: Path, status: str
) -> None:
    base = write_run(tmp_path / "base", [record("add"), record("softmax")])
    head = write_run(tmp_path / "head", [record("add")],
                     ops=[{"op": "add", "status": "PASS", "notes": ""},
                          {"op": "softmax", "status": status, "notes": "signal SIGSEGV"}])
    (head / "logs").mkdir()
    (head / "logs" / "softmax.log").write_text("Segmentation fault\n")
    rows = judge(base, head)
    assert rows["softmax"].verdict == "failing"
    assert f"op {status} (signal SIGSEGV)" in rows["softmax"].reason
    assert rows["softmax"].head_log == str(head / "logs" / "softmax.log")
    assert str(head / "logs" / "softmax.log") in rows["softmax"].reason
    with pytest.raises(GateFailed, match="1 case\\(s\\) failing in head"):
        cli(["gate", str(base), str(head)])


def test_a_case_failing_correctness_in_head_names_the_op_status(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", [record("add")])
    head = write_run(tmp_path / "head", [record("add", status="fail", message="3 of 64 elements outside")],
                     ops=[{"op": "add", "status": "FAIL", "notes": ""}])
    row = judge(base, head)["add"]
    assert row.verdict == "failing"
    assert row.reason.startswith("passed in base, fail in head (op FAIL): 3 of 64 elements outside")


def test_a_case_missing_in_head_fails_and_one_new_in_head_does_not(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", [record("add"), record("gelu", status="fail")])
    head = write_run(tmp_path / "head", [record("softmax")])
    rows = judge(base, head)
    assert rows["add"].verdict == "failing" and "absent in head" in rows["add"].reason
    assert rows["gelu"].verdict == "not compared"  # it did not pass in base either
    assert rows["softmax"].verdict == "not compared"


# -- damaged records are refused, not compared ---------------------------------------------------------


def _damage(run: Path, where: str) -> None:
    path = run / "records.jsonl"
    lines = path.read_text().splitlines()
    if where == "middle":
        lines.insert(1, '{"schema_version": 3, "op": "tor')
    else:
        lines.append('{"schema_version": 3, "op": "tor')
    path.write_text("\n".join(lines) + ("\n" if where == "middle" else ""))


@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_finished_run_with_an_unreadable_line_is_refused(tmp_path: Path, where: str) -> None:
    base = write_run(tmp_path / "base", [record("add"), record("gelu")])
    head = write_run(tmp_path / "head", [record("add"), record("gelu")])
    _damage(head, where)
    with pytest.raises(UsageError) as refused:
        cli(["gate", str(base), str(head)])
    assert refused.value.exit_code == 2
    assert "records.jsonl is damaged" in refused.value.message and "cut short in a run that finished" in refused.value.message
    assert ("line 2:" if where == "middle" else "line 3:") in refused.value.message


def test_an_interrupted_run_may_end_in_a_torn_line_but_not_hold_one_inside(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [record("add"), record("gelu")], status="interrupted")
    _damage(run, "last")
    assert [r.op for r in load_run(run).records] == ["add", "gelu"]
    other = write_run(tmp_path / "o", [record("add"), record("gelu")], status="interrupted")
    _damage(other, "middle")
    with pytest.raises(UsageError, match="went on writing after them: line 2"):
        load_run(other)
    corrupt = write_run(tmp_path / "c", [record("add")], status="interrupted")
    with open(corrupt / "records.jsonl", "a") as fh:
        fh.write('{"schema_version": 4, "op": 7}\n')  # whole, but not a record: refused, finished or not
    with pytest.raises(UsageError, match="not records"):
        load_run(corrupt)


# -- software and backend ------------------------------------------------------------------------------


def test_runs_of_other_software_are_refused_naming_each_difference(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", [record("add")])
    head = write_run(tmp_path / "head", [record("add")],
                     versions={**VERSIONS, "torch": "2.14.0", "triton": "3.8.0"}, harness_version="0.2.0")
    with pytest.raises(UsageError) as refused:
        cli(["compare", str(base), str(head)])
    message = refused.value.message
    assert refused.value.exit_code == 2
    for part in ("torch '2.13.0' in base, '2.14.0' in head", "triton '3.7.1' in base, '3.8.0' in head",
                 "harness '0.1.0' in base, '0.2.0' in head", "--allow-mismatch", "harness ab"):
        assert part in message
    code, printed = cli(["compare", str(base), str(head), "--allow-mismatch"])
    assert code == 0
    lines = printed.splitlines()
    assert lines[2].startswith("- **warning**: different software compared (--allow-mismatch): torch")
    assert sum("**warning**: different software" in line for line in lines[2:5]) == 3


def test_a_deliberate_difference_is_named_not_refused(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", [record("add")])
    head = write_run(tmp_path / "head", [record("add")], harness_version="0.2.0")
    comparison = compare_runs(base, head, Criteria(), spread=SPREAD, deliberate=("harness",))
    assert comparison.warnings == ("different software (allowed): harness '0.1.0' in base, '0.2.0' in head",)


def test_cpu_runs_are_not_judged_unless_allowed(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", [record("add", backend="cpu")], backend="cpu")
    head = write_run(tmp_path / "head", [record("add", backend="cpu")], backend="cpu")
    with pytest.raises(UsageError) as refused:
        cli(["gate", str(base), str(head)])
    assert "--allow-cpu" in refused.value.message and "pipeline" in refused.value.message
    code, printed = cli(["compare", str(base), str(head), "--allow-cpu"])
    assert code == 0
    assert "cpu backend timings compared (--allow-cpu)" in printed


# -- drift and clocks ----------------------------------------------------------------------------------


def test_a_change_torch_made_as_well_is_drift_and_does_not_fail_the_gate(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", [record("add", 1.0, torch=1.0, seed=1), record("gelu", 1.0, seed=2)])
    head = write_run(tmp_path / "head", [record("add", 1.15, torch=1.13, seed=3), record("gelu", 1.15, seed=4)])
    rows = judge(base, head)
    assert rows["add"].verdict == "drift" and rows["add"].torch_ratio == pytest.approx(1.13, rel=0.01)
    assert rows["gelu"].verdict == "regression"
    out = tmp_path / "cmp"
    with pytest.raises(GateFailed, match="1 regression"):
        cli(["gate", str(base), str(head), "--out", str(out), "--spread", str(_spread_file(tmp_path))])
    md = (out / "compare.md").read_text()
    assert "### Drift (torch moved as much: suspect the machine)" in md and "drift 1" in md


def _spread_file(tmp_path: Path) -> Path:
    path = tmp_path / "spread.yaml"
    path.write_text("format_version: 1\ndefault: {source: tests, classes: [{sigma_pct: 1.0}]}\n")
    return path


def test_rows_whose_clocks_moved_are_named(tmp_path: Path) -> None:
    steady = {"start": {"sm_clock_mhz": 1980.0, "mem_clock_mhz": 3201.0},
              "end": {"sm_clock_mhz": 1965.0, "mem_clock_mhz": 3201.0}}
    dropped = {"start": {"sm_clock_mhz": 1980.0}, "end": {"sm_clock_mhz": 1500.0}}
    low = {"start": {"sm_clock_mhz": 1500.0}, "end": {"sm_clock_mhz": 1510.0}}
    base = write_run(tmp_path / "base", [record(op, states=[steady]) for op in ("add", "gelu", "sum")])
    head = write_run(tmp_path / "head", [record("add", states=[steady]), record("gelu", states=[dropped]),
                                         record("sum", states=[low])])
    rows = judge(base, head)
    assert rows["add"].clocks == ""
    assert rows["gelu"].clocks.startswith("SM clock moved 1980->1500 MHz during head's timing")
    assert rows["sum"].clocks == "SM clock 1972 MHz in base, 1505 MHz in head"


# -- autotune configs ----------------------------------------------------------------------------------


def _configs(run: Path, block_m: int) -> None:
    key = ("int:4096", "int:4096", "int:4096", "str:torch.bfloat16", "str:torch.bfloat16", "str:torch.bfloat16")
    other = ("int:2048", "int:2048", "int:2048", "str:torch.bfloat16", "str:torch.bfloat16", "str:torch.bfloat16")
    record_ = OpAutotune(op="mm", tuners={"_mm_kernel": ("M", "N", "K")}, configs=(
        TunedConfig("_mm_kernel", key, {"BLOCK_M": block_m, "BLOCK_N": 256}, num_warps=8, num_stages=3),
        TunedConfig("_mm_kernel", other, {"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=4),
    ))
    path = op_autotune_path(run, "mm")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record_.to_json())


def test_compare_shows_rows_whose_autotune_choice_differs(tmp_path: Path) -> None:
    shapes = {"big": (4096, 4096, 4096), "small": (2048, 2048, 2048)}
    base = write_run(tmp_path / "base", [record("mm", shape=s, seed=i) for i, s in enumerate(shapes.values())])
    head = write_run(tmp_path / "head", [record("mm", shape=s, seed=9 + i) for i, s in enumerate(shapes.values())])
    _configs(base, 128)
    _configs(head, 64)
    comparison = compare_runs(base, head, Criteria(), spread=SPREAD)
    change = {r.shape: r.autotune_change for r in comparison.rows}
    assert change["4096x4096x4096"] == ("_mm_kernel: BLOCK_M=128,BLOCK_N=256,warps=8,stages=3 -> "
                                        "BLOCK_M=64,BLOCK_N=256,warps=8,stages=3")
    assert change["2048x2048x2048"] == ""
    from harness.compare.render import render_compare_markdown

    md = render_compare_markdown(comparison)
    assert "### Autotune configs differ between base and head" in md
    assert md.count("`mm[builtin-bfloat16-4096x4096x4096]`") >= 2


def test_autotune_keys_match_rows_by_their_dimensions_and_dtype() -> None:
    key = ("int:4096", "int:11008", "str:torch.bfloat16")
    assert key_matches(key, "bfloat16", (4096, 11008, 4096))
    assert not key_matches(key, "float16", (4096, 11008, 4096))
    assert not key_matches(key, "bfloat16", (4096, 4096, 4096))
    assert not key_matches(("str:torch.bfloat16",), "bfloat16", (8,))  # no dimension: no claim
    a = OpAutotune(op="x", configs=(TunedConfig("k", ("int:4104",), {"B": 1}),))
    b = OpAutotune(op="x", configs=(TunedConfig("k", ("int:4104",), {"B": 2}),))
    assert "chose differently at 1 key(s) not matched" in config_change(a, b, "bfloat16", (4096, 4096))
    assert config_change(a, a, "bfloat16", (4096, 4096)) == ""
    assert config_change(a, None, "bfloat16", (4104,)) == ""


# -- pooling keeps the runs apart ---------------------------------------------------------------------


def test_pooled_records_keep_which_run_each_sample_came_from() -> None:
    one = [record("add", 1.0, seed=1, settled=False, states=[{"start": {"sm_clock_mhz": 1980.0}, "end": {}}])]
    two = [record("add", 1.02, seed=2, states=[{"start": {"sm_clock_mhz": 1970.0}, "end": {}}])]
    (merged,) = merge_records([one, two], run_id="gate-head")
    assert merged.candidate is not None and merged.candidate.blocks == (60, 60)
    assert [len(r) for r in merged.candidate.runs()] == [60, 60]
    assert merged.candidate.runs()[1] == two[0].candidate.samples_ms  # type: ignore[union-attr]
    assert not merged.candidate.settled  # one repeat did not settle
    assert len(merged.device_state) == 2
    again = Measurement(**{**merged.__dict__})  # a pooled record round-trips through the schema
    from harness.results.schema import record_from_dict

    assert record_from_dict(json.loads(json.dumps(again.to_dict()))) == merged
    (twice,) = merge_records([[merged], [record("add", seed=3)]], run_id="x")
    assert twice.candidate is not None and twice.candidate.blocks == (60, 60, 60)


def test_a_case_a_later_repeat_lost_is_an_error_naming_that_repeat() -> None:
    one = [record("add"), record("softmax")]
    two = [record("add")]  # softmax's op crashed in repeat 2
    merged = {r.op: r for r in merge_records([one, two], run_id="gate-head")}
    assert merged["softmax"].status == "error"
    assert "no record in repeat 2 of 2" in merged["softmax"].message
    assert merged["add"].status == "pass"


def test_pooled_op_statuses_keep_the_worst_repeat() -> None:
    infos = [{"ops": [{"op": "add", "status": "PASS", "notes": ""}, {"op": "mm", "status": "PASS", "notes": ""}]},
             {"ops": [{"op": "add", "status": "PASS", "notes": ""},
                      {"op": "mm", "status": "TIMEOUT", "notes": "after 1800 s"}]}]
    ops = {o["op"]: o for o in merged_ops(infos)}
    assert ops["add"]["status"] == "PASS"
    assert ops["mm"]["status"] == "TIMEOUT" and ops["mm"]["notes"] == "repeat 2: after 1800 s"


def test_a_pooled_side_carries_its_first_runs_autotune_configs(tmp_path: Path) -> None:
    r1 = write_run(tmp_path / "head-1", [record("mm", shape=(4096, 4096, 4096))])
    r2 = write_run(tmp_path / "head-2", [record("mm", shape=(4096, 4096, 4096), seed=1)])
    _configs(r1, 128)
    pooled = pool_side([r1, r2], tmp_path / "head", "gate-head", "HEAD")
    assert (pooled / "autotune" / "mm.json").is_file()
    assert side_replay(tmp_path, "head", 1) is None
    assert side_replay(tmp_path, "head", 2) == tmp_path / "head-1"


def test_gate_run_replays_each_sides_first_run_in_its_later_runs(tmp_path: Path) -> None:
    from tests.unit.test_compare import _fake_tree

    base = _fake_tree(tmp_path / "v1", median=1.0)
    head = _fake_tree(tmp_path / "v2", median=1.0)
    out = tmp_path / "gate"
    cli(["gate-run", "--base-ref", str(base), "--head-ref", str(head), "--out", str(out), "--repeats", "3",
         "--", "--ops", "softmax", "--backend", "cuda"])
    args = {p.name: json.loads((p / "run.json").read_text())["args"] for p in (out / "repeats").iterdir()}
    for name in ("base", "head"):
        assert "--replay-from" not in args[f"{name}-1"]
        for k in (2, 3):
            assert args[f"{name}-{k}"][-2:] == ["--replay-from", str((out / "repeats" / f"{name}-1").resolve())]
    with pytest.raises(UsageError, match="sets --replay-from"):
        cli(["gate-run", "--base-ref", str(base), "--head-ref", str(head), "--out", str(tmp_path / "g2"),
             "--", "--replay-from", "x"])
