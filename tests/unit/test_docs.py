"""docs/options.md stays true: every `harness run` flag has a row with its variable and key, as
harness/options.py reads them (issue 17: README claimed a HARNESS_<NAME> form for every option;
--ops-module's is HARNESS_OPS_MODULES and --resume, --all have none)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from harness.cli import build_parser
from harness.options import _PARSERS, ENV_PREFIX, known_env_names, options_doc

ROOT = Path(__file__).resolve().parents[2]


def _table() -> dict[str, tuple[str, str]]:
    """flag -> (variable, key) from the `harness run` table of docs/options.md."""
    text = (ROOT / "docs" / "options.md").read_text()
    section = text.split("## `harness run`", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"--[a-z][a-z-]*", cells[0]):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def test_every_run_flag_has_its_variable_and_key_in_docs_options() -> None:
    subparsers = build_parser()._subparsers
    assert subparsers is not None
    commands = subparsers._group_actions[0]
    assert isinstance(commands, argparse._SubParsersAction)
    run = commands.choices["run"]
    table = _table()
    flags = {a.option_strings[-1]: a.dest for a in run._actions if a.option_strings and a.dest != "help"}
    assert set(table) == set(flags), f"docs/options.md rows differ from the flags: {set(table) ^ set(flags)}"
    for flag, dest in flags.items():
        variable, key = table[flag]
        if dest in _PARSERS:
            assert (variable, key) == (ENV_PREFIX + dest.upper(), dest.replace("_", "-")), flag
        else:
            assert (variable, key) == ("none", "none"), f"{flag} has no environment form; the table must say so"


def test_the_options_table_of_docs_is_generated_from_the_option_table() -> None:
    text = (ROOT / "docs" / "options.md").read_text()
    assert options_doc(text) == text, "docs/options.md's table is out of date: run `python -m harness.options`"


def test_every_variable_the_harness_reads_is_documented() -> None:
    text = (ROOT / "docs" / "options.md").read_text()
    for name in known_env_names():
        documented = name in text or re.sub(r"_(CUDA|MUSA|ROCM|ASCEND|CPU)$", "_<BACKEND>", name) in text
        assert documented, f"{name} is read by the harness but not in docs/options.md"


def test_readme_points_at_the_options_table() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "docs/options.md" in readme and "HARNESS_OPS_MODULES" in readme
