"""Where a run's code came from: the one git helper of the harness.

``git`` runs one git command (refusing clearly when git is missing or the command fails);
``commit_state`` tells the commit and whether tracked files differ from it in one call;
``describe`` names a checkout's tag; ``code_digest`` names the harness's own files by their
content, which a commit label cannot do where the tree was copied under a stale ``.git`` (as on a
lent machine: every run there says ``<the copy's HEAD>+dirty``). The fingerprint that says which runs are alike is
:func:`harness.results.runinfo.fingerprint`, shared with compare and history.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.errors import EnvironmentProblem, UsageError

__all__ = ["CODE_SUFFIXES", "CommitState", "code_digest", "commit_state", "describe", "git"]

# The files of the harness package that make up its code: sources, tables, page templates.
CODE_SUFFIXES = (".py", ".yaml", ".html", ".css", ".js")


def git(repo: Path, *args: str, timeout: float = 300) -> str:
    """``git -C repo ARGS``'s standard output; EnvironmentProblem without git, UsageError on failure."""
    try:
        done = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(repo), *args],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise EnvironmentProblem("git is not installed, so git refs cannot be read or checked out. "
                                 "Install git, or give directories instead of refs.") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"git {' '.join(args)} in {repo} did not finish within {timeout:g} s.") from None
    if done.returncode != 0:
        raise UsageError(f"git {' '.join(args)} failed in {repo}: {done.stderr.strip()}")
    return done.stdout.strip()


def _quiet(repo: Path, *args: str) -> str | None:
    try:
        return git(repo, *args, timeout=20)
    except (EnvironmentProblem, UsageError):
        return None


@dataclass(frozen=True)
class CommitState:
    """The commit checked out at a path, and whether tracked files differ from it (None: unknown)."""

    commit: str | None
    dirty: bool | None


def commit_state(where: Path) -> CommitState:
    """One ``git status --porcelain=v2 --branch``: the commit and whether tracked files changed.
    A copied working tree with a stale ``.git`` (as on a lent machine) is dirty, not that commit."""
    out = _quiet(where, "status", "--porcelain=v2", "--branch", "--untracked-files=no")
    if out is None:
        return CommitState(None, None)
    commit = None
    dirty = False
    for line in out.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split()[-1]
            commit = None if oid == "(initial)" else oid
        elif not line.startswith("#"):
            dirty = True
    return CommitState(commit, dirty if commit else None)


def describe(where: Path) -> str:
    """``git describe --tags --always`` of a checkout; "unknown" where there is no git checkout."""
    if not (where / ".git").exists():
        return "unknown"
    return _quiet(where, "describe", "--tags", "--always") or "unknown"


@functools.cache
def code_digest(package: Path) -> str:
    """A short hash of the files under ``package`` (CODE_SUFFIXES, compiled caches left out): each
    relative path and its bytes, in path order. Equal digests: the same harness code, whatever the
    commit labels say."""
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in CODE_SUFFIXES and p.is_file()
                       and "__pycache__" not in p.parts):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
