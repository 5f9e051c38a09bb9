"""What the batch's device threads share, and the interfaces that plug into them.

:class:`BatchContext` is read by the batch (harness.run.batch), by a source's
:class:`OpRunner` (the harness's own cases, a library's suite) and by the autotune sweep
(harness.run.sweep), which sits below the batch: the context names the sweep through
:class:`TuneStep`, what the batch asks of it, so neither imports the other's module."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.autotune.sweep import SweepSummary
from harness.contract import ChildSpec, Replay, RunFiles, SuiteFacts, SweepTask
from harness.options import PRESTART_DEPTH
from harness.run.decide import AttemptExit, OpOutcome
from harness.run.plan import OpPlan, RunPlan
from harness.run.spawn import Launch, StopToken

__all__ = ["BatchContext", "BatchEvents", "DeviceLocks", "HeldProcess", "OpRunner", "TuneStep"]


class DeviceLocks:
    """One lock per device: held while an op is measured there, and by a sweep on every device
    it uses. Sweeps take their locks one sweep at a time, in sorted order, after letting go of
    their own op's lock, so two threads never wait on each other."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._sweep = threading.Lock()

    def lock(self, device: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(device, threading.Lock())

    @contextmanager
    def measuring(self, device: str) -> Iterator[None]:
        with self.lock(device):
            yield

    @contextmanager
    def sweeping(self, own: str, devices: Sequence[str]) -> Iterator[None]:
        """Inside :meth:`measuring` of ``own``: hold ``devices`` (and ``own``) exclusively."""
        own_lock = self.lock(own)
        own_lock.release()
        held: list[str] = []
        try:
            with self._sweep:
                for device in sorted(set(devices) | {own}):
                    self.lock(device).acquire()
                    held.append(device)
            yield
        finally:
            for device in held:
                if device != own:
                    self.lock(device).release()
            if own not in held:
                own_lock.acquire()


class TuneStep(Protocol):
    """A step before an autotuned op's attempts (the parallel sweep, harness.run.sweep.SweepStep)."""

    devices: tuple[str, ...]

    def applies(self, op_plan: OpPlan) -> bool:
        """Whether the op is tuned by this step before it is measured."""
        ...

    def replay_file(self, run_dir: Path, op: str) -> Path:
        """The configs the op's attempts replay once the step has run."""
        ...

    def run(self, ctx: BatchContext, op_plan: OpPlan) -> SweepSummary | None:
        """Tune the op; None when a stop cut it short."""
        ...


class BatchEvents(Protocol):
    """What a progress display hears; called from the device threads."""

    def attempt_started(self, device: str, op: str, attempt: int) -> None: ...

    def op_finished(self, outcome: OpOutcome) -> None: ...

    def note(self, text: str) -> None: ...


class OpRunner(Protocol):
    """A source of ops: the process an attempt of an op starts, and what it leaves behind."""

    def launch(self, ctx: BatchContext, op_plan: OpPlan, attempt: int, skip: Collection[str],
               capture_off: str = "") -> Launch:
        """Write what the op's process reads and say how to start it (for the cases not in ``skip``;
        ``capture_off``: why the process must capture no graph, put in its spec as ``capture_off``)."""
        ...

    def collect(self, ctx: BatchContext, op_plan: OpPlan, end: AttemptExit | None) -> tuple[str, ...]:
        """After the process is gone (``end`` None: a stop cut it short): turn what it left into
        records where it did not append them itself; notes for the op's row."""
        ...

    def run_info(self, identity: Mapping[str, Any]) -> dict[str, Any]:
        """Facts this source adds to run.json."""
        ...


@dataclass(frozen=True)
class HeldProcess:
    """A pre-started op process: imports done, waiting for ``go`` on its stdin."""

    child: subprocess.Popen[bytes]
    exit_path: Path
    skip: frozenset[str]


@dataclass(frozen=True)
class BatchContext:
    """What every device thread shares."""

    plan: RunPlan
    run_dir: Path
    parent_env: Mapping[str, str]
    stop: StopToken
    events: BatchEvents
    runner: OpRunner
    prestart: bool = False
    prestart_depth: int = PRESTART_DEPTH  # how many of a device's next ops are held at once
    cache_dir: Path | None = None  # the run's own compiler caches (harness.run.caches), if isolated
    sweep: TuneStep | None = None  # --sweep-devices: tune autotuned ops before measuring them
    locks: DeviceLocks = field(default_factory=DeviceLocks)
    held: dict[str, HeldProcess] = field(default_factory=dict)  # op -> its pre-started process
    held_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def files(self) -> RunFiles:
        return RunFiles(self.run_dir)

    @property
    def records_path(self) -> Path:
        return self.files.records

    def is_held(self, op: str) -> bool:
        with self.held_lock:
            return op in self.held

    def take_held(self, op: str) -> HeldProcess | None:
        with self.held_lock:
            return self.held.pop(op, None)

    def child_spec(self, op_plan: OpPlan, device: str, skip: Collection[str] = (), *, capture_off: str = "",
                   sweep: SweepTask | None = None, suite: SuiteFacts | None = None) -> ChildSpec:
        """The spec of one process of ``op_plan`` on ``device``, every source's and the sweep's: the
        run's options, the cases not in ``skip``, why it must not capture graphs (``capture_off``),
        its autotune replay (none in a sweep process, which tunes), and a source's own section."""
        plan, options = self.plan, self.plan.options
        replay = Replay()
        if sweep is None:
            replay_file = (self.sweep.replay_file(self.run_dir, op_plan.op)
                           if self.sweep is not None and self.sweep.applies(op_plan) else None)
            replay = Replay(run_dir=options.replay_from, file=None if replay_file is None else str(replay_file))
        return ChildSpec(
            run_id=plan.run_id, run_dir=str(self.run_dir), backend=plan.backend.name, device=device,
            op=op_plan.op, provider=op_plan.provider, dtypes=op_plan.dtypes, shapes=op_plan.shapes,
            seed=options.seed, timer=plan.timer, cache=options.cache, ops_modules=options.ops_modules,
            warmup_ms=options.warmup_ms, rep_ms=options.rep_ms, cap_ms=options.cap_ms,
            skip_cases=tuple(sorted(skip)), capture_off=capture_off, ir_sass=options.ir == "full",
            replay=replay, sweep=sweep, suite=suite,
        )
