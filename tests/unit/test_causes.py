"""A cause for every case and op that does not pass: derived from the records and the op's row,
kept in the records (schema 5), ops_status.csv and report.md; a torch side that returns None is
the benchmark's defect, timed, not a shape mismatch."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.child.latency_seam import LatencySeam, RowContext, RowWriter, SuiteTimers
from harness.child.timing.base import Samples
from harness.results.causes import CAUSES, NO_TORCH_OUTPUT, Cause, case_cause, op_cause
from harness.results.render import render_markdown
from harness.results.schema import (
    SCHEMA_VERSION,
    Correctness,
    Measurement,
    Timing,
    record_from_dict,
)
from harness.results.store import read_records
from harness.run.decide import OpOutcome, render_status, with_causes


def _rec(status: str, message: str = "", notes: tuple[str, ...] = (), shape: tuple[int, ...] = (8,),
         correctness: Correctness | None = None, op: str = "add") -> Measurement:
    return Measurement(run_id="r", op=op, provider="flaggems-suite", dtype="bfloat16" if shape else "any",
                       shape=shape, backend="cuda", device="0", timer="graph", status=status, message=message,
                       notes=notes, correctness=correctness)


@pytest.mark.parametrize(("record", "kind", "said"), [
    (_rec("fail", "add[x]: FlagGems' output does not match torch's (4 of 64 elements outside atol=0 rtol=0)",
          correctness=Correctness(passed=False, max_abs=1.0, max_rel=1.0, atol=0, rtol=0, mismatched=4, numel=64)),
     "library", "4 of 64 elements"),
    (_rec("error", "FlagGems' call raised RuntimeError: triton compile failed"), "library", "kernel raised"),
    (_rec("error", "FlagGems' call raised OutOfMemoryError: CUDA out of memory. Tried to allocate 8 GiB"),
     "environment", "out of memory in the op"),
    (_rec("error", "FlagGems' call raised RuntimeError: CUDA error: an illegal memory access was encountered"),
     "environment", "driver error"),
    (_rec("error", "torch's call raised TypeError: unsupported dtype"), "benchmark", "torch side raised"),
    (_rec("error", "ValueError: bad shape from get_input_iter", shape=()), "benchmark", "own code raised"),
    (_rec("error", "ModuleNotFoundError: No module named 'vllm'", shape=()), "environment", "package is missing"),
    (_rec("error", "comparing FlagGems' outputs with torch's raised OutOfMemoryError: CUDA out of memory"),
     "harness", "check ran out of memory"),
    (_rec("error", "poisoned: capture invalidated the context", notes=("poisoned",)), "harness", "graph capture"),
    (_rec("skip", "requires vLLM and NVIDIA Hopper architecture for FP8", shape=()), "environment", "lacks"),
    (_rec("skip", "FlagGems' benchmark timed only torch for this input (no FlagGems call followed)"),
     "benchmark", "one side only"),
    (_rec("skip", NO_TORCH_OUTPUT), "benchmark", NO_TORCH_OUTPUT),
    (_rec("skip", "Issue 1234", shape=()), "unknown", "Issue 1234"),
    (_rec("skip", "'geglu' not found in FlagGems", shape=()), "library", "lacks what the benchmark calls"),
    (_rec("skip", "'reglu' not found in TransformerEngine", shape=()), "environment", "installed package"),
    (_rec("skip", "vLLM version prior to 0.9 does not include the API.", shape=()), "environment", "installed"),
])
def test_each_case_that_does_not_pass_gets_a_cause_with_evidence(record: Measurement, kind: str, said: str) -> None:
    assert record.cause is not None and record.cause.kind == kind and said in record.cause.evidence
    assert record.cause == case_cause(record)


def test_a_passing_case_has_no_cause_and_cannot_be_given_one() -> None:
    assert _rec("pass").cause is None
    with pytest.raises(ValueError, match="no cause"):
        Measurement(run_id="r", op="a", provider="p", dtype="f", shape=(1,), backend="cpu", device="0",
                    timer="cpu", status="pass", cause=Cause("library", "x"))
    with pytest.raises(ValueError, match="not one of"):
        Cause("weather", "rain")


def test_an_old_record_of_a_torch_side_returning_none_reads_as_the_benchmarks_defect() -> None:
    """What a schema 4 record of scaled_dot_product_attention held: a shape mismatch against None."""
    old = _rec("fail", "sdpa[x]: FlagGems' output does not match torch's (output shape differs: candidate "
                       "'Tensor' vs reference 'NoneType')",
               correctness=Correctness(passed=False, max_abs=None, max_rel=None, atol=0, rtol=0, mismatched=1,
                                       shape_mismatch="candidate 'Tensor' vs reference 'NoneType'")).to_dict()
    old["schema_version"] = 4
    del old["cause"]
    record = record_from_dict(old)
    assert record.cause == Cause("benchmark", NO_TORCH_OUTPUT)


def test_the_cause_round_trips_through_a_record_line() -> None:
    record = _rec("error", "FlagGems' call raised RuntimeError: boom")
    data = json.loads(json.dumps(record.to_dict()))
    assert data["schema_version"] == SCHEMA_VERSION == 5
    assert data["cause"] == {"kind": "library", "evidence": "the library's kernel raised: FlagGems' call raised "
                                                            "RuntimeError: boom"}
    assert record_from_dict(data) == record
    data["cause"] = {"kind": "weather", "evidence": ""}
    with pytest.raises(ValueError, match="not one of"):
        record_from_dict(data)


@pytest.mark.parametrize(("status", "notes", "records", "kind", "said"), [
    ("PASS", (), [], None, ""),
    ("TIMEOUT", ("no exit within --op-timeout 530s; process group ended",), [], "environment", "op timeout"),
    ("PENDING", ("not started: the run's --budget ran out",), [], "environment", "budget"),
    ("CRASH", ("device context poisoned; op process stopped",), [], "harness", "poisoned"),
    ("CRASH", ("killed by SIGKILL",), [], "unknown", "SIGKILL"),
    ("CRASH", ("killed by SIGKILL: CUDA out of memory while the harness captured a graph of the op's calls",), [],
     "environment", "out of memory"),
    ("PENDING", ("not started: the run was stopped (SIGTERM)",), [], "environment", "stopped from outside"),
    ("INTERRUPTED", ("interrupted during attempt 1; resume with --resume",), [], "environment", "attempt 1"),
    ("PENDING", (), [], "unknown", "the run ended before this op"),
    ("CRASH", ("killed by SIGABRT while the harness captured a graph of the op's calls (log: logs/x.log)",), [],
     "harness", "inside the harness's graph capture"),
    ("CRASH", ("attempt 1 CRASH: killed by SIGABRT while the harness captured a graph of the op's calls",
               "attempt 2 CRASH: killed by SIGSEGV", "attempt 2 captured no graph: attempt 1 of this op died "
               "inside a graph capture"), [], "unknown", "SIGSEGV"),
    ("FAIL", ("3 case(s) failed the correctness check",),
     [_rec("fail", "x: out of tolerance"), _rec("fail", "y: out of tolerance"), _rec("pass"),
      _rec("fail", NO_TORCH_OUTPUT)], "library", "2 of 3 case(s) not passing"),
    ("SKIP", ("no cases to run; FlagGems' function ran and timed nothing (no Benchmark.get_latency call: not a "
              "benchmark)",), [], "benchmark", "not a benchmark"),
    ("SKIP", ("every case skipped (reasons on the rows)",),
     [_rec("skip", "requires vLLM and NVIDIA Hopper architecture for FP8", shape=())], "environment", "vLLM"),
    ("ERROR", ("pytest reported a failure outside the cases; see the op log",), [], "unknown", "outside the cases"),
])
def test_an_op_gets_its_cause_from_its_row_and_its_records(status: str, notes: tuple[str, ...],
                                                           records: list[Measurement], kind: str | None,
                                                           said: str) -> None:
    cause = op_cause(status, notes, records)
    if kind is None:
        assert cause is None
        return
    assert cause is not None and cause.kind == kind and said in cause.evidence and kind in CAUSES


def test_ops_status_csv_and_report_md_carry_the_causes() -> None:
    records = [_rec("fail", "add[x]: out of tolerance"), _rec("pass", op="mul")]
    outcomes = with_causes([OpOutcome("add", "0", "FAIL", 1, 1.0, 1, ("1 case(s) failed the correctness check",)),
                            OpOutcome("mul", "0", "PASS", 1, 1.0, 1)], records)
    rows = list(csv.DictReader(io.StringIO(render_status(outcomes))))
    assert (rows[0]["cause"], rows[1]["cause"]) == ("library", "")
    assert rows[0]["evidence"] == "its one case: output wrong: out of tolerance"
    assert OpOutcome.from_json(outcomes[0].to_json()) == outcomes[0]
    info = {"run_id": "r", "ops": [{**o.to_json(), "notes": "; ".join(o.notes)} for o in outcomes]}
    report = render_markdown(records, info)
    assert "## Causes" in report and "- add (FAIL): **library**, its one case: output wrong" in report
    assert "- mul" not in report


# -- the torch side returning None, in the seam -------------------------------------------------------


class _Timer:
    name = "graph"

    def begin_row(self) -> None:
        pass

    def measure(self, fn: Any) -> Samples:
        fn()
        return Samples((2.0, 3.0, 1.0), self.name)


class _Bench:
    op_name = "scaled_dot_product_attention"
    dtypes = to_bench_dtypes = [torch.float32]
    is_inplace = is_backward = False
    to_bench_metrics = ["latency_base", "latency", "speedup"]

    @staticmethod
    def torch_op(q: Any, k: Any) -> None:
        q @ k.T  # computes, returns nothing: FlagGems' sdpa_flash benchmark's torch side

    @staticmethod
    def gems_op(q: Any, k: Any) -> Any:
        return q @ k.T


def test_a_torch_side_returning_none_is_timed_and_says_so_not_a_shape_mismatch(tmp_path: Path) -> None:
    ctx = RowContext(run_id="r", op="sdpa", provider="flaggems-suite", backend="cuda", device="0", device_name="H",
                     cache="cold", seed=0, records=tmp_path / "records.jsonl")
    seam = LatencySeam(RowWriter(ctx), SuiteTimers(_Timer(), None), (), under_gems=lambda: False,  # type: ignore[arg-type]
                       level="core")
    bench = _Bench()
    seam.begin_item("test_attention.py::test_sdpa")
    args = (torch.randn(8, 4), torch.randn(8, 4))
    seam.get_latency(bench, bench.torch_op, args, {})
    seam.get_latency(bench, bench.gems_op, args, {})
    seam.end_item()
    (row,) = read_records(tmp_path / "records.jsonl")
    assert row.status == "skip" and row.message == NO_TORCH_OUTPUT and row.speedup is None
    assert row.baseline is not None and row.candidate is not None  # timed, both sides
    assert row.cause == Cause("benchmark", NO_TORCH_OUTPUT)
    assert "shape" not in row.message


def test_timings_survive_on_a_skipped_row() -> None:
    t = Timing.of([1.0, 2.0])
    row = Measurement(run_id="r", op="a", provider="p", dtype="f", shape=(1,), backend="cpu", device="0",
                      timer="cpu", status="skip", baseline=t, candidate=t, message=NO_TORCH_OUTPUT)
    assert record_from_dict(json.loads(json.dumps(row.to_dict()))).candidate == t


# -- a results folder, derived again ----------------------------------------------------------------

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "flaggems-corpus-h200-2026-12-03c"


def test_a_folder_of_csvs_gets_its_causes_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.results.render import render_csv
    from harness.results.triage import main

    records = [_rec("fail", "add[x]: FlagGems' output does not match torch's (output shape differs: candidate "
                            "'Tensor' vs reference 'NoneType')"), _rec("pass", op="mul")]
    (tmp_path / "summary.csv").write_text(render_csv(records))
    (tmp_path / "ops_status.csv").write_text(render_status([OpOutcome("add", "0", "FAIL", 1, 1.0, 1),
                                                            OpOutcome("mul", "0", "PASS", 1, 1.0, 1)]))
    assert main([str(tmp_path)]) == 0
    rows = list(csv.DictReader((tmp_path / "causes.csv").open()))
    assert [(r["op"], r["case"], r["cause"]) for r in rows] == [("add", "", "benchmark"),
                                                               ("add", "add[flaggems-suite-bfloat16-8]", "benchmark")]
    assert rows[1]["evidence"] == NO_TORCH_OUTPUT
    assert "1 op(s) not passing of 2" in capsys.readouterr().out
    assert main([str(tmp_path / "nowhere")]) == 2


def _fault(where: str) -> str:
    """A faulthandler dump as an op's log holds it: the watcher thread, then the current one."""
    return (f"Fatal Python error: Aborted\n\nThread 0x7f55 (most recent call first):\n"
            f'  File "/w/harness/child/process.py", line 105 in watch\n\n'
            f"Current thread 0x7f56 (most recent call first):\n"
            f'  File "/w/torch/_ops.py", line 1269 in __call__\n{where}'
            f'  File "/w/harness/child/latency_seam.py", line 514 in measure\n\nExtension modules: numpy\n')


