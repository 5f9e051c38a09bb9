"""``python tests/cli_probe.py ARGS...``: run ``harness ARGS`` in this process, then print one JSON
line: the exit code, the seconds it took (import included) and the heavy modules it imported.
Used by tests/unit/test_cli_imports.py and benchmarks/cli_latency.py."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time

HEAVY = ("torch", "triton", "pytest")


def main(args: list[str]) -> None:
    start = time.perf_counter()
    from harness.cli import main as harness_main

    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = harness_main(args)
    except SystemExit as exc:  # --help, argparse's own refusals
        code = exc.code if isinstance(exc.code, int) else 2
    seconds = time.perf_counter() - start
    heavy = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in HEAVY})
    print(json.dumps({"exit": code, "seconds": seconds, "heavy": heavy, "stderr": err.getvalue()}))


if __name__ == "__main__":
    main(sys.argv[1:])
