"""benchmarks/bisect_h200.sh end to end on the cpu backend: the flow of the H200 session, with
nothing of it needing a GPU.

``--mode fixture`` (default, a few minutes on two cores): a throwaway library repository whose
src/flag_gems is the stand-in package of tests/data/fake_flaggems_suite.py plus three ops of its
own (``scale``, ``shift``, ``steady``), benchmarked by a stand-in v5.3 tree. ``scale`` starts to
sleep at one commit and ``shift`` at a later one; ``steady`` never changes. The script's jobs
are steady, scale and shift over the whole range: steady's check finds nothing to bisect, scale
and shift are bisected and each culprit is checked against its parent; this driver then checks
that the culprits are the commits that made them sleep. ``--split S`` cuts a first call at S
seconds and resumes it in a second call from the first one's session.tgz.

``--mode flaggems``: the real FlagGems git directory (benchmarks/fetch_bisect_repo.sh) and the
v5.3.4 benchmark tree over v5.3.3..v5.3.4, one op. FlagGems finds no device on a CPU machine, so
every run's op ends in ERROR and the bisection ends after its check ("nothing to bisect"); what
it shows is that the shallow git directory, the source exports, the tree and the shapes file are
accepted by `harness bisect` as the H200 session uses them.

    python benchmarks/bisect_h200_dryrun.py [--mode fixture|flaggems] [--split S] [--dir DIR]

Prints the script's output and, for the fixture, whether the culprits are right (exit 1 if not).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.data.fake_flaggems_suite import write_fake_suite  # noqa: E402

SCRIPT = ROOT / "benchmarks" / "bisect_h200.sh"

WORK_MODULE = '''\
"""Ops of the dry run's stand-in library: {note}."""
import time


def scale(x):
    {scale}
    return x * 2


def shift(x):
    {shift}
    return x + 1


def steady(x):
    return x - 1
'''

TESTS = {
    f"test_{op}.py": f'''\
import pytest
import torch

from flag_gems import work

from . import base


@pytest.mark.{op}
def test_{op}():
    base.UnaryPointwiseBenchmark(op_name="{op}", torch_op=lambda x: {reference}, gems_op=work.{op},
                                 dtypes=[torch.float32]).run()
