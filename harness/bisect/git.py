"""The library's git history, read with git itself: refs, the first-parent commits between two
refs, which of them change the library's source, the source's export into a cache folder, and
a link to a commit when the repository has a GitHub remote."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness.bisect.session import Commit
from harness.errors import EnvironmentProblem, UsageError

__all__ = ["Repo", "commit_link", "github_base"]


class Repo:
    """A git directory (a clone's work tree, its .git, or a bare mirror)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _git(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        if shutil.which("git") is None:
            raise EnvironmentProblem("git is not on PATH; install git to bisect a library's history.")
        done = subprocess.run(["git", "-C", str(self.path), *args], input=stdin, capture_output=True,
                              text=True, check=False)
        if check and done.returncode != 0:
            raise UsageError(f"--repo {self.path}: git {args[0]} failed: "
                             f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")
        return done

    def check(self) -> None:
        done = self._git("rev-parse", "--git-dir", check=False)
        if done.returncode != 0:
            raise UsageError(f"--repo {self.path}: not a git repository (give a clone or a bare mirror of the "
                             "library).")

    def resolve(self, ref: str, option: str) -> str:
        """The commit ``ref`` names; an unknown ref is refused."""
        done = self._git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
        if done.returncode != 0 or not done.stdout.strip():
            raise UsageError(f"{option} {ref}: no such commit in {self.path} (unknown ref). Give a tag, branch or "
                             "commit of that repository.")
        return done.stdout.strip()

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self._git("merge-base", "--is-ancestor", older, newer, check=False).returncode == 0

    def first_parent(self, good: str, bad: str) -> list[tuple[str, str]]:
        """(sha, subject) of every first-parent commit after ``good`` up to ``bad``, oldest first."""
        out = self._git("log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{good}..{bad}").stdout
        return [(sha, subject) for sha, _, subject in (line.partition("\0") for line in out.splitlines()) if sha]

    def trees(self, revisions: Sequence[str], path: str) -> dict[str, str]:
        """The tree id of ``path`` at each revision ("" where the revision has no such path)."""
        if not revisions:
            return {}
        done = self._git("cat-file", "--batch-check=%(objectname) %(objecttype)",
                         stdin="".join(f"{rev}:{path}\n" for rev in revisions))
        found: dict[str, str] = {}
        for rev, line in zip(revisions, done.stdout.splitlines(), strict=True):
            oid, _, kind = line.partition(" ")
            found[rev] = oid if kind.strip() == "tree" else ""
        return found

    def source_commits(self, good: str, bad: str, path: str) -> list[Commit]:
        """The first-parent commits after ``good`` up to ``bad`` whose ``path`` differs from the
        commit before them (the first one's: its first parent), oldest first."""
        listed = self.first_parent(good, bad)
        if not listed:
            return []
        revs = [f"{listed[0][0]}^", *(sha for sha, _ in listed)]
        trees = self.trees(revs, path)
        commits = []
        before = trees[revs[0]]
        for sha, subject in listed:
            if trees[sha] != before:
                commits.append(Commit(sha=sha, subject=subject, tree=trees[sha]))
            before = trees[sha]
        return commits

    def export(self, sha: str, path: str, cache: Path) -> Path:
        """``path`` of ``sha`` exported once into ``cache/<tree id>/``, as `git archive` writes it
        (benchmarks/fetch_flaggems.sh's export); returns the folder that holds ``path``."""
        tree = self.trees([sha], path)[sha]
        dest = cache / (tree or sha)
        if (dest / path).exists():
            return dest
        cache.mkdir(parents=True, exist_ok=True)
        data = subprocess.run(["git", "-C", str(self.path), "archive", "--format=tar", sha, "--", path],
                              capture_output=True, check=False)
        if data.returncode != 0:
            raise UsageError(f"--repo {self.path}: git archive {sha[:12]} {path} failed: "
                             f"{data.stderr.decode(errors='replace').strip()}")
        work = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=cache))
        with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
            tar.extractall(work, filter="data")
        # Bytecode for every module, on every core, once per tree: otherwise each op process that
        # imports a newly exported tree compiles what it imports one module at a time (about 3 s
        # for FlagGems' src/ on one core), and most tested commits run on one side of one try only.
        # A process of its own: its workers are not forked from this one, whose probes are threads.
        subprocess.run([sys.executable, "-m", "compileall", "-qq", "-j", "0", "-d", str(dest), str(work)],
                       capture_output=True, check=False)
        try:
            work.rename(dest)
        except OSError:  # another probe exported the same tree first
            shutil.rmtree(work, ignore_errors=True)
        return dest

    def subject(self, sha: str) -> str:
        return self._git("log", "-1", "--format=%s", sha).stdout.strip()

    def remote_url(self) -> str:
        return self._git("config", "--get", "remote.origin.url", check=False).stdout.strip()


_GITHUB = re.compile(r"^(?:https?://|git@|ssh://git@)github\.com[:/]([^/]+)/([^/]+?)(?:\.git)?/?$")


def github_base(remote: str) -> str:
    """https://github.com/OWNER/NAME for a GitHub remote URL, else ""."""
    found = _GITHUB.match(remote.strip())
    return f"https://github.com/{found.group(1)}/{found.group(2)}" if found else ""


def commit_link(base: str, sha: str) -> str:
    return f"{base.rstrip('/')}/commit/{sha}" if base else ""
