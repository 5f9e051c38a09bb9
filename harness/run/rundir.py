"""The run directory as the parent keeps it: completion markers, the records' torn last line,
the lock that keeps one harness process per directory, and run.json.

File names come from :class:`harness.contract.RunFiles`; run.json's schema and its checked
reader from :mod:`harness.results.runinfo`.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.contract import RunFiles
from harness.errors import UsageError
from harness.results.runinfo import read_run_info
from harness.results.store import read_json, write_json
from harness.run.decide import OP_STATUSES, OpOutcome

__all__ = [
    "check_out_dir",
    "read_markers",
    "read_run_info",
    "repair_records_tail",
    "run_lock",
    "write_marker",
    "write_run_info",
]


def check_out_dir(path: Path) -> None:
    """Fail before anything is written if the run directory cannot be used."""
    if path.exists() and (path / "run.json").exists():
        raise UsageError(
            f"Output directory {path} already holds a run. Use --resume {path} to finish it, "
            "or choose another --out."
        )
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK):
        raise UsageError(
            f"Output directory {path} is not writable ({probe} does not allow writing). "
            "Choose another --out or fix the permissions."
        )
    if probe.is_file():
        raise UsageError(f"Output path {probe} is a file, not a directory. Choose another --out.")


def write_run_info(run_dir: Path, info: dict[str, Any]) -> None:
    write_json(RunFiles(run_dir).run_info, info)


# -- completion markers ----------------------------------------------------------------------


def write_marker(run_dir: Path, outcome: OpOutcome) -> None:
    """The completion marker: an op that has one is not run again by --resume."""
    write_json(RunFiles(run_dir).marker(outcome.op), {**outcome.row(), "notes": list(outcome.notes)})


def read_markers(run_dir: Path) -> dict[str, OpOutcome]:
    found: dict[str, OpOutcome] = {}
    for path in sorted((run_dir / "done").glob("*.json")):
        data = read_json(path)
        if data.get("status") not in OP_STATUSES:
            continue
        found[data["op"]] = OpOutcome(
            op=data["op"],
            device=data["device"],
            status=data["status"],
            attempts=int(data["attempts"]),
            elapsed_s=float(data["elapsed_s"]),
            rows=int(data["rows"]),
            notes=tuple(data["notes"]),
            compile_s=float(data["compile_s"]) if data.get("compile_s") not in (None, "") else None,
        )
    return found


# -- records.jsonl ---------------------------------------------------------------------------


def repair_records_tail(path: Path) -> int:
    """Cut a torn last line (a process killed in the middle of writing a record) so the next
    append starts on a line of its own. Call only while no op process is running. Returns the
    number of bytes dropped."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return 0
        fh.seek(0)
        data = fh.read()
        keep = data.rfind(b"\n") + 1
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return size - keep


# -- one harness process per run directory ---------------------------------------------------


def _open_lock(path: Path) -> int:
    """An open descriptor of ``path`` (created if missing) holding an exclusive flock on it.

    flock belongs to the open file, so the kernel drops it when its holder ends, however it ends
    (a run killed with SIGKILL leaves a file that locks nothing), and the descriptor is never
    inherited by an op process, which would keep the lock after the harness died. The holder
    removes the file before it lets go (:func:`run_lock`): a process that opened the file before
    that removal and locked it after holds a lock on a name that is gone, so it opens the path
    again until the file it locked is the one the path names.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise
        try:
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


@contextmanager
def run_lock(run_dir: Path, fresh: bool = False) -> Iterator[None]:
    """One harness process per run directory: a resume must not race the run it finishes.

    ``run.lock`` exists only while a harness process works on the directory: it is removed
    when the run ends (complete, failed, interrupted or on an error of the harness); a SIGKILLed
    run leaves it behind, unlocked, and the next resume takes it. ``fresh`` (a new run, not a
    resume): refuse a directory that came to hold a run while this process was preparing.
    """
    path = RunFiles(run_dir).lock
    try:
        fd = _open_lock(path)
    except BlockingIOError:
        raise UsageError(
            f"Run directory {run_dir} is in use by another harness process. Wait for it to "
            "finish (or stop it), then run `harness run --resume` again."
        ) from None
    try:
        if fresh:
            check_out_dir(run_dir)
        yield
    finally:
        try:
            path.unlink(missing_ok=True)  # still locked: no other process can be using it now
        except OSError:
            pass
        os.close(fd)
