"""The nightly's publish job, its shell steps run as written in nightly.yml, on real cpu shards.

The steps are read from .github/workflows/nightly.yml and run with bash as GitHub runs them
(`bash --noprofile --norc -eo pipefail`), in a workspace laid out as the job lays it out: src/
(this checkout), data/ (a clone of the bench-data branch, here of a local bare repository),
shards/ (two real `harness run --shard K/2` runs, as the artifacts download them). The install
step makes a fresh venv from requirements/host.lock exactly as the job does, so a command that
imports what the lock lacks (torch, pytest: the nightly's History step of commit 4462473 failed
every night that way) fails here. Two nights run back to back: the second loads the first from
the data branch, and its push meets a concurrent one and is replayed onto it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness_cli import run_harness

ROOT = Path(__file__).resolve().parents[1]
NIGHTLY = ROOT / ".github" / "workflows" / "nightly.yml"

# Needs an index to install requirements/host.lock from (PyPI, or the machine's pip mirror):
# run with the integration tests (`nox -s tests -- -m integration`, which .ci/run does).
pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _steps(job: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job's steps by name, and its env."""
    doc = yaml.safe_load(NIGHTLY.read_text())
    return {step.get("name", ""): step for step in doc["jobs"][job]["steps"]}, doc["jobs"][job].get("env", {})


def _script(job: str, prefix: str) -> str:
    steps, _ = _steps(job)
    matches = [s["run"] for name, s in steps.items() if name.startswith(prefix) and "run" in s]
    assert len(matches) == 1, f"{job}: no single step named {prefix!r}: {sorted(steps)}"
    return str(matches[0])


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = cwd / ".step.sh"
    path.write_text(script)
    try:
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=900)
    finally:
        path.unlink()


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def _copy_checkout(target: Path) -> None:
    """The files a checkout of this commit has (tracked, plus new files not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _env(work: Path, run_id: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "VIRTUAL_ENV", "PYTHON"))}
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python").exists():  # setup-python's `python`: 3.11 or newer
        (bin_dir / "python").symlink_to(sys.executable)
    _, job_env = _steps("publish")
    env.update({str(k): str(v) for k, v in job_env.items()})
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", RUNNER_TEMP=str(work / "runner-temp"),
               GITHUB_WORKSPACE=str(work), GITHUB_RUN_ID=run_id, GH_TOKEN="not-a-token", REPO="owner/repo",
               SERVER=f"file://{work / 'remote'}")
    (work / "runner-temp").mkdir(exist_ok=True)
    return env


def _night(work: Path, run_id: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """One publish job after the install step: fresh data/ clone, merge/check/record, commit."""
    env = _env(work, run_id)
    shutil.rmtree(work / "data", ignore_errors=True)
    shutil.rmtree(work / "merged", ignore_errors=True)
    _git("clone", "--quiet", "--branch", "bench-data", str(work / "remote/owner/repo.git"), "data", cwd=work)
    record = _bash(_script("publish", "Merge, check, record"), work, env)
    return record, env


def test_the_publish_steps_run_as_written_on_real_shards(tmp_path: Path) -> None:
    work = tmp_path / "ws"
    (work / "src").mkdir(parents=True)
    _copy_checkout(work / "src")

    # The two cpu shards, as the artifacts land: shards/nightly-cpu-shard-K/run.json ...
    for k in (1, 2):
        done = run_harness("run", "--backend", "cpu", "--ops", "add", "softmax", "--dtypes", "fp32",
                           "--shard", f"{k}/2", "--out", str(work / "shards" / f"nightly-cpu-shard-{k}"),
                           "--progress", "plain", cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    # The bench-data branch: a bare repository standing in for GitHub, bootstrapped as docs say.
    remote = work / "remote/owner/repo.git"
    remote.mkdir(parents=True)
    _git("init", "--quiet", "--bare", cwd=remote)
    seed = tmp_path / "seed"
    seed.mkdir()
    _git("init", "--quiet", cwd=seed)
    _git("switch", "--quiet", "--orphan", "bench-data", cwd=seed)
    _git("commit", "--quiet", "--allow-empty", "-m", "bench-data: nightly history", cwd=seed)
    _git("push", "--quiet", str(remote), "bench-data", cwd=seed)

    # The install step, verbatim: a fresh venv from the hash lock, the harness from src/.
    env = _env(work, "1001")
    install = _bash(_script("publish", "Harness for merge and history"), work, env)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    venv_python = work / "runner-temp/h/bin/python"
    lacks = subprocess.run([str(venv_python), "-c", "import importlib.util as u; "
                            "print([m for m in ('torch', 'triton', 'pytest') if u.find_spec(m)])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert lacks == "[]", f"the host venv must not hold {lacks}"

    # Night 1: nothing in bench-data yet.
    record, env = _night(work, "1001")
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-3000:]
    merged = work / "merged/cpu"
    info = json.loads((merged / "run.json").read_text())
    assert info["run_id"].startswith("nightly-") and info["run_id"].endswith("-cpu-1001")
    assert sorted(m["shard"] for m in info["merged_from"]) == ["1/2", "2/2"]
    assert (merged / "history/history-check.md").is_file() and (merged / "history/trend.csv").is_file()
    night1 = list((work / "data/runs/cpu").iterdir())
    assert [p.name.endswith("-1001") for p in night1] == [True]
    assert sorted(p.name for p in night1[0].iterdir()) == ["records.jsonl", "run.json"]
    commit = _bash(_script("publish", "Commit to bench-data"), work, env)
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert "runs/cpu/" in _git("ls-tree", "-r", "--name-only", "bench-data", cwd=remote)

    # Night 2 loads night 1 from bench-data. A backend with a missing shard fails (that backend
    # only: cpu is still merged, checked and recorded). Meanwhile another writer pushed: the
    # push is replayed onto it.
    shutil.copytree(work / "shards/nightly-cpu-shard-2", work / "shards/nightly-rocm-shard-2")
    record, env = _night(work, "1002")
    assert record.returncode == 1, record.stdout[-3000:] + record.stderr[-3000:]
    assert "::error::rocm: the shards do not make one run" in record.stdout
    assert "Part(s) 1/2 missing" in record.stderr
    trend = (work / "merged/cpu/history/trend.csv").read_text()
    assert "-cpu-1001" in trend and "-cpu-1002" in trend  # the earlier night came back from the branch
    dashboard = work / "site"  # the history dashboard the publish job uploads (and deploys to Pages)
    assert (dashboard / "index.html").is_file() and (dashboard / "ops" / "add.html").is_file()
    assert "/commit/" in (dashboard / "ops" / "add.html").read_text()  # each point links its commit
    other = tmp_path / "other"
    _git("clone", "--quiet", "--branch", "bench-data", str(remote), str(other), cwd=tmp_path)
    (other / "runs/rocm/x").mkdir(parents=True)
    (other / "runs/rocm/x/run.json").write_text("{}\n")
    _git("add", "runs", cwd=other)
    _git("commit", "--quiet", "-m", "a concurrent night", cwd=other)
    _git("push", "--quiet", "origin", "bench-data", cwd=other)
    commit = _bash(_script("publish", "Commit to bench-data"), work, env)
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert "push rejected (attempt 1)" in commit.stdout
    files = _git("ls-tree", "-r", "--name-only", "bench-data", cwd=remote).split()
    assert "runs/rocm/x/run.json" in files
    assert sum(f.startswith("runs/cpu/") and f.endswith("/run.json") for f in files) == 2
