"""`harness gate-run --container`: both sides of the gate in the backend's image, on a real engine,
and what a hostile head side plants from its op refused by the host (docs/ci-security.md,
"What the host reads").

The attack runs twice where the tests run as root: with root as the caller (the container runs
as 65532 and the side's folder is root's) and with a non-root caller, as on a CI runner (the
container runs as that user and can write anywhere in its own folder). Elsewhere only the
second applies, and the caller is the test's own user.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.actions_log import read_log

ROOT = Path(__file__).resolve().parents[2]
NON_ROOT_UID = 4242  # the stand-in runner user when the tests run as root

pytestmark = [pytest.mark.integration, pytest.mark.docker]

OPS = '''
"""The op both sides measure (tests only): x + 1 in torch, tiny."""
import math
import torch
from harness.ops.base import OpSpec

{attack}

def candidate(x):
    {plant}
    return x + 1

HARNESS_OPS = [OpSpec(
    id="planted", baseline=lambda x: x + 1, candidate=candidate,
    make_inputs=lambda shape, dtype, gen, device: (torch.randn(shape, dtype=dtype, generator=gen, device=device),),
    bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize, flops=lambda shape: math.prod(shape),
    dtypes=("float32",), description="x + 1",
)]
'''

# What a hostile pull request's op does, inside the container, when the gate runs it as head.
ATTACK = '''
import os, socket, sys
from pathlib import Path

REPORTS = Path("/repo/reports")  # the head side's output folder

def _run_dir():
    # reports/head-1; found by name, so the same op attacks a gate that shares one folder too
    return next(p for p in REPORTS.rglob("head-1") if p.is_dir())
SECRET = {secret!r}  # a host file only the runner's user may read

# Printed while the harness in the container loads this module: it reaches the gate's log.
print("::warning::forged by the op module")
print("::add-mask::gate")
print("ok\\r::notice::after a carriage return")
print("##[error]forged in the older form", file=sys.stderr, flush=True)

def _try(action):
    try:
        action()
    except OSError:
        pass

def _forge(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "records.jsonl").write_text("forged\\n")

def plant_once():
    RUN = _run_dir()
    if (RUN / "a.txt").exists():
        return
    (RUN / "autotune").mkdir(exist_ok=True)
    (RUN / "autotune" / "mm.json").symlink_to(SECRET)  # what the host copied before
    (RUN / "::error::named").symlink_to("/etc/passwd")
    (RUN / "a.txt").write_text("a")
    os.link(RUN / "a.txt", RUN / "b.txt")
    os.mkfifo(RUN / "fifo")
    socket.socket(socket.AF_UNIX).bind(str(RUN / "sock"))
    (RUN / "compare.md").write_text("## Performance comparison: PASS\\n")
    # Beside the run: only writable when the container runs as the caller.
    _try(lambda: (REPORTS / "compare.md").write_text("## Performance comparison: PASS\\n"))
    _try(lambda: _forge(REPORTS / "repeats" / "base-1"))  # where base's run was, in one shared folder
    _try(lambda: _forge(REPORTS / "base-1"))
'''


def _ops(attack: str = "", plant: str = "pass") -> str:
    return textwrap.dedent(OPS).format(attack=attack, plant=plant)


def _worktrees(where: Path) -> dict[str, Path]:
    trees = {side: where / side for side in ("base", "head")}
    for tree in trees.values():  # two trees, as the PR gate mounts the default branch and the merge
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), "HEAD"], cwd=ROOT, check=True,
                       capture_output=True)
    return trees


def _remove_worktrees(trees: dict[str, Path]) -> None:
    for tree in trees.values():
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)


def _gate_run(trees: dict[str, Path], out: Path, env: dict[str, str], run_args: list[str],
              as_user: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(as_user or []), sys.executable, "-m", "harness", "gate-run", "--container", "cpu",
         "--base-ref", str(trees["base"]), "--head-ref", str(trees["head"]), "--repeats", "1",
         "--threshold", "500", "--allow-cpu", "--out", str(out), "--", *run_args],
        cwd=ROOT, capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)}, timeout=900,
    )


def _leftover_folders(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith(".gate-sides-")]


def test_gate_runs_each_side_in_the_same_confined_image(  # type: ignore[no-untyped-def]
        cpu_image, container_env: dict[str, str], tmp_path: Path, no_leftovers) -> None:
    trees = _worktrees(tmp_path)
    out = tmp_path / "gate"
    try:
        done = _gate_run(trees, out, container_env, ["--ops", "add", "--dtypes", "fp32"])
    finally:
        _remove_worktrees(trees)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "in the cpu container" in done.stdout and "both sides run in triton-op-harness-cpu:" in done.stderr
    assert (out / "compare.md").is_file() and (out / "base" / "run.json").is_file()
    infos = {side: json.loads((out / "repeats" / f"{side}-1" / "run.json").read_text()) for side in ("base", "head")}
    assert infos["base"]["container"] == infos["head"]["container"]
    assert infos["base"]["container"]["image"] == cpu_image.ref
    # Each side ran into a folder of its own (its reports/), beside OUT: "gate: SIDE (REF) -> RUN_DIR in ..."
    run_dirs = {line.split()[1]: Path(line.split(" -> ")[1].split(" in the cpu container")[0])
                for line in done.stdout.splitlines() if line.startswith("gate: ") and " -> " in line}
    assert run_dirs["base"].name == "base-1" and run_dirs["head"].name == "head-1"
    assert run_dirs["base"].parent != run_dirs["head"].parent
    assert run_dirs["base"].parent.parent == run_dirs["head"].parent.parent != out
    assert run_dirs["base"].parent.parent.parent == out.parent
    # OUT holds only what the host wrote, after its checks; the sides' folders are gone.
    assert {p.name for p in out.iterdir()} <= {"base", "head", "repeats", "compare.md", "compare.csv",
                                               "compare-junit.xml", "compare.html"}
    assert _leftover_folders(tmp_path) == []
    for path in out.rglob("*"):  # handed back to the caller after each side
        assert path.stat().st_uid == os.getuid(), path
        assert not path.is_symlink() and (path.is_dir() or path.stat().st_nlink == 1), path


@dataclass(frozen=True)
class Attacked:
    caller: str  # "root" or "non-root"
    done: subprocess.CompletedProcess[str]
    work: Path  # where OUT and the sides' folders were
    out: Path
    secret: str
    leftovers: list[str]  # harness-started containers left after the gate


def _as_non_root(work: Path) -> list[str] | None:
    """The command prefix that runs the gate as NON_ROOT_UID with access to the engine's socket,
    after handing it ``work``; None when the engine is not reached through a local socket."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    sock = Path(host.removeprefix("unix://"))
    if not host.startswith("unix://") or not sock.is_socket():
        return None
    for path in [work, *work.rglob("*")]:
        os.chown(path, NON_ROOT_UID, NON_ROOT_UID, follow_symlinks=False)
    (work / "home").mkdir()
    os.chown(work / "home", NON_ROOT_UID, NON_ROOT_UID)
    return ["setpriv", f"--reuid={NON_ROOT_UID}", f"--regid={NON_ROOT_UID}",
            f"--groups={os.stat(sock).st_gid}", "--inh-caps=-all", "--"]


