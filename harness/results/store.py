"""Files of a run directory: crash-safe appends and atomic replacement."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.results.schema import Measurement, record_from_dict

__all__ = ["append_record", "atomic_write_text", "csv_text", "file_mode", "read_json", "read_records", "write_json"]


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """A CSV file's text: a header of ``columns``, then one line per row (LF line ends)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


_UMASK: int | None = None
_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process's umask, read once (os.umask can only be read by setting it: done under a lock
    and at most once, so no other thread creates a file while it is 0)."""
    global _UMASK
    with _UMASK_LOCK:
        if _UMASK is None:
            current = os.umask(0o022)
            os.umask(current)
            _UMASK = current
        return _UMASK


def file_mode() -> int:
    """The mode a newly created file gets here (0o644 under the usual umask 022)."""
    return 0o666 & ~_umask()


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never half.
    The file gets the mode any new file gets (the umask's), not mkstemp's private 0600: reports
    are read by other users (a host user reading what a container wrote)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def append_record(path: Path, record: Measurement) -> None:
    """Append one record as one line, flushed to disk before returning.

    One ``write`` of one complete line on an O_APPEND descriptor: a crash
    leaves at most a partial last line, which :func:`read_records` skips. If an
    earlier writer was killed mid-line, this line starts on a fresh one, so the
    torn fragment never swallows a good record.
    """
    line = json.dumps(record.to_dict(), sort_keys=True, allow_nan=False) + "\n"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_records(path: Path) -> list[Measurement]:
    """All complete records in a records.jsonl.

    A torn line (a writer killed mid-write) is skipped wherever it is: later
    appends start on a fresh line, so a fragment can sit between good records.
    Anything else that is not a record (valid JSON of the wrong shape) is an error.
    """
    if not path.exists():
        return []
    records: list[Measurement] = []
    torn = 0
    lines = path.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            # The last line may be a write in progress or a crash's leftover: skipped quietly.
            torn += number != len(lines)
            continue
        records.append(record_from_dict(data))
    if torn:
        warnings.warn(f"{path}: skipped {torn} torn line(s) left by an interrupted writer", stacklevel=2)
    return records
