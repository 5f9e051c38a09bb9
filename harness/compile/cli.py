"""`harness compile`: plan the tasks (one per target), run them in worker processes, write
compile.json and compile.md, and gate against an earlier compile (docs/compile.md).

Nothing here imports torch or Triton: the workers do (``python -m harness.compile.worker``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.compile.gate import Thresholds, judge, render_findings, summary_table
from harness.compile.targets import DEFAULT_TARGETS, Target, parse_targets
from harness.contract import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, PARENT_PID_ENV, op_file_stem
from harness.errors import HarnessError, UsageError
from harness.results.store import (
    OUTPUT_ROOM,
    atomic_write_text,
    check_can_write_dir,
    check_path_fits,
    read_json,
    write_json,
)

if TYPE_CHECKING:
    from harness.run.spawn import StopToken

__all__ = ["add_parser", "dead_targets", "plan_tasks", "run"]

FORMAT_VERSION = 1
RESULT = "compile.json"
VARIANT_TIMEOUT_S = 300.0  # one variant's compile, or a worker's start before its first one
WORKER_COMMAND: tuple[str, ...] = ("-m", "harness.compile.worker")  # after the interpreter; then the task file
PROGRESS_POLL_S = 0.5  # how often a worker's progress file is looked at


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compile", help="compile every built-in kernel for GPU targets without their hardware; gate on a baseline",
        description="Compile every built-in kernel at every autotune config and each shape's specialisation "
                    "for each target (Triton's GPUTarget, no device needed), keep the IR and metadata, and "
                    "with --against fail when a kernel stops compiling or its registers, spills or shared "
                    "memory grow. Proves neither speed nor correctness on the device (docs/compile.md).")
    p.add_argument("--targets", default=DEFAULT_TARGETS, help=f"BACKEND:ARCH list (default {DEFAULT_TARGETS})")
    p.add_argument("--level", default="core", choices=("smoke", "core", "comprehensive"),
                   help="the shapes whose specialisations are compiled (default core)")
    p.add_argument("--ops", nargs="+", metavar="OP", help="op ids (default: every built-in op)")
    p.add_argument("--dtypes", nargs="+", metavar="DTYPE", help="float16 bfloat16 float32 (default: all three)")
    p.add_argument("--ops-module", dest="ops_modules", action="append", metavar="PATH_OR_MODULE",
                   help="also compile the ops of this module (repeatable)")
    p.add_argument("--out", help="output folder (default reports/compile-<UTC time>); must not hold a compile")
    p.add_argument("--against", metavar="DIR", help="an earlier `harness compile --out DIR`: exit 1 on a regression")
    p.add_argument("--threshold", type=float, default=Thresholds.pct,
                   help=f"growth in percent of registers or shared memory that regresses (default {Thresholds.pct:g})")
    p.add_argument("--jobs", type=int, help="worker processes, at least 1 (default: the CPU count, at most 4)")
    p.add_argument("--variant-timeout", type=float, default=VARIANT_TIMEOUT_S, metavar="SECONDS",
                   help="end a worker (its process group) whose variant takes longer than this to compile; its "
                        f"start before the first variant counts as one (default {VARIANT_TIMEOUT_S:g})")
    p.add_argument("--keep-triton-cache", action="store_true", help="keep OUT/triton-cache")


def plan_tasks(ops: Sequence[str], targets: Sequence[Target], level: str, dtypes: Sequence[str],
               ops_modules: Sequence[str], out: Path, variant_timeout_s: float = VARIANT_TIMEOUT_S
               ) -> list[dict[str, Any]]:
    """One task per target, each with every op's shapes at the level; the worker writes a line to
    ``progress`` as it begins each variant, and is ended when one takes over ``variant_timeout_s``."""
    from harness.ops.shapes import load_level

    shapes = load_level(level)
    missing = [op for op in ops if op not in shapes]
    if missing:
        raise UsageError(f"--level {level} has no shapes for {', '.join(missing)}; choose other ops or level.")
    items = [{"op": op, "shapes": [list(s) for s in shapes[op]], "dtypes": list(dtypes)} for op in ops]
    return [{"target": t.label, "ops": items, "ops_modules": list(ops_modules), "out": str(out),
             "result": str(out / "tasks" / f"{op_file_stem(t.label)}.json"),
             "progress": str(out / "tasks" / f"{op_file_stem(t.label)}.progress"),
             "variant_timeout_s": variant_timeout_s} for t in targets]


def _worker_env(env: Mapping[str, str], cache: Path) -> dict[str, str]:
    child = {k: v for k, v in env.items() if k != "TRITON_INTERPRET"}  # compile, do not interpret
    child["TRITON_CACHE_DIR"] = str(cache)
    src = str(Path(__file__).absolute().parent.parent.parent)
    child["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    child[PARENT_PID_ENV] = str(os.getpid())  # the worker ends with this process (harness.compile.worker)
    return child


class CompileInterrupted(HarnessError):
    """SIGINT or SIGTERM while the workers ran: they were ended, nothing was written (exit 130)."""

    exit_code = EXIT_INTERRUPTED


def _run_tasks(tasks: Sequence[dict[str, Any]], env: dict[str, str], jobs: int, out: Path) -> list[str]:
    """Run the workers, ``jobs`` at a time, each as an op process is run: a session of its own,
    a deadline, its process group ended and what it left outside the group found by its mark
    (harness.run.spawn, harness.run.leftovers). The deadline moves each time the worker begins
    a variant: a worker that begins none for its task's ``variant_timeout_s`` is ended (its
    imports and tracing count toward the first). The problems of workers that crashed, were
    ended or left processes running; a signal ends every worker and raises
    :class:`CompileInterrupted`."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.run.spawn import StopToken, stop_on_signals

    (out / "tasks").mkdir(parents=True, exist_ok=True)
    stop = StopToken()
    with stop_on_signals(stop), ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="compile") as pool:
        found = list(pool.map(lambda task: _run_worker(task, env, out, stop), tasks))
    if stop.requested:
        raise CompileInterrupted(f"interrupted ({stop.reason}): the compile workers were ended; nothing was "
                                 f"written to {out / RESULT}.")
    return [problem for problems in found for problem in problems]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _wait_progressing(pid: int, progress: Path, timeout_s: float, stop: StopToken) -> str:
    """harness.run.spawn.wait_exit with a deadline that moves to ``timeout_s`` after each line the
    worker adds to ``progress``: 'exited', 'stopped' or 'timeout'."""
    from harness.run.spawn import wait_exit

    seen, deadline = _size(progress), time.monotonic() + timeout_s
    while True:
        state = wait_exit(pid, min(deadline, time.monotonic() + PROGRESS_POLL_S), stop)
        if state != "timeout":
            return state
        size = _size(progress)
        if size != seen:  # a variant begun: its own timeout starts now
            seen, deadline = size, time.monotonic() + timeout_s
        elif time.monotonic() >= deadline:
            return "timeout"


