"""Processes an op leaves behind, found by a mark in their environment, and ended.

Ending an op's process group ends what the op started in that group, but a process the op
started in a session of its own (``setsid``, a daemon that double-forks) is in another group and
survives. So the parent marks every op process's environment with the run directory and the op
(:data:`harness.contract.RUN_MARK_ENV`, :data:`harness.contract.OP_MARK_ENV`); every process it
starts inherits the mark, whatever session or group it moves to. After each attempt the batch
looks in ``/proc`` for processes that still carry the op's mark and ends them (SIGKILL, through a
pidfd so a pid reused meanwhile is never hit), and the op's row says which. A resume refuses to
start while a process of the run is alive (one that survived a harness killed with SIGKILL).

Why the environment and not a cgroup: a cgroup of one's own needs a delegated cgroup v2 subtree
(systemd ``Delegate=``, a container with a writable ``/sys/fs/cgroup``), which CI runners and
the vendor containers do not give; the environment needs nothing. What it cannot see: a process
that clears its environment (``env -i``, ``execve`` with a fresh one) or that runs as another
user (its ``/proc/PID/environ`` is unreadable); Linux only (elsewhere nothing is found).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.contract import OP_MARK_ENV, RUN_MARK_ENV

__all__ = ["Marked", "describe", "end_marked", "find_marked", "op_marks"]

PROC = Path("/proc")


def _run_key(run_dir: Path) -> str:
    return os.path.realpath(run_dir)


def op_marks(run_dir: Path, op: str) -> dict[str, str]:
    """The environment entries that mark a process as started for ``op`` of the run in ``run_dir``."""
    return {RUN_MARK_ENV: _run_key(run_dir), OP_MARK_ENV: op}


@dataclass(frozen=True)
class Marked:
    """A live process carrying a run's mark."""

    pid: int
    op: str
    command: str


def _marks(pid: int, proc: Path) -> dict[str, str] | None:
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:  # gone, a zombie's unreadable environment, another user's process
        return None
    found: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep and key in (RUN_MARK_ENV.encode(), OP_MARK_ENV.encode()):
            found[key.decode()] = value.decode("utf-8", "surrogateescape")
    return found


def _command(pid: int, proc: Path) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)[:80] or "?"


def _matches(marks: Mapping[str, str] | None, run: str, op: str | None) -> bool:
    if not marks:
        return False
    return marks.get(RUN_MARK_ENV) == run and (op is None or marks.get(OP_MARK_ENV) == op)


def find_marked(run_dir: Path, op: str | None = None, proc: Path = PROC) -> list[Marked]:
    """Live processes (other than this one) marked for ``op`` (any op when None) of the run."""
    run = _run_key(run_dir)
    me = os.getpid()
    found: list[Marked] = []
    try:
        entries = list(proc.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        marks = _marks(pid, proc)
        if marks is not None and _matches(marks, run, op):
            found.append(Marked(pid, marks.get(OP_MARK_ENV, "?"), _command(pid, proc)))
    return sorted(found, key=lambda m: m.pid)


def end_marked(processes: Iterable[Marked], run_dir: Path, proc: Path = PROC) -> list[Marked]:
    """SIGKILL each process that still carries its mark; the ones ended. A pidfd pins the process
    while its mark is checked again, so a pid reused in between is never signalled."""
    run = _run_key(run_dir)
    ended: list[Marked] = []
    for p in processes:
        try:
            fd = os.pidfd_open(p.pid)
        except OSError:  # gone already (or no pidfd: then leave it rather than risk a reused pid)
            continue
        try:
            if _matches(_marks(p.pid, proc), run, p.op):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                ended.append(p)
        except OSError:
            pass
        finally:
            os.close(fd)
    return ended


def describe(processes: Iterable[Marked]) -> str:
    """``pid 123 (sleep 300), pid 124 (...)``."""
    return ", ".join(f"pid {p.pid} ({p.command})" for p in processes)
