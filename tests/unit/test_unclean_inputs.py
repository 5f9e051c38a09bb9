"""Inputs and conditions that once passed silently or ended in a traceback, each refused or
reported (issue 34): short writes, foreign history databases, unparsable suite trees, YAML,
unknown compile targets, run.json without its fields, garbage records.

The one-line refusals of plain bad flags are rows of tests/unit/test_bad_inputs.py; what needs
more than a row (a simulated short write, bytes compared before and after) is here.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as harness_main


def _call(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = harness_main(args, env or {"PATH": "/usr/bin:/bin"})
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


# -- harness compile: a target where nothing compiles ----------------------------------------


def _fake_tasks(ok: dict[str, bool]) -> Any:
    """A stand-in for the compile workers: each task's result, its one variant compiled or not."""

    def run_tasks(tasks: list[dict[str, Any]], env: object, jobs: int, out: Path) -> list[str]:
        for task in tasks:
            variant = {"op": "add", "target": task["target"], "label": "k", "ok": ok[task["target"]],
                       "error": "RuntimeError: PassManager::run failed", "cases": []}
            Path(task["result"]).parent.mkdir(parents=True, exist_ok=True)
            Path(task["result"]).write_text(json.dumps({"ops": [
                {"op": "add", "target": task["target"], "elapsed_s": 0.0, "variants": [variant], "problems": []}]}))
        return []

    return run_tasks


def test_compile_exits_non_zero_when_nothing_compiles_for_a_target(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.compile.cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(harness.compile.cli, "_run_tasks", _fake_tasks({"hip:gfx9999": False, "cuda:90": True}))
    code, _, err = _call(["compile", "--ops", "add", "--level", "smoke", "--targets", "hip:gfx9999,cuda:90",
                          "--out", "o"])
    assert code == 1, err
    assert "nothing compiled for hip:gfx9999" in err and "cuda:90" not in err
    monkeypatch.setattr(harness.compile.cli, "_run_tasks", _fake_tasks({"cuda:90": True}))
    code, _, err = _call(["compile", "--ops", "add", "--level", "smoke", "--targets", "cuda:90", "--out", "o2"])
    assert code == 0, err


def test_dead_targets_counts_a_worker_without_result_but_not_a_target_without_kernels() -> None:
    from harness.compile.cli import dead_targets

    variants = [{"target": "a", "ok": False}, {"target": "a", "ok": True}, {"target": "b", "ok": False}]
    assert dead_targets(["a", "b", "c", "d"], variants, ["d"]) == ["b", "d"]


# -- a record written in part ----------------------------------------------------------------


def _record() -> Any:
    from harness.results.schema import Measurement

    return Measurement(run_id="r", op="add", provider="builtin", dtype="float32", shape=(4,), backend="cpu",
                       device="cpu", device_name="x", timer="cpu", cache="cold", status="pass")


def test_a_short_write_of_a_record_raises_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from harness.results.store import append_record, read_records_file

    path = tmp_path / "records.jsonl"
    append_record(path, _record())
    real = os.write
    taken = iter([10, 0])
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, data[:next(taken)]))
    with pytest.raises(OSError, match="written in part") as caught:
        append_record(path, _record())
    assert caught.value.filename == str(path)
    monkeypatch.setattr(os, "write", real)
    append_record(path, _record())  # the next record starts on a fresh line
    found = read_records_file(path)
    assert len(found.records) == 2 and [p.kind for p in found.problems] == ["torn"]


