"""Process groups: start a command in its own session, wait with a deadline, end the whole group.

The waits never reap the child before its group has been signalled: while the child is an
unreaped zombie its pid, and so its process group id, cannot be reused, so signalling the
group can never reach an unrelated process. A :class:`StopToken`, set by SIGINT/SIGTERM to the
parent, cuts a wait short; a second signal forces the kill.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["KILL_GRACE_S", "StopToken", "end_group", "reap_group", "signal_name", "stop_on_signals", "wait_exit"]

KILL_GRACE_S = 5.0  # between the polite signal and SIGKILL
_POLL_S = 0.05


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


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


def wait_exit(pid: int, deadline: float | None, stop: StopToken | None, forced: bool = False) -> str:
    """'exited', 'timeout' (the monotonic deadline passed) or 'stopped' (a stop was requested;
    with forced=True, only a forced one counts)."""
    while True:
        if _exited(pid):
            return "exited"
        if stop is not None and (stop.forced if forced else stop.requested):
            return "stopped"
        if deadline is not None and time.monotonic() >= deadline:
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
