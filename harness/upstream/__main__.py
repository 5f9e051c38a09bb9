"""``python -m harness.upstream run --suite PATH [harness run options]``: the suite mode as a
command of its own, equivalent to ``harness run --suite PATH``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.cli import _add_run, _cli_values
from harness.errors import HarnessError
from harness.options import read_pyproject, resolve_run_options
from harness.upstream.cli import add_suite_argument, is_suite_run, resume_suite, run_suite


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.upstream")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_run(sub)
    add_suite_argument(sub.choices["run"])
    ns = parser.parse_args(argv)
    env = dict(os.environ)
    try:
        if ns.resume:
            if not is_suite_run(Path(ns.resume)):
                raise HarnessError(f"--resume {ns.resume}: not a suite run (no 'suite' in its run.json); "
                                   "use `harness run --resume`.")
            return resume_suite(Path(ns.resume), env, sys.stdout)
        if not ns.suite:
            raise HarnessError("give --suite PATH (FlagGems' benchmark/ directory)")
        options = resolve_run_options(_cli_values(ns), env, read_pyproject(Path("pyproject.toml")))
        return run_suite(options, ns.suite, env, sys.stdout)
    except HarnessError as exc:
        print(f"harness: error: {exc.message}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