IN_CAPTURE = '  File "/w/harness/child/timing/graph.py", line 233 in _capture_graph\n'


def test_a_log_ending_in_a_fatal_error_inside_a_capture_is_read_as_such() -> None:
    """cholesky_solve on the H200: MAGMA aborted inside the capture of torch's side, twice."""
    from harness.results.causes import died_in_capture

    assert died_in_capture("attempt 1\n" + _fault(IN_CAPTURE) + "attempt 2\n" + _fault(IN_CAPTURE))
    assert not died_in_capture(_fault(IN_CAPTURE) + "attempt 2 captured no graph\n" + _fault(""))  # the last one decides
    assert not died_in_capture(_fault(""))
    assert not died_in_capture("Traceback: ... in _capture_graph\nRuntimeError: boom\n")  # no fatal error


def test_triage_reads_a_capture_death_from_the_crashed_ops_log(tmp_path: Path) -> None:
    from harness.results.triage import main

    (tmp_path / "records.jsonl").write_text("")
    (tmp_path / "ops_status.csv").write_text(render_status([
        OpOutcome("cholesky_solve", "0", "CRASH", 2, 34.8, 4, ("attempt 1 CRASH: killed by SIGABRT",)),
        OpOutcome("mm", "0", "CRASH", 1, 1.0, 0, ("killed by SIGSEGV",))]))
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "cholesky_solve.log").write_text(_fault(IN_CAPTURE))
    (tmp_path / "logs" / "mm.log").write_text(_fault(""))
    assert main([str(tmp_path)]) == 0
    causes = {r["op"]: r["cause"] for r in csv.DictReader((tmp_path / "causes.csv").open())}
    assert causes == {"cholesky_solve": "harness", "mm": "unknown"}


def test_the_committed_corpus_causes_table_is_what_its_csvs_give() -> None:
    from harness.results.triage import causes_rows, read_folder

    ops, cases, source = read_folder(CORPUS)
    assert source == "summary.csv"
    committed = list(csv.DictReader((CORPUS / "causes.csv").open(encoding="utf-8")))
    assert committed == causes_rows(ops, cases)
    not_passing = {r["op"] for r in ops if r["status"] != "PASS"}
    assert {r["op"] for r in committed if not r["case"]} == not_passing  # every op that did not pass has one
    assert all(r["cause"] in CAUSES and r["evidence"] for r in committed)
