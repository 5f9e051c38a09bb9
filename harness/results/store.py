"""Files of a run directory: crash-safe appends and atomic replacement."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.results.schema import Measurement, record_from_dict

__all__ = ["append_record", "atomic_write_text", "read_json", "read_records", "write_json"]


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
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
    leaves at most a partial last line, which :func:`read_records` skips.
    """
    line = json.dumps(record.to_dict(), sort_keys=True, allow_nan=False) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_records(path: Path) -> list[Measurement]:
    """All complete records in a records.jsonl; a torn final line (a crash mid-write) is skipped."""
    if not path.exists():
        return []
    records: list[Measurement] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # unterminated last line: torn write
                continue
            raise ValueError(f"{path}:{number}: not a JSON record") from None
        records.append(record_from_dict(data))
    return records


def iter_dicts(records: Iterable[Measurement]) -> Iterable[dict[str, Any]]:
    for r in records:
        yield r.to_dict()
