"""Files of a run directory: crash-safe appends, atomic replacement, and the checked reader of
records.jsonl.

Every text written here encodes whatever an op's messages held (harness.results.text): a lone
surrogate is written as its escape, never an encoding error that loses the file.

Reading records.jsonl (:func:`read_records_file`, :func:`read_records`): a line is a record, a
**torn** line (what a writer killed in the middle of its one ``write`` leaves: a record cut
short; later appends start on a fresh line, so one may sit between good records), or a
**corrupt** one (anything else: not JSON, JSON that is not a record, a record of a newer
schema). Torn lines are reported and tolerated; a corrupt line is never skipped silently:
``read_records`` raises :class:`RecordsCorrupt` naming each one (``on_corrupt="skip"`` keeps
the readable records, for a run in progress), and :class:`RecordsFile` lists them.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.errors import UsageError
from harness.results.schema import Measurement, RecordError, record_from_dict
from harness.results.text import json_safe, xml_text

__all__ = [
    "LineProblem",
    "RecordsCorrupt",
    "RecordsFile",
    "append_record",
    "atomic_write_text",
    "check_can_write_dir",
    "check_can_write_file",
    "check_path_fits",
    "csv_text",
    "file_mode",
    "read_json",
    "read_records",
    "read_records_file",
    "read_records_strict",
    "write_json",
]


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """A CSV file's text: a header of ``columns``, then one line per row (LF line ends). Control
    characters other than tab and line ends (a NUL stops Python's csv reader) and lone surrogates
    in a cell are written as escapes (harness.results.text)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: xml_text(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows)
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
        # backslashreplace: a lone surrogate (a non-UTF-8 name in a message) is written as its escape
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as fh:
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


# Bytes kept under PATH_MAX for what an output folder holds (logs/<op>.log, autotune/<op>/<file>,
# the temporaries of atomic replacement): a folder whose own path just fits would fail inside.
OUTPUT_ROOM = 128
# atomic_write_text's temporary beside a file: "." + name + "." + 8 random characters.
_TEMP_EXTRA = 10


def _limits(path: Path) -> tuple[int, int]:
    """(NAME_MAX, PATH_MAX) of the file system that would hold ``path`` (255 and 4096 where the
    system does not say)."""
    probe = Path(os.path.abspath(path))
    while not os.path.isdir(probe) and probe != probe.parent:
        probe = probe.parent
    found = []
    for name, default in (("PC_NAME_MAX", 255), ("PC_PATH_MAX", 4096)):
        try:
            found.append(os.pathconf(probe, name))
        except (OSError, ValueError):
            found.append(default)
    return found[0], found[1]


def check_path_fits(path: Path, source: str, room: int = 0, temp: int = 0) -> None:
    """Refuse (UsageError naming ``source``) a path the file system cannot hold: a name longer
    than NAME_MAX (``temp`` bytes more for the last one: a temporary written beside it), or the
    whole path, with ``room`` bytes for what is written inside it, reaching PATH_MAX."""
    full = os.fsencode(os.path.abspath(path))
    name_max, path_max = _limits(path)
    parts = full.split(b"/")
    for index, part in enumerate(parts):
        extra = temp if index == len(parts) - 1 else 0
        if len(part) + extra > name_max:
            raise UsageError(f"{source}: cannot create it ({os.strerror(errno.ENAMETOOLONG)}: a name of "
                             f"{len(part)} bytes{' and its temporary' if extra else ''}, where this file system "
                             f"takes {name_max}). Choose a shorter name.")
    if len(full) + room >= path_max:
        raise UsageError(f"{source}: cannot create it ({os.strerror(errno.ENAMETOOLONG)}: the path is "
                         f"{len(full)} bytes{f' and what is written in it needs {room} more' if room else ''}, "
                         f"where this system takes paths under {path_max}). Choose a shorter path.")


def check_can_write_dir(path: Path, source: str) -> None:
    """Refuse (UsageError naming ``source``, the option that gave ``path``) a directory that cannot
    be created or written, before anything is computed or written: a path too long for the file
    system (:func:`check_path_fits`, with room for the files written in it), or one whose nearest
    existing directory refuses a new entry. That directory is tried for real (a directory made
    there and removed again): permissions alone do not say that /proc, a read-only mount or a path
    through a file refuse one."""
    check_path_fits(path, source, room=OUTPUT_ROOM)
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{source}: {probe} is not a directory, so {path} cannot be created there. "
                         "Choose another directory.")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".harness-probe-", dir=probe))
    except OSError as exc:
        raise UsageError(f"{source}: cannot write {path} ({probe} refuses a new entry: {exc.strerror}). "
                         "Choose another directory, or fix the permissions.") from None


def check_can_write_file(path: Path, source: str) -> None:
    """As :func:`check_can_write_dir`, for a file to be written (its directory must take it)."""
    check_path_fits(path, source, temp=_TEMP_EXTRA)
    if path.is_dir():
        raise UsageError(f"{source}: {path} is a directory; give a file name.")
    check_can_write_dir(path.parent, source)


