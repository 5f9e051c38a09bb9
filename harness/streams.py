"""Standard output and error that never fail a command.

`harness run ... | head -2` closes the pipe after two lines; the run must still finish and write
every file. While a command runs, :func:`guarded_streams` puts :class:`Tolerant` wrappers in
place of ``sys.stdout`` and ``sys.stderr``: a write to a closed pipe (EPIPE, BrokenPipeError) or
to a closed stream is dropped, and the descriptor is pointed at /dev/null so that Python's own
flush at exit does not fail either; text a terminal cannot encode (a lone surrogate from a
non-UTF-8 file name) is written with backslash escapes.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["Tolerant", "guarded_streams"]


def _closed_pipe(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.EBADF))


class Tolerant(io.TextIOBase):
    """A text stream over ``stream`` whose writes cannot raise for a closed reader."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__()
        self.stream: Any = stream
        # the reader went away (or there never was one: Python sets sys.stdout to None when
        # descriptor 1 was closed before it started): output is discarded from then on
        self.dropped = stream is None

    def _drop(self) -> None:
        self.dropped = True
        try:  # later flushes (Python's own at exit) go to /dev/null instead of failing again
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass

    def write(self, text: str) -> int:
        if self.dropped:
            return len(text)
        try:
            try:
                self.stream.write(text)
            except UnicodeEncodeError:
                encoding = getattr(self.stream, "encoding", None) or "utf-8"
                self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        except (OSError, ValueError) as exc:
            if isinstance(exc, OSError) and not _closed_pipe(exc):
                raise
            self._drop()
        return len(text)

    def flush(self) -> None:
        if self.dropped:
            return
        try:
            self.stream.flush()
        except (OSError, ValueError) as exc:
            if isinstance(exc, OSError) and not _closed_pipe(exc):
                raise
            self._drop()

    def isatty(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (OSError, ValueError, AttributeError):
            return False

    def fileno(self) -> int:
        if self.stream is None:
            raise io.UnsupportedOperation("no stream")
        return int(self.stream.fileno())

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "backslashreplace"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def guarded_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` as :class:`Tolerant` streams while inside."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Tolerant(saved[0]), Tolerant(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        for wrapper in (sys.stdout, sys.stderr):
            if isinstance(wrapper, Tolerant):
                wrapper.flush()
        sys.stdout, sys.stderr = saved
