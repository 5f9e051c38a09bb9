"""What the gate's host does with what a side produced, when the side's code is not trusted.

In `harness gate-run --container` each side's `harness run` is code under test (in the PR
gate, a pull request's). It writes into a folder of its own, mounted as the container's
reports/, and the host reads that folder only through this module (docs/ci-security.md,
"What the host reads"):

- :func:`check_tree` walks the whole folder without following anything and names every entry
  that is not a folder or a plain file with one name: symbolic links, hard links, FIFOs,
  sockets, device nodes. With the side's run directories given, it also names anything beside
  them and any file at a run directory's top that only the host writes (``compare.*``).
- :func:`copy_checked` copies a checked run directory into a folder the host owns. Every entry
  is opened relative to its parent's descriptor with ``O_NOFOLLOW``, so a link is refused,
  never followed, even one swapped in after the check.
- :func:`commands_stopped`, :func:`log_safe` and :func:`inert`: text a side printed or named
  reaches a GitHub Actions log with its workflow commands (``::warning::``, ``##[add-mask]``)
  not obeyed.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from harness.errors import GateFailed, HarnessError

__all__ = [
    "MAX_DEPTH",
    "MAX_TREE_BYTES",
    "Finding",
    "check_tree",
    "commands_stopped",
    "copy_checked",
    "entry_kind",
    "inert",
    "log_safe",
    "log_safe_errors",
    "refusal",
    "remove_tree",
    "under_actions",
]

MAX_TREE_BYTES = 4 << 30  # a side's files, all together: more is refused rather than copied
MAX_DEPTH = 64  # folders nested deeper are refused (a run directory is 3 deep)
MAX_SHOWN = 20  # findings listed in a refusal; the rest are counted
HOST_OWNED_PREFIX = "compare"  # compare.md, .csv, .html, -junit.xml: written by the host alone

SYMLINK = "symbolic link"
HARD_LINK = "hard link"
FIFO = "FIFO"
SOCKET = "socket"
CHAR_DEVICE = "character device"
BLOCK_DEVICE = "block device"
UNKNOWN = "file of an unknown type"
NOT_A_RUN = "not a run directory of this side"
HOST_OWNED = "a file only the host writes"
TOO_DEEP = "folders nested too deep"
TOO_LARGE = "more bytes than the host copies"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO swapped in after the check returns at once instead of waiting.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Finding:
    """One entry of a side's folder the host refuses to read."""

    path: str  # relative to the checked folder, "/"-separated, as the side named it
    kind: str  # one of the words above
    detail: str = ""  # a link's target, a count of names

    def shown(self) -> str:
        """One line for a person and for a workflow log: names escaped (:func:`inert`)."""
        return f"{inert(self.path)}: {self.kind}" + (f" ({inert(self.detail)})" if self.detail else "")


def entry_kind(st: os.stat_result) -> str | None:
    """What an entry is, from its own status (``lstat``); None for a folder or a plain file with
    one name, the only entries the host reads."""
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return None
    if stat.S_ISREG(mode):
        return HARD_LINK if st.st_nlink > 1 else None
    if stat.S_ISLNK(mode):
        return SYMLINK
    if stat.S_ISFIFO(mode):
        return FIFO
    if stat.S_ISSOCK(mode):
        return SOCKET
    if stat.S_ISCHR(mode):
        return CHAR_DEVICE
    if stat.S_ISBLK(mode):
        return BLOCK_DEVICE
    return UNKNOWN


def _detail(kind: str, st: os.stat_result, dir_fd: int, name: str) -> str:
    if kind == SYMLINK:
        try:
            return f"to {os.readlink(name, dir_fd=dir_fd)}"
        except OSError:
            return ""
    if kind == HARD_LINK:
        return f"{st.st_nlink} names"
    return ""


# visit(dir_fd, name, path, status, depth) -> whether to descend into it (for a folder)
_Visit = Callable[[int, str, str, os.stat_result, int], bool]


def _walk(dir_fd: int, rel: str, depth: int, visit: _Visit) -> None:
    """Every entry below ``dir_fd``, parents first, in name order; folders are entered through
    descriptors opened with O_NOFOLLOW relative to their parent, so nothing is followed."""
    with os.scandir(dir_fd) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        path = f"{rel}/{entry.name}" if rel else entry.name
        if visit(dir_fd, entry.name, path, st, depth) and stat.S_ISDIR(st.st_mode):
            fd = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                _walk(fd, path, depth + 1, visit)
            finally:
                os.close(fd)


