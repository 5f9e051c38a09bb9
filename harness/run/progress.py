"""Progress of a batch: a live display (rich) on a terminal, plain lines elsewhere (CI logs).

Both displays read one :class:`ProgressState`, which is pure (times are passed in), and
hear the batch through :class:`harness.run.context.BatchEvents`, called from device threads.
Inside an op, a ticker thread reads which case each running op is on (the op process writes
harness.contract.CaseProgress at each case's start): the live display shows it, and the
plain lines repeat it at least every :data:`HEARTBEAT_S` seconds while an op runs, so a
five-minute op does not look hung in a CI log.
rich is the optional extra ``progress``; without it the plain lines are used.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from harness.contract import CaseProgress, RunFiles
from harness.run.decide import OpOutcome

__all__ = [
    "PlainProgress",
    "ProgressState",
    "RichProgress",
    "choose_display",
    "finished_line",
    "make_progress",
]

_RECENT = 6  # finished ops kept on the live display
HEARTBEAT_S = 30.0  # plain mode: a line per running op at least this often
_TICK_S = 1.0  # how often the running ops' case progress is read


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


@dataclass
class ProgressState:
    """What the displays show: done/total, failures so far, each device's current op, elapsed."""

    total: int
    devices: tuple[str, ...]
    started_at: float
    done: int = 0
    failed: int = 0
    running: dict[str, tuple[str, int, float]] = field(default_factory=dict)  # device -> (op, attempt, since)
    recent: list[OpOutcome] = field(default_factory=list)
    cases: dict[str, CaseProgress] = field(default_factory=dict)  # device -> the running op's case

    def start(self, device: str, op: str, attempt: int, now: float) -> None:
        since = self.running[device][2] if attempt > 1 and device in self.running else now
        self.running[device] = (op, attempt, since)
        self.cases.pop(device, None)

    def finish(self, outcome: OpOutcome) -> None:
        self.done += 1
        self.failed += outcome.failed
        if self.running.get(outcome.device, ("",))[0] == outcome.op:
            del self.running[outcome.device]
            self.cases.pop(outcome.device, None)
        self.recent = [*self.recent, outcome][-_RECENT:]

    def case_seen(self, device: str, progress: CaseProgress) -> None:
        """The op running on ``device`` is on this case (ignored when another op runs there now)."""
        if self.running.get(device, ("",))[0] == progress.op:
            self.cases[device] = progress

    def headline(self, now: float) -> str:
        return (f"{self.done}/{self.total} ops done, {self.failed} failed, "
                f"elapsed {_clock(now - self.started_at)}")

    def device_lines(self, now: float) -> list[str]:
        lines = []
        for device in self.devices:
            if device in self.running:
                op, attempt, since = self.running[device]
                retry = f", attempt {attempt}" if attempt > 1 else ""
                lines.append(f"device {device}: {op} ({_clock(now - since)}{retry}{self._case(device)})")
            else:
                lines.append(f"device {device}: idle")
        return lines


    def _case(self, device: str) -> str:
        progress = self.cases.get(device)
        if progress is None:
            return ""
        return f", case {progress.done + 1}/{progress.total} {progress.case_id}"

    def running_lines(self, now: float) -> list[str]:
        """The heartbeat: one line per running op."""
        return [f"[{self.done}/{self.total}] {line}, running" for line in self.device_lines(now)
                if not line.endswith(": idle")]


class _Ticker:
    """Every ``_TICK_S``: read each running op's case progress into the state, then ``on_tick``."""

    def __init__(self, state: ProgressState, run_dir: Path | None, lock: threading.RLock,
                 on_tick: Any = None) -> None:
        self.state, self.run_dir, self.lock, self.on_tick = state, run_dir, lock, on_tick
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="harness-progress", daemon=True)

    def __enter__(self) -> _Ticker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)

    def read(self) -> None:
        if self.run_dir is None:
            return
        files = RunFiles(self.run_dir)
        with self.lock:
            running = dict(self.state.running)
        for device, (op, _, _) in running.items():
            progress = CaseProgress.load(files.progress(op))
            if progress is not None:
                with self.lock:
                    self.state.case_seen(device, progress)

    def _loop(self) -> None:
        while not self.stopped.wait(_TICK_S):
            try:
                self.read()
                if self.on_tick is not None:
                    self.on_tick()
            except Exception:  # noqa: BLE001 - the display must never stop a run
                pass


def finished_line(outcome: OpOutcome, done: int, total: int) -> str:
    note = f" ({'; '.join(outcome.notes)})" if outcome.notes else ""
    tries = f", {outcome.attempts} attempts" if outcome.attempts > 1 else ""
    return (f"[{done}/{total}] device {outcome.device}: {outcome.op} {outcome.status}, "
            f"{outcome.rows} row(s), {outcome.elapsed_s:.1f}s{tries}{note}")


def started_line(device: str, op: str, attempt: int, done: int, total: int) -> str:
    what = "started" if attempt == 1 else f"retry, attempt {attempt}"
    return f"[{done}/{total}] device {device}: {op} {what}"


