"""The real pipeline on the CPU backend: real torch, real Triton (interpreter), real processes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness_cli import run_harness

ROOT = Path(__file__).resolve().parents[1]
XSD = ROOT / "tests" / "data" / "junit-10.xsd"
USER_OPS = ROOT / "tests" / "data" / "user_ops.py"
OUTPUTS = ("run.json", "records.jsonl", "summary.csv", "junit.xml", "report.md", "ops_status.csv")

pytestmark = pytest.mark.slow


def harness(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_harness(*args, cwd=cwd, env=env, timeout=600)


def test_softmax_end_to_end_writes_every_output(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = harness("run", "--backend", "cpu", "--ops", "softmax", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in OUTPUTS:
        assert (out / name).is_file(), name
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete"
    assert info["backend"] == "cpu" and info["timer"] == "cpu" and info["level"] == "smoke"
    assert info["identity"]["torch"].startswith("2.") and info["identity"]["triton"] != "absent"
    assert len(info["fingerprint"]) == 16
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    # smoke: 2 shapes x 3 dtypes, every one checked and timed
    assert len(records) == 6
    assert {r["status"] for r in records} == {"pass"}
    assert all(r["candidate"]["summary"]["n"] >= 3 and r["candidate"]["samples_ms"] for r in records)
    assert all(r["correctness"]["passed"] for r in records)
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert len(rows) == 6 and all(float(r["speedup"]) > 0 for r in rows)
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(str(out / "junit.xml"))
    assert (out / "junit.xml").read_text().count("<testcase ") == 6
    assert "reports:" in done.stdout
    progress = json.loads((out / "progress" / "softmax.json").read_text())  # what the live display read
    assert progress["op"] == "softmax" and progress["total"] == 6 and progress["done"] == 5


def test_every_output_file_is_readable_by_others_under_the_usual_umask(tmp_path: Path) -> None:
    """0644 files and 0755 folders (umask 022): a host user reads what a container's root wrote."""
    out = tmp_path / "run"
    done = subprocess.run(["sh", "-c", 'umask 022 && exec "$@"', "sh", sys.executable, "-m", "harness", "run",
                           "--backend", "cpu", "--ops", "add", "--dtypes", "fp32", "--out", str(out)],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    modes = {str(p.relative_to(out)): p.stat().st_mode & 0o777 for p in out.rglob("*")}
    assert {"run.json", "records.jsonl", "report.md", "junit.xml", "ops_status.csv", "summary.csv",
            "autotune/meta.json"} <= set(modes)
    wrong = {name: oct(mode) for name, mode in modes.items()
             if mode != (0o755 if (out / name).is_dir() else 0o644)}
    assert not wrong, wrong


def test_user_ops_module_and_shapes_file(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("scale3: [[5, 7]]\n")
    out = tmp_path / "run"
    done = harness("run", "--backend", "cpu", "--ops-module", str(USER_OPS), "--ops", "scale3",
                   "--shapes-file", str(shapes), "--dtypes", "fp16", "bf16", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    by_dtype = {r["dtype"]: r for r in records}
    assert by_dtype["float16"]["status"] == "pass"
    # bf16 is not among the op's dtypes: noted on its row, not a failure of the run
    assert by_dtype["bfloat16"]["status"] == "skip"
    assert "does not support dtype bfloat16" in by_dtype["bfloat16"]["message"]


def test_wrong_kernel_fails_correctness_and_reports_no_speedup(tmp_path: Path) -> None:
    bad = tmp_path / "bad_ops.py"
    bad.write_text(USER_OPS.read_text().replace("(x * factor)", "(x * factor + 0.5)"))
    out = tmp_path / "run"
    done = harness("run", "--backend", "cpu", "--ops-module", str(bad), "--ops", "scale3",
                   "--dtypes", "fp32", "--out", str(out), cwd=tmp_path,
                   env={"HARNESS_SHAPES_FILE": ""})
    # scale3 has no smoke shapes: the harness says so
    assert done.returncode == 2 and "no shapes" in done.stderr
    shapes = tmp_path / "s.yaml"
    shapes.write_text("scale3: [[3, 3]]\n")
    done = harness("run", "--backend", "cpu", "--ops-module", str(bad), "--ops", "scale3",
                   "--dtypes", "fp32", "--shapes-file", str(shapes), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 1
    record = json.loads((out / "records.jsonl").read_text().splitlines()[0])
    assert record["status"] == "fail" and record["speedup"] is None and record["candidate"] is None
    assert "max abs err" in record["message"]
    junit = (out / "junit.xml").read_text()
    assert "<failure" in junit and "max abs err" in junit


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--backend", "tpu"], "Unknown backend 'tpu'"),
        (["--ops", "softmaxx"], "Unknown op(s): softmaxx"),
        (["--dtypes", "int3"], "Unknown dtype 'int3'"),
        (["--level", "galactic"], "Unknown level 'galactic'"),
        (["--timer", "direct", "--backend", "cpu"], "device events"),
    ],
)
def test_bad_input_exits_2_and_leaves_no_run(tmp_path: Path, args: list[str], needle: str) -> None:
    out = tmp_path / "run"
    done = harness("run", *args, "--out", str(out), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_bad_shapes_file_and_unwritable_out(tmp_path: Path) -> None:
    shapes = tmp_path / "s.yaml"
    shapes.write_text("softmax: [[4, 4]\n")
    done = harness("run", "--backend", "cpu", "--shapes-file", str(shapes), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 2 and "not valid YAML" in done.stderr
    shapes.write_text("sofmax: [[4, 4]]\n")
    done = harness("run", "--backend", "cpu", "--shapes-file", str(shapes), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 2 and "matches no op" in done.stderr
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = harness("run", "--backend", "cpu", "--ops", "add", "--out", str(blocker / "sub"), cwd=tmp_path)
    assert done.returncode == 2 and "is not a directory" in done.stderr
    if os.geteuid() != 0:  # root can write anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        done = harness("run", "--backend", "cpu", "--ops", "add", "--out", str(ro / "r"), cwd=tmp_path)
        assert done.returncode == 2 and "cannot write" in done.stderr


def test_list_plugins_and_doctor(tmp_path: Path) -> None:
    listed = harness("list", "ops", cwd=tmp_path)
    assert listed.returncode == 0
    for op in ("softmax", "layer_norm", "rms_norm", "gelu", "silu_and_mul", "add", "sum", "mm"):
        assert op in listed.stdout
    backends = harness("list", "backends", cwd=tmp_path)
    assert "MUSA_VISIBLE_DEVICES" in backends.stdout
    plugins = harness("plugins", "--backend", "musa", cwd=tmp_path)
    assert "harness.child.plugins.device" in plugins.stdout and "timer graph" in plugins.stdout
    suite = harness("plugins", "--backend", "musa", "--suite", "--plugins", "-wall", cwd=tmp_path)
    assert suite.returncode == 0 and "a suite op process" in suite.stdout
    assert "autotune: on, inside the suite plugin" in suite.stdout and "wall: off, inside the suite plugin" in suite.stdout
    assert "harness.child.plugins.skipguards" in suite.stdout  # FlagGems' pytest on MUSA gets the shim
    modules = [line.split()[0] for line in suite.stdout.splitlines() if line.startswith("  harness.")]
    assert "harness.child.plugins.device" not in modules  # the suite plugin pins the device itself
    assert "harness.child.plugins.device_inputs" in modules  # FlagGems' inputs drawn on the device
    doctor = harness("doctor", cwd=tmp_path, env={"CUDA_VISIBLE_DEVICES": "5"})
    assert doctor.returncode == 0 and "detected backend: cpu" in doctor.stdout


def test_resume_refuses_options_it_would_ignore(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert harness("run", "--backend", "cpu", "--ops", "add", "--dtypes", "fp32", "--out", str(out),
                   cwd=tmp_path).returncode == 0
    before = (out / "records.jsonl").read_bytes()
    refused = harness("run", "--resume", str(out), "--timer", "cpu", "--ops", "softmax", cwd=tmp_path)
    assert refused.returncode == 2
    assert "--ops" in refused.stderr and "--timer" in refused.stderr and "would be ignored" in refused.stderr
    again = harness("run", "--resume", str(out), "--progress", "plain", "--budget", "90", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (out / "records.jsonl").read_bytes() == before  # nothing left to do, nothing redone
    # --budget may change on resume: this session's budget, stored as the run's from now on
    assert json.loads((out / "run.json").read_text())["options"]["budget"] == 90.0


def test_report_renders_the_same_outputs_read_only(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert harness("run", "--backend", "cpu", "--ops", "add", "--dtypes", "fp32", "--out", str(out),
                   cwd=tmp_path).returncode == 0
    files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    md = harness("report", str(out), cwd=tmp_path)
    csv_text = harness("report", str(out), "--format", "csv", cwd=tmp_path)
    assert md.returncode == 0 and md.stdout == (out / "report.md").read_text()
    assert csv_text.stdout == (out / "summary.csv").read_text()
    html = harness("report", str(out), "--format", "html", cwd=tmp_path)
    assert html.returncode == 0 and html.stdout == (out / "report.html").read_text()
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == files


def test_every_run_has_a_report_html_and_runs_join_into_one_page_and_a_history_site(tmp_path: Path) -> None:
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        done = harness("run", "--backend", "cpu", "--ops", "add", "--dtypes", "fp32", "--out", str(run), cwd=tmp_path)
        assert done.returncode == 0 and "report.html" in done.stdout, done.stdout + done.stderr
        page = (run / "report.html").read_text()
        assert page.startswith("<!DOCTYPE html>") and "add[builtin-float32-" in page and "<script" in page
    across = harness("report", "--across", *map(str, runs), "--out", str(tmp_path / "across.html"), cwd=tmp_path)
    assert across.returncode == 0 and (tmp_path / "across.html").stat().st_size > 0
    assert harness("report", "--across", str(runs[0]), cwd=tmp_path).returncode == 2  # one run joins nothing
    db = tmp_path / "h.sqlite"
    for run in runs:
        assert harness("history", "add", str(run), "--db", str(db), cwd=tmp_path).returncode == 0
    site = harness("history", "site", "--db", str(db), "--out", str(tmp_path / "site"),
                   "--commit-url", "https://example.invalid/commit/{commit}", cwd=tmp_path)
    assert site.returncode == 0, site.stderr
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "ops" / "add.html").is_file()
    compared = harness("compare", *map(str, runs), "--allow-cpu", "--out", str(tmp_path / "cmp"), cwd=tmp_path)
    assert compared.returncode == 0 and (tmp_path / "cmp" / "compare.html").is_file()
