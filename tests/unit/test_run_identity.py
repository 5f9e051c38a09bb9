"""What run.json says about the code that ran: the commit, and whether the tree differed from it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.results.render import commit_label
from harness.run.provenance import commit_state


def git_commit(where: Path) -> str | None:
    return commit_state(where).commit


def git_dirty(where: Path) -> bool | None:
    return commit_state(where).dirty


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_a_copied_tree_that_differs_from_its_commit_is_dirty(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    commit = git_commit(tmp_path)
    assert commit is not None and len(commit) == 40
    assert git_dirty(tmp_path) is False
    (tmp_path / "untracked.txt").write_text("not code\n")
    assert git_dirty(tmp_path) is False  # untracked files do not count
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_dirty(tmp_path) is True


def test_outside_a_repository_nothing_is_claimed(tmp_path: Path) -> None:
    assert git_commit(tmp_path) is None and git_dirty(tmp_path) is None


def test_commit_label() -> None:
    assert commit_label({}) == "no git"
    assert commit_label({"git_commit": "a" * 40, "git_dirty": False}, 12) == "a" * 12
    assert commit_label({"git_commit": "a" * 40, "git_dirty": True}, 12) == "a" * 12 + "+dirty"
    assert commit_label({"git_commit": "abc", "git_dirty": None}) == "abc"