@contextmanager
def _opened_dir(path: Path) -> Iterator[int]:
    fd = os.open(path, _DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def check_tree(root: Path, run_dirs: Collection[str] | None = None) -> list[Finding]:
    """Every entry of ``root`` the host refuses to read, in path order; [] when all is plain.

    Refused anywhere: symbolic links, hard links (a file with more than one name), FIFOs,
    sockets, device nodes, folders nested deeper than MAX_DEPTH, and more than MAX_TREE_BYTES
    in files. With ``run_dirs`` (the names of the side's run directories), also anything else
    at the top of ``root`` and a file at a run directory's top named like the host's comparison
    outputs (``compare*``). ``root`` itself is made by the host; it is opened without following
    a link all the same.
    """
    try:
        root_status = os.lstat(root)
    except FileNotFoundError:
        return []
    kind = entry_kind(root_status)
    if kind is not None or not stat.S_ISDIR(root_status.st_mode):
        return [Finding(".", kind or UNKNOWN)]
    findings: list[Finding] = []
    total = 0

    def visit(dir_fd: int, name: str, path: str, st: os.stat_result, depth: int) -> bool:
        nonlocal total
        kind = entry_kind(st)
        if kind is not None:
            findings.append(Finding(path, kind, _detail(kind, st, dir_fd, name)))
            return False
        is_dir = stat.S_ISDIR(st.st_mode)
        if run_dirs is not None and depth == 0 and not (is_dir and name in run_dirs):
            findings.append(Finding(path, NOT_A_RUN))
            return False
        if run_dirs is not None and depth == 1 and name.startswith(HOST_OWNED_PREFIX):
            findings.append(Finding(path, HOST_OWNED))
            return False
        if is_dir and depth + 1 >= MAX_DEPTH:
            findings.append(Finding(path, TOO_DEEP, f"more than {MAX_DEPTH}"))
            return False
        if not is_dir:
            total += st.st_size
        return True

    with _opened_dir(root) as fd:
        _walk(fd, "", 0, visit)
    if total > MAX_TREE_BYTES:
        findings.append(Finding(".", TOO_LARGE, f"{total} bytes in files, the limit is {MAX_TREE_BYTES}"))
    return findings


def refusal(findings: Collection[Finding], who: str, root: Path) -> GateFailed:
    """The error that fails the gate closed, naming each finding (the first MAX_SHOWN), on one
    line as every message is printed."""
    shown = [f.shown() for f in list(findings)[:MAX_SHOWN]]
    if len(findings) > MAX_SHOWN:
        shown.append(f"and {len(findings) - MAX_SHOWN} more")
    return GateFailed(
        f"{who} left {len(findings)} entr{'y' if len(findings) == 1 else 'ies'} in its output folder "
        f"{inert(str(root))} that the host does not read: " + "; ".join(shown) + ". "
        "The gate fails closed: nothing more of that side is read or published. A `harness run` "
        "writes only folders and plain files into its own run directory; these come from the code "
        "under test (docs/ci-security.md, \"What the host reads\")."
    )


def copy_checked(src: Path, dst: Path) -> int:
    """Copy the folder ``src`` to ``dst`` (which must not exist) through descriptors that never
    follow a link; the bytes copied. Folders and plain files with one name only: anything else
    met on the way (changed since :func:`check_tree`) is refused with GateFailed, as is more than
    MAX_TREE_BYTES. The copies get the modes any new file and folder gets (the umask's)."""
    copied = 0

    def refuse(path: str, why: str) -> GateFailed:
        return GateFailed(f"Copying {inert(str(src))} stopped at {inert(path)}: {why}. Nothing of it is read.")

    def copy_file(dir_fd: int, name: str, path: str, st: os.stat_result) -> None:
        nonlocal copied
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        try:
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or entry_kind(now) is not None \
                    or not stat.S_ISREG(now.st_mode):
                raise refuse(path, "it changed while it was copied")
            out = os.open(dst / path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
            try:
                while chunk := os.read(fd, _CHUNK):
                    copied += len(chunk)
                    if copied > MAX_TREE_BYTES:
                        raise refuse(path, f"more than {MAX_TREE_BYTES} bytes")
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out, view):]
            finally:
                os.close(out)
        finally:
            os.close(fd)

    def visit(dir_fd: int, name: str, path: str, st: os.stat_result, depth: int) -> bool:
        kind = entry_kind(st)
        if kind is not None:
            raise refuse(path, f"a {kind}")
        if stat.S_ISDIR(st.st_mode):
            if depth + 1 >= MAX_DEPTH:
                raise refuse(path, TOO_DEEP)
            os.mkdir(dst / path)
            return True
        copy_file(dir_fd, name, path, st)
        return False

    dst.mkdir(parents=False)
    try:
        with _opened_dir(src) as fd:
            _walk(fd, "", 0, visit)
    except OSError as exc:
        where = str(exc.filename) if exc.filename is not None else str(src)
        raise GateFailed(f"Copying {inert(str(src))} failed at {inert(where)}: {exc.strerror or exc}. "
                         "Nothing of it is read.") from None
    return copied


