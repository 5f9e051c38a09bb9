"""Entry of an op's process: ``python -m harness.child EXIT_FILE [--hold [--preload M,...]] -- PYTEST_ARGS...``
(its command line: harness.contract.ChildArgs).

It runs pytest in-process, then writes pytest's exit status to EXIT_FILE. A process that ends
without that file never got back from pytest (a signal, ``os._exit``, a poisoned context, a
fatal error in native code), which ``harness.run.decide.classify_exit`` reports as a crash.
No harness plugin is imported here before pytest loads it.

With ``--hold`` (a pre-started process, docs/batch.md "Pre-start"), it first imports what
every op needs (pytest, torch, triton, the harness's op and timing modules; none of which
opens a device), with ``--warm-profiler`` pays the profiler's start (one empty session:
:func:`warm_profiler`) where those imports opened the device already (FlagGems 5.3.4 does, at
import; the session would open it otherwise, measured on the H200), and then waits for one
line on stdin: ``go TIME`` (TIME: when the parent sent
it, kept in the op's timeline as ``asked``) runs pytest as above; anything
else, or the end of stdin (the parent cancelled it or is gone), ends it with
:data:`harness.contract.CANCELLED_EXIT` and no EXIT_FILE.

It ends with its parent. A harness killed with SIGKILL (or by the OOM killer) cannot end its op
processes, which run in sessions of their own; so each one watches its parent (the pid in
:data:`harness.contract.PARENT_PID_ENV`, else the parent it started with) from a daemon thread, and once the
parent is gone it SIGKILLs its own process group: itself and any strays the op started
(:func:`watch_parent`). Why not ``prctl(PR_SET_PDEATHSIG)``: it fires when the parent *thread*
that started the process exits (the harness starts op processes from device worker threads),
and a SIGKILL it sends takes this process alone, before the watchdog could end its strays.
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path

from harness.contract import CANCELLED_EXIT, GO, PARENT_PID_ENV, ChildArgs, times_path

__all__ = ["PARENT_POLL_S", "PRELOAD", "asked_time", "end_own_group", "leave", "main", "preload", "times_path",
           "warm_profiler", "watch_parent"]

PARENT_POLL_S = 0.5
# Imported while held. Never a module pytest loads as a plugin (-p): pytest must import those
# itself, or it warns that it cannot rewrite their asserts.
PRELOAD = ("pytest", "torch", "triton", "harness.ops.registry", "harness.child.measure", "harness.child.timing")


def preload(modules: Sequence[str] = PRELOAD) -> list[str]:
    """Import ``modules``; the ones that failed (their errors come again, in full, under pytest)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - reported when the op really runs
            failed.append(name)
    return failed


def end_own_group(log_fd: int = 2) -> None:
    """SIGKILL this process's group when it leads one (it was started in a session of its own),
    so the strays it started go with it; otherwise this process alone (never a group it merely
    joined, such as a shell's). Says so on ``log_fd`` first."""
    pid = os.getpid()
    try:
        os.write(log_fd, f"harness.child: the harness process is gone; ending op process {pid} and its group\n".encode())
    except OSError:
        pass
    if os.getpgid(0) == pid:
        os.killpg(pid, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)


def _expected_parent(env: MutableMapping[str, str]) -> int:
    """The pid the parent set (a parent that died between the fork and the watchdog's start is
    noticed too), removed from the environment the op sees; else the parent this process has."""
    raw = env.pop(PARENT_PID_ENV, "")
    try:
        return int(raw) if raw else os.getppid()
    except ValueError:
        return os.getppid()


def watch_parent(parent: int, on_gone: Callable[[], None] | None = None,
                 interval_s: float = PARENT_POLL_S) -> threading.Thread:
    """Call ``on_gone`` (default :func:`end_own_group`) once ``parent`` is no longer this
    process's parent (it exited, and this process was handed to init or a subreaper), polling
    every ``interval_s`` from a daemon thread."""
    if on_gone is None:
        # pytest captures fd 2 while it runs: the note goes where stderr pointed at the start (the op's log)
        try:
            log_fd = os.dup(2)
        except OSError:
            log_fd = -1
        on_gone = functools.partial(end_own_group, log_fd)
    gone = on_gone

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        gone()

    thread = threading.Thread(target=watch, name="harness-parent-watch", daemon=True)
    thread.start()
    return thread


