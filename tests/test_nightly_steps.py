"""The nightly's publish job, its shell steps run as written in nightly.yml, on real cpu shards.

The steps are read from .github/workflows/nightly.yml and run with bash as GitHub runs them
(`bash --noprofile --norc -eo pipefail`), in a workspace laid out as the job lays it out: src/
(this checkout), data/ (a clone of the bench-data branch, here of a local bare repository),
shards/ (real `harness run --shard K/N` runs, uploaded and downloaded as the workflow's
upload-artifact and download-artifact steps say, modelled below). The install step makes a
fresh venv from requirements/host.lock exactly as the job does, so a command that imports what
the lock lacks (torch, pytest: the nightly's History step of commit 4462473 failed every night
that way) fails here. Nights run back to back, each loading the earlier ones from the data
branch: several artifacts, one artifact, a missing backend, a missing shard, an attempt run
again, and a push that meets a concurrent one and is replayed onto it.

The night step (the date a run records) runs .github/scripts/night.sh, which asks GitHub's API
for the run's creation time; here a `curl` on PATH answers for the API and a `date` on PATH
stands for the runner's clock. Those tests, and the one that holds SHARDS_EXPECTED to the bench
matrices, need no index and run with the unit tests. tests/test_corpus_workflow.py runs the same
script as corpus-nightly.yml's prepare job calls it, with the same stand-ins (night_tools).
"""

from __future__ import annotations

import fnmatch
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

NIGHT_SCRIPT = Path(".github") / "scripts" / "night.sh"  # the one night rule, both nightlies call it

# Stands in for GitHub's API: answers GET .../actions/runs/$GITHUB_RUN_ID with FAKE_CREATED as the
# run's creation time (and this attempt's run_started_at, FAKE_STARTED, which must not be used),
# refusing a request without the token on stdin or with the token on the command line.
FAKE_CURL = """#!/bin/sh
headers=$(cat)
case "$headers" in *"Authorization: Bearer $GH_TOKEN"*) ;; *) echo "curl: no token on stdin" >&2; exit 22;; esac
case "$*" in *"$GH_TOKEN"*) echo "curl: the token is on the command line" >&2; exit 22;; esac
for arg in "$@"; do url=$arg; done
if [ "$url" != "$GITHUB_API_URL/repos/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID" ]; then
  echo "curl: unexpected URL $url" >&2; exit 22
fi
printf '{"id": %s, "created_at": "%s", "run_started_at": "%s"}\n' "$GITHUB_RUN_ID" "$FAKE_CREATED" \
  "${FAKE_STARTED:-2031-01-01T00:10:00Z}"
"""

# The runner's clock: with FAKE_NOW set, `date` without -d tells FAKE_NOW's time (an attempt run
# after midnight UTC); `date -d ...` and every call without FAKE_NOW are the real date's.
FAKE_DATE = """#!/bin/sh
case " $* " in *" -d "*) exec {date} "$@";; esac
if [ -z "$FAKE_NOW" ]; then exec {date} "$@"; fi
exec {date} -d "$FAKE_NOW" "$@"
"""


def night_tools(work: Path) -> Path:
    """What a job's night step finds: night.sh where the checkout puts it (work/src/), and the
    API's curl and the runner's clock on PATH (the directory returned)."""
    script = work / "src" / NIGHT_SCRIPT
    script.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / NIGHT_SCRIPT, script)
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    real_date = shutil.which("date")
    assert real_date is not None
    for name, text in (("curl", FAKE_CURL), ("date", FAKE_DATE.replace("{date}", real_date))):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _workflow() -> dict[str, Any]:
    return dict(yaml.safe_load(NIGHTLY.read_text()))


