"""Shipped text files have LF line ends, and .gitattributes keeps them so."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def crlf_paths(eol_listing: str) -> list[str]:
    """Paths that `git ls-files --eol` reports with CRLF in the index or the work tree."""
    found = []
    for line in eol_listing.splitlines():
        info, _, path = line.partition("\t")
        index_eol, worktree_eol = info.split()[:2]
        if index_eol == "i/crlf" or worktree_eol == "w/crlf":
            found.append(path)
    return found


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def test_the_parser_finds_crlf_in_index_or_work_tree() -> None:
    listing = (
        "i/lf    w/lf    attr/text=auto eol=lf \ta.py\n"
        "i/crlf  w/lf    attr/text=auto eol=lf \tb.csv\n"
        "i/lf    w/crlf  attr/text=auto eol=lf \tc d.md\n"
        "i/-text w/-text attr/-text           \tx.png\n"
    )
    assert crlf_paths(listing) == ["b.csv", "c d.md"]


def test_no_tracked_text_file_has_crlf() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listing = _git(ROOT, "ls-files", "--eol")
    assert listing, "git ls-files listed nothing"
    assert crlf_paths(listing) == []


def test_gitattributes_normalises_a_crlf_file_on_commit(tmp_path: Path) -> None:
    shutil.copy(ROOT / ".gitattributes", tmp_path / ".gitattributes")
    _git(tmp_path, "init", "-q")
    (tmp_path / "table.csv").write_bytes(b"a,b\r\n1,2\r\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\r\n")
    _git(tmp_path, "add", ".gitattributes", "table.csv", "image.png")
    listing = _git(tmp_path, "ls-files", "--eol", "--cached")
    by_path = {line.partition("\t")[2]: line.split()[0] for line in listing.splitlines()}
    assert by_path["table.csv"] == "i/lf"
    assert by_path["image.png"] == "i/-text"
    stored_png = subprocess.run(
        ["git", "show", ":image.png"], cwd=tmp_path, check=True, capture_output=True
    ).stdout
    assert stored_png == b"\x89PNG\r\n\x1a\n\r\n"
    assert _git(tmp_path, "show", ":table.csv") == "a,b\n1,2\n"