def asked_time(words: Sequence[str]) -> float | None:
    """The time a go line carries (``go TIME``), or None for a bare ``go`` or one that is no
    finite number (the timeline then has no ``asked``)."""
    try:
        value = float(words[0]) if words else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def warm_profiler(times: dict[str, float]) -> None:
    """Pay the profiler's start now (harness.child.timing.profiler.warm_up), noting when it ended
    (``warmed``); a failure is said on stderr and left to the profiler rows, which meet it again."""
    try:
        from harness.child.timing.profiler import warm_up

        warm_up()
    except Exception as exc:  # noqa: BLE001 - the op's own profiler rows report it in full
        print(f"harness.child: warning: the profiler's warm-up failed ({type(exc).__name__}: {exc}); "
              "its start is paid by the op's first profiler row instead", file=sys.stderr, flush=True)
        return
    times["warmed"] = time.time()


class _Clock:
    """A pytest plugin that notes when the session starts and ends (wall clock, seconds)."""

    def __init__(self, times: dict[str, float]) -> None:
        self.times = times

    def pytest_sessionstart(self) -> None:
        self.times["session_start"] = time.time()

    def pytest_sessionfinish(self) -> None:
        self.times["session_end"] = time.time()


class _Heap:
    """A pytest plugin that freezes the heap once the tests are collected (``frozen``)."""

    def __init__(self, times: dict[str, float]) -> None:
        self.times = times

    def pytest_collection_finish(self) -> None:
        # What the imports and the collection made (torch, Triton, FlagGems' modules, the items)
        # lives as long as the process: the collector's permanent generation takes it, so a full
        # collection scans only what the tests make. FlagGems' Benchmark.run calls gc.collect()
        # after every row, and with all of that in view it cost about 0.3 s a row on the H200
        # machine (9.4 s of pairwise_distance's 30 rows, py-spy, 2026-12-02; docs/batch.md).
        # Garbage that the tests make is collected as before. Garbage already there is collected
        # first from the young generations (cheap: they hold what was made since the collector last
        # ran); what is garbage in the oldest one stays for good, rather than paying a full
        # collection (0.2-0.3 s there) in every op process.
        gc.collect(1)
        gc.freeze()
        self.times["frozen"] = time.time()


def leave(code: int) -> None:
    """End the op process as the interpreter would, less its slowest part. An interpreter's exit
    waits for the non-daemon threads, runs the ``atexit`` hooks, then tears down every module: with
    torch and Triton loaded the last step alone took about 1.1 s on a 2-core CPU machine
    (``benchmarks/op_exit_cost.py``), paid by every op of a batch, and it measures nothing. So this
    waits for the threads and runs the hooks in that order (a thread or hook that hangs still hangs
    here, and the parent still ends the process and says so: docs/batch.md), flushes Python's
    output, and ends the process with ``os._exit``."""
    main_thread = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main_thread and not thread.daemon and thread.is_alive():
            thread.join()
    atexit._run_exitfuncs()  # the step of CPython's own exit that runs the hooks (a private name)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing left to say
            pass
    os._exit(code)


def main(argv: Sequence[str]) -> int:
    # Where an op's time goes outside its cases (docs/batch.md, "Where an op's time goes"): the
    # process start, the release of a pre-started process, pytest's start, its session, its return.
    times = {"started": time.time()}
    args = ChildArgs.parse(argv)
    if args is None:
        print(ChildArgs.USAGE, file=sys.stderr)
        return 2
    hold, extra, warm = args.hold, args.preload, args.warm_profiler  # extra: a suite's package
    watch_parent(_expected_parent(os.environ))
    if hold:
        preload((*PRELOAD, *extra))
        times["preloaded"] = time.time()
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():  # a device opened while another op may be timing
            if warm:  # the device is open already: the warm-up opens nothing more
                warm_profiler(times)
            what = f"the pre-start imports (with {', '.join(extra)})" if extra else "the pre-start imports"
            print(f"harness.child: warning: {what} initialised CUDA: "
                  "this process opened its device context while the op before it may be timing on the same "
                  "device (not measured to move timings); `--prestart off` avoids it, at the cost of each op's "
                  "imports on the device's clock (docs/flaggems.md, \"Selection\")", file=sys.stderr, flush=True)
        times["held"] = time.time()
        words = sys.stdin.readline().split()
        if not words or words[0] != GO:
            return CANCELLED_EXIT
        times["go"] = time.time()
        asked = asked_time(words[1:])
        if asked is not None:  # when the parent asked: before "held", the op waited for its own preparation
            times["asked"] = asked
    import json

    import pytest

    from harness.results.store import atomic_write_text

    times["pytest"] = time.time()
    code = int(pytest.main(list(args.pytest_args), plugins=[_Clock(times), _Heap(times)]))
    times["returned"] = time.time()
    atomic_write_text(Path(args.exit_file), f"{code}\n")
    try:  # a diagnostic: never the reason an op fails
        atomic_write_text(times_path(Path(args.exit_file)), json.dumps(times) + "\n")
    except OSError:
        pass
    return code