def _steps(job: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job's steps by name, and its env."""
    doc = _workflow()
    return {step.get("name", ""): step for step in doc["jobs"][job]["steps"]}, doc["jobs"][job].get("env", {})


def _step(job: str, prefix: str) -> dict[str, Any]:
    steps, _ = _steps(job)
    matches = [s for name, s in steps.items() if name.startswith(prefix)]
    assert len(matches) == 1, f"{job}: no single step named {prefix!r}: {sorted(steps)}"
    return matches[0]


def _script(job: str, prefix: str) -> str:
    return str(_step(job, prefix)["run"])


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


def _bin(work: Path) -> Path:
    """The runner's PATH additions: setup-python's `python` (3.11 or newer), the API's curl and
    the runner's clock (night_tools)."""
    bin_dir = night_tools(work)
    if not (bin_dir / "python").exists():
        (bin_dir / "python").symlink_to(sys.executable)
    return bin_dir


def _env(work: Path, run_id: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "VIRTUAL_ENV", "PYTHON"))}
    _, job_env = _steps("publish")
    env.update({str(k): str(v) for k, v in job_env.items()})
    env.update(PATH=f"{_bin(work)}:{env.get('PATH', '/usr/bin:/bin')}", RUNNER_TEMP=str(work / "runner-temp"),
               GITHUB_WORKSPACE=str(work), GITHUB_RUN_ID=run_id, GH_TOKEN="not-a-token", REPO="owner/repo",
               SERVER=f"file://{work / 'remote'}", GITHUB_API_URL="https://api.invalid",
               GITHUB_REPOSITORY="owner/repo", GITHUB_OUTPUT=str(work / "runner-temp" / "output"))
    (work / "runner-temp").mkdir(exist_ok=True)
    return env


def night_step(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A job's night step, as both nightlies write it: after the checkout into src/, night.sh run
    with the token and the schedule in its environment (the token never on a command line)."""
    (index,) = [i for i, s in enumerate(steps) if str(s.get("name", "")).startswith("The night this run records")]
    step = steps[index]
    checkout = [i for i, s in enumerate(steps[:index]) if str(s.get("uses", "")).startswith("actions/checkout@")
                and s.get("with", {}).get("path") == "src" and "ref" not in s.get("with", {})]
    assert checkout, "the night step runs before the checkout that brings night.sh"
    assert step["id"] == "night" and str(step["run"]).split("#")[0].split() == ["bash", f"src/{NIGHT_SCRIPT}"]
    assert step["env"] == {"GH_TOKEN": "${{ github.token }}", "SCHEDULE": "${{ github.event.schedule }}"}
    return step


# The clock of an attempt run again days later, after midnight UTC: the night must not move with it.
RERUN_NOW = "2026-12-03T00:20:00Z"


def _night_date(work: Path, run_id: str, created: str, schedule: str) -> subprocess.CompletedProcess[str]:
    """The publish job's night step, in an attempt run at RERUN_NOW; its output `date` is in the
    result's stdout as `date=...`."""
    env = _env(work, run_id)
    env.update(FAKE_CREATED=created, SCHEDULE=schedule, FAKE_NOW=RERUN_NOW, FAKE_STARTED=RERUN_NOW)
    output = Path(env["GITHUB_OUTPUT"])
    output.write_text("")
    done = _bash(_script("publish", "The night this run records"), work, env)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout + output.read_text(), done.stderr)


@pytest.mark.parametrize(("created", "schedule", "night"), [
    ("2026-11-30T02:31:07Z", "17 2 * * *", "2026-11-30"),  # the slot's day, not the re-run's (RERUN_NOW)
    ("2026-11-30T02:17:00Z", "17 2 * * *", "2026-11-30"),  # created on the slot
    ("2026-12-01T00:40:00Z", "50 23 * * *", "2026-11-30"),  # a slot late in the day, started after midnight
    ("2026-11-30T23:59:59Z", "", "2026-11-30"),  # workflow_dispatch: the day it was asked for
])
def test_the_night_is_the_schedules_date_from_the_runs_creation(tmp_path: Path, created: str, schedule: str,
                                                                 night: str) -> None:
    night_step(_workflow()["jobs"]["publish"]["steps"])
    assert _step("publish", "Merge, check, record")["env"]["NIGHT"] == "${{ steps.night.outputs.date }}"
    done = _night_date(tmp_path, "1001", created, schedule)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"date={night}"