'''
    for op, reference in (("scale", "x * 2"), ("shift", "x + 1"), ("steady", "x - 1"))
}

SLEEP = "time.sleep(0.002)"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, subject: str, note: str, scale: str = "pass", shift: str = "pass") -> str:
    work = repo / "src" / "flag_gems" / "work.py"
    work.write_text(WORK_MODULE.format(note=note, scale=scale, shift=shift))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", subject)
    return _git(repo, "rev-parse", "HEAD")


def make_fixture(root: Path) -> dict[str, str]:
    """The stand-in tree (root/tree: benchmark/, FLAGGEMS_REF, site/) and the library repository
    (root/repo); returns subject -> sha of its commits."""
    suite = write_fake_suite(root / "tree")
    for name, text in TESTS.items():
        (suite.benchmark / name).write_text(text)
    repo = root / "repo"
    shutil.copytree(suite.site / "flag_gems", repo / "src" / "flag_gems")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "dryrun@example.com")
    _git(repo, "config", "user.name", "bisect dry run")
    shas = {"good": _commit(repo, "work ops", "as first written")}
    shas["tidy"] = _commit(repo, "tidy work", "tidied")
    shas["scale sleeps"] = _commit(repo, "scale sleeps", "scale sleeps", scale=SLEEP)
    (repo / "README.md").write_text("stand-in library\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "docs only")
    shas["comment"] = _commit(repo, "comment", "scale sleeps, commented", scale=SLEEP)
    shas["shift sleeps"] = _commit(repo, "shift sleeps", "both sleep", scale=SLEEP, shift=SLEEP)
    shas["bad"] = _commit(repo, "tidy again", "both sleep, tidied", scale=SLEEP, shift=SLEEP)
    _git(repo, "tag", "good", shas["good"])
    _git(repo, "tag", "bad", shas["bad"])
    (root / "shapes.yaml").write_text("scale: [[64, 64]]\nshift: [[64, 64]]\nsteady: [[64, 64]]\n")
    return shas


def run_script(env: dict[str, str]) -> int:
    done = subprocess.run(["nice", "bash", str(SCRIPT)], cwd=ROOT, env={**os.environ, **env}, check=False)
    return done.returncode


def fixture(base: Path, split_s: int | None) -> int:
    """The whole flow in one call, or (``split_s``) a first call cut at ``split_s`` seconds and a
    second one resuming from the first one's session.tgz."""
    shas = make_fixture(base)
    env = {
        "BACKEND": "cpu", "PY": sys.executable, "SKIP_SETUP": "1", "SITE": str(base / "tree" / "site"),
        "REPO_SRC": str(base / "repo" / ".git"), "TREE_SRC": str(base / "tree"),
        "JOBS": "steady good bad; scale good bad; shift good bad", "DTYPE": "float32",
        "SHAPES_FILE": str(base / "shapes.yaml"),
        "WORK": str(base / "work"), "SESSION": str(base / "no-session.tgz"),
        "REPO_URL": "https://github.com/example/worklib", "TOTAL_S": "1500", "RUN_S": "5",
    }
    out = base / "out"
    if split_s is not None:
        first = base / "out-first"
        code = run_script({**env, "OUT": str(first), "TOTAL_S": str(split_s)})
        print(f"first call: exit {code}; files {sorted(p.name for p in first.iterdir())}")
        env["SESSION"] = str(first / "session.tgz")
    code = run_script({**env, "OUT": str(out)})
    summary = json.loads((out / "summary.json").read_text())
    expected = {"steady": None, "scale": shas["scale sleeps"], "shift": shas["shift sleeps"]}
    named = {op: (entry.get("culprit") or {}).get("sha") for op, entry in summary["jobs"].items()}
    checked = {op: [r["verdict"] for r in entry["culprit_check"]] for op, entry in summary["jobs"].items()}
    print(f"script exit {code}; culprits named {named}; expected {expected}; culprit checks {checked}")
    print("files in OUT:", sorted(p.name for p in out.iterdir()))
    right = named == expected and checked == {"steady": [], "scale": ["regression"], "shift": ["regression"]}
    print("dry run:", "the culprits are right and each is slower than its parent" if right else "WRONG")
    return 0 if right else 1


def flaggems(base: Path) -> int:
    wheels = sorted((ROOT / ".whl" / "flaggems-v5.3.4").glob("flag_gems-*.whl"))
    repo = ROOT / ".bisect" / "FlagGems.git"
    if not wheels or not repo.is_dir() or not (ROOT / ".flaggems" / "v5.3.4" / "benchmark").is_dir():
        print("needs .whl/flaggems-v5.3.4/, .bisect/FlagGems.git and .flaggems/v5.3.4 "
              "(benchmarks/fetch_flaggems.sh, benchmarks/fetch_bisect_repo.sh)")
        return 2
    site = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--target", str(site), str(wheels[-1])], check=True)
    out = base / "out"
    code = run_script({
        "BACKEND": "cpu", "PY": sys.executable, "SKIP_SETUP": "1", "SITE": str(site),
        "JOBS": "log_normal_ v5.3.3 v5.3.4", "OUT": str(out), "WORK": str(base / "work"),
        "SESSION": str(base / "no-session.tgz"), "TOTAL_S": "900", "RUN_S": "20",
    })
    print(f"script exit {code}; files in OUT:", sorted(p.name for p in out.iterdir()))
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("fixture", "flaggems"), default="fixture")
    parser.add_argument("--split", type=int, metavar="S",
                        help="fixture: cut the first call at S seconds (TOTAL_S) and resume it in a second call")
    parser.add_argument("--dir", type=Path, help="work here (kept) instead of a temporary directory")
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        print("git is not on PATH")
        return 2

    def go(base: Path) -> int:
        return fixture(base, args.split) if args.mode == "fixture" else flaggems(base)

    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        return go(args.dir.resolve())
    with tempfile.TemporaryDirectory(prefix="bisect-dryrun-") as tmp:
        return go(Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
