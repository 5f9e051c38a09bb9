"""Sources of ops: what differs between the harness's own cases and a library's benchmark suite
when a run is prepared.

A :class:`Source` validates what the user gave and chooses the run's ops (:meth:`Source.choose`),
or reopens a stored run (:meth:`Source.reopen`); the run's preparation around it (backend,
replay source, run directory, devices, sweep, ``--shard`` part) is one path for every source
(:func:`harness.run.execute.prepare`). The sources themselves are listed in harness.sources:
nothing here, nor in the executor, names a library."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.backends.base import Backend
from harness.options import RunOptions
from harness.results.runinfo import RunInfo
from harness.run.context import OpRunner
from harness.run.plan import OpPlan
from harness.run.plugins import PluginPlan
from harness.run.sweep import SweepLauncher

__all__ = ["Chosen", "Source"]


@dataclass(frozen=True)
class Chosen:
    """What a source chose for a run, before its devices are known."""

    options: RunOptions  # as the op processes get them (the source's provider, timer, level, paths)
    level: str
    plugins: PluginPlan
    runner: OpRunner
    # every selected op (dismissed ones too) over these devices; None when reopened (a resume keeps
    # the op plans its run.json holds)
    plan_ops: Callable[[Sequence[str]], tuple[OpPlan, ...]] | None = None
    dismissed: Mapping[str, str] = field(default_factory=dict)  # op id -> reason (planned, never run)
    digest_facts: Mapping[str, Any] | None = None  # what the op plans cannot say (harness.run.plan.plan_digest)
    sweep_launcher: SweepLauncher | None = None  # how a sweep process of this source starts (else the cases')


class Source(Protocol):
    """A source of ops for `harness run`."""

    @property
    def name(self) -> str:
        """The source's name in messages."""
        ...

    def claims(self, options: RunOptions) -> bool:
        """Whether a new run with these options takes its ops from this source."""
        ...

    def made(self, info: RunInfo) -> bool:
        """Whether the stored run (its run.json) took its ops from this source."""
        ...

    def choose(self, options: RunOptions, backend: Backend, env: Mapping[str, str], all_ops: bool) -> Chosen:
        """Validate the options this source reads and choose the ops (``all_ops``: ``--all``)."""
        ...

    def reopen(self, info: RunInfo, options: RunOptions, backend: Backend) -> Chosen:
        """The choice stored in a run.json, for a resume (KeyError, TypeError or ValueError when the
        file cannot give it)."""
        ...
