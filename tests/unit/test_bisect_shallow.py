"""`harness bisect`'s git reading on a shallow git directory as benchmarks/fetch_bisect_repo.sh
makes it (the range and nothing older), and the source export's compiled bytecode."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bisect.git import Repo, github_base
from tests.bisect_repo import make_repo

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "benchmarks" / "fetch_bisect_repo.sh"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """The throwaway repository and a shallow copy of it from 'tidy' (its second commit) to 'docs2'."""
    base = tmp_path_factory.mktemp("shallow")
    full = base / "slowlib"
    shas = make_repo(full)
    subprocess.run(["git", "-C", str(full), "tag", "tidy", shas["tidy"]], check=True)
    shallow = base / "slowlib.git"
    done = subprocess.run(["bash", str(FETCH), str(full / ".git"), "tidy", "docs", str(shallow)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return full, shallow, shas


def test_the_shallow_directory_lists_the_range_as_the_full_one_does(repos: tuple[Path, Path, dict[str, str]]) -> None:
    full, shallow, shas = repos
    small, whole = Repo(shallow), Repo(full)
    tidy, bad = small.resolve("tidy", "--good"), small.resolve("bad", "--bad")
    assert (tidy, bad) == (shas["tidy"], shas["comment"])
    assert small.is_ancestor(tidy, bad) and not small.is_ancestor(bad, tidy)
    assert small.first_parent(tidy, shas["docs2"]) == whole.first_parent(tidy, shas["docs2"])
    # the first listed commit's source is compared with its parent's: the oldest commit kept
    assert small.source_commits(tidy, bad, "src") == whole.source_commits(tidy, bad, "src")
    assert [c.sha for c in small.source_commits(tidy, bad, "src")] == [shas["sleeps"], shas["comment"]]
    assert github_base(small.remote_url()) == "https://github.com/flagos-ai/FlagGems"


def test_nothing_older_than_the_oldest_ref_is_kept(repos: tuple[Path, Path, dict[str, str]]) -> None:
    _, shallow, shas = repos
    listed = subprocess.run(["git", "--git-dir", str(shallow), "rev-list", "--all"], capture_output=True, text=True,
                            check=True).stdout.split()
    assert sorted(listed) == sorted(shas[k] for k in ("tidy", "sleeps", "comment", "docs2"))
    tags = subprocess.run(["git", "--git-dir", str(shallow), "tag"], capture_output=True, text=True,
                          check=True).stdout.split()
    assert sorted(tags) == ["bad", "culprit", "docs", "tidy"]  # 'good' points before the range


def test_an_export_holds_bytecode_that_imports_from_where_it_lies(repos: tuple[Path, Path, dict[str, str]],
                                                                   tmp_path: Path) -> None:
    _, shallow, shas = repos
    one = Repo(shallow).export(shas["sleeps"], "src", tmp_path)
    source = one / "src" / "slowlib" / "__init__.py"
    assert list((source.parent / "__pycache__").glob("__init__.*.pyc"))
    done = subprocess.run([sys.executable, "-c", "import slowlib; print(slowlib.work.__code__.co_filename)"],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(one / "src")})
    assert Path(done.stdout.strip()) == source
