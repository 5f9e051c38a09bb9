"""Nothing lost, nothing misleading (issue 17), without starting op processes: the records reader
and its torn/corrupt lines, outputs that parse whatever bytes messages hold, the run directory's
refusals, leftover processes and resume beside one, a closed stdout, the environment check."""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from harness.cli import main as harness_main
from harness.errors import UsageError
from harness.results.render import Unreached, render_csv, render_junit, render_markdown
from harness.results.schema import RecordError, record_from_dict
from harness.results.store import (
    RecordsCorrupt,
    append_record,
    atomic_write_text,
    read_records,
    read_records_file,
    write_json,
)
from harness.run.decide import AttemptExit, OpOutcome, classify_exit
from harness.run.leftovers import end_marked, find_marked, op_marks
from harness.run.rundir import check_out_dir, repair_records_tail
from harness.run.spawn import wait_exit
from harness.streams import Tolerant
from tests.procs import alive, wait_for
from tests.unit.test_bad_inputs import RECORD, _run_json
from tests.unit.test_schema import make_record

XSD = Path(__file__).resolve().parents[1] / "data" / "junit-10.xsd"
# What an op's message may hold: ANSI colours, C0 controls, NUL, lone surrogates (a non-UTF-8
# file name), the non-characters XML forbids, markup, CSV and Markdown separators, line ends.
NASTY = ("\x1b[31mred\x1b[0m \x00 \x07 \x0b \x0c \x1f " + b"\xff\xfe".decode("utf-8", "surrogateescape")
         + " \ud800 \ufffe \uffff ]]> <a> &amp; \"q\" 'q' | a,b \r\n second line")


