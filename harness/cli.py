"""The `harness` command: its parser and the dispatch to each command.

Parsing and every refusal of bad input import neither torch, Triton nor pytest; a command
imports what it needs when it runs. HarnessError becomes a message and an exit code in one
place (:func:`harness.errors.exit_status`)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from harness import __version__
from harness.errors import UsageError, exit_status, printable
from harness.runargs import add_plugin_args, add_run_parser, cli_values, join_toggles

__all__ = ["build_parser", "main"]

class _Parser(argparse.ArgumentParser):
    """argparse's parser (its subcommands' too), whose refusals echo the arguments escaped."""

    def error(self, message: str) -> NoReturn:
        super().error(printable(message))


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = _Parser(
        prog="harness",
        description="Benchmark and CI harness for Triton operators on CUDA, MUSA, ROCm, Ascend and CPU.",
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_run_parser(sub)
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
    add_plugin_args(pp)
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
                         "or commits (a tree that differed from its commit, +dirty, counts as another), or a "
                         "part resumed under another commit (run.json lists the differences under "
                         "software_mismatch)")
    from harness.bisect.cli import add_parser as add_bisect_parser
    from harness.compare.cli import add_parsers as add_compare_parsers
    from harness.compile.cli import add_parser as add_compile_parser
    from harness.container.cli import add_parser as add_container_parser

    add_compare_parsers(sub)
    add_container_parser(sub)
    add_compile_parser(sub)
    add_bisect_parser(sub)
    return parser


def _cmd_run(ns: argparse.Namespace, env: Mapping[str, str]) -> int:
    from harness.options import (
        RESUME_OPTIONS,
        read_project_config,
        resolve_run_options,
        resume_values,
    )
    from harness.run.execute import execute
    from harness.sources import prepare, prepare_resume

    if ns.all and (ns.ops or ns.ops_file):
        raise UsageError("--all selects every op; it cannot be combined with --ops or --ops-file.")
    if ns.retry_failed and not ns.resume:
        raise UsageError("--retry-failed runs again the failed ops of an earlier run: give it with "
                         "--resume RUN_DIR.")
    if ns.resume:
        values = cli_values(ns)
        given = [f"--{k.replace('_', '-')}" for k, v in values.items()
                 if v not in (None, [], ()) and k not in RESUME_OPTIONS]
        if given:
            raise UsageError(
                f"--resume {ns.resume} finishes the run with the options it was started with; "
                f"{', '.join(given)} would be ignored. Drop them (only --progress and --budget may "
                "change), or start a new run."
            )
        changed = resume_values(values)  # a budget counts from this session's start
        prepared = replace(prepare_resume(Path(ns.resume), env), retry_failed=ns.retry_failed)
        if changed:
            plan = prepared.plan
            prepared = replace(prepared, plan=replace(plan, options=replace(plan.options, **changed)))
    else:
        options = resolve_run_options(cli_values(ns), env, read_project_config())
        prepared = prepare(options, env, all_ops=bool(ns.all))
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


def _doctor_packages() -> tuple[list[str], list[str]]:
    """Print each package doctor knows and its version; (missing required, absent optional)."""
    import importlib.metadata

    missing: list[str] = []
    absent: list[str] = []
    for name in (*DOCTOR_REQUIRED, *DOCTOR_OPTIONAL):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "MISSING" if name in DOCTOR_REQUIRED else "not installed (optional)"
            (missing if name in DOCTOR_REQUIRED else absent).append(name)
        print(f"  package {name:10} {version}")
    return missing, absent


def _cmd_doctor(env: Mapping[str, str]) -> int:
    from harness.backends import BACKENDS, detect_backend, enumerate_devices
    from harness.errors import HarnessError

    detected = detect_backend()
    print(f"detected backend: {detected.name} ({detected.description})")
    if detected.capabilities.accelerator:
        try:
            print(f"devices: {', '.join(enumerate_devices(detected, None, env))}")
        except HarnessError as exc:
            print(f"devices: none usable ({exc.message})")
    missing, absent = _doctor_packages()
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


def _cmd_merge(ns: argparse.Namespace) -> int:
    from harness.options import check_run_id
    from harness.results.store import check_can_write_dir
    from harness.run.merge import merge_runs

    run_id = None
    if ns.run_id is not None:
        try:
            run_id = check_run_id(ns.run_id)
        except UsageError as exc:
            raise UsageError(f"--run-id: {exc.message}") from None
    check_can_write_dir(Path(ns.out), f"--out {ns.out}")  # before any part is read
    merge_runs([Path(r) for r in ns.runs], Path(ns.out), run_id, sys.stdout, allow_mismatch=ns.allow_mismatch)
    return 0


def _dispatch(parser: argparse.ArgumentParser, ns: argparse.Namespace, environ: Mapping[str, str]) -> int:
    own: dict[str, Callable[[], int]] = {
        "run": lambda: _cmd_run(ns, environ), "list": lambda: _cmd_list(ns, environ),
        "plugins": lambda: _cmd_plugins(ns), "doctor": lambda: _cmd_doctor(environ),
        "report": lambda: _cmd_report(ns), "merge": lambda: _cmd_merge(ns),
    }
    if ns.command in own:
        return own[ns.command]()
    if ns.command == "compile":
        from harness.compile.cli import run as run_compile

        return run_compile(ns, environ)
    if ns.command == "bisect":
        from harness.bisect.cli import run as run_bisect

        return run_bisect(ns, environ)
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