def write_json(path: Path, data: Any) -> None:
    """``data`` as JSON that any parser reads: strings encodable, NaN and infinities as null."""
    atomic_write_text(path, json.dumps(json_safe(data, finite=True), indent=2, sort_keys=True,
                                       allow_nan=False) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def append_record(path: Path, record: Measurement) -> None:
    """Append one record as one line, flushed to disk before returning.

    One ``write`` of one complete line on an O_APPEND descriptor: a crash
    leaves at most a partial last line, which :func:`read_records` skips. If an
    earlier writer was killed mid-line, this line starts on a fresh one, so the
    torn fragment never swallows a good record.

    A line the system takes only in part (a full disk, a file size limit, a quota) raises
    OSError naming the file and the cause: a record is written whole or the writer knows. What
    was taken stays as a torn line (other op processes may be appending to the same file, so it
    is not cut back), and the next append starts on a fresh line.
    """
    line = json.dumps(json_safe(record.to_dict()), sort_keys=True, allow_nan=False) + "\n"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line
        data = line.encode("utf-8")
        try:
            written = os.write(fd, data)
            while 0 < written < len(data):  # the rest, or the cause of the short write as an OSError
                more = os.write(fd, data[written:])
                if more <= 0:
                    break
                written += more
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        if written < len(data):
            raise OSError(errno.ENOSPC, f"the record was written in part ({written} of {len(data)} bytes)",
                          str(path))
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class LineProblem:
    """A line of records.jsonl that is not a record."""

    line: int  # 1-based
    kind: Literal["torn", "corrupt"]
    reason: str

    def describe(self) -> str:
        return f"line {self.line}: {self.reason}"


class RecordsCorrupt(UsageError):
    """records.jsonl holds lines that are neither records nor torn writes (exit 2)."""


@dataclass(frozen=True)
class RecordsFile:
    """Everything read from one records.jsonl: the records and the lines that are not records."""

    path: Path
    records: tuple[Measurement, ...] = ()
    problems: tuple[LineProblem, ...] = ()

    @property
    def corrupt(self) -> tuple[LineProblem, ...]:
        return tuple(p for p in self.problems if p.kind == "corrupt")

    @property
    def torn(self) -> tuple[LineProblem, ...]:
        return tuple(p for p in self.problems if p.kind == "torn")

    def corrupt_message(self) -> str:
        """One line: which lines are corrupt, why, and what to do."""
        shown = "; ".join(p.describe() for p in self.corrupt[:5])
        more = f" (and {len(self.corrupt) - 5} more)" if len(self.corrupt) > 5 else ""
        return (f"{self.path}: {len(self.corrupt)} line(s) are not records this harness can read: "
                f"{shown}{more}. The run's results are not whole: restore the file (it was edited or "
                "damaged), read it with the harness that wrote it, or run again; `harness report RUN_DIR` "
                "lists every line.")

    def check(self) -> None:
        """Raise :class:`RecordsCorrupt` when a line is corrupt (torn lines are tolerated)."""
        if self.corrupt:
            raise RecordsCorrupt(self.corrupt_message())


_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
_NUMBER_TAIL = re.compile(r"[-+0-9.eE]*")


def _cut_short(line: str, error: json.JSONDecodeError) -> bool:
    """Whether an unparseable line is a record cut short (a prefix of one), not damage."""
    if not line.startswith("{") or error.msg == "Extra data":
        return False
    if error.pos >= len(line) or error.msg.startswith("Unterminated string"):
        return True
    rest = line[error.pos:]
    return any(lit.startswith(rest) for lit in _LITERALS) or _NUMBER_TAIL.fullmatch(rest) is not None


def _shorten(text: str, width: int = 60) -> str:
    return repr(text if len(text) <= width else text[:width] + "...")


def _read_line(number: int, line: str) -> Measurement | LineProblem:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        if _cut_short(line, exc):
            return LineProblem(number, "torn", "a record cut short (a writer killed mid-line)")
        return LineProblem(number, "corrupt", f"not JSON ({exc.msg} at column {exc.colno}): {_shorten(line)}")
    except RecursionError:
        return LineProblem(number, "corrupt", f"not JSON (nested too deeply): {_shorten(line)}")
    try:
        return record_from_dict(data)
    except RecordError as exc:
        return LineProblem(number, "corrupt", str(exc))


def read_records_file(path: Path) -> RecordsFile:
    """Read a records.jsonl, sorting its lines into records, torn lines and corrupt lines; a
    missing file has no records. Raises only when the file cannot be read at all."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return RecordsFile(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror}).") from None
    text = raw.decode("utf-8", errors="surrogateescape")
    lines = text.split("\n")  # the last item is what follows the last line end ("" when it ends in one)
    records: list[Measurement] = []
    problems: list[LineProblem] = []
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        item = _read_line(number, line)
        if isinstance(item, Measurement):
            records.append(item)
        else:
            problems.append(item)
    return RecordsFile(path, tuple(records), tuple(problems))


def read_records(path: Path, on_corrupt: Literal["raise", "skip"] = "raise") -> list[Measurement]:
    """The records of a records.jsonl (torn lines tolerated). A corrupt line raises
    :class:`RecordsCorrupt` naming it, unless ``on_corrupt="skip"`` (a run in progress reads what
    it can; its end reports the lines, see harness.run.execute)."""
    found = read_records_file(path)
    if on_corrupt == "raise":
        found.check()
    return list(found.records)


def read_records_strict(path: Path, finished: bool) -> list[Measurement]:
    """The records of a run that is to be judged (compare, gate, history): every line must be a
    record. Only a run that did not finish may end in a torn last line (its writer was killed
    mid-write); that line is left out. A corrupt line raises :class:`RecordsCorrupt`; a torn line
    anywhere else, ValueError naming it: a run that finished with a line cut short would be
    judged on records silently missing."""
    found = read_records_file(path)
    found.check()
    if found.torn:
        text = path.read_bytes().decode("utf-8", errors="surrogateescape")
        last = max((n for n, line in enumerate(text.split("\n"), start=1) if line.strip()), default=0)
        bad = [p for p in found.torn if finished or p.line != last]
        if bad:
            shown = "; ".join(p.describe() for p in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            raise ValueError(f"{len(bad)} record(s) cut short in a run that "
                             f"{'finished' if finished else 'went on writing after them'}: {shown}")
    return list(found.records)
