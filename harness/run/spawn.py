"""Op processes: their environment and command, held starts, and their process groups.

Each op process runs in its own session and process group, pinned to one device through the
backend's visibility variables (every other vendor's are cleared). A pre-started process
(``--hold``) imports what every op needs, then waits for :data:`harness.contract.GO` on its
stdin. The waits never reap the child before its group has been signalled: while the child is an
unreaped zombie its pid, and so its process group id, cannot be reused, so signalling the
group can never reach an unrelated process. A :class:`StopToken`, set by SIGINT/SIGTERM to the
parent, cuts a wait short; a second signal forces the kill.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.backends import isolated_env
from harness.backends.base import Backend
from harness.contract import GO, PARENT_PID_ENV, ChildArgs
from harness.providers.vendors import gems_vendor_env
from harness.run.decide import signal_name

__all__ = [
    "EXIT_LINGER_S",
    "KILL_GRACE_S",
    "Launch",
    "StopToken",
    "cancel",
    "child_env",
    "end_group",
    "reap_group",
    "release",
    "start",
    "stop_on_signals",
    "wait_exit",
]

KILL_GRACE_S = 5.0  # between the polite signal and SIGKILL
# How long an op process may take to exit once pytest has finished (its exit status is written)
# before its group is ended: a hang at interpreter exit must not turn a finished op into a TIMEOUT.
EXIT_LINGER_S = 60.0
_POLL_S = 0.05


class StopToken:
    """Set once to stop the run (a signal, a caller); set again to stop it at once."""

    def __init__(self) -> None:
        self._requested = threading.Event()
        self._forced = threading.Event()
        self.reason = ""

    def request(self, reason: str) -> None:
        if self._requested.is_set():
            self._forced.set()
            return
        self.reason = reason
        self._requested.set()

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    @property
    def forced(self) -> bool:
        return self._forced.is_set()


@contextmanager
def stop_on_signals(token: StopToken, on_signal: Callable[[str], None] = lambda name: None) -> Iterator[StopToken]:
    """While inside, SIGINT and SIGTERM request a stop (a second one forces it) instead of
    killing the parent half-way through writing a file. Only the main thread can install
    handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield token
        return

    def handle(signum: int, _frame: object) -> None:
        token.request(signal_name(signum))
        on_signal(signal_name(signum))

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield token
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def wait_exit(pid: int, deadline: float | None, stop: StopToken | None, forced: bool = False,
              finished: Callable[[], bool] | None = None, linger_s: float = EXIT_LINGER_S) -> str:
    """'exited', 'timeout' (the monotonic deadline passed), 'stopped' (a stop was requested;
    with forced=True, only a forced one counts) or 'lingered' (``finished()`` became true, the
    op's work is done, and the process was still there ``linger_s`` later)."""
    done_at: float | None = None
    while True:
        if _exited(pid):
            return "exited"
        if stop is not None and (stop.forced if forced else stop.requested):
            return "stopped"
        now = time.monotonic()
        if finished is not None and done_at is None and finished():
            done_at = now
        if done_at is not None and now - done_at >= linger_s:
            return "lingered"
        if deadline is not None and now >= deadline:
            return "timeout"
        time.sleep(_POLL_S)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reap_group(child: subprocess.Popen[bytes], settle_s: float = 5.0) -> None:
    """SIGKILL whatever is left of the child's group (strays it spawned), reap the child, then
    wait (bounded) until the group is gone, so the device is free for the next process."""
    _signal_group(child.pid, signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:
        try:
            os.killpg(child.pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(_POLL_S)


def end_group(child: subprocess.Popen[bytes], first: int, stop: StopToken | None, grace_s: float = KILL_GRACE_S) -> None:
    """``first`` to the whole group, ``grace_s`` to go (cut short by a forced stop), then SIGKILL."""
    _signal_group(child.pid, first)
    wait_exit(child.pid, time.monotonic() + grace_s, stop, forced=True)
    reap_group(child)


# -- starting op processes -------------------------------------------------------------------


def child_env(backend: Backend, device: str, parent_env: Mapping[str, str],
              caches: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an op process pinned to ``device``; ``caches`` are the run's own
    compiler cache variables (harness.run.caches.cache_env), over the user's."""
    env = isolated_env(backend, parent_env, device)
    env.update(caches or {})
    if backend.capabilities.triton_interpreter:
        env["TRITON_INTERPRET"] = "1"  # must be set before the child imports triton
    if backend.op_threads is not None:  # read by torch's and MKL's pools when they start
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(backend.op_threads)
    # Before anything imports flag_gems: otherwise it probes every vendor's CLI (no timeout).
    env.update(gems_vendor_env(backend, env))
    # Not resolved: where `harness ab` runs this harness through a directory that links to its
    # package alone, the op's process must import it the same way (and nothing else from there).
    src = str(Path(__file__).absolute().parent.parent.parent)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env[PARENT_PID_ENV] = str(os.getpid())  # the op process ends with this one (harness.child)
    return env


@dataclass(frozen=True)
class Launch:
    """One op process to start (built by an OpRunner): pytest's arguments, the file where the
    process writes pytest's exit status, and what else it needs."""

    pytest_args: tuple[str, ...]
    exit_path: Path
    env: Mapping[str, str] = field(default_factory=dict)  # over the device-pinned child_env
    cwd: Path | None = None
    header: str = ""  # what the op's log says about this process ("attempt 2 on device 0")
    preload: tuple[str, ...] = ()  # modules a held process imports besides the usual (a suite's package)

    def command(self, hold: bool, warm_profiler: bool = False) -> list[str]:
        """The op process's command line; ``warm_profiler`` (held only): pay the profiler's start
        while held (harness.child.timing.profiler.warm_up)."""
        args = ChildArgs(str(self.exit_path), self.pytest_args, hold=hold, preload=self.preload,
                         warm_profiler=warm_profiler)
        return [sys.executable, *args.argv()]


def start(launch: Launch, env: Mapping[str, str], log_path: Path, hold: bool,
          warm_profiler: bool = False) -> subprocess.Popen[bytes]:
    """Start the process in a session of its own (ended as a whole), its output appended to
    ``log_path``; with ``hold`` it waits for :func:`release` (``warm_profiler``: having paid the
    profiler's start)."""
    launch.exit_path.parent.mkdir(parents=True, exist_ok=True)
    launch.exit_path.unlink(missing_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        line = f"\n=== {launch.header}{' (pre-started)' if hold else ''} ===\n"
        log.write(line.encode("utf-8", "replace"))
        log.flush()
        return subprocess.Popen(
            launch.command(hold, warm_profiler), cwd=launch.cwd, env={**env, **launch.env},
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE if hold else subprocess.DEVNULL,
            start_new_session=True,
        )


def release(child: subprocess.Popen[bytes]) -> None:
    """Let a held process run its op. One that already died is left to be classified by its
    exit like any other attempt (a fresh process would have hit the same failure). The line
    carries the time it was sent, so the op's timeline shows how long the op waited for its own
    preparation (``asked`` against ``held``: its imports and any warm-up done)."""
    stdin = child.stdin
    if stdin is None:
        return
    try:
        stdin.write(f"{GO} {time.time():.6f}\n".encode())
        stdin.close()
    except (BrokenPipeError, OSError):
        pass


def cancel(child: subprocess.Popen[bytes]) -> None:
    """End a held process that will not run (its op ended otherwise, or the run stopped)."""
    if child.stdin is not None:
        try:
            child.stdin.close()
        except OSError:
            pass
    reap_group(child)


def read_exit(path: Path) -> int | None:
    """pytest's exit status as the op process wrote it; None when it ended before (a crash)."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None
