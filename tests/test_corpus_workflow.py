"""The corpus nightly's shell steps, run as written in .github/workflows/corpus-nightly.yml, on
cpu, with a stand-in FlagGems repository (tests/data/fake_flaggems_suite.py committed to a local
git repository standing in for FlagGems' GitHub one).

The steps run with bash as GitHub runs them, in workspaces laid out as the jobs lay them out:
prepare (src/ with benchmarks/fetch_flaggems.sh, data/ the bench-data branch), bench (inputs/ as
the corpus-inputs artifact downloads, the checkout), publish (shards/ as the shards' artifacts
download, data/). The harness on PATH is this checkout's (the install steps make a venv from
requirements/host.lock; tests/test_nightly_steps.py runs that one). The runner's Python stands in
for a device's: torch and Triton of this venv, the stand-in flag_gems on PYTHONPATH. prepare's night
step runs .github/scripts/night.sh, nightly.yml's night rule, with tests/test_nightly_steps.py's
stand-ins on PATH: a `curl` answering for GitHub's API and a `date` for the runner's clock.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.data.fake_flaggems_suite import write_fake_suite
from tests.test_nightly_steps import night_step, night_tools

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "corpus-nightly.yml"
HARNESS = Path(sys.executable).parent / "harness"


def _jobs() -> dict[str, Any]:
    return dict(yaml.safe_load(WORKFLOW.read_text())["jobs"])


def _workflow_env() -> dict[str, str]:
    return {str(k): str(v) for k, v in yaml.safe_load(WORKFLOW.read_text())["env"].items()}


def _step(job: str, prefix: str) -> dict[str, Any]:
    matches = [s for s in _jobs()[job]["steps"] if str(s.get("name", "")).startswith(prefix)]
    assert len(matches) == 1, f"{job}: no single step named {prefix!r}"
    return dict(matches[0])


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


def _wrapper(path: Path, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
    path.chmod(0o755)


def _env(work: Path, job: str, site: Path | None = None, **extra: str) -> dict[str, str]:
    """The job's environment: the workflow's and the job's env (expressions replaced as GitHub
    would for a scheduled run), the runner's variables, and the harness the install steps make."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(_workflow_env())
    env.update({str(k): str(v) for k, v in (_jobs()[job].get("env") or {}).items()})
    temp = work / "runner-temp"
    for venv in ("h", "c"):  # the install steps' venvs: this checkout's harness
        _wrapper(temp / venv / "bin" / "harness", HARNESS)
        _wrapper(temp / venv / "bin" / "python", Path(sys.executable))
    env.update(FLAGGEMS_REF_INPUT="", BUDGET_S="3600", RUNNER_TEMP=str(temp), GITHUB_RUN_ID="1001",
               GITHUB_OUTPUT=str(temp / "output"), GH_TOKEN="not-a-token", GITHUB_API_URL="https://api.invalid",
               GITHUB_REPOSITORY="owner/repo", PATH=f"{night_tools(work)}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    if site is not None:
        env["PYTHONPATH"] = str(site)
    env.update(extra)
    (temp / "output").write_text("")
    return env


def _outputs(env: dict[str, str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in Path(env["GITHUB_OUTPUT"]).read_text().splitlines() if "=" in line)


def _night(work: Path, created: str, now: str, schedule: str | None = None) -> tuple[
        subprocess.CompletedProcess[str], dict[str, str]]:
    """prepare's night step in an attempt run at `now`, of a run GitHub created at `created` for
    the workflow's schedule (for `schedule`; "" is a manual run)."""
    cron = str(yaml.safe_load(WORKFLOW.read_text())[True]["schedule"][0]["cron"])
    step = _step("prepare", "The night this run records")
    env = _env(work, "prepare", FAKE_CREATED=created, FAKE_NOW=now, FAKE_STARTED=now,
               SCHEDULE=cron if schedule is None else schedule)
    return _bash(str(step["run"]), work, env), env


def _flaggems_repo(root: Path, version: str = "5.3.4") -> tuple[Path, Path]:
    """A git repository of the stand-in tree, tagged v<version>, with a later commit on main; and
    the stand-in flag_gems package of that version."""
    suite = write_fake_suite(root / "tree", version=version, ref=None)
    repo = root / "FlagGems"
    shutil.copytree(suite.benchmark, repo / "benchmark")
    _git("init", "--quiet", "--initial-branch", "main", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "--quiet", "-m", "benchmarks", cwd=repo)
    _git("tag", f"v{version}", cwd=repo)
    (repo / "README.md").write_text("later\n")
    _git("add", "-A", cwd=repo)
    _git("commit", "--quiet", "-m", "later", cwd=repo)
    return repo, suite.site


def _prepare(work: Path, repo: Path, ref: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """prepare's tree step in a workspace whose src/ holds fetch_flaggems.sh as the checkout does."""
    shutil.rmtree(work / "inputs", ignore_errors=True)
    (work / "src" / "benchmarks").mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "benchmarks" / "fetch_flaggems.sh", work / "src" / "benchmarks" / "fetch_flaggems.sh")
    env = _env(work, "prepare", FLAGGEMS_REPO=str(repo), FLAGGEMS_REF_INPUT=ref)
    env.update({str(k): str(v) for k, v in _step("prepare", "FlagGems tree and wheel")["env"].items()})
    env["WHEEL"] = "0"  # the stand-in tree is not a package: no wheel to build
    return _bash(str(_step("prepare", "FlagGems tree and wheel")["run"]), work, env), env


def test_shards_expected_are_the_bench_matrix_and_the_policy_holds() -> None:
    jobs = _jobs()
    made: dict[str, set[tuple[int, int]]] = {}
    for entry in jobs["bench"]["strategy"]["matrix"]["include"]:
        made.setdefault(entry["backend"], set()).add((int(entry["shard"]), int(entry["shards"])))
    expected = dict(spec.split(":") for spec in str(jobs["publish"]["env"]["SHARDS_EXPECTED"]).split())
    assert sorted(expected) == sorted(made)
    for backend, parts in made.items():
        assert parts == {(k, int(expected[backend])) for k in range(1, int(expected[backend]) + 1)}
    # The security model of the nightly: read-only self-hosted jobs, one writer on a hosted runner.
    assert jobs["bench"]["permissions"] == {"contents": "read"} and "self-hosted" in jobs["bench"]["runs-on"]
    assert jobs["bisect"]["permissions"] == {"contents": "read"} and "self-hosted" in jobs["bisect"]["runs-on"]
    assert "secrets." not in yaml.safe_dump(jobs["bisect"])  # the matrix comes from publish, checked twice
    # prepare reads the run's creation time (actions: read), for the night's date.
    assert jobs["prepare"]["permissions"] == {"contents": "read", "actions": "read"}
    assert jobs["prepare"]["runs-on"] == "ubuntu-latest"
    assert jobs["publish"]["runs-on"] == "ubuntu-latest" and jobs["publish"]["environment"] == "bench-data"
    from tests.unit.test_workflow_policy import check_workflow

    assert check_workflow(WORKFLOW.name, WORKFLOW.read_text()) == []


def test_the_ref_is_the_pinned_tag_or_mains_sha_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    repo, _ = _flaggems_repo(tmp_path / "fg")
    pinned = _workflow_env()["FLAGGEMS_PINNED"]
    if pinned != "v5.3.4":  # the stand-in repository is tagged v5.3.4; give the pinned tag too
        _git("tag", pinned, "v5.3.4", cwd=repo)
    work = tmp_path / "ws"
    work.mkdir()
    done, env = _prepare(work, repo, "")
    assert done.returncode == 0, done.stdout + done.stderr
    name = _outputs(env)["name"]
    assert name == pinned.replace("/", "_")
    tree = work / "inputs" / ".flaggems" / name
    assert (tree / "benchmark" / "test_add.py").is_file()
    assert (tree / "FLAGGEMS_REF").read_text().startswith(f"{pinned} (")

    done, env = _prepare(work, repo, "main")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _outputs(env)["name"] == _git("rev-parse", "main", cwd=repo).strip()

    for bad in ("v9.9.9", "no such ref", "-x"):
        done, env = _prepare(work, repo, bad)
        assert done.returncode == 2, (bad, done.stdout, done.stderr)
        errors = [line for line in done.stdout.splitlines() if line.startswith("::error::")]
        assert len(errors) == 1 and "FlagGems ref" in errors[0] and "name=" not in Path(env["GITHUB_OUTPUT"]).read_text()


def test_the_night_is_nightly_ymls_rule_and_a_re_run_after_midnight_keeps_it(tmp_path: Path) -> None:
    """The night publish stores under is prepare's, from the run's creation time (night.sh, as
    nightly.yml's publish takes it): an attempt run after midnight UTC records the same night."""
    jobs = _jobs()
    night_step(jobs["prepare"]["steps"])
    assert jobs["prepare"]["outputs"]["night"] == "${{ steps.night.outputs.date }}"
    assert _step("publish", "Merge, check, store")["env"]["NIGHT"] == "${{ needs.prepare.outputs.night }}"
    cron = str(yaml.safe_load(WORKFLOW.read_text())[True]["schedule"][0]["cron"])
    assert cron == "43 1 * * *", "the runs below are created at this schedule's slot"
    for created, now, schedule in (
        ("2026-12-04T01:43:09Z", "2026-12-04T01:43:30Z", None),  # the scheduled run's first attempt
        ("2026-12-04T01:43:09Z", "2026-12-05T00:20:00Z", None),  # that run again, after midnight UTC
        ("2026-12-04T01:43:09Z", "2026-12-07T09:00:00Z", None),  # ... and days later
        ("2026-12-04T23:59:00Z", "2026-12-05T00:20:00Z", ""),  # a manual run, again after midnight
    ):
        done, env = _night(tmp_path, created, now, schedule)
        assert done.returncode == 0, done.stdout + done.stderr
        assert _outputs(env) == {"date": "2026-12-04"}, (created, now)


def test_a_tree_of_a_layout_the_harness_does_not_know_is_refused_in_one_line(tmp_path: Path) -> None:
    repo = tmp_path / "FlagGems"
    (repo / "benchmark").mkdir(parents=True)
    (repo / "benchmark" / "README.md").write_text("not a benchmark tree\n")
    _git("init", "--quiet", "--initial-branch", "main", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "--quiet", "-m", "x", cwd=repo)
    _git("tag", "v5.3.4", cwd=repo)
    work = tmp_path / "ws"
    work.mkdir()
    done, env = _prepare(work, repo, "v5.3.4")
    assert done.returncode == 2
    assert done.stderr.count("harness: error:") == 1 and "--suite" in done.stderr
    assert "name=" not in Path(env["GITHUB_OUTPUT"]).read_text()


def _bench(tmp_path: Path, inputs: Path, site: Path, shard: int, shards: int, store: Path) -> Path:
    """One bench job: the Benchmark step as written, then its upload (the shard's folder)."""
    work = tmp_path / f"bench-{shard}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(inputs, work / "inputs")
    env = _env(work, "bench", site, BACKEND="cpu", SHARD=str(shard), SHARDS=str(shards), NAME="v5.3.4",
               CORPUS_CACHE_ROOT=str(tmp_path / "runner-cache"))
    done = _bash(str(_step("bench", "Benchmark")["run"]), work, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"cpu {shard}/{shards}: harness run exited " in done.stdout
    run = work / "reports" / "corpus" / f"cpu-{shard}"
    shutil.copytree(run, store / f"cpu-{shard}", ignore=shutil.ignore_patterns("logs"))
    return store / f"cpu-{shard}"


def _same_commit(store: Path) -> None:
    """Both shards as from one commit: a commit made in this working tree while the test ran
    moves the commit a later shard records, which `harness merge` rightly refuses."""
    first = json.loads((store / "cpu-1" / "run.json").read_text())["git_commit"]
    for path in store.glob("cpu-*/run.json"):
        data = json.loads(path.read_text())
        data["git_commit"] = first
        path.write_text(json.dumps(data))


def _publish(work: Path, store: Path, shards: list[str], night: str, run_id: str,
             expected: str = "cpu:2") -> subprocess.CompletedProcess[str]:
    shutil.rmtree(work / "shards", ignore_errors=True)
    shutil.rmtree(work / "merged", ignore_errors=True)
    shutil.rmtree(work / "site", ignore_errors=True)
    for name in shards:
        shutil.copytree(store / name, work / "shards" / name)
    env = _env(work, "publish", SHARDS_EXPECTED=expected, NIGHT=night, GITHUB_RUN_ID=run_id)
    return _bash(str(_step("publish", "Merge, check, store")["run"]), work, env)


def _slowed(records: Path, factor: float) -> None:
    """A shard's records with every candidate's samples ``factor`` times as long."""
    from dataclasses import replace

    from harness.results.schema import Timing
    from harness.results.store import append_record, read_records

    rows = read_records(records)
    records.unlink()
    for r in rows:
        c = r.candidate
        append_record(records, r if c is None else replace(r, candidate=Timing.of([x * factor for x in c.samples_ms])))


def _nights(work: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((work / "data" / "corpus" / "nights.csv").open()))


@pytest.mark.slow
def test_a_night_runs_shards_merges_stores_whole_and_the_next_replays_it(tmp_path: Path) -> None:
    repo, site = _flaggems_repo(tmp_path / "fg")
    prep = tmp_path / "prepare"
    (prep / "data").mkdir(parents=True)
    night, env = _night(prep, "2026-12-04T01:43:09Z", "2026-12-04T01:43:30Z")
    assert night.returncode == 0, night.stdout + night.stderr
    day = _outputs(env)["date"]
    done, env = _prepare(prep, repo, "v5.3.4")
    assert done.returncode == 0, done.stdout + done.stderr
    last_night = _bash(str(_step("prepare", "Last night")["run"]), prep,
                       {**env, "NAME": "v5.3.4"})
    assert last_night.returncode == 0 and not (prep / "inputs" / "last").exists()  # no night stored yet

    # Night 1: both shards (side by side, as two runners), no weights and no replay yet.
    store = tmp_path / "artifacts"
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda k: _bench(tmp_path, prep / "inputs", site, k, 2, store), (1, 2)))
    _same_commit(store)
    info = json.loads((store / "cpu-1" / "run.json").read_text())
    assert info["options"]["triton_cache"] == "user"
    assert info["caches"]["triton"].startswith(str(tmp_path / "runner-cache" / "flaggems-5.3.4-triton-"))
    pub = tmp_path / "publish"
    (pub / "data").mkdir(parents=True)
    record = _publish(pub, store, ["cpu-1", "cpu-2"], day, "1001")
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-3000:]
    assert "night 2026-12-04: passed: cpu; failed or partial: none" in record.stdout
    assert "::notice::cpu: new baseline: flaggems-5.3.4-torch-" in record.stdout
    (soft,) = [p.name for p in (pub / "data" / "corpus" / "cpu").iterdir()]
    stored = pub / "data" / "corpus" / "cpu" / soft / "2026-12-04-1001"
    for name in ("run.json", "records.jsonl", "ops_status.csv", "report.md", "summary.csv"):
        assert (stored / name).is_file(), name
    assert (stored / "autotune").is_dir()  # tomorrow's replay
    assert [(n["status"], n["note"].startswith("new baseline")) for n in _nights(pub)] == [("complete", True)]
    first = _nights(pub)[0]
    library = info["suite"]["ref"].split()[-1].rstrip(")")  # "v5.3.4 (v5.3.4, <commit>)"
    assert len(library) == 40 and first["library"] == library  # the FlagGems commit measured
    assert (first["judged"], first["flagged"], first["aa"]) == ("0", "0", "")  # no night before it
    assert (pub / "site" / "nights.csv").is_file() and (pub / "site" / "index.html").is_file()

    # Night 2's prepare reads night 1 from bench-data: its op times for the shards, its configs.
    shutil.rmtree(prep / "data")
    shutil.copytree(pub / "data", prep / "data")
    night, env = _night(prep, "2026-12-05T01:43:10Z", "2026-12-05T01:43:40Z")
    assert night.returncode == 0, night.stdout + night.stderr
    day = _outputs(env)["date"]
    done, env = _prepare(prep, repo, "v5.3.4")
    assert done.returncode == 0
    last_night = _bash(str(_step("prepare", "Last night")["run"]), prep, {**env, "NAME": "v5.3.4"})
    assert last_night.returncode == 0, last_night.stdout + last_night.stderr
    assert "cpu: shards weighed by" in last_night.stdout and "autotune configs replayed" in last_night.stdout
    assert (prep / "inputs" / "last" / "cpu" / "ops_status.csv").is_file()
    assert (prep / "inputs" / "last" / "cpu" / "night" / "autotune").is_dir()
    part = _bench(tmp_path, prep / "inputs", site, 1, 2, tmp_path / "artifacts-2")
    again = json.loads((part / "run.json").read_text())
    assert again["options"]["shard_weights"].endswith("inputs/last/cpu/ops_status.csv")
    assert again["options"]["replay_from"].endswith("inputs/last/cpu/night")

    # Night 2, shard 2/2 never reported (its runner offline): partial, named, that backend fails.
    record = _publish(pub, tmp_path / "artifacts-2", ["cpu-1"], day, "1002")
    assert record.returncode == 1
    assert "::error::cpu: night 2026-12-05 partial: shard(s) 2/2 missing" in record.stdout
    assert "failed or partial: cpu" in record.stdout
    assert _nights(pub)[-1]["status"] == "partial" and _nights(pub)[-1]["missing"] == "2/2"
    assert "2/2" in (pub / "site" / "nights.csv").read_text()

    # Night 3, after a FlagGems upgrade (the shards say so in run.json): a new baseline, said so.
    upgraded = tmp_path / "artifacts-3"
    for k in (1, 2):
        shutil.copytree(store / f"cpu-{k}", upgraded / f"cpu-{k}")
        path = upgraded / f"cpu-{k}" / "run.json"
        data = json.loads(path.read_text())
        data["identity"]["flag_gems"]["version"] = "5.4.0"
        path.write_text(json.dumps(data))
    record = _publish(pub, upgraded, ["cpu-1", "cpu-2"], "2026-12-06", "1003")
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-3000:]
    assert "new baseline: flaggems-5.4.0-torch-" in record.stdout and f"(was {soft})" in record.stdout
    assert len(list((pub / "data" / "corpus" / "cpu").iterdir())) == 2
    assert _nights(pub)[-1]["note"].startswith("new baseline: flaggems-5.4.0")

    # Night 4: FlagGems 5.3.4 at night 1's commit again, by the same harness: an A/A night, said so,
    # its flags counted (its one earlier night is too few for a baseline: nothing judged yet).
    # nights.csv written before these columns gets the new header.
    nights = pub / "data" / "corpus" / "nights.csv"
    lines = nights.read_text().splitlines()
    nights.write_text("\n".join(["night,backend,run,status,software,missing,note", *lines[1:]]) + "\n")
    record = _publish(pub, store, ["cpu-1", "cpu-2"], "2026-12-07", "1004")
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-3000:]
    assert f"::notice::cpu: an A/A night (FlagGems {library} and the harness as on the nights of its baseline): " \
           "its 0 regression(s) flagged of 0 case(s) judged are false alarms" in record.stdout
    assert nights.read_text().startswith("night,backend,run,status,software,missing,note,library,judged,flagged,aa\n")
    last = _nights(pub)[-1]
    assert (last["software"], last["library"], last["flagged"], last["aa"]) == (soft, library, "0", "yes")
    assert _nights(pub)[-2]["aa"] == ""  # the upgrade's night: another software, no night before it

    # Night 5: the same software at another FlagGems commit: not A/A. Night 6: night 1's commit
    # again, but night 5 is in its baseline: not A/A either.
    other = tmp_path / "artifacts-5"
    for k in (1, 2):
        shutil.copytree(store / f"cpu-{k}", other / f"cpu-{k}")
        path = other / f"cpu-{k}" / "run.json"
        path.write_text(path.read_text().replace(library, "f" * 40))
    record = _publish(pub, other, ["cpu-1", "cpu-2"], "2026-12-08", "1005")
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-3000:]
    assert (_nights(pub)[-1]["library"], _nights(pub)[-1]["aa"]) == ("f" * 40, "")
    assert "an A/A night" not in record.stdout
    record = _publish(pub, store, ["cpu-1", "cpu-2"], "2026-12-09", "1006")
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-3000:]
    assert (_nights(pub)[-1]["library"], _nights(pub)[-1]["aa"]) == (library, "")
    # Night 7: another FlagGems commit, every case 50% slower: flagged at once, and the range to
    # bisect named: night 6's commit (the last before the slowdown) to night 7's.
    slow = tmp_path / "artifacts-7"
    for k in (1, 2):
        shutil.copytree(store / f"cpu-{k}", slow / f"cpu-{k}")
        path = slow / f"cpu-{k}" / "run.json"
        path.write_text(path.read_text().replace(library, "e" * 40))
        _slowed(slow / f"cpu-{k}" / "records.jsonl", 1.5)
    record = _publish(pub, slow, ["cpu-1", "cpu-2"], "2026-12-10", "1007")
    assert record.returncode == 1, record.stdout[-3000:] + record.stderr[-3000:]  # the regressions fail it
    env = _env(pub, "publish", NAME="v5.3.4")
    ranges = _bash(str(_step("publish", "Ranges to bisect")["run"]), pub, env)
    assert ranges.returncode == 0, ranges.stdout + ranges.stderr
    (named,) = [line for line in ranges.stdout.splitlines() if "began between FlagGems" in line]
    assert named.startswith(f"::warning::cpu: {_nights(pub)[-1]['flagged']} regression(s) of ")
    assert f"between FlagGems {library[:12]} and {'e' * 12}: harness bisect --repo FLAGGEMS_CLONE --good {library} " \
           f"--bad {'e' * 40} -- --suite <FlagGems v5.3.4>/benchmark --ops " in named
    stored = pub / "data" / "corpus" / "cpu" / soft / "2026-12-10-1007" / "history" / "bisect-ranges.json"
    assert json.loads(stored.read_text())["ranges"][0]["good"] == library  # kept with the night
    (handed,) = json.loads(_outputs(env)["bisect"])  # to the bisect job
    assert (handed["backend"], handed["good"], handed["bad"]) == ("cpu", library, "e" * 40)
    # A nights.csv whose header this workflow does not know is refused, nothing recorded.
    nights.write_text("when,what\n1,2\n")
    record = _publish(pub, store, ["cpu-1", "cpu-2"], "2026-12-11", "1008")
    assert record.returncode == 1 and "not a header this workflow knows" in record.stdout
    assert nights.read_text() == "when,what\n1,2\n"


