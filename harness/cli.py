"""The `harness` command: its parser and the dispatch to each command.

Parsing and every refusal of bad input import neither torch, Triton nor pytest; a command
imports what it needs when it runs. HarnessError becomes a message and an exit code in one
place (:func:`harness.errors.exit_status`)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from harness import __version__
from harness.errors import UsageError, exit_status

__all__ = ["build_parser", "main"]

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


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    p.add_argument("--op-timeout", type=float, help="seconds before a hung op's process group is killed (default 1800)")
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
    _add_toolbox_run_args(p)
    p.add_argument("--node", dest="nodes", nargs="+", metavar="FILE::FUNC",
                   help="with --suite: run exactly these pytest nodes of the suite (test_mm.py::test_mm, "
                        "parameters in [...] allowed), one op each")
    p.add_argument("--allow-version-mismatch", action="store_true", default=None,
                   help="with --suite: run even when the installed flag_gems' major.minor differs from the tree's")
    p.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted run: redo only ops without a completion marker")
    p.add_argument("--shard", metavar="K/N",
                   help="run only the K-th of N parts of the selected ops (cost-weighted, the same parts on "
                        "every machine); join the N runs with `harness merge` (docs/compare.md)")


def _add_plugin_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugins", nargs="+", metavar="TOGGLE",
                   help="turn optional plugins on or off: -ir -autotune -wall +skipguards +mm_cluster "
                        "(`harness plugins` lists them and what each does by default here)")
    p.add_argument("--extra-plugin", dest="extra_plugins", action="append", metavar="MODULE",
                   help="also load this pytest plugin module in every op process (repeatable)")


def _add_toolbox_run_args(p: argparse.ArgumentParser) -> None:
    _add_plugin_args(p)
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
    _add_run(parser.add_subparsers(dest="command", parser_class=_RunArgs))
    return parser.parse_args(["run", *join_toggles(args)])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Benchmark and CI harness for Triton operators on CUDA, MUSA, ROCm, Ascend and CPU.",
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)
    lp = sub.add_parser("list", help="list ops or backends", description="List what the harness knows.")
    lp.add_argument("what", choices=("ops", "backends", "suite"),
                    help="ops, backends, or suite (the benchmarks of --suite PATH, read without a GPU)")
    lp.add_argument("--suite", metavar="PATH", help="with 'suite': a FlagGems benchmark/ directory")
    lp.add_argument("--csv", action="store_true", help="with 'suite': CSV instead of a table")
    lp.add_argument("--ops-module", dest="ops_modules", action="append", metavar="PATH_OR_MODULE",
                    help="also list ops from this module")
    lp.add_argument("--provider", default="builtin", choices=("builtin", "flaggems"),
                    help="with 'ops': builtin, or flaggems (what the installed flag_gems registers and "
                         "which of those have harness cases)")
    pp = sub.add_parser("plugins", help="print the pytest plugins planned for a backend",
                        description="Print which harness plugins load for a backend, and why.")
    pp.add_argument("--backend", default="auto", help="backend name or alias (default: auto)")
    pp.add_argument("--timer", default="auto", help="timer to plan for (default: auto)")
    pp.add_argument("--ir", default="on", choices=("on", "off", "full"), help="on, full or off (default: on)")
    pp.add_argument("--suite", action="store_true",
                    help="the plan of a FlagGems suite op process (harness run --suite): what its pytest "
                         "loads and which features the suite plugin carries out")
    _add_plugin_args(pp)
    sub.add_parser("doctor", help="what is detected and what is missing",
                   description="Report the detected backend, devices, packages and tools.")
    rp = sub.add_parser("report", help="render a run's records again (Markdown, CSV, JUnit, HTML), or join "
                                       "runs of several backends into one page (--across)",
                        description="Render a run directory's records again, read-only, to stdout (or --out); "
                        "with --across, one HTML page joining runs of different backends or devices case by case.",
                        epilog="examples:\n  harness report reports/RUN --format html --out report.html\n"
                        "  harness report --across reports/cuda-run reports/musa-run --out across.html",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help="a run directory (reports/<run-id>)")
    rp.add_argument("--format", default="md", choices=("md", "csv", "junit", "html"), help="output format (default md)")
    rp.add_argument("--across", nargs="+", metavar="RUN_DIR",
                    help="join these runs (different backends or devices) into one HTML page")
    rp.add_argument("--out", metavar="FILE", help="write the output to FILE instead of standard output")
    mp = sub.add_parser(
        "merge", help="join the parts of a run made with --shard K/N into one run directory",
        description="Merge the run directories of every part of one `harness run --shard K/N` split into "
        "one run: records, summary.csv, junit.xml, report.md, ops_status.csv, run.json. Refused: runs "
        "of different fingerprints, plans, commits or software versions, a missing or repeated part, a "
        "part still running.",
        epilog="example:\n  harness merge reports/night-1 reports/night-2 --out reports/night\n"
        "Exit codes: 0 merged, 2 the parts do not make one run (the message names them).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mp.add_argument("runs", nargs="+", metavar="RUN", help="run directory of each part")
    mp.add_argument("--out", required=True, metavar="DIR", help="the merged run directory (new or empty)")
    mp.add_argument("--run-id", help="run id of the merged run (default: UTC time, backend and a random token)")
    mp.add_argument("--allow-mismatch", action="store_true",
                    help="merge parts made with different torch, Triton, driver, flag_gems or harness versions "
                         "(run.json lists the differences under software_mismatch)")
    from harness.compare.cli import add_parsers as add_compare_parsers
    from harness.compile.cli import add_parser as add_compile_parser
    from harness.container.cli import add_parser as add_container_parser

    add_compare_parsers(sub)
    add_container_parser(sub)
    add_compile_parser(sub)
    return parser


def _cli_values(ns: argparse.Namespace) -> dict[str, Any]:
    keys = ("backend", "ops", "dtypes", "level", "shapes_file", "ops_modules", "provider", "timer",
            "cache", "seed", "warmup_ms", "rep_ms", "cap_ms", "devices", "op_timeout", "reports_dir", "out", "run_id",
            "ops_file", "dismiss", "progress", "suite", "replay_from", "prestart", "prestart_depth", "plugins", "extra_plugins",
            "ir", "triton_cache", "keep_triton_cache", "sweep_devices", "shard", "nodes", "allow_version_mismatch")
    return {k: getattr(ns, k, None) for k in keys}


def _cmd_run(ns: argparse.Namespace, env: Mapping[str, str]) -> int:
    from harness.options import read_project_config, resolve_run_options
    from harness.run.execute import execute, prepare, prepare_resume

    if ns.all and (ns.ops or ns.ops_file):
        raise UsageError("--all selects every op; it cannot be combined with --ops or --ops-file.")
    if ns.resume:
        given = [f"--{k.replace('_', '-')}" for k, v in _cli_values(ns).items()
                 if v not in (None, [], ()) and k != "progress"]
        if given:
            raise UsageError(
                f"--resume {ns.resume} finishes the run with the options it was started with; "
                f"{', '.join(given)} would be ignored. Drop them (only --progress may change), "
                "or start a new run."
            )
        prepared = prepare_resume(Path(ns.resume), env)
    else:
        options = resolve_run_options(_cli_values(ns), env, read_project_config())
        if options.suite:
            from harness.suite.runner import prepare_suite

            prepared = prepare_suite(options, options.suite, env, all_ops_flag=bool(ns.all))
        elif options.nodes or options.allow_version_mismatch:
            raise UsageError("--node and --allow-version-mismatch apply to --suite runs only.")
        else:
            prepared = prepare(options, env)
    return execute(prepared, env, sys.stdout)


def _cmd_list(ns: argparse.Namespace, env: Mapping[str, str]) -> int:
    if ns.what == "suite":
        from harness.suite.listing import list_suite

        if not ns.suite:
            raise UsageError("harness list suite needs --suite PATH (a FlagGems benchmark/ directory).")
        sys.stdout.write(list_suite(Path(ns.suite), csv_format=ns.csv))
        return 0
    if ns.what == "backends":
        from harness.backends import BACKENDS

        print(f"{'name':8} {'aliases':22} {'torch':7} {'visibility':45} description")
        for b in BACKENDS:
            print(f"{b.name:8} {', '.join(b.aliases):22} {b.torch_namespace or '-':7} "
                  f"{', '.join(b.visibility_keys) or '-':45} {b.description}")
        print("\nrun on real hardware:")
        for b in BACKENDS:
            print(f"  {b.name:8} {b.hardware_verified}")
        return 0
    from harness.ops.registry import catalog
    from harness.ops.shapes import LEVELS, load_level

    if ns.provider == "flaggems":
        from harness.ops.registry import load_ops
        from harness.providers.inventory import list_flaggems_ops

        return list_flaggems_ops(load_ops(ns.ops_modules or ()), env, sys.stdout)
    ops = catalog(ns.ops_modules or ())
    counts = {level: load_level(level) for level in LEVELS}
    print(f"{'op':14} {'source':10} {'aten':28} {'shapes s/c/x':13} description")
    for op in ops.values():
        n = "/".join(str(len(counts[lv].get(op.id, ()))) for lv in LEVELS)
        print(f"{op.id:14} {op.source[:10]:10} {op.aten or '-':28} {n:13} {op.description}")
    return 0


def _cmd_plugins(ns: argparse.Namespace) -> int:
    from harness.backends import resolve_backend
    from harness.options import _modules, _toggles
    from harness.run.plugins import check_extra_plugins, plan_plugins

    backend = resolve_backend(ns.backend)
    toggles = _toggles(ns.plugins) if ns.plugins else ()
    extra = check_extra_plugins(_modules(ns.extra_plugins)) if ns.extra_plugins else ()
    if ns.suite:
        from harness.options import RunOptions
        from harness.suite.runner import suite_plugins

        plan = suite_plugins(backend, RunOptions(timer=ns.timer, plugins=toggles, extra_plugins=extra, ir=ns.ir))
    else:
        plan = plan_plugins(backend, ns.timer, toggles, extra, ns.ir)
    what = "; a suite op process (FlagGems' own pytest)" if ns.suite else ""
    print(f"backend {backend.name}: timer {plan.timer}{what}")
    for module, reason in zip(plan.modules, plan.reasons, strict=True):
        print(f"  {module:34} {reason}")
    if plan.suite_modules:
        print("FlagGems' own pytest (--suite):")
        for module, reason in zip(plan.suite_modules, plan.suite_reasons, strict=True):
            print(f"  {module:34} {reason}")
    if plan.off:
        print("not loaded:")
        for line in plan.off:
            print(f"  {line}")
    return 0


# What `harness run` needs, and what only some commands use (doctor says which is which).
DOCTOR_REQUIRED = ("torch", "triton", "numpy", "pytest", "pyyaml", "junit-xml")
DOCTOR_OPTIONAL = {"docker": "the container commands", "nox": "the nox sessions", "rich": "the live progress display"}


def _engine_status(env: Mapping[str, str]) -> str:
    """Whether a docker engine answers (what the bench-<backend> sessions need)."""
    from harness.container.engine import Engine
    from harness.errors import HarnessError

    try:
        engine = Engine.connect(env)
    except HarnessError as exc:
        return f"no: {exc.message.split('. ')[0]}"
    return f"yes, at {engine.address}"


def _cmd_doctor(env: Mapping[str, str]) -> int:
    import importlib.metadata

    from harness.backends import BACKENDS, detect_backend, enumerate_devices
    from harness.errors import HarnessError

    detected = detect_backend()
    print(f"detected backend: {detected.name} ({detected.description})")
    if detected.capabilities.accelerator:
        try:
            print(f"devices: {', '.join(enumerate_devices(detected, None, env))}")
        except HarnessError as exc:
            print(f"devices: none usable ({exc.message})")
    missing: list[str] = []
    absent: list[str] = []
    for name in (*DOCTOR_REQUIRED, *DOCTOR_OPTIONAL):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "MISSING" if name in DOCTOR_REQUIRED else "not installed (optional)"
            (missing if name in DOCTOR_REQUIRED else absent).append(name)
        print(f"  package {name:10} {version}")
    for b in BACKENDS:
        if b.listing is None:
            continue
        tool = b.listing.command[0]
        print(f"  {b.name:7} listing CLI {tool:14} {'found' if shutil.which(tool) else 'not found'}")
    for b in BACKENDS:
        for key in b.visibility_keys:
            if env.get(key):
                print(f"  visibility: {key}={env[key]}")
    print(f"  docker engine answers: {_engine_status(env)}")
    if missing:
        print(f"missing packages: {', '.join(missing)}: `harness run` needs them "
              "(`python3 -m pip install -e .` in this checkout installs them).")
    for name in absent:
        print(f"optional package {name} is not installed: {DOCTOR_OPTIONAL[name]} need it.")
    return 0


def _cmd_report(ns: argparse.Namespace) -> int:
    from harness.run.report import render_across, render_report

    if ns.across and ns.run_dir:
        raise UsageError("Give either RUN_DIR or --across RUN_DIR..., not both.")
    if not ns.across and not ns.run_dir:
        raise UsageError("harness report needs a run directory (or --across RUN_DIR RUN_DIR...).")
    if ns.out:
        from harness.results.store import check_can_write_file

        check_can_write_file(Path(ns.out), f"--out {ns.out}")  # before anything is rendered
    text = (render_across([Path(d) for d in ns.across]) if ns.across
            else render_report(Path(ns.run_dir), ns.format, warnings=sys.stderr))
    if ns.out:
        from harness.results.store import atomic_write_text

        out = Path(ns.out)
        atomic_write_text(out, text)
        print(f"written: {out}")
    else:
        sys.stdout.write(text)
    return 0


def _dispatch(parser: argparse.ArgumentParser, ns: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if ns.command == "run":
        return _cmd_run(ns, environ)
    if ns.command == "list":
        return _cmd_list(ns, environ)
    if ns.command == "plugins":
        return _cmd_plugins(ns)
    if ns.command == "doctor":
        return _cmd_doctor(environ)
    if ns.command == "report":
        return _cmd_report(ns)
    if ns.command == "compile":
        from harness.compile.cli import run as run_compile

        return run_compile(ns, environ)
    if ns.command == "merge":
        from harness.options import check_run_id
        from harness.run.merge import merge_runs

        run_id = None
        if ns.run_id is not None:
            try:
                run_id = check_run_id(ns.run_id)
            except UsageError as exc:
                raise UsageError(f"--run-id: {exc.message}") from None
        merge_runs([Path(r) for r in ns.runs], Path(ns.out), run_id, sys.stdout, allow_mismatch=ns.allow_mismatch)
        return 0
    if ns.command == "container":
        from harness.container.cli import run as run_container

        return run_container(ns, environ)
    from harness.compare.cli import dispatch

    handled = dispatch(ns, environ)
    if handled is not None:
        return handled
    parser.print_help()
    return 2


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """`harness ARGS`; a closed stdout or stderr (`| head`) never fails the command (harness.streams)."""
    from harness.options import unknown_env
    from harness.streams import guarded_streams

    with guarded_streams():
        parser = build_parser()
        ns = parser.parse_args(join_toggles(sys.argv[1:] if argv is None else argv))
        environ = dict(os.environ if env is None else env)
        for warning in unknown_env(environ):
            print(f"harness: warning: {warning}", file=sys.stderr)
        return exit_status(lambda: _dispatch(parser, ns, environ))
