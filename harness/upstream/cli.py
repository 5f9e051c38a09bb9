"""Command-line wiring of the suite mode, kept here so cli.py and options.py only call it.

``harness run --suite PATH`` and its alias ``python -m harness.upstream run --suite PATH`` take
the same arguments as ``harness run``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from harness.options import RunOptions
from harness.upstream.runner import execute_suite, is_suite_run, prepare_suite, prepare_suite_resume

__all__ = ["SUITE_HELP", "add_suite_argument", "is_suite_run", "resume_suite", "run_suite"]

SUITE_HELP = ("run FlagGems' own benchmark suite instead of the harness's cases: PATH is the benchmark/ "
              "directory of a FlagGems checkout at the tag of the installed flag_gems (v5.0.x); each op "
              "in --ops runs FlagGems' pytest nodes with that mark, timed by the harness timer, on the "
              "harness's shapes; rows have provider flaggems-suite (docs/flaggems.md)")


def add_suite_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", metavar="PATH", help=SUITE_HELP)


def run_suite(options: RunOptions, suite_path: str, env: Mapping[str, str], out: TextIO) -> int:
    return execute_suite(prepare_suite(options, suite_path, env), env, out)


def resume_suite(run_dir: Path, env: Mapping[str, str], out: TextIO) -> int:
    return execute_suite(prepare_suite_resume(run_dir, env), env, out)
