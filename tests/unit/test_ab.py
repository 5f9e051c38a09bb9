"""`harness ab`: the plan (order, replay, environments, commands) and a run with stand-in harnesses."""

from __future__ import annotations

import argparse
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.compare.ab import (
    AbSide,
    ab_order,
    check_run_args,
    parse_env_assignment,
    plan_steps,
    side_env,
    step_command,
)
from harness.compare.cli import add_parsers, dispatch
from harness.errors import GateFailed, UsageError
from tests.unit.test_compare import _as_cuda_runs, _fake_tree


def test_sides_alternate_and_a_goes_first_in_either_order() -> None:
    assert ab_order(2) == [("a", 1), ("b", 1), ("b", 2), ("a", 2)]
    assert ab_order(3, "abab") == [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)]
    with pytest.raises(UsageError):
        ab_order(0, "abab")
    with pytest.raises(UsageError, match="Unknown --order"):
        ab_order(2, "aabb")


def test_a_first_run_records_and_every_other_run_replays_it(tmp_path: Path) -> None:
    steps = plan_steps(2, "abba", tmp_path, replay=True)
    assert [s.label for s in steps] == ["a-1", "b-1", "b-2", "a-2"]
    assert steps[0].replay_from is None
    assert all(s.replay_from == tmp_path / "a-1" for s in steps[1:])
    command = step_command(steps[1], "/py", ["--ops", "add"])
    assert command == ["/py", "-m", "harness", "run", "--out", str(tmp_path / "b-1"), "--run-id", "ab-b-1",
                       "--ops", "add", "--replay-from", str(tmp_path / "a-1")]
    assert "--replay-from" not in step_command(steps[0], "/py", [])
    assert all(s.replay_from is None for s in plan_steps(2, "abba", tmp_path, replay=False))


def test_each_side_gets_only_its_own_switch() -> None:
    parent = {"KEEP": "1", "DROP": "x", "TRITON_X": "0", "PYTHONPATH": "/inherited"}
    b = AbSide("b", set_env=(("TRITON_X", "1"),), unset_env=("DROP",), pythonpath=("/lib-fix",))
    env = side_env(b, parent, "/shim")
    assert env["TRITON_X"] == "1" and "DROP" not in env and env["KEEP"] == "1"
    assert env["PYTHONPATH"] == os.pathsep.join(["/lib-fix", "/shim", "/inherited"])
    assert parent["TRITON_X"] == "0" and "DROP" in parent  # the caller's mapping is untouched
    a = side_env(AbSide("a"), {}, "/shim")
    assert a == {"PYTHONPATH": "/shim"}
    assert b.describe() == "TRITON_X=1, unset DROP, PYTHONPATH+=/lib-fix"
    assert AbSide("a").describe() == "the environment as inherited"


@pytest.mark.parametrize("arg", ["--out", "--out=x", "--run-id", "--replay-from", "--resume"])
def test_flags_ab_sets_itself_are_refused_after_the_double_dash(arg: str) -> None:
    with pytest.raises(UsageError, match="sets"):
        check_run_args(["--ops", "add", arg])
    check_run_args(["--ops", "add", "--outfile-is-not-out"])


def test_env_assignments_are_checked() -> None:
    assert parse_env_assignment("TRITON_X=1") == ("TRITON_X", "1")
    assert parse_env_assignment("EMPTY=") == ("EMPTY", "")
    assert parse_env_assignment("K=a=b") == ("K", "a=b")
    for bad in ("NOVALUE", "1X=2", "=3"):
        with pytest.raises(ValueError):
            parse_env_assignment(bad)


def _ab(argv: Sequence[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="harness")
    add_parsers(parser.add_subparsers(dest="command"))
    ns = parser.parse_args(["ab", *_as_cuda_runs(argv)])
    out = io.StringIO()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = dispatch(ns, env, out)
    assert code is not None
    return code, out.getvalue()


def test_ab_runs_both_sides_replaying_a_and_gates_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stand-in harness packages first on each side's PYTHONPATH: B's candidate is 25% slower.
    # (From the checkout's root, `python -m harness` would find the real one in the working directory.)
    monkeypatch.chdir(tmp_path)
    fast, slow = _fake_tree(tmp_path / "fast", 1.0), _fake_tree(tmp_path / "slow", 1.25)
    args = ["--a-pythonpath", str(fast), "--b-pythonpath", str(slow), "--b-env", "SWITCH=on"]
    code, printed = _ab([*args, "--out", str(tmp_path / "ab"), "--", "--ops", "softmax"])
    assert code == 0 and "FAIL (3 regression(s))" in printed  # reported, not gated
    out = tmp_path / "ab"
    runs = {p.name: json.loads((p / "run.json").read_text()) for p in (out / "repeats").iterdir()}
    assert "--replay-from" not in runs["a-1"]["args"]
    for name in ("b-1", "b-2", "a-2"):
        assert runs[name]["args"][-2:] == ["--replay-from", str(out / "repeats" / "a-1")]
        assert runs[name]["args"][5:7] == ["--ops", "softmax"]
    summary = json.loads((out / "ab.json").read_text())
    assert [r["run"] for r in summary["runs"]] == ["a-1", "b-1", "b-2", "a-2"]
    assert summary["sides"]["b"]["set_env"] == {"SWITCH": "on"}
    compare_md = (out / "compare.md").read_text()
    assert "head is side B (SWITCH=on, PYTHONPATH+=" in compare_md
    assert json.loads((out / "b" / "run.json").read_text())["merged_from"] == ["ab-b-1", "ab-b-2"]
    with pytest.raises(GateFailed, match="3 regression"):
        _ab([*args, "--out", str(tmp_path / "gated"), "--repeats", "1", "--fail-on-regression"])


def test_ab_refuses_bad_input_before_running(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--b-python"):
        _ab(["--b-python", str(tmp_path / "no-python"), "--out", str(tmp_path / "x")])
    with pytest.raises(UsageError, match="sets --out"):
        _ab(["--out", str(tmp_path / "y"), "--", "--out", "elsewhere"])
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
