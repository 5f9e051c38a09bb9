"""The run directory as the parent keeps it: completion markers, the records' torn last line,
the lock that keeps one harness process per directory, and run.json.

File names come from :class:`harness.contract.RunFiles`; run.json's schema and its checked
reader from :mod:`harness.results.runinfo`.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.contract import RunFiles
from harness.errors import UsageError
from harness.options import RunOptions
from harness.results.runinfo import read_run_info
from harness.results.schema import Measurement, record_from_dict
from harness.results.store import (
    OUTPUT_ROOM,
    check_can_write_dir,
    check_path_fits,
    file_mode,
    read_json,
    write_json,
)
from harness.run.decide import OP_STATUSES, OpOutcome
from harness.run.leftovers import describe, find_marked

__all__ = [
    "check_out_dir",
    "read_markers",
    "reopen_failed",
    "read_run_info",
    "refuse_live_ops",
    "repair_records_tail",
    "run_dir_for",
    "run_lock",
    "write_marker",
    "write_run_info",
]


def _in_use(run_dir: Path) -> bool:
    """Whether a harness process holds the run directory's lock now (without taking it)."""
    try:
        fd = os.open(RunFiles(run_dir).lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops a lock taken here
    return False


def _held_run(path: Path, source: str, check_lock: bool) -> str:
    """Why ``path``, which holds a run.json, cannot take a new run: what it holds and what to do."""
    if check_lock and _in_use(path):
        return (f"{source}: {path} is in use by a harness process that is running now. Wait for it to "
                "finish (or stop it), or choose another --out or --run-id.")
    try:
        status = read_run_info(RunFiles(path).run_info).get("status")
    except UsageError:
        return (f"{source}: {path} already holds a run, and its run.json is damaged. Choose another "
                "--out or --run-id.")
    if status in ("running", "interrupted"):
        return (f"{source}: {path} already holds an unfinished run (status {status}). Finish it with "
                f"`harness run --resume {path}`, or choose another --out or --run-id.")
    return (f"{source}: {path} already holds a finished run (status {status}). Choose another --out or "
            "--run-id.")


def check_out_dir(path: Path, source: str = "", check_lock: bool = True) -> None:
    """Fail before anything is written if a new run cannot use ``path``; ``source`` names the
    option that chose it (``--out DIR``, ``--reports-dir DIR``) for the message; where ``path``
    would be created is tried for real (harness.results.store.check_can_write_dir)."""
    source = source or f"run directory {path}"
    check_path_fits(path, source, room=OUTPUT_ROOM)  # before any look inside it: too long a name raises
    if (path / "run.json").exists():
        raise UsageError(_held_run(path, source, check_lock))
    check_can_write_dir(path, source)


def run_dir_for(options: RunOptions, run_id: str) -> tuple[Path, str]:
    """The run directory a new run writes and the option that chose it (for messages)."""
    if options.out:
        return Path(options.out), f"--out {options.out}"
    return Path(options.reports_dir) / run_id, f"--reports-dir {options.reports_dir}"


def refuse_live_ops(run_dir: Path) -> None:
    """Refuse to work on a run while a process of its ops is still alive (one that survived a
    harness killed with SIGKILL): two op processes would time on one device and append to one
    records file."""
    live = find_marked(run_dir)
    if live:
        ops = ", ".join(sorted({p.op for p in live}))
        raise UsageError(
            f"{run_dir}: op process(es) of this run are still running: {describe(live)} (op {ops}), "
            "left by a harness process that was killed. End them first (kill "
            f"{' '.join(str(p.pid) for p in live)}), then resume again."
        )


def write_run_info(run_dir: Path, info: dict[str, Any]) -> None:
    write_json(RunFiles(run_dir).run_info, info)


# -- completion markers ----------------------------------------------------------------------


def write_marker(run_dir: Path, outcome: OpOutcome) -> None:
    """The completion marker: an op that has one is not run again by --resume."""
    write_json(RunFiles(run_dir).marker(outcome.op), outcome.to_json())


def read_markers(run_dir: Path) -> dict[str, OpOutcome]:
    """The completion markers (a marker of an older harness, with numbers as strings, reads too);
    a damaged one is refused by name."""
    found: dict[str, OpOutcome] = {}
    for path in sorted((run_dir / "done").glob("*.json")):
        try:
            data = read_json(path)
            if not isinstance(data, dict) or data.get("status") not in OP_STATUSES:
                continue
            outcome = OpOutcome.from_json(data)
        except (ValueError, OSError) as exc:
            raise UsageError(f"{path}: not a readable completion marker ({exc}). Delete it to run that "
                             "op again on --resume.") from None
        found[outcome.op] = outcome
    return found


def reopen_failed(run_dir: Path, done: Mapping[str, OpOutcome]) -> dict[str, OpOutcome]:
    """``--resume --retry-failed``: the ops of ``done`` (their completion markers) that did not pass
    (FAIL, ERROR, CRASH, TIMEOUT) lose their marker and their records, so the resume runs each of
    them again from its first case. Returns the ops that stay done. Call only under the run lock,
    with no op process running."""
    again = {op for op, outcome in done.items() if outcome.failed}
    if not again:
        return dict(done)
    path = RunFiles(run_dir).records
    if path.exists():
        kept = [line for line in path.read_bytes().splitlines(keepends=True)
                if (record := _record_or_none(line)) is None or record.op not in again]
        _replace_bytes(path, b"".join(kept))  # a torn or corrupt line stays, for the readers to report
    for op in again:
        RunFiles(run_dir).marker(op).unlink(missing_ok=True)
    return {op: outcome for op, outcome in done.items() if op not in again}


def _replace_bytes(path: Path, data: bytes) -> None:
    """``path`` replaced by ``data`` at once, byte for byte (a reader sees the old file or the new)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- records.jsonl ---------------------------------------------------------------------------


def repair_records_tail(path: Path) -> int:
    """Cut a torn last line (a process killed in the middle of writing a record) so the next
    append starts on a line of its own; a last line that is a whole record and only lacks its line
    end gets one (readers count it as a record). Call only while no op process is running.
    Returns the number of bytes dropped."""
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
        if isinstance(_record_or_none(data[keep:]), Measurement):
            fh.write(b"\n")
            keep = size
        else:
            fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return size - keep


def _record_or_none(line: bytes) -> Measurement | None:
    try:
        return record_from_dict(json.loads(line.decode("utf-8", "replace")))
    except (ValueError, RecursionError):
        return None


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
            check_out_dir(run_dir, check_lock=False)  # this process holds the lock
        yield
    finally:
        try:
            path.unlink(missing_ok=True)  # still locked: no other process can be using it now
        except OSError:
            pass
        os.close(fd)
