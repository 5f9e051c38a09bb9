"""`harness run`'s arguments: its parser, shared by the `harness` command and by the commands
that check arguments meant for a run elsewhere (a container, gate-run, ab), so each reads them
as `harness run` itself does. Imports neither torch, Triton nor pytest."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from harness.errors import UsageError

__all__ = ["SUITE_HELP", "add_plugin_args", "add_run_parser", "cli_values", "join_toggles", "parse_run_args"]

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


SUITE_HELP = ("run FlagGems' own benchmark suite instead of the harness's cases: PATH is the benchmark/ "
              "directory of a FlagGems tree (v5.3+ or v5.0.x layout, or FlagGems-vllm) at the tag of the "
              "installed package; select with --ops (its benchmark names), --node or --all; FlagGems' own "
              "shapes at --level core|comprehensive; timed by the harness's timers, outputs checked "
              "against torch's; rows have provider flaggems-suite (docs/flaggems.md)")


def _backend_names() -> str:
    """Every backend and alias, from the backends' own data (`run --help` stays true)."""
    from harness.backends import known_names

    return known_names()


def add_run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.options import MAX_PRESTART_DEPTH, PRESTART_DEPTH
    p = sub.add_parser(
        "run",
        help="benchmark ops: check each against torch, time both, write reports",
        description="Benchmark operators: each case is checked against the torch baseline "
        "(upcast reference), then both are timed. Each op runs in its own process.",
        epilog=_RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--backend", help=f"backend or alias: {_backend_names()} (default: auto)")
    p.add_argument("--ops", nargs="+", metavar="OP", help="op ids (default: every op); see `harness list ops`")
    p.add_argument("--dtypes", nargs="+", metavar="DTYPE", help="float16 bfloat16 float32 (aliases fp16 bf16 fp32; default: all three); with --suite also "
                   "float64, int8..int64, uint8, bool, complex64/128, float8_e4m3fn... (default: each benchmark's own)")
    p.add_argument("--level", help="shape level: smoke, core, comprehensive, or auto (smoke on cpu, core on accelerators; "
                   "with --suite: FlagGems' core or comprehensive, auto = core)")
    p.add_argument("--shapes-file", help="YAML mapping op id -> list of shapes; overrides the level for the ops it names")
    p.add_argument("--ops-module", dest="ops_modules", action="append", metavar="PATH_OR_MODULE",
                   help="load extra ops from a Python file or module defining HARNESS_OPS (repeatable); see docs/ops.md")
    p.add_argument("--provider", help="where candidates come from (default: builtin)")
    p.add_argument("--timer", help="auto, graph, direct, profiler, cpu (default: auto = graph where the backend "
                   "captures device graphs, direct where it only has events, cpu on the cpu backend; docs/timing.md)")
    p.add_argument("--cache", help="cold (flush L2 before each timed call, default) or warm")
    p.add_argument("--seed", type=int, help="base seed; each case derives its own (default 0)")
    p.add_argument("--warmup-ms", type=float, help="warm-up budget per measurement in ms (default 25)")
    p.add_argument("--rep-ms", type=float, help="measurement budget per timing in ms (default 100)")
    p.add_argument("--cap-ms", type=float, help="most ms one timing samples when its spread does not settle "
                   "(default 1000; docs/timing.md)")
    p.add_argument("--devices", nargs="+", metavar="ID", help="device ids to shard ops over (default: the backend's visible devices)")
    p.add_argument("--gpus", nargs="+", metavar="ID",
                   help="the old driver's name of --devices, an alias of it (giving both is refused)")
    p.add_argument("--op-timeout", type=float, help="seconds before a hung op's process group is killed (default 1800)")
    p.add_argument("--shard-weights", metavar="OPS_STATUS_CSV",
                   help="with --shard: balance the parts by the op times (elapsed_s) of an earlier run's "
                        "ops_status.csv, such as last night's; every part must be given the same file")
    p.add_argument("--budget", metavar="SECONDS",
                   help="no op starts this long after the ops began; the ops left end as not run (cause: "
                        "environment, budget) and `harness run --resume` runs them (default: no budget)")
    p.add_argument("--reports-dir", help="where run directories are created (default: reports)")
    p.add_argument("--out", help="exact run directory (default: REPORTS_DIR/RUN_ID)")
    p.add_argument("--run-id", help="run id (default: UTC time, backend and a random token)")
    p.add_argument("--all", action="store_true", help="every known op (the default when neither --ops nor --ops-file is given)")
    p.add_argument("--ops-file", help="text file of op ids, one per line (# starts a comment)")
    p.add_argument("--dismiss", help="YAML file mapping op id -> reason; those ops are skipped and the reason recorded")
    p.add_argument("--progress", help="auto (live display on a terminal), rich, or plain lines")
    p.add_argument("--prestart", help="auto (default: on for accelerators, off on the cpu backend), on or off: "
                   "start each device's next op process while the current op runs, held before it touches "
                   "the device, so its imports (5 s a process on the H200 machine, 9-11 s with FlagGems) overlap")
    p.add_argument("--prestart-depth", metavar="N",
                   help=f"how many of a device's next ops are pre-started at once (1-{MAX_PRESTART_DEPTH}, "
                        f"default {PRESTART_DEPTH}): an op "
                        "process's preparation (imports, the profiler's warm-up: 10-15 s on the H200 machine) "
                        "overlaps that many ops before it, so short ops do not wait for it")
    p.add_argument("--replay-from", metavar="RUN_DIR",
                   help="use the autotune configs recorded by an earlier run of the same backend instead "
                        "of tuning; a key it lacks is tuned live and its row says replay-miss (docs/compare.md)")
    p.add_argument("--suite", metavar="PATH", help=SUITE_HELP)
    p.add_argument("--flagtune", help="on or off (default off, or as USE_FLAGTUNE=1|0 says): FlagGems' USE_FLAGTUNE "
                   "in every op process, FlagTune's wider autotune search; recorded in run.json, and `harness ab` "
                   "refuses sides that differ in it unless it is the switch (docs/flaggems.md)")
    p.add_argument("--table-colour", help="on or off (default): with --suite, FlagGems' printed result table in "
                   "each op's log has SUCCESS in green and FAILED in red (its Size Detail is folded either way)")
    _add_toolbox_run_args(p)
    p.add_argument("--node", dest="nodes", nargs="+", metavar="FILE::FUNC",
                   help="with --suite: run exactly these pytest nodes of the suite (test_mm.py::test_mm, "
                        "parameters in [...] allowed), one op each")
    p.add_argument("--allow-version-mismatch", action="store_true", default=None,
                   help="with --suite: run even when the installed flag_gems' major.minor differs from the tree's")
    p.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted run: redo only ops without a completion marker")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume: also run again, from their first case, the ops that ended FAIL, "
                        "ERROR, CRASH or TIMEOUT (their records are replaced)")
    p.add_argument("--shard", metavar="K/N",
                   help="run only the K-th of N parts of the selected ops (cost-weighted, the same parts on "
                        "every machine); join the N runs with `harness merge` (docs/compare.md)")