def test_a_file_size_limit_on_records_raises(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from harness.results.schema import Measurement\n"
        "from harness.results.store import append_record\n"
        "r = Measurement(run_id='r', op='add', provider='builtin', dtype='float32', shape=(4,), backend='cpu',"
        " device='cpu', device_name='x', timer='cpu', cache='cold', status='pass')\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (700, 700))\n"
        "path = Path(sys.argv[1])\n"
        "try:\n"
        "    for _ in range(3):\n"
        "        append_record(path, r)\n"
        "except OSError as exc:\n"
        "    print('refused', exc.filename, exc.strerror)\n"
        "    sys.exit(1)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "records.jsonl")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"refused {tmp_path / 'records.jsonl'} File too large" in done.stdout


def test_the_op_process_stops_when_a_record_cannot_be_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import harness.child.plugins.records as records
    from harness.contract import UNRECORDED_EXIT

    def refuse(path: Path, record: object) -> None:
        raise OSError(27, "File too large", str(path))

    def exit_now(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(records, "append_record", refuse)
    monkeypatch.setattr(records.os, "_exit", exit_now)
    with pytest.raises(SystemExit) as ended:
        records.write_record(tmp_path / "records.jsonl", _record())
    assert ended.value.code == UNRECORDED_EXIT
    err = capsys.readouterr().err
    assert "records.jsonl: the record of add[builtin-float32-4] could not be written whole" in err and "(File too large)" in err


def test_an_op_whose_record_was_not_written_is_an_error() -> None:
    from harness.contract import UNRECORDED_EXIT
    from harness.run.decide import AttemptExit, classify_exit

    verdict = classify_exit(AttemptExit(UNRECORDED_EXIT), ["pass"])
    assert verdict.status == "ERROR" and "could not be written whole" in verdict.note


def test_a_refused_write_of_report_html_fails_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    # the module that defines write_html_report (its names are patched there)
    outputs = next(m for m in (importlib.import_module(f"harness.run.{name}") for name in ("outputs", "report")
                               if importlib.util.find_spec(f"harness.run.{name}"))
                   if "atomic_write_text" in vars(m) and "write_html_report" in vars(m)
                   and vars(m)["write_html_report"].__module__ == m.__name__)

    def full_disk(path: Path, text: str) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(outputs, "atomic_write_text", full_disk)
    monkeypatch.setattr(outputs, "html_report", lambda info, records, unreached: "<html></html>")
    with pytest.raises(OSError, match="No space left"):
        outputs.write_html_report(tmp_path, {}, [], [])
    monkeypatch.setattr(outputs, "html_report", lambda info, records, unreached: 1 / 0)
    assert outputs.write_html_report(tmp_path, {}, [], []) == "report.html not written: ZeroDivisionError: division by zero"


# -- history: a database that is not the harness's --------------------------------------------


def _history_run(root: Path) -> Path:
    from harness.results.runinfo import RUN_SCHEMA_VERSION
    from harness.results.store import append_record, write_json

    run = root / "run"
    run.mkdir()
    write_json(run / "run.json", {"schema_version": RUN_SCHEMA_VERSION, "run_id": "r1", "status": "complete",
                                  "backend": "cpu", "timer": "cpu", "level": "smoke",
                                  "started_at": "2026-12-01T00:00:00+00:00", "identity": {"device_name": "x"}})
    append_record(run / "records.jsonl", _record())
    return run


def _sqlite_of_another_program(path: Path, wal: bool = False) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    if wal:  # a reader of a WAL file makes its index and log beside it, unless told not to
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("kind", ["other program", "other program, WAL", "empty", "not sqlite"])
@pytest.mark.parametrize("command", ["add", "check"])
def test_history_refuses_a_file_that_is_not_its_own_and_leaves_it_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, command: str) -> None:
    import hashlib

    monkeypatch.chdir(tmp_path)
    _history_run(tmp_path)
    db = tmp_path / "other.sqlite"
    if kind.startswith("other program"):
        _sqlite_of_another_program(db, wal=kind.endswith("WAL"))
    else:
        db.write_bytes(b"" if kind == "empty" else b"plain text, not a database\n" * 40)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    code, out, err = _call(["history", command, "run", "--db", str(db)])
    assert code == 2, out + err
    assert "it was left as it is" in err and "Traceback" not in err
    says = {"other program": "an SQLite file of another program (application id 0, tables notes)",
            "other program, WAL": "an SQLite file of another program (application id 0, tables notes)",
            "empty": "is an empty file, not a history database", "not sqlite": "not a usable history database"}
    assert says[kind] in err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite", "run"]  # no journal left beside it


def test_history_marks_its_own_database_and_reads_one_written_before_the_mark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from harness.compare.history import APPLICATION_ID

    monkeypatch.chdir(tmp_path)
    _history_run(tmp_path)
    code, _, err = _call(["history", "add", "run", "--db", "h.sqlite"])
    assert code == 0, err
    conn = sqlite3.connect("h.sqlite")
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.execute("PRAGMA application_id = 0")  # as a harness before the mark wrote it
    conn.commit()
    conn.close()
    code, _, err = _call(["history", "add", "run", "--db", "h.sqlite"])
    assert code == 0, err
    conn = sqlite3.connect("h.sqlite")
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


# -- YAML: one line with file, line and column; a key given twice ------------------------------


def test_flaggems_core_shapes_yaml_errors_are_one_line_with_line_and_column(tmp_path: Path) -> None:
    from harness.errors import ConfigError
    from harness.suite.shapefile import read_suite_shapes

    path = tmp_path / "core_shapes.yaml"
    path.write_text("BlasBenchmark:\n  shapes: [[1, 2]\nSoftmax:\n  shapes: []\n")
    with pytest.raises(ConfigError) as caught:
        read_suite_shapes(path)
    assert caught.value.message.startswith(f"FlagGems' shape file {path}: not valid YAML at line 3, column 1: ")
    assert "\n" not in caught.value.message
    path.write_text("Softmax:\n  shapes: [[4]]\nSoftmax:\n  shapes: [[8]]\n")
    with pytest.raises(ConfigError, match="at line 3, column 1: the key 'Softmax' is given twice"):
        read_suite_shapes(path)


def test_a_key_a_merge_brings_in_may_be_set_again_but_not_a_key_given_twice() -> None:
    from harness.errors import ConfigError
    from harness.yamlfile import load_yaml

    text = "base: &b {shapes: [[1]], warmup: 3}\nmine:\n  <<: *b\n  shapes: [[2]]\n"
    assert load_yaml(text, "f.yaml")["mine"] == {"shapes": [[2]], "warmup": 3}
    with pytest.raises(ConfigError, match=r"^f\.yaml: not valid YAML at line 4, column 3: the key 'shapes' is "
                                          r"given twice \(first at line 3\); give it once\. Fix it\.$"):
        load_yaml("mine:\n  <<: {a: 1}\n  shapes: [[2]]\n  shapes: [[3]]\n", "f.yaml", "Fix it.")


# -- a FlagGems tree with files that cannot be read ---------------------------------------------


def _fake_tree(root: Path) -> Path:
    from tests.data.fake_flaggems_suite import write_fake_suite

    return write_fake_suite(root).benchmark


@pytest.mark.parametrize("command", [["list", "suite"], ["run", "--backend", "cpu", "--ops", "abs"]])
def test_a_suite_whose_base_module_does_not_parse_is_one_line_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    bench = _fake_tree(tmp_path)
    (bench / "base.py").write_text((bench / "base.py").read_text() + "\ndef broken(:\n")
    line = (bench / "base.py").read_text().count("\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = _call([*command, "--suite", str(bench)])
    assert code == 2, err
    assert f"{bench / 'base.py'} line {line}: does not parse (" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_benchmark_files_that_cannot_be_read_are_named_and_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _fake_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, before, err = _call(["list", "suite", "--suite", str(bench)])
    assert code == 0, err
    (bench / "test_syntax_bad.py").write_text("import pytest\n\n\n@pytest.mark.abs\ndef test_abs(:\n    pass\n")
    (bench / "test_latin1.py").write_bytes(b"import pytest\n# caf\xe9\n")
    code, listed, err = _call(["list", "suite", "--suite", str(bench)])
    assert code == 0, err
    header = listed.splitlines()[0]
    assert header.startswith(before.splitlines()[0]) and header.endswith(", 2 file(s) not read")
    assert "not read: test_latin1.py line 2: not UTF-8 text (byte 20)" in listed
    assert "not read: test_syntax_bad.py line 5: does not parse (" in listed
    code, csv_text, err = _call(["list", "suite", "--suite", str(bench), "--csv"])
    assert code == 0 and csv_text.count("not read: ") == 2, err
    code, _, err = _call(["run", "--backend", "cpu", "--suite", str(bench), "--ops", "no_such_op"])
    assert code == 2, err
    assert "2 file(s) of the tree could not be read (test_latin1.py line 2: not UTF-8 text" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("selection", [[], ["--all"]])
def test_a_run_of_the_whole_tree_warns_of_each_file_it_cannot_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, selection: list[str]) -> None:
    """No --ops: the tree is the selection, so each file left out is one warning line on stderr
    (before the refusal of no selection, or of the stand-in flag_gems not being installed)."""
    bench = _fake_tree(tmp_path)
    (bench / "test_syntax_bad.py").write_text("import pytest\n\n\n@pytest.mark.abs\ndef test_abs(:\n    pass\n")
    (bench / "test_latin1.py").write_bytes(b"import pytest\n# caf\xe9\n")
    (bench / "test_odd\x1bname.py").write_bytes(b"\xff\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = _call(["run", "--backend", "cpu", "--suite", str(bench), *selection])
    assert code in (2, 3) and "Traceback" not in err, err
    lines = err.strip().splitlines()
    warned = [line for line in lines if line.startswith("harness: warning: ")]
    left_out = "; pytest cannot collect it, so its benchmarks are left out"
    assert warned[:2] == [
        f"harness: warning: --suite {bench}: test_latin1.py line 2: not UTF-8 text (byte 20){left_out}",
        f"harness: warning: --suite {bench}: test_odd\\x1bname.py line 1: not UTF-8 text (byte 1){left_out}",
    ]
    assert warned[2].startswith(f"harness: warning: --suite {bench}: test_syntax_bad.py line 5: does not parse (")
    assert warned[2].endswith(left_out) and len(warned) == 3
    assert lines[:3] == warned and len(lines) == 4 and lines[3].startswith("harness: error: ")


# -- harness report on records that are not records --------------------------------------------


def test_report_on_garbage_records_names_the_lines_and_says_what_became_of_each_case(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.options import RunOptions
    from harness.results.runinfo import RUN_SCHEMA_VERSION
    from harness.results.store import write_json

    run = tmp_path / "run"
    run.mkdir()
    write_json(run / "run.json", {
        "schema_version": RUN_SCHEMA_VERSION, "run_id": "r1", "status": "complete", "backend": "cpu",
        "level": "smoke", "timer": "cpu", "devices": ["cpu"], "identity": {"device_name": "x"},
        "options": RunOptions().to_dict(), "started_at": "2026-12-01T00:00:00+00:00", "dismissed": {},
        "plan": [{"op": "add", "device": "cpu", "dtypes": ["float32"], "shapes": [[4, 4], [8, 8]],
                  "provider": "builtin"}],
        "ops": [{"op": "add", "device": "cpu", "status": "PASS", "attempts": 1, "elapsed_s": 1.0, "rows": 2,
                 "notes": ""}]})
    (run / "records.jsonl").write_text('garbage line\n{"not": "a record"}\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = _call(["report", "run"])
    assert code == 0, err
    assert "line 1: not JSON" in err and "line 2: not a harness record" in err
    assert "op PASS: PASS" not in out and "not run: op PASS" not in out
    rows = [line for line in out.splitlines() if line.startswith("| add |")]
    assert len(rows) == 2 and all("no record: the op passed" in row for row in rows)
    assert "- line 1: not JSON" in out
