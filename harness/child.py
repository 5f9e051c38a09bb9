"""Entry of an op's process: ``python -m harness.child EXIT_FILE [--hold] -- PYTEST_ARGS...``.

It runs pytest in-process, then writes pytest's exit status to EXIT_FILE. A process that ends
without that file never got back from pytest (a signal, ``os._exit``, a poisoned context, a
fatal error in native code), which ``harness.batch.classify_exit`` reports as a crash. Kept
apart from harness.batch so that no harness plugin is imported before pytest loads it.

With ``--hold`` (a pre-started process, docs/batch.md "Pre-start"), it first imports what
every op needs (pytest, torch, triton, the harness's op and timing modules; none of which
opens a device) and then waits for one line on stdin: ``go`` runs pytest as above; anything
else, or the end of stdin (the parent cancelled it or is gone), ends it with
:data:`CANCELLED_EXIT` and no EXIT_FILE.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CANCELLED_EXIT", "GO", "PRELOAD", "main"]

GO = "go"
CANCELLED_EXIT = 3
# Imported while held. Never a module pytest loads as a plugin (-p): pytest must import those
# itself, or it warns that it cannot rewrite their asserts.
PRELOAD = ("pytest", "torch", "triton", "harness.ops.registry", "harness.measure", "harness.timing")


def preload(modules: Sequence[str] = PRELOAD) -> list[str]:
    """Import ``modules``; the ones that failed (their errors come again, in full, under pytest)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - reported when the op really runs
            failed.append(name)
    return failed


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    hold = len(args) > 1 and args[1] == "--hold"
    if hold:
        del args[1]
    if len(args) < 2 or args[1] != "--":
        print("usage: python -m harness.child EXIT_FILE [--hold] -- PYTEST_ARGS...", file=sys.stderr)
        return 2
    if hold:
        preload()
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():  # a device opened while another op may be timing
            print("harness.child: warning: the pre-start imports initialised CUDA", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip() != GO:
            return CANCELLED_EXIT
    import pytest

    from harness.results.store import atomic_write_text

    code = int(pytest.main(list(args[2:])))
    atomic_write_text(Path(args[0]), f"{code}\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