_SLOW_GEMS = '''
@contextlib.contextmanager
def use_gems(exclude=None):
    """At this commit FlagGems' add is slow: an aten::add kernel that sleeps, while gems are in use."""
    import time

    global current_work_registrar
    lib = torch.library.Library("aten", "IMPL")

    def slow_add(a, b, *, alpha=1):
        time.sleep(0.004)
        return torch.sub(a, b, alpha=-alpha)  # a + alpha * b, by another aten op

    lib.impl("add.Tensor", slow_add, "CPU")
    current_work_registrar = object()
    try:
        yield
    finally:
        lib._destroy()
        current_work_registrar = None
'''


def _library_repo(root: Path) -> tuple[Path, dict[str, str], Path, Path]:
    """A stand-in FlagGems repository with its source under src/ (what `harness bisect` exports):
    good, a docs-only commit, the commit that makes add slow, a later one (bad). Returns the
    repository, subject -> sha, the installed stand-in's site and the benchmark tree."""
    suite = write_fake_suite(root / "tree", version="5.3.4", ref=None)
    repo = root / "FlagGems"
    shutil.copytree(suite.site / "flag_gems", repo / "src" / "flag_gems")
    _git("init", "--quiet", "--initial-branch", "main", cwd=repo)
    shas: dict[str, str] = {}

    def commit(subject: str) -> None:
        _git("add", "-A", cwd=repo)
        _git("commit", "--quiet", "-m", subject, cwd=repo)
        shas[subject] = _git("rev-parse", "HEAD", cwd=repo).strip()

    commit("good")
    (repo / "README.md").write_text("docs\n")
    commit("docs only")
    init = repo / "src" / "flag_gems" / "__init__.py"
    text = init.read_text()
    start, end = text.index("@contextlib.contextmanager\ndef use_gems"), text.index("def broken_add")
    init.write_text(text[:start] + _SLOW_GEMS.lstrip() + "\n\n" + text[end:])
    commit("add sleeps")
    init.write_text(init.read_text() + "\n# kept\n")
    commit("bad")
    return repo, shas, suite.site, suite.benchmark


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_bisect_job_names_the_commit_of_a_range_publish_gives_it(tmp_path: Path) -> None:
    """publish's range step turns history check's bisect-ranges.json into the bisect matrix; the
    bisect job's step, as written, clones the library and names the commit that made add slow."""
    repo, shas, site, tree = _library_repo(tmp_path / "lib")
    # publish: the matrix from each backend's bisect-ranges.json (a bad file is warned about, left out)
    pub = tmp_path / "publish"
    ranges = {"format_version": 1, "run_id": "n", "unnamed": [],
              "ranges": [{"good": shas["good"], "bad": shas["bad"], "ops": ["add"], "cases": ["add[x]"]}]}
    for backend, data in (("cpu", ranges), ("cuda", {"format_version": 9})):
        (pub / "merged" / backend / "history").mkdir(parents=True)
        (pub / "merged" / backend / "history" / "bisect-ranges.json").write_text(json.dumps(data))
    env = _env(pub, "publish", NAME="v5.3.4")
    done = _bash(str(_step("publish", "Ranges to bisect")["run"]), pub, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "::warning::cuda: " in done.stdout and "format_version 9" in done.stdout
    (entry,) = json.loads(_outputs(env)["bisect"])
    assert entry == {"backend": "cpu", "good": shas["good"], "bad": shas["bad"], "ops": "add"}
    # bisect: the job's step with the matrix entry, on cpu
    work = tmp_path / "bisect"
    shutil.copytree(tree, work / "inputs" / ".flaggems" / "v5.3.4" / "benchmark")
    summary = work / "summary.md"
    env = _env(work, "bisect", site, BACKEND=entry["backend"], GOOD=entry["good"], BAD=entry["bad"], OPS=entry["ops"],
               NAME="v5.3.4", FLAGGEMS_REPO=str(repo), CORPUS_CACHE_ROOT=str(tmp_path / "runner-cache"),
               BISECT_ARGS="--allow-cpu --repeats 1", GITHUB_STEP_SUMMARY=str(summary))
    done = _bash(str(_step("bisect", "Bisect")["run"]), work, env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    assert f"::notice::cpu add: bisect: culprit {shas['add sleeps'][:12]} add sleeps" in done.stdout
    found = json.loads((work / "reports" / "bisect" / "bisect.json").read_text())
    assert found["culprit"]["sha"] == shas["add sleeps"]
    assert shas["add sleeps"][:12] in summary.read_text()
    assert (tmp_path / "runner-cache" / "flaggems.git" / "HEAD").is_file()  # the mirror kept on the runner
    # the next time the mirror is fetched, not cloned; a range that changes no source is a warning
    env.update(GOOD=shas["good"], BAD=shas["docs only"])
    again = _bash(str(_step("bisect", "Bisect")["run"]), work, env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "::warning::cpu add: harness bisect refused the range: " in again.stdout
    # a range that is not one is refused before anything runs
    for bad_env in ({"GOOD": "HEAD~1; rm -rf /"}, {"OPS": "add --ops-module os"}, {"OPS": "-x"}):
        refused = _bash(str(_step("bisect", "Bisect")["run"]), work, {**env, **bad_env})
        assert refused.returncode == 1 and "::error::cpu: not a range to bisect" in refused.stdout, bad_env