def test_a_schedule_the_night_rule_does_not_cover_fails(tmp_path: Path) -> None:
    done = _night_date(tmp_path, "1001", "2026-11-30T02:31:07Z", "*/30 2 * * *")
    assert done.returncode == 1
    assert "::error::schedule '*/30 2 * * *'" in done.stdout and "date=" not in done.stdout


def test_the_night_step_fails_when_the_api_does_not_answer(tmp_path: Path) -> None:
    env = _env(tmp_path, "1001")
    (tmp_path / "bin" / "curl").write_text("#!/bin/sh\ncat >/dev/null; echo 'curl: (22) 502' >&2; exit 22\n")
    env.update(FAKE_CREATED="2026-11-30T02:31:07Z", SCHEDULE="17 2 * * *")
    Path(env["GITHUB_OUTPUT"]).write_text("")
    done = _bash(_script("publish", "The night this run records"), tmp_path, env)
    assert done.returncode != 0 and Path(env["GITHUB_OUTPUT"]).read_text() == ""


def test_shards_expected_are_the_bench_matrices() -> None:
    """publish's SHARDS_EXPECTED names each backend the bench jobs run, with their shard count."""
    jobs = _workflow()["jobs"]
    made: dict[str, set[tuple[int, int]]] = {}
    for shard in jobs["bench-cpu"]["strategy"]["matrix"]["shard"]:
        made.setdefault("cpu", set()).add((int(shard), int(jobs["bench-cpu"]["env"]["SHARDS"])))
    for entry in jobs["bench"]["strategy"]["matrix"]["include"]:
        made.setdefault(entry["backend"], set()).add((int(entry["shard"]), int(entry["shards"])))
    expected = dict(spec.split(":") for spec in str(jobs["publish"]["env"]["SHARDS_EXPECTED"]).split())
    assert sorted(expected) == sorted(made)
    for backend, parts in made.items():
        count = int(expected[backend])
        assert parts == {(k, count) for k in range(1, count + 1)}, backend


# -- upload-artifact and download-artifact, as their READMEs describe them ---------------------


