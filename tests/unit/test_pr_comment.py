"""pr-comment.yml's posting step, run as written against the layouts download-artifact makes.

download-artifact puts each matched artifact into a folder named after it when several match,
and straight into its path when one does (the gate uploaded only its meta file). The step is
read from the workflow and run with bash, `gh` replaced by a stand-in that answers the two
API reads and records what would be posted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
REPO = "owner/repo"
HEAD = "a" * 40
RUN_ID = "77"

FAKE_GH = f'''#!{sys.executable}
import json, os, sys
args = sys.argv[2:]  # after "api"
data = sys.stdin.read() if "--input" in args else None
with open(os.environ["FAKE_GH_LOG"], "a") as fh:
    fh.write(json.dumps({{"args": args, "data": data}}) + "\\n")
path = next(a for a in args if "/" in a)
if "/pulls/" in path:
    print(json.dumps({{"state": "open", "base": {{"repo": {{"full_name": "{REPO}"}}}}, "head": {{"sha": "{HEAD}"}}}}))
elif "/comments?" in path:
    print("[]")
else:
    print("{{}}")
'''


def _step() -> str:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "pr-comment.yml").read_text())
    (step,) = [s for s in workflow["jobs"]["comment"]["steps"] if s.get("name") == "Validate the PR and post"]
    return str(step["run"])


def _meta(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"pr": 12, "head_sha": HEAD, "base_sha": "b" * 40, "backend": "cuda", "run_id": RUN_ID,
            "run_attempt": "1", "schema": 1}
    (folder / "perf-gate-meta.json").write_text(json.dumps(meta))


def _post(tmp_path: Path, gate: Path) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    log = tmp_path / "gh.log"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GH_TOKEN": "x", "REPO": REPO,
           "GATE_RUN_ID": RUN_ID, "GATE_RUN_URL": "https://example.invalid/run", "GATE_DIR": str(gate),
           "FAKE_GH_LOG": str(log)}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _step()], env=env,
                          capture_output=True, text=True, timeout=60)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls


def _posted(calls: list[dict[str, Any]]) -> str:
    (body,) = [json.loads(c["data"])["body"] for c in calls if c["data"] is not None]
    return str(body)


@pytest.mark.parametrize("with_reports", [True, False])
def test_the_comment_is_posted_whether_one_artifact_or_several_matched(tmp_path: Path, with_reports: bool) -> None:
    gate = tmp_path / "gate"
    if with_reports:  # two artifacts: each in a folder named after it
        _meta(gate / "perf-gate-meta-cuda")
        (gate / "perf-gate-cuda").mkdir()
        (gate / "perf-gate-cuda" / "compare.md").write_text("## Performance comparison: PASS\n")
    else:  # the meta alone: straight into GATE_DIR
        _meta(gate)
    done, calls = _post(tmp_path, gate)
    assert done.returncode == 0, done.stderr
    body = _posted(calls)
    assert body.startswith("<!-- perf-gate-comment -->") and "#### cuda" in body
    if with_reports:
        assert "## Performance comparison: PASS" in body
    else:
        assert "no compare.md: the gate did not finish" in body


def test_nothing_is_posted_without_the_meta_file(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "compare.md").write_text("## Performance comparison: PASS\n")  # a reports artifact alone
    done, calls = _post(tmp_path, gate)
    assert done.returncode != 0 and "no meta artifact" in done.stderr
    assert calls == []