def _call(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = harness_main(args, env or {"PATH": os.environ.get("PATH", "")})
    return code, out.getvalue(), err.getvalue()


# -- records.jsonl: torn lines tolerated, corrupt lines never silently dropped --------------------


def test_a_corrupt_line_is_named_and_refused_a_torn_one_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    append_record(path, make_record(op="first"))
    with open(path, "a") as fh:
        fh.write("not json\n")  # damage in the middle
        fh.write('{"schema_version": 2, "op": "to')  # a writer killed mid-line
    append_record(path, make_record(op="after"))
    with open(path, "a") as fh:
        fh.write('{"schema_version": 2}\n[1]\n')  # JSON, but no record
    found = read_records_file(path)
    assert [r.op for r in found.records] == ["first", "after"]
    assert [(p.line, p.kind) for p in found.problems] == [(2, "corrupt"), (3, "torn"), (5, "corrupt"), (6, "corrupt")]
    with pytest.raises(RecordsCorrupt, match=r"3 line\(s\) are not records .*line 2: not JSON") as caught:
        read_records(path)
    assert caught.value.exit_code == 2
    assert [r.op for r in read_records(path, on_corrupt="skip")] == ["first", "after"]


def test_record_errors_say_what_the_line_is() -> None:
    """Issue 17: a malformed record said "Upgrade the harness"."""
    good = json.loads(RECORD)
    cases = [
        ({k: v for k, v in good.items() if k != "schema_version"}, "no schema_version"),
        ({**good, "schema_version": "2"}, "is not a record version"),
        ({**good, "schema_version": 99}, "Upgrade the harness"),
        ({**good, "shape": "4x4"}, "shape is '4x4', not a list of integers"),
        ({**good, "speedup": "fast"}, "speedup is 'fast', not a number"),
        ({**good, "status": "ok"}, "status 'ok'"),
        ({**good, "baseline": {"samples_ms": ["x"], "summary": {}}}, "baseline.samples_ms item"),
        ({**good, "surprise": 1}, "a damaged record"),
        ({k: v for k, v in good.items() if k != "op"}, "a damaged record"),
        ([1, 2], "not a record: a JSON list"),
    ]
    for data, says in cases:
        with pytest.raises(RecordError) as caught:
            record_from_dict(data)
        assert says in caught.value.message
        newer = isinstance(data, dict) and data.get("schema_version") == 99
        assert ("Upgrade the harness" in caught.value.message) == newer  # only a newer record says so


def test_a_whole_last_record_without_its_line_end_is_kept_and_completed(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(RECORD + "\n" + RECORD)  # the final newline never made it
    assert len(read_records(path)) == 2
    assert repair_records_tail(path) == 0
    assert path.read_text() == RECORD + "\n" + RECORD + "\n"
    assert len(read_records(path)) == 2


# -- outputs parse whatever the messages hold ----------------------------------------------------


def _nasty_records() -> list:
    return [
        make_record(op="x\x1bop", notes=(NASTY,), device_name=NASTY),
        make_record(status="fail", speedup=None, gbps=None, baseline=None, candidate=None, fallback=None, message=NASTY),
        make_record(op="add", status="error", speedup=None, gbps=None, message=NASTY),
        make_record(op="mm", status="skip", speedup=None, gbps=None, message=NASTY),
    ]


def test_every_rendered_format_parses_and_keeps_every_row(tmp_path: Path) -> None:
    records = _nasty_records()
    unreached = [Unreached(op="gelu", case_id="gelu[builtin-float16-4x64]", status="error", message=NASTY,
                           provider="builtin", dtype="float16", shape="4x64")]
    junit = render_junit(records, unreached, op_notes={"add": NASTY})
    root = ET.fromstring(junit)
    assert len(root.findall(".//testcase")) == 5
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(junit)
    assert "\\x1b[31mred" in junit and "\\udcff\\udcfe" in junit and "\\ufffe" in junit
    text = render_csv(records)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 4 and "\x00" not in text
    assert rows[2]["message"].startswith("\\x1b[31mred") and "second line" in rows[2]["message"]
    md = render_markdown(records, {"run_id": "r", "identity": {}}, unreached, ["line 3: " + NASTY])
    assert md.count("\n| ") >= 6 and "\x00" not in md and "\x1b" not in md
    for name, content in (("summary.csv", text), ("junit.xml", junit), ("report.md", md)):
        atomic_write_text(tmp_path / name, content)
        (tmp_path / name).read_text(encoding="utf-8")  # valid UTF-8: surrogates were escaped
    write_json(tmp_path / "run.json", {"message": NASTY, "nan": float("nan"), "inf": [float("inf")]})
    data = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert data["nan"] is None and data["inf"] == [None]  # JSON has no NaN: null, never invalid JSON
    data["message"].encode("utf-8")  # no lone surrogate left in the parsed text
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # atomic: no temp files left


def test_records_with_any_message_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    append_record(path, make_record(op="add", status="error", speedup=None, gbps=None, message=NASTY))
    (record,) = read_records(path)
    record.message.encode("utf-8")
    assert record.message.startswith("\x1b[31mred") and "\\udcff" in record.message


def _write_run(path: Path, records: list, run_id: str) -> Path:
    path.mkdir()
    path.joinpath("run.json").write_text(_run_json(run_id=run_id, backend="cpu"))
    for r in records:
        append_record(path / "records.jsonl", r)
    return path


def test_compare_and_history_outputs_parse_whatever_the_messages_hold(tmp_path: Path) -> None:
    base = _write_run(tmp_path / "base", [make_record(run_id="b", device_name="x86_64"),
                                          make_record(op="add", run_id="b", device_name="x86_64")], "b")
    head = _write_run(tmp_path / "head", [make_record(run_id="h", device_name="x86_64"),
                                          make_record(op="add", run_id="h", status="error", speedup=None,
                                                      gbps=None, message=NASTY, device_name="x86_64")], "h")
    code, _, err = _call(["compare", str(base), str(head), "--out", str(tmp_path / "cmp"), "--allow-mismatch",
                          "--allow-cpu"])
    assert code == 0, err
    ET.parse(tmp_path / "cmp" / "compare-junit.xml")
    list(csv.reader((tmp_path / "cmp" / "compare.csv").open(encoding="utf-8")))
    (tmp_path / "cmp" / "compare.md").read_text(encoding="utf-8")
    db = str(tmp_path / "h.sqlite")
    for run in (base, head):
        assert _call(["history", "add", str(run), "--db", db])[0] == 0
    code, _, err = _call(["history", "check", str(head), "--db", db, "--out", str(tmp_path / "hist")])
    assert code in (0, 1), err
    ET.parse(tmp_path / "hist" / "history-check-junit.xml")
    code, _, err = _call(["history", "export", "--db", db, "--out", str(tmp_path / "trend.csv")])
    assert code == 0, err
    list(csv.reader((tmp_path / "trend.csv").open(encoding="utf-8")))


# -- harness report, and a run's end, with a corrupt records line ------------------------------


def _corrupt_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(_run_json())
    (run / "records.jsonl").write_text(RECORD + "\ngarbage line\n")
    return run


def test_harness_report_names_the_corrupt_line_and_compare_refuses_the_run(tmp_path: Path) -> None:
    """Issue 17: a corrupt line was dropped as torn; the report contradicted itself and `history
    add` stored a run without it. Now the report lists the line, and the readers refuse."""
    run = _corrupt_run(tmp_path)
    code, out, err = _call(["report", str(run)])
    assert code == 0
    assert "records.jsonl line 2: not JSON" in err
    assert "records.jsonl has lines that are not records" in out and "line 2: not JSON" in out
    code, _, err = _call(["history", "add", str(run), "--db", str(tmp_path / "h.sqlite")])
    assert code == 2 and "line 2: not JSON" in err and not (tmp_path / "h.sqlite").exists()


def test_a_run_whose_records_file_holds_a_corrupt_line_fails_and_says_which(tmp_path: Path) -> None:
    from harness.backends import get_backend
    from harness.options import RunOptions
    from harness.run.execute import Prepared, execute
    from harness.run.plan import OpPlan, RunPlan
    from harness.run.plugins import plan_plugins

    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text("garbage written by something else\n")
    backend = get_backend("cpu")
    plan = RunPlan(run_id="r1", backend=backend, level="smoke", plugins=plan_plugins(backend, "auto"),
                   devices=("cpu",), ops=(OpPlan("add", "cpu", ("float32",), ((4, 4),), "builtin"),),
                   options=RunOptions(progress="plain"))
    out = io.StringIO()
    code = execute(Prepared(plan=plan, run_dir=run, dismissed={"add": "not today"}), {}, out)
    assert code == 1 and "line 1: not JSON" in out.getvalue()
    info = json.loads((run / "run.json").read_text())
    assert info["records_problems"] == [{"line": 1, "kind": "corrupt",
                                         "reason": "not JSON (Expecting value at column 1): "
                                                   "'garbage written by something else'"}]
    assert "line 1: not JSON" in (run / "report.md").read_text()


def test_a_run_that_records_nothing_still_has_its_records_file_and_markers(tmp_path: Path) -> None:
    """Issue 17 (docs): records.jsonl is always written; a dismissed op gets its done/<op>.json."""
    (tmp_path / "d.yaml").write_text("add: not today\n")
    code, out, err = _call(["run", "--backend", "cpu", "--ops", "add", "--dismiss", str(tmp_path / "d.yaml"),
                            "--out", str(tmp_path / "run"), "--progress", "plain"])
    assert code == 0, err
    run = tmp_path / "run"
    assert (run / "records.jsonl").read_bytes() == b""
    marker = json.loads((run / "done" / "add.json").read_text())
    assert marker["status"] == "SKIP" and marker["attempts"] == 0 and marker["notes"] == ["dismissed: not today"]


# -- the run directory ---------------------------------------------------------------------------


def test_a_live_run_directory_is_not_offered_for_resume(tmp_path: Path) -> None:
    """Issue 17: "use --resume" was suggested for a directory a running harness holds."""
    from harness.run.rundir import run_lock

    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(_run_json(status="running"))
    with run_lock(run):
        with pytest.raises(UsageError, match="in use by a harness process that is running now") as caught:
            check_out_dir(run, f"--out {run}")
        assert "--resume" not in caught.value.message
    with pytest.raises(UsageError, match="Finish it with `harness run --resume"):
        check_out_dir(run, f"--out {run}")


def _marked_sleep(run: Path, op: str, new_session: bool = True) -> subprocess.Popen[bytes]:
    env = {**os.environ, **op_marks(run, op)}
    return subprocess.Popen(["sleep", "60"], env=env, start_new_session=new_session)


def test_leftover_processes_are_found_by_their_mark_and_ended(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    mine, other_op, other_run = _marked_sleep(run, "softmax"), _marked_sleep(run, "mm"), _marked_sleep(tmp_path, "softmax")
    try:
        wait_for(lambda: len(find_marked(run)) == 2, "the marked processes to start")
        found = find_marked(run, "softmax")
        assert [p.pid for p in found] == [mine.pid] and found[0].command == "sleep 60"
        assert [p.pid for p in end_marked(found, run)] == [mine.pid]
        mine.wait(timeout=10)
        assert alive(other_op.pid) and alive(other_run.pid)  # another op's, another run's: left alone
    finally:
        for proc in (mine, other_op, other_run):
            proc.kill()
            proc.wait()


def test_resume_is_refused_beside_a_live_op_process_of_the_run(tmp_path: Path) -> None:
    """Issue 17: --resume started a second copy beside an orphan that survived the parent's kill -9."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(_run_json(status="running"))
    before = sorted(p.name for p in run.iterdir())
    orphan = _marked_sleep(run, "add")
    try:
        wait_for(lambda: bool(find_marked(run)), "the orphan to start")
        code, _, err = _call(["run", "--resume", str(run)])
        assert code == 2, err
        assert f"pid {orphan.pid} (sleep 60) (op add)" in err and f"kill {orphan.pid}" in err
        assert sorted(p.name for p in run.iterdir()) == before  # nothing written
        assert json.loads((run / "run.json").read_text())["status"] == "running"
    finally:
        orphan.kill()
        orphan.wait()


def test_a_finished_process_that_lingers_is_classified_by_its_records() -> None:
    """Issue 17: a process that hung after pytest finished was a TIMEOUT, hiding a FAIL."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        start = time.monotonic()
        assert wait_exit(sleeper.pid, start + 30, None, finished=lambda: True, linger_s=0.2) == "lingered"
        assert wait_exit(sleeper.pid, time.monotonic() + 0.2, None, finished=lambda: False) == "timeout"
    finally:
        sleeper.kill()
        sleeper.wait()
    hung = classify_exit(AttemptExit(-9, timed_out=True, pytest_exit=1), ["pass", "fail"], timeout_s=30)
    assert hung.status == "FAIL" and "then hung after pytest finished: process group ended after --op-timeout 30s" in hung.note
    lingered = classify_exit(AttemptExit(-15, pytest_exit=0, lingered_s=60.0), ["pass"])
    assert lingered.status == "PASS" and "ended after 60s" in lingered.note
    assert classify_exit(AttemptExit(-9, timed_out=True), []).status == "TIMEOUT"


def test_op_rows_keep_numbers_as_numbers_and_read_older_rows() -> None:
    outcome = OpOutcome("add", "0", "PASS", 2, 1.234, 6, ("a", "b"), compile_s=0.5)
    data = outcome.to_json()
    assert data == {"op": "add", "device": "0", "status": "PASS", "attempts": 2, "elapsed_s": 1.23, "rows": 6,
                    "notes": ["a", "b"], "compile_s": 0.5, "cause": "", "evidence": "", "returncode": None}
    assert OpOutcome.from_json(data) == replace(outcome, elapsed_s=1.23)
    assert OpOutcome.from_json({**outcome.row(), "notes": "a; b"}) == replace(outcome, elapsed_s=1.23)  # strings
    assert OpOutcome.from_json({**data, "compile_s": None}).compile_s is None


# -- a closed stdout, the environment ---------------------------------------------------------


def test_writes_to_a_closed_pipe_are_dropped() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = Tolerant(open(write_end, "w", encoding="utf-8"))  # noqa: SIM115 - closed by the test
    stream.write("line\n")
    stream.flush()
    stream.write("more\n")
    assert stream.dropped
    stream.stream.close()  # no error: the descriptor now points at /dev/null
    surrogate = Tolerant(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    surrogate.write("name \udcff")  # encoded with an escape, not an error
    surrogate.flush()


def test_unknown_harness_variables_are_warned_about_in_one_line_each() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HARNESS_OPS_MODULE": "x.py", "HARNESS_RESUME": "r",
           "HARNESS_LEVEL": "smoke", "HARNESS_ZZZ": "1"}
    code, _, err = _call(["list", "backends"], env)
    assert code == 0
    lines = err.splitlines()
    assert lines == [
        "harness: warning: HARNESS_OPS_MODULE is not a harness variable and is ignored; did you mean HARNESS_OPS_MODULES?",
        "harness: warning: HARNESS_RESUME is not a harness variable and is ignored; --resume has no environment form: "
        "give it on the command line",
        "harness: warning: HARNESS_ZZZ is not a harness variable and is ignored; the options and their variables: "
        "docs/options.md",
    ]


def test_run_help_lists_every_backend_alias() -> None:
    from harness.backends import BACKENDS
    from harness.cli import build_parser

    subparsers = build_parser()._subparsers
    assert subparsers is not None
    commands = subparsers._group_actions[0]
    assert isinstance(commands, argparse._SubParsersAction)
    text = " ".join(commands.choices["run"].format_help().split())
    for backend in BACKENDS:
        for name in (backend.name, *backend.aliases):
            assert name in text, name


def test_the_harness_can_be_run_with_stdout_closed(tmp_path: Path) -> None:
    done = subprocess.run(f"{sys.executable} -m harness list backends >&- 2>&-", shell=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 0


def test_file_options_cross_into_a_container_relative_to_the_checkout(tmp_path: Path) -> None:
    """Issue 17 (docs): HARNESS_SHAPES_FILE and friends crossed as host paths that name nothing inside."""
    from harness.options import forwarded_run_env

    repo = tmp_path / "repo"
    (repo / "cfg").mkdir(parents=True)
    env = {"HARNESS_SHAPES_FILE": str(repo / "cfg" / "shapes.yaml"), "HARNESS_DISMISS": "cfg/dismiss.yaml",
           "HARNESS_OPS_MODULES": "cfg/my_ops.py,some.module", "HARNESS_LEVEL": "core", "HARNESS_OUT": "/x"}
    assert forwarded_run_env(env, repo, cwd=repo) == {
        "HARNESS_SHAPES_FILE": "cfg/shapes.yaml", "HARNESS_DISMISS": "cfg/dismiss.yaml",
        "HARNESS_OPS_MODULES": "cfg/my_ops.py,some.module", "HARNESS_LEVEL": "core"}
    assert forwarded_run_env({"HARNESS_OPS_FILE": "ops.txt"}, repo, cwd=repo / "cfg") == {
        "HARNESS_OPS_FILE": "cfg/ops.txt"}
    with pytest.raises(UsageError, match="outside the checkout"):
        forwarded_run_env({"HARNESS_REPLAY_FROM": str(tmp_path / "elsewhere")}, repo, cwd=repo)
