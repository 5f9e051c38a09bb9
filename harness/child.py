"""Entry of an op's process: ``python -m harness.child EXIT_FILE -- PYTEST_ARGS...``.

It runs pytest in-process, then writes pytest's exit status to EXIT_FILE. A process that ends
without that file never got back from pytest (a signal, ``os._exit``, a poisoned context, a
fatal error in native code), which ``harness.batch.classify_exit`` reports as a crash. Kept
apart from harness.batch so that no harness plugin is imported before pytest loads it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        print("usage: python -m harness.child EXIT_FILE -- PYTEST_ARGS...", file=sys.stderr)
        return 2
    import pytest

    from harness.results.store import atomic_write_text

    code = int(pytest.main(list(argv[2:])))
    atomic_write_text(Path(argv[0]), f"{code}\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