def _run_worker(task: Mapping[str, Any], env: Mapping[str, str], out: Path, stop: StopToken) -> list[str]:
    """One task's worker from its start to its reaping; its problems."""
    from harness.run.leftovers import describe, end_marked, find_marked, op_marks
    from harness.run.spawn import end_group, reap_group

    if stop.requested:
        return []
    target, timeout_s = str(task["target"]), float(task["variant_timeout_s"])
    stem = op_file_stem(target)
    spec, log, progress = out / "tasks" / f"{stem}.task.json", out / "tasks" / f"{stem}.log", Path(task["progress"])
    write_json(spec, task)
    progress.unlink(missing_ok=True)  # an earlier worker's lines must not name this one's variant
    with open(log, "wb") as fh:
        child = subprocess.Popen([sys.executable, *WORKER_COMMAND, str(spec)],
                                 env={**env, **op_marks(out, target)}, stdout=fh, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
    state = _wait_progressing(child.pid, progress, timeout_s, stop)
    if state == "stopped":
        end_group(child, signal.SIGINT, stop)
    elif state == "timeout":
        end_group(child, signal.SIGTERM, stop)
    else:
        reap_group(child)
    problems: list[str] = []
    doing = _last_line(progress)
    if state == "timeout":
        what = f"compiling {doing}" if doing else "its start (imports, tracing) before any variant"
        problems.append(f"the worker for {target} was ended: {what} took over --variant-timeout {timeout_s:g} s "
                        f"(log: {log})")
    elif state == "exited" and (child.returncode != 0 or not Path(task["result"]).is_file()):
        problems.append(f"the worker for {target} exited with {child.returncode}: {_last_line(log) or 'no output'}"
                        f"{f' (last variant begun: {doing})' if doing else ''} (log: {log})")
    left = end_marked(find_marked(out, target), out)
    if left:
        problems.append(f"the worker for {target} left processes running, ended: {describe(left)}")
    return problems


def dead_targets(targets: Sequence[str], variants: Sequence[Mapping[str, Any]], unfinished: Sequence[str]
                 ) -> list[str]:
    """The targets where nothing compiled: a worker that left no result, or variants none of which
    compiled (Triton takes any gfx name or compute capability and fails each kernel on one it does
    not know). A target with no variant at all (ops without kernels) is not counted."""
    seen = {str(v.get("target")) for v in variants}
    compiled = {str(v.get("target")) for v in variants if v.get("ok")}
    return [t for t in targets if t in unfinished or (t in seen and t not in compiled)]


def _check_against(against: str | None) -> dict[str, Any] | None:
    if not against:
        return None
    path = Path(against) / RESULT
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--against {against}: {path} cannot be read ({exc}); give the --out folder of an "
                         "earlier `harness compile`.") from None
    if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
        raise UsageError(f"--against {against}: {path} is not a compile result this harness reads "
                         f"(format_version {FORMAT_VERSION}).")
    return data