def add_plugin_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugins", nargs="+", metavar="TOGGLE",
                   help="turn optional plugins on or off: -ir -autotune -wall +skipguards +mm_cluster "
                        "(`harness plugins` lists them and what each does by default here)")
    p.add_argument("--extra-plugin", dest="extra_plugins", action="append", metavar="MODULE",
                   help="also load this pytest plugin module in every op process (repeatable)")


def _add_toolbox_run_args(p: argparse.ArgumentParser) -> None:
    add_plugin_args(p)
    p.add_argument("--ir", help="on (default where Triton compiles), full (SASS too) or off: keep each compiled "
                                "kernel's IR, metadata and compile time under RUN/ir/<op>/<case>/ (docs/compile.md)")
    p.add_argument("--triton-cache", help="isolated (default: a Triton and FlagGems cache of this run's own, "
                                          "so it compiles and tunes what it measures) or user (the usual caches)")
    p.add_argument("--keep-triton-cache", action="store_true", default=None,
                   help="keep the run's own cache (RUN/triton-cache) after the run")
    p.add_argument("--sweep-devices", metavar="N|IDS",
                   help="tune each autotuned op first over N processes or these devices (ids, repeats "
                        "allowed), then measure it on one device replaying the configs (docs/batch.md)")


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


def cli_values(ns: argparse.Namespace) -> dict[str, Any]:
    """The run options the command line gave (None where not given), by option name."""
    keys = ("backend", "ops", "dtypes", "level", "shapes_file", "ops_modules", "provider", "timer",
            "cache", "seed", "warmup_ms", "rep_ms", "cap_ms", "devices", "op_timeout", "reports_dir", "out", "run_id",
            "ops_file", "dismiss", "progress", "suite", "replay_from", "prestart", "prestart_depth", "plugins", "extra_plugins",
            "ir", "triton_cache", "keep_triton_cache", "sweep_devices", "shard", "nodes", "allow_version_mismatch",
            "budget", "shard_weights", "flagtune", "table_colour")
    values = {k: getattr(ns, k, None) for k in keys}
    gpus = getattr(ns, "gpus", None)
    if gpus:
        if values["devices"]:
            raise UsageError("--gpus is the old name of --devices: give one of them, not both.")
        values["devices"] = gpus
    return values