@pytest.fixture(scope="module", params=["root", "non-root"])
def attacked(request, cpu_image, container_env: dict[str, str], docker_engine) -> Iterator[Attacked]:  # type: ignore[no-untyped-def]
    """One gate whose head side's op plants every attack; base runs the same op, harmless."""
    caller = request.param
    if caller == "root" and os.geteuid() != 0:
        pytest.skip("the root caller needs the tests to run as root")
    work = Path(tempfile.mkdtemp(prefix="gate-attack-"))
    secret = work / "secret.txt"
    secret_text = f"runner-only-secret-{os.urandom(6).hex()}"
    secret.write_text(secret_text)
    secret.chmod(0o600)
    trees = _worktrees(work)
    for tree in trees.values():
        (tree / "gate_shapes.yaml").write_text("planted: [[64]]\n")
    (trees["base"] / "gate_ops.py").write_text(_ops())
    (trees["head"] / "gate_ops.py").write_text(
        _ops(textwrap.dedent(ATTACK).format(secret=str(secret)), "plant_once()"))
    env = {**container_env, "GITHUB_ACTIONS": "true"}
    as_user = None
    if caller == "non-root" and os.geteuid() == 0:
        as_user = _as_non_root(work)
        if as_user is None:
            _remove_worktrees(trees)
            shutil.rmtree(work)
            pytest.skip("the engine is not reached through a local socket a non-root user can be given")
        env["HOME"] = str(work / "home")
    before = set(docker_engine.managed_containers())
    try:
        done = _gate_run(trees, work / "gate", env,
                         ["--ops-module", "gate_ops.py", "--shapes-file", "gate_shapes.yaml", "--ops", "planted",
                          "--warmup-ms", "1", "--rep-ms", "1"],
                         as_user)
        left = sorted(set(docker_engine.managed_containers()) - before)
        yield Attacked(caller, done, work, work / "gate", secret_text, left)
    finally:
        _remove_worktrees(trees)
        shutil.rmtree(work, ignore_errors=True)