def _check_numbers(ns: argparse.Namespace) -> None:
    """--threshold, --variant-timeout and --jobs, before anything is written."""
    if not math.isfinite(ns.threshold) or ns.threshold <= 0:
        raise UsageError(f"--threshold {ns.threshold}: give a positive percentage, for example 10.")
    if not math.isfinite(ns.variant_timeout) or ns.variant_timeout <= 0:
        raise UsageError(f"--variant-timeout {ns.variant_timeout}: give a positive number of seconds, for "
                         f"example {VARIANT_TIMEOUT_S:g}.")
    if ns.jobs is not None and ns.jobs < 1:
        raise UsageError(f"--jobs {ns.jobs}: give a number of worker processes, at least 1 (leave --jobs out "
                         "for the CPU count, at most 4).")


def run(ns: argparse.Namespace, env: Mapping[str, str]) -> int:
    from harness.ops.registry import catalog
    from harness.options import _dtypes

    targets = parse_targets(ns.targets)
    _check_numbers(ns)
    baseline = _check_against(ns.against)
    known = catalog(tuple(ns.ops_modules or ()))
    ops = list(dict.fromkeys(ns.ops or [op for op, info in known.items() if info.source == "builtin"]))
    unknown = [op for op in ops if op not in known]
    if unknown:
        raise UsageError(f"--ops: unknown op(s) {', '.join(unknown)}. Known: {', '.join(known)}.")
    dtypes = _dtypes(ns.dtypes) if ns.dtypes else ("float16", "bfloat16", "float32")
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(ns.out or f"reports/compile-{stamp}").absolute()
    check_path_fits(out, f"--out {ns.out or out}", room=OUTPUT_ROOM)  # before looking inside it
    if (out / RESULT).exists():
        raise UsageError(f"--out {out} already holds a compile ({RESULT}); give a new folder.")
    check_can_write_dir(out, f"--out {ns.out or out}")  # before any worker starts
    tasks = plan_tasks(ops, targets, ns.level, dtypes, tuple(ns.ops_modules or ()), out, ns.variant_timeout)
    jobs = ns.jobs if ns.jobs is not None else max(1, min(4, os.cpu_count() or 1))
    cache = out / "triton-cache"
    started = time.perf_counter()
    print(f"harness compile: {len(ops)} op(s) x {len(targets)} target(s) at level {ns.level}, {jobs} worker(s), "
          f"into {out}", flush=True)
    problems = _run_tasks(tasks, _worker_env(dict(env), cache), jobs, out)
    results: list[dict[str, Any]] = []
    triton = ""
    unfinished: list[str] = []  # targets whose worker left no result
    for task in tasks:
        path = Path(task["result"])
        if not path.is_file():
            unfinished.append(task["target"])
        else:
            data = read_json(path)
            triton = triton or str(data.get("triton_version", ""))
            results += data.get("ops", [])
    if not ns.keep_triton_cache:
        shutil.rmtree(cache, ignore_errors=True)
    for r in results:
        problems += [f"{r['op']} on {r['target']}: {p}" for p in r.get("problems", [])]
    report = {
        "format_version": FORMAT_VERSION, "targets": [t.label for t in targets], "level": ns.level,
        "ops": ops, "dtypes": list(dtypes), "triton_version": triton, "created_at": stamp,
        "elapsed_s": round(time.perf_counter() - started, 1), "problems": problems,
        "variants": [v for r in results for v in r.get("variants", [])],
        "per_op": [{k: r[k] for k in ("op", "target", "elapsed_s")} for r in results],
    }
    write_json(out / RESULT, report)
    failed = [v for v in report["variants"] if not v.get("ok")]
    md = [f"# Compile {stamp}", "", f"- targets {', '.join(report['targets'])}, level {ns.level}, Triton "
          f"{triton or '?'}, {len(report['variants'])} variant(s), {len(failed)} failed to compile, "
          f"{report['elapsed_s']} s", "", *summary_table(results), ""]
    md += [f"- problem: {p}" for p in problems]
    md += [f"- does not compile: {v['op']} {v['target']} {v['label']}: {v.get('error', '')}" for v in failed]
    atomic_write_text(out / "compile.md", "\n".join(md) + "\n")
    print(f"{len(report['variants'])} variant(s), {len(failed)} failed, {len(problems)} problem(s) in "
          f"{report['elapsed_s']} s: {out}/compile.md", flush=True)
    dead = dead_targets([t.label for t in targets], report["variants"], unfinished)
    if dead:
        print(f"harness compile: nothing compiled for {', '.join(dead)}: every variant failed or the worker "
              f"ended without a result (an arch this Triton does not know?); see {out}/compile.md.",
              file=sys.stderr, flush=True)
    if baseline is None:
        return EXIT_FAILED if dead else EXIT_OK
    thresholds = Thresholds(pct=ns.threshold)
    findings = judge(baseline, report, thresholds)
    atomic_write_text(out / "gate.md", render_findings(findings, str(Path(ns.against).absolute()), str(out),
                                                        thresholds))
    bad = [f for f in findings if f.regression]
    for f in bad:
        print(f"REGRESSION {f.kind}: {f.op} {f.target} {f.label}: {f.detail}")
    print(f"compile gate: {'FAIL' if bad else 'pass'} ({len(bad)} regression(s)); {out}/gate.md")
    return EXIT_FAILED if bad or dead else EXIT_OK