def remove_tree(root: Path) -> None:
    """Remove a side's folder, best effort: its folders are first made writable (through
    descriptors, nothing followed: the side may have made them read-only), then removed with
    shutil.rmtree, which does not follow links either."""
    def writable(dir_fd: int, name: str, path: str, st: os.stat_result, depth: int) -> bool:
        if stat.S_ISDIR(st.st_mode):
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                try:
                    os.fchmod(fd, 0o700)
                finally:
                    os.close(fd)
            except OSError:
                return False
            return True
        return False

    try:
        with _opened_dir(root) as fd:
            os.fchmod(fd, 0o700)
            _walk(fd, "", 0, writable)
    except OSError:
        pass
    shutil.rmtree(root, ignore_errors=True)


_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def inert(text: str) -> str:
    """``text`` on one line of printable ASCII that no workflow runner obeys: backslashes doubled,
    every other character outside space..tilde written as its escape (``\\x0a``, ``\\u200b``),
    ``::`` as ``:\\x3a`` and ``##[`` as ``##\\x5b``. For names the side chose (paths, link
    targets) shown in a message."""
    escaped = _UNPRINTABLE.sub(_escape, text.replace("\\", "\\\\"))
    return escaped.replace("::", ":\\x3a").replace("##[", "##\\x5b")


_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")


def log_safe(text: str) -> str:
    """``text`` with its lines kept and nothing in it a GitHub Actions runner obeys: a line whose
    first characters after blanks are ``::`` gets ``:\\x3a`` for them, and ``##[`` anywhere
    becomes ``##\\x5b`` (the runner's older command form, found anywhere in a line). For
    messages that may quote what a side wrote, printed where commands are not stopped."""
    parts = _LINE_BREAK.split(text)
    for i in range(0, len(parts), 2):  # the even parts are lines, the odd ones their breaks
        line = parts[i]
        if line.lstrip().startswith("::"):
            at = line.index("::")
            parts[i] = line[:at] + ":\\x3a" + line[at + 2:]
    return "".join(parts).replace("##[", "##\\x5b")


@contextmanager
def log_safe_errors() -> Iterator[None]:
    """A HarnessError raised meanwhile goes on with a :func:`log_safe` message (same class, same
    exit code): its message may quote what a side wrote, and it is printed after the block."""
    try:
        yield
    except HarnessError as exc:
        exc.message = log_safe(exc.message)
        exc.args = (exc.message,)
        raise


def under_actions(env: Mapping[str, str]) -> bool:
    """Whether this process runs as a step of a GitHub Actions job (the runner sets it)."""
    return env.get("GITHUB_ACTIONS") == "true"


@contextmanager
def commands_stopped(stream: TextIO, env: Mapping[str, str]) -> Iterator[bool]:
    """Under GitHub Actions (``GITHUB_ACTIONS=true``), what is written to ``stream`` meanwhile
    is shown but its workflow commands are not obeyed: ``::stop-commands::TOKEN`` before, and
    ``::TOKEN::`` on a line of its own after, with a fresh random token the text cannot know.
    Elsewhere nothing is written. Yields whether commands are stopped.

    The runner keeps this state for the rest of the job, so the resume line is written however
    the block ends."""
    if not under_actions(env):
        yield False
        return
    token = secrets.token_hex(16)
    stream.write(f"::stop-commands::{token}\n")
    stream.flush()
    try:
        yield True
    finally:
        stream.write(f"\n::{token}::\n")
        stream.flush()
