"""`harness run`'s arguments: its parser, shared by the `harness` command and by the commands
that check arguments meant for a run elsewhere (a container, gate-run, ab), so each reads them
as `harness run` itself does. Imports neither torch, Triton nor pytest."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from harness.errors import UsageError
from harness.options import PLUGIN_OPTIONS, RUN_OPTIONS, RunOption

__all__ = ["add_plugin_args", "add_run_parser", "cli_values", "join_toggles", "named_ops", "parse_run_args"]

_RUN_EPILOG = """\
examples:
  harness run --ops softmax                       # auto-detect the backend (cpu if no accelerator)
  harness run --backend cuda --ops softmax mm --dtypes bf16 --level core
  harness run --ops-module my_ops.py --ops my_op --shapes-file my_shapes.yaml
  harness run --resume reports/20261129T120000Z-cuda-abc123
  harness run --backend cuda --ops mm --replay-from reports/earlier-run   # its autotune configs

Every option can also come from HARNESS_<NAME> (for example HARNESS_BACKEND=cuda)
or from [tool.harness] in ./pyproject.toml; the command line wins.
Outputs: run.json, records.jsonl, summary.csv, junit.xml, report.md, ops_status.csv,
autotune/ (the configs Triton's autotuners chose, per op, and meta.json).
Exit codes: 0 all passed, 1 a case or op failed, 2 bad input, 3 missing environment, 130 interrupted.
"""


def _backend_names() -> str:
    """Every backend and alias, from the backends' own data (`run --help` stays true)."""
    from harness.backends import known_names

    return known_names()


def _add_option(p: argparse.ArgumentParser, option: RunOption) -> None:
    """One row of harness.options.RUN_OPTIONS as an argument of ``p``."""
    from harness.options import MAX_PRESTART_DEPTH, PRESTART_DEPTH

    kwargs: dict[str, Any] = {"help": option.help.format(backends=_backend_names() if "{backends}" in option.help
                                                          else "", max_depth=MAX_PRESTART_DEPTH, depth=PRESTART_DEPTH)}
    if option.destination != option.option_flag.removeprefix("--").replace("-", "_"):
        kwargs["dest"] = option.destination
    for name in ("metavar", "nargs", "action"):
        if getattr(option, name) is not None:
            kwargs[name] = getattr(option, name)
    if option.argtype is not None:
        kwargs["type"] = option.argtype
    if option.action == "store_true" and option.layered:
        kwargs["default"] = None  # not given: the environment or [tool.harness] may set it
    p.add_argument(option.option_flag, **kwargs)


def add_run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`harness run`: one argument per row of harness.options.RUN_OPTIONS that has a flag."""
    p = sub.add_parser(
        "run",
        help="benchmark ops: check each against torch, time both, write reports",
        description="Benchmark operators: each case is checked against the torch baseline "
        "(upcast reference), then both are timed. Each op runs in its own process.",
        epilog=_RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for option in RUN_OPTIONS:
        if option.has_flag:
            _add_option(p, option)


def add_plugin_args(p: argparse.ArgumentParser) -> None:
    """--plugins and --extra-plugin, as `harness run` has them (for `harness plugins`)."""
    for option in RUN_OPTIONS:
        if option.name in PLUGIN_OPTIONS:
            _add_option(p, option)


class _RunArgs(argparse.ArgumentParser):
    """`harness run`'s parser for checking arguments meant for a run elsewhere (a container):
    a bad argument is a UsageError, not an exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"harness run: {message}. See `harness run --help`.")


def join_toggles(args: Sequence[str]) -> list[str]:
    """``--plugins -ir -autotune +wall`` as one argument (``--plugins=-ir,-autotune,+wall``):
    argparse would take ``-ir`` for an option of its own."""
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] == "--plugins":
            toggles = []
            i += 1
            while i < len(args) and re.fullmatch(r"[+-][A-Za-z_][A-Za-z0-9_]*(,[+-][A-Za-z_][A-Za-z0-9_]*)*", args[i]):
                toggles.append(args[i])
                i += 1
            out.append("--plugins=" + ",".join(toggles) if toggles else "--plugins")
            continue
        out.append(args[i])
        i += 1
    return out


def parse_run_args(args: Sequence[str]) -> argparse.Namespace:
    """``args`` read as `harness run` reads them (the namespace of the run subcommand)."""
    parser = _RunArgs(prog="harness")
    add_run_parser(parser.add_subparsers(dest="command", parser_class=_RunArgs))
    return parser.parse_args(["run", *join_toggles(args)])


def named_ops(ns: argparse.Namespace) -> tuple[str, ...]:
    """The op names ``--ops`` gave (comma lists split, as the options layer reads them); () when
    none."""
    if not ns.ops:
        return ()
    option = next(o for o in RUN_OPTIONS if o.name == "ops")
    assert option.parse is not None
    return tuple(option.parse(list(ns.ops)))


def cli_values(ns: argparse.Namespace) -> dict[str, Any]:
    """The run options the command line gave (None where not given), by option name."""
    values = {o.name: getattr(ns, o.name, None) for o in RUN_OPTIONS if o.layered and o.has_flag}
    gpus = getattr(ns, "gpus", None)
    if gpus:
        if values["devices"]:
            raise UsageError("--gpus is the old name of --devices: give one of them, not both.")
        values["devices"] = gpus
    return values
