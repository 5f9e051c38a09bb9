"""An --extra-plugin that stands in for a full disk in the op process: once records.jsonl holds
anything, the system takes half of each record written to it, then nothing (as ``os.write`` does
when a file size limit or a quota cuts a write short). Every attempt of the op after its first
record fails the same way."""

from __future__ import annotations

import os
from typing import Any

_real_write = os.write
_cut = [False]  # whether a write was cut short in this process: nothing is taken after it


def _short_write(fd: int, data: Any) -> int:  # os.write's bytes-like buffer
    if not os.readlink(f"/proc/self/fd/{fd}").endswith("records.jsonl") or os.fstat(fd).st_size == 0:
        return _real_write(fd, data)
    if _cut[0]:
        return 0  # the disk is full: nothing more
    _cut[0] = True
    return _real_write(fd, data[: len(data) // 2])


def pytest_configure(config: object) -> None:
    os.write = _short_write