class PlainProgress:
    """One line per event, and a heartbeat per running op at least every ``heartbeat_s``: what CI
    logs want."""

    def __init__(self, out: TextIO, state: ProgressState, run_dir: Path | None = None,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        self.out = out
        self.state = state
        self.lock = threading.RLock()  # re-entrant: a signal handler may print while the lock is held
        self.heartbeat_s = heartbeat_s
        self.last_line = time.monotonic()
        self.ticker = _Ticker(state, run_dir, self.lock, self.heartbeat)

    def __enter__(self) -> PlainProgress:
        self.ticker.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.ticker.__exit__()
        with self.lock:
            print(self.state.headline(time.monotonic()), file=self.out, flush=True)

    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)
        self.last_line = time.monotonic()

    def heartbeat(self) -> None:
        """Every running op's case, when nothing was printed for ``heartbeat_s``."""
        now = time.monotonic()
        with self.lock:
            if now - self.last_line < self.heartbeat_s:
                return
            for line in self.state.running_lines(now):
                self._print(line)
            self.last_line = now

    def attempt_started(self, device: str, op: str, attempt: int) -> None:
        with self.lock:
            self.state.start(device, op, attempt, time.monotonic())
            self._print(started_line(device, op, attempt, self.state.done, self.state.total))

    def op_finished(self, outcome: OpOutcome) -> None:
        with self.lock:
            self.state.finish(outcome)
            self._print(finished_line(outcome, self.state.done, self.state.total))

    def note(self, text: str) -> None:
        with self.lock:
            self._print(text)


_STYLE = {"PASS": "green", "SKIP": "yellow", "FAIL": "red", "ERROR": "red", "CRASH": "bold red", "TIMEOUT": "bold red"}


class RichProgress:
    """A live panel (done/total, failures, elapsed, each device's op) under the finished lines."""

    def __init__(self, out: TextIO, state: ProgressState, run_dir: Path | None = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.state = state
        self.lock = threading.RLock()  # re-entrant: a signal handler may print while the lock is held
        self.ticker = _Ticker(state, run_dir, self.lock)
        self.console = Console(file=out)
        self.live = Live(console=self.console, get_renderable=self._render, refresh_per_second=4,
                         transient=True, redirect_stdout=False, redirect_stderr=False)

    def _render(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        with self.lock:
            head = self.state.headline(now)
            devices = self.state.device_lines(now)
            done, total, failed = self.state.done, self.state.total, self.state.failed
        bar = Table.grid(padding=(0, 1))
        bar.add_row(ProgressBar(total=max(total, 1), completed=done, width=40, complete_style="cyan",
                                finished_style="green"),
                    Text(head, style="red" if failed else ""))
        return Group(bar, *(Text("  " + line, style="dim" if line.endswith("idle") else "") for line in devices))

    def __enter__(self) -> RichProgress:
        self.live.start()
        self.ticker.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.ticker.__exit__()
        self.live.stop()
        with self.lock:
            self.console.print(self.state.headline(time.monotonic()), highlight=False)

    def attempt_started(self, device: str, op: str, attempt: int) -> None:
        with self.lock:
            self.state.start(device, op, attempt, time.monotonic())

    def op_finished(self, outcome: OpOutcome) -> None:
        from rich.text import Text

        with self.lock:
            self.state.finish(outcome)
            line = finished_line(outcome, self.state.done, self.state.total)
        text = Text(line)
        text.stylize(_STYLE.get(outcome.status, ""), line.index(outcome.status), line.index(outcome.status) + len(outcome.status))
        self.live.console.print(text, highlight=False)

    def note(self, text: str) -> None:
        self.live.console.print(text, markup=False, highlight=False)


def choose_display(mode: str, is_tty: bool, rich_available: bool) -> tuple[str, str]:
    """('rich' | 'plain', a note to print or ''): rich on a terminal under auto, when installed."""
    if mode == "plain" or (mode == "auto" and not is_tty):
        return "plain", ""
    if not rich_available:
        if mode == "rich":
            return "plain", ("--progress rich: the rich package is not installed; showing plain lines "
                             "(install it with: pip install 'triton-op-harness[progress]')")
        return "plain", ""
    return "rich", ""


def make_progress(mode: str, out: TextIO, total: int, devices: Sequence[str], done: Sequence[OpOutcome] = (),
                  run_dir: Path | None = None) -> PlainProgress | RichProgress:
    """The display for ``--progress`` (auto, rich, plain), already counting ops ended earlier;
    with ``run_dir``, it shows which case each running op is on."""
    is_tty = bool(getattr(out, "isatty", lambda: False)())
    kind, note = choose_display(mode, is_tty, importlib.util.find_spec("rich") is not None)
    state = ProgressState(total=total, devices=tuple(devices), started_at=time.monotonic(),
                          done=len(done), failed=sum(o.failed for o in done))
    if note:
        print(note, file=out, flush=True)
    return RichProgress(out, state, run_dir) if kind == "rich" else PlainProgress(out, state, run_dir)
