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