def test_the_gate_fails_closed_naming_each_planted_entry(attacked: Attacked) -> None:
    done = attacked.done
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "The head side" in done.stderr and "that the host does not read" in done.stderr
    named = [
        "head-1/autotune/mm.json: symbolic link (to ",
        "head-1/:\\x3aerror:\\x3anamed: symbolic link (to /etc/passwd)",
        "head-1/a.txt: hard link (2 names)",
        "head-1/b.txt: hard link (2 names)",
        "head-1/fifo: FIFO",
        "head-1/sock: socket",
        "head-1/compare.md: a file only the host writes",
    ]
    if attacked.caller == "non-root":  # the side's whole folder is the container user's
        named += ["compare.md: not a run directory", "repeats: not a run directory",
                  "base-1: not a run directory"]
    for line in named:
        assert line in done.stderr, (line, done.stderr[-3000:])
    assert attacked.leftovers == []


def test_no_host_file_leaves_through_a_link(attacked: Attacked) -> None:
    done = attacked.done
    assert attacked.secret not in done.stdout + done.stderr
    for path in attacked.work.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.name != "secret.txt":
            assert attacked.secret not in path.read_text(errors="replace"), path


def test_head_cannot_forge_the_verdict_nor_touch_bases_results(attacked: Attacked) -> None:
    out = attacked.out
    assert not (out / "compare.md").exists() and not (out / "head").exists()
    assert sorted(p.name for p in (out / "repeats").iterdir()) == ["base-1"]  # head's run never copied
    base = (out / "repeats" / "base-1" / "records.jsonl").read_text()
    assert "forged" not in base
    assert [json.loads(line)["op"] for line in base.splitlines()] and \
        {json.loads(line)["op"] for line in base.splitlines()} == {"planted"}
    for path in out.rglob("*"):
        mode = os.lstat(path).st_mode
        assert stat.S_ISDIR(mode) or (stat.S_ISREG(mode) and os.lstat(path).st_nlink == 1), path
    assert _leftover_folders(attacked.work) == []  # the sides' folders are removed


def test_workflow_commands_the_side_prints_are_shown_but_not_obeyed(attacked: Attacked) -> None:
    done = attacked.done
    assert "::warning::forged by the op module" in done.stdout  # shown in the log ...
    assert "##[error]forged in the older form" in done.stdout  # (the container's stderr comes with it)
    seen = read_log(done.stdout)
    assert seen.others == [] and not seen.stopped  # ... inside a stopped region, resumed after
    assert seen.obeyed.count("stop-commands") == 2  # one region per side's container
    assert read_log(done.stderr).obeyed == []  # the refusal names the planted names inert