def _upload(job: str, workspace: Path, matrix: dict[str, str], store: Path) -> str:
    """The job's "Upload shard" step: the files its `path:` lines match, less the `!` lines,
    stored relative to the include paths' least common ancestor (one directory: that directory).
    Returns the artifact's name."""
    step = _step(job, "Upload shard")["with"]
    name = str(step["name"])
    for key, value in matrix.items():
        name = name.replace("${{ matrix." + key + " }}", value)
    lines = [line.strip() for line in str(step["path"]).splitlines() if line.strip()]
    includes = [line for line in lines if not line.startswith("!")]
    excludes = [line[1:] for line in lines if line.startswith("!")]
    assert all("$" not in line and "*" not in line for line in includes), "model a wildcard upload here"
    root = workspace / os.path.commonpath(includes)
    for include in includes:
        for path in sorted((workspace / include).rglob("*")):
            rel = path.relative_to(workspace).as_posix()
            parts = rel.split("/")
            if any(fnmatch.fnmatch("/".join(parts[:n]), ex) for ex in excludes for n in range(1, len(parts) + 1)):
                continue
            if path.is_file():
                target = store / name / path.relative_to(root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    return name


def _download(store: Path, artifacts: list[str], work: Path) -> None:
    """publish's "Download the shards" step: the artifacts its pattern matches, each extracted
    into `path` itself when merge-multiple is set or exactly one matches, else into path/NAME."""
    step = _step("publish", "Download the shards")["with"]
    matched = [name for name in artifacts if fnmatch.fnmatchcase(name, str(step["pattern"]))]
    flat = step.get("merge-multiple") is True or len(matched) == 1
    dest = work / str(step["path"])
    shutil.rmtree(dest, ignore_errors=True)
    for name in matched:
        shutil.copytree(store / name, dest if flat else dest / name, dirs_exist_ok=True)


def _bench_shard(tmp_path: Path, store: Path, backend: str, shard: int, shards: int, ops: list[str]) -> str:
    """One bench job: its run written where its Benchmark step writes it, then its upload."""
    job, out = ("bench-cpu", "cpu-$SHARD") if backend == "cpu" else ("bench", "$BACKEND-$SHARD")
    script = _script(job, "Benchmark")
    assert "rm -rf reports/nightly\n" in script and f'--out "reports/nightly/{out}"' in script
    workspace = tmp_path / f"bench-{backend}-{shard}"
    done = run_harness("run", "--backend", "cpu", "--ops", *ops, "--dtypes", "fp32", "--shard", f"{shard}/{shards}",
                       "--out", str(workspace / "reports" / "nightly" / f"{backend}-{shard}"), "--progress", "plain",
                       cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    matrix = {"shard": str(shard), "backend": backend}
    return _upload(job, workspace, matrix, store)


def _night(work: Path, run_id: str, created: str, store: Path, artifacts: list[str],
           expected: str | None = None) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """One publish job after the install step: its night, the download, a fresh data/ clone,
    merge/check/record. `expected` replaces SHARDS_EXPECTED (the real one when None)."""
    night = _night_date(work, run_id, created, "17 2 * * *")
    assert night.returncode == 0, night.stdout + night.stderr
    env = _env(work, run_id)
    env["NIGHT"] = night.stdout.splitlines()[-1].removeprefix("date=")
    if expected is not None:
        env["SHARDS_EXPECTED"] = expected
    _download(store, artifacts, work)
    shutil.rmtree(work / "data", ignore_errors=True)
    shutil.rmtree(work / "merged", ignore_errors=True)
    _git("clone", "--quiet", "--branch", "bench-data", str(work / "remote/owner/repo.git"), "data", cwd=work)
    record = _bash(_script("publish", "Merge, check, record"), work, env)
    return record, env


@pytest.mark.slow
@pytest.mark.integration  # installs requirements/host.lock from an index: `.ci/run`'s integration pass
def test_the_publish_steps_run_as_written_on_real_shards(tmp_path: Path) -> None:
    work = tmp_path / "ws"
    (work / "src").mkdir(parents=True)
    _copy_checkout(work / "src")

    # The bench jobs: two cpu shards, and a backend of one shard (a cpu run standing in for rocm).
    store = tmp_path / "artifacts"
    cpu = [_bench_shard(tmp_path, store, "cpu", k, 2, ["add", "softmax"]) for k in (1, 2)]
    rocm = _bench_shard(tmp_path, store, "rocm", 1, 1, ["add"])
    assert cpu + [rocm] == ["nightly-cpu-shard-1", "nightly-cpu-shard-2", "nightly-rocm-shard-1"]
    assert sorted(p.name for p in (store / rocm).iterdir()) == ["rocm-1"]  # the artifact keeps its folder
    assert not (store / rocm / "rocm-1" / "logs").exists()

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

    def recorded(backend: str) -> list[str]:
        return sorted(p.name for p in (work / "data/runs" / backend).iterdir())

    # Night 1, several artifacts: nothing in bench-data yet; both backends merged and recorded.
    record, env = _night(work, "1001", "2026-11-28T02:31:07Z", store, cpu + [rocm], expected="cpu:2 rocm:1")
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-3000:]
    assert "night 2026-11-28: passed: cpu rocm; failed: none" in record.stdout
    merged = work / "merged/cpu"
    info = json.loads((merged / "run.json").read_text())
    assert info["run_id"] == "nightly-2026-11-28-cpu-1001"
    assert sorted(m["shard"] for m in info["merged_from"]) == ["1/2", "2/2"]
    assert (merged / "history/history-check.md").is_file() and (merged / "history/trend.csv").is_file()
    assert recorded("cpu") == recorded("rocm") == ["2026-11-28-1001"]
    assert sorted(p.name for p in (work / "data/runs/cpu/2026-11-28-1001").iterdir()) == ["records.jsonl", "run.json"]
    commit = _bash(_script("publish", "Commit to bench-data"), work, env)
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert "runs/cpu/2026-11-28-1001/run.json" in _git("ls-tree", "-r", "--name-only", "bench-data", cwd=remote)

    # Night 1 run again, days later (run_started_at, the wall clock: both later): the same night,
    # the same directory, one run in the history.
    record, env = _night(work, "1001", "2026-11-28T02:31:07Z", store, cpu + [rocm], expected="cpu:2 rocm:1")
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-3000:]
    assert recorded("cpu") == ["2026-11-28-1001"]
    trend = (work / "merged/cpu/history/trend.csv").read_text()
    assert trend.count("nightly-2026-11-28-cpu-1001") == len(trend.splitlines()) - 1
    assert _bash(_script("publish", "Commit to bench-data"), work, env).returncode == 0

    # Night 2, one artifact (extracted flat by download-artifact) and the workflow's own
    # SHARDS_EXPECTED: rocm is merged, checked against night 1 and recorded; every backend without
    # a shard fails, named.
    record, env = _night(work, "1002", "2026-11-29T02:40:00Z", store, [rocm])
    assert record.returncode == 1, record.stdout[-3000:] + record.stderr[-3000:]
    for backend, count in (("cpu", 2), ("cuda", 2), ("musa", 1), ("ascend", 1)):
        assert f"::error::{backend}: no shard arrived (expected {count})" in record.stdout
    assert "night 2026-11-29: passed: rocm; failed: cpu cuda musa ascend" in record.stdout
    assert recorded("rocm") == ["2026-11-28-1001", "2026-11-29-1002"] and recorded("cpu") == ["2026-11-28-1001"]
    trend = (work / "merged/rocm/history/trend.csv").read_text()
    assert "-rocm-1001" in trend and "-rocm-1002" in trend  # the earlier night came back from the branch
    dashboard = work / "site"  # the history dashboard the publish job uploads (and deploys to Pages)
    assert (dashboard / "index.html").is_file() and (dashboard / "ops" / "add.html").is_file()
    assert "/commit/" in (dashboard / "ops" / "add.html").read_text()  # each point links its commit
    assert _bash(_script("publish", "Commit to bench-data"), work, env).returncode == 0

    # Night 3: cpu's shard 1/2 missing, and a file where only shard folders belong (what a flat
    # extraction of an artifact without its folder leaves): both fail, named; rocm goes on.
    record, env = _night(work, "1003", "2026-11-30T02:20:00Z", store, [cpu[1], rocm], expected="cpu:2 rocm:1")
    assert record.returncode == 1, record.stdout[-3000:] + record.stderr[-3000:]
    assert "::error::cpu: shard(s) 1/2 missing: nothing merged or recorded for cpu" in record.stdout
    assert "passed: rocm; failed: cpu" in record.stdout and not (work / "merged/cpu").exists()
    assert recorded("cpu") == ["2026-11-28-1001"] and recorded("rocm")[-1] == "2026-11-30-1003"
    shutil.copy2(work / "shards/rocm-1/run.json", work / "shards/run.json")
    shutil.rmtree(work / "merged")
    record = _bash(_script("publish", "Merge, check, record"), work, env)
    assert record.returncode == 1
    assert "::error::shards/run.json is not the run directory of an expected shard" in record.stdout

    # Meanwhile another writer pushed: the push is replayed onto it.
    other = tmp_path / "other"
    _git("clone", "--quiet", "--branch", "bench-data", str(remote), str(other), cwd=tmp_path)
    (other / "runs/musa/x").mkdir(parents=True)
    (other / "runs/musa/x/run.json").write_text("{}\n")
    _git("add", "runs", cwd=other)
    _git("commit", "--quiet", "-m", "a concurrent night", cwd=other)
    _git("push", "--quiet", "origin", "bench-data", cwd=other)
    commit = _bash(_script("publish", "Commit to bench-data"), work, env)
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert "push rejected (attempt 1)" in commit.stdout
    files = _git("ls-tree", "-r", "--name-only", "bench-data", cwd=remote).split()
    assert "runs/musa/x/run.json" in files
    assert sorted(f.split("/")[2] for f in files if f.startswith("runs/rocm/") and f.endswith("/run.json")) == [
        "2026-11-28-1001", "2026-11-29-1002", "2026-11-30-1003"]
    assert sum(f.startswith("runs/cpu/") and f.endswith("/run.json") for f in files) == 1
