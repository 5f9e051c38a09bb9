"""A throwaway library repository for `harness bisect`'s tests: ``slowlib`` under src/, whose
``work`` starts to sleep at one commit (the culprit)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPS_MODULE = ROOT / "tests" / "data" / "bisect_ops.py"
SHAPES = ROOT / "tests" / "data" / "bisect_shapes.yaml"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _work(repo: Path, body: str) -> None:
    (repo / "src" / "slowlib" / "__init__.py").write_text(f"import time\n\n\ndef work(x):\n    {body}\n    return x * 2.0\n")


def _commit(repo: Path, subject: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", subject)
    return _git(repo, "rev-parse", "HEAD")


def make_repo(repo: Path) -> dict[str, str]:
    """good -> docs only -> tidy -> sleeps (the culprit) -> comment (bad) -> docs again; tags good,
    bad, culprit and docs (the last commit, which leaves src/ alone). Returns subject -> sha."""
    (repo / "src" / "slowlib").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "bisect@example.com")
    _git(repo, "config", "user.name", "bisect test")
    _git(repo, "remote", "add", "origin", "https://github.com/example/slowlib.git")
    shas = {}
    _work(repo, "pass")
    shas["good"] = _commit(repo, "slowlib: work doubles")
    (repo / "README.md").write_text("slowlib\n")
    shas["docs"] = _commit(repo, "docs only")
    _work(repo, "pass  # tidy")
    shas["tidy"] = _commit(repo, "tidy slowlib")
    _work(repo, "time.sleep(0.004)")
    shas["sleeps"] = _commit(repo, "slowlib sleeps")
    _work(repo, "time.sleep(0.004)  # kept")
    shas["comment"] = _commit(repo, "comment")
    (repo / "README.md").write_text("slowlib, again\n")
    shas["docs2"] = _commit(repo, "docs again")
    for tag, sha in (("good", shas["good"]), ("bad", shas["comment"]), ("culprit", shas["sleeps"]),
                     ("docs", shas["docs2"])):
        _git(repo, "tag", tag, sha)
    return shas
