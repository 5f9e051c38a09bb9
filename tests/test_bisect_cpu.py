"""`harness bisect` end to end on the CPU backend: a throwaway library repository whose ``work``
starts to sleep at one commit, bisected through real `harness ab` runs with each commit's source
exported from git; then resumed (nothing runs again) and bisected into a second output folder
from the cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.bisect.git import Repo
from harness.bisect.runner import AbStepRunner
from harness.bisect.session import Commit
from harness.results.store import read_records
from tests.bisect_repo import OPS_MODULE, SHAPES, make_repo
from tests.harness_cli import run_harness

RUN_ARGS = ["--backend", "cpu", "--ops-module", str(OPS_MODULE), "--ops", "libwork", "--dtypes", "fp32",
            "--shapes-file", str(SHAPES), "--rep-ms", "20", "--warmup-ms", "5"]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")]


def test_bisect_names_the_commit_that_made_the_op_slow_then_resumes_and_reuses_its_cache(tmp_path: Path) -> None:
    repo = tmp_path / "slowlib"
    shas = make_repo(repo)

    def bisect(out: str) -> tuple[int, str, dict[str, Any]]:
        done = run_harness("bisect", "--repo", str(repo), "--good", "good", "--bad", "bad", "--allow-cpu",
                           "--repeats", "1", "--out", out, "--cache", "cache", "--", *RUN_ARGS, cwd=tmp_path,
                           timeout=900)
        data = json.loads((tmp_path / out / "bisect.json").read_text()) if done.returncode in (0, 1) else {}
        return done.returncode, done.stdout + done.stderr, data

    code, output, data = bisect("out")
    assert code == 0, output
    culprit = data["culprit"]
    assert (culprit["sha"], culprit["subject"]) == (shas["sleeps"], "slowlib sleeps")
    assert culprit["link"] == f"https://github.com/example/slowlib/commit/{shas['sleeps']}"
    marks = {t["sha"]: t["mark"] for t in data["tested"] if not t.get("check")}
    assert marks == {shas["sleeps"]: "bad", shas["tidy"]: "good"}
    assert data["commits_in_range"] == 3  # the docs-only commit is not in the range
    check = data["tested"][0]
    assert check["check"] and (check["sha"], check["subject"], check["mark"]) == (shas["comment"], "comment", "bad")
    last = output.strip().splitlines()[-1]
    assert last.startswith(f"bisect: culprit {shas['sleeps'][:12]} slowlib sleeps (")
    md = (tmp_path / "out" / "bisect.md").read_text()
    assert f"[{shas['sleeps'][:12]}](https://github.com/example/slowlib/commit/{shas['sleeps']})" in md
    assert (tmp_path / "out" / "bisect-state.json").is_file()
    # Each tested commit's source was exported from git, and its runs ran with it first on the path.
    exports = list((tmp_path / "cache" / "src").glob("*/src/slowlib/__init__.py"))
    assert any("time.sleep" in p.read_text() for p in exports) and any("tidy" in p.read_text() for p in exports)

    # A noisy step's tries are judged on their runs pooled: the check's 2 runs a side and the
    # culprit's 1, pooled by the step runner, make one row of 3 runs a side.
    check_where = Path(check["tries"][0]["where"])
    culprit_step = next(t for t in data["tested"] if t["sha"] == shas["sleeps"])
    culprit_where = Path(culprit_step["tries"][0]["where"])
    runner = AbStepRunner(Repo(repo), Commit(shas["good"], "good", ""), "src", RUN_ARGS, tmp_path / "cache", {},
                          allow_cpu=True)
    rows = runner._judge([check_where, culprit_where], 0.5)
    assert [r.case_id for r in rows] == ["libwork[builtin-float32-64]"] and rows[0].ratio and rows[0].ratio > 10
    pooled = read_records(culprit_where / "pooled" / "b" / "records.jsonl")
    assert len(pooled) == 1 and pooled[0].candidate is not None and len(pooled[0].candidate.runs()) == 3

    # The same command again resumes the finished bisection: nothing runs.
    code, output, again = bisect("out")
    assert code == 0 and "resuming" in output and "harness run ab-" not in output, output
    assert again["culprit"] == data["culprit"]

    # Another bisection over the same range takes every step from the cache.
    code, output, other = bisect("other")
    assert code == 0 and "harness run ab-" not in output, output
    assert other["culprit"] == data["culprit"]
    assert other["runs"] == 0 and other["cached_runs"] == data["runs"]
