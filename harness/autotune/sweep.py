"""The parallel autotune sweep, its pure part: which cases each sweep process tunes, and how
their recorded configs become the one set the measurement replays.

A sweep splits an op's cases over N processes (each on a device of ``--sweep-devices``); each
tunes its share and records what the autotuners chose (an :class:`OpAutotune`, the format of
``autotune/<op>.json``). :func:`merge_processes` joins them: a (kernel, key) tuned by two
processes that chose differently is a :class:`Conflict` (cases of different shapes can share a
key: FlagGems' LibTuner rounds keys, a kernel may key on one dimension only); the choice of
the lowest sweep process is kept, so the result does not depend on which process finished first.
Files of a sweep (RUN/sweep/<op>/): ``shard-<i>.json`` (what a process tuned),
``configs.json`` (merged: what the measurement replays), ``sweep.json`` (:class:`SweepSummary`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.autotune.store import OpAutotune, TunedConfig
from harness.contract import op_file_stem

__all__ = [
    "SWEEP_DIR",
    "Conflict",
    "ProcessOutcome",
    "SweepFiles",
    "sweep_failed",
    "SweepSummary",
    "merge_processes",
    "open_shares",
    "split_cases",
]

SWEEP_DIR = "sweep"


@dataclass(frozen=True)
class SweepFiles:
    """The files of one op's sweep in a run directory."""

    run_dir: Path
    op: str

    @property
    def folder(self) -> Path:
        return Path(self.run_dir) / SWEEP_DIR / op_file_stem(self.op)

    @property
    def configs(self) -> Path:
        """The merged configs: what the op's measurement replays."""
        return self.folder / "configs.json"

    @property
    def summary(self) -> Path:
        return self.folder / "sweep.json"

    def process_configs(self, index: int) -> Path:
        """What sweep process ``index`` tuned (autotune format)."""
        return self.folder / f"shard-{index}.json"

    def process_result(self, index: int) -> Path:
        """How sweep process ``index``'s cases went (written by the tune plugin)."""
        return self.folder / f"shard-{index}.result.json"

    def process_spec(self, index: int) -> Path:
        return self.folder / f"shard-{index}.spec.json"

    def process_exit(self, index: int) -> Path:
        return self.folder / f"shard-{index}.exit"

    def process_log(self, index: int) -> Path:
        return self.folder / f"shard-{index}.log"


def sweep_failed(files: SweepFiles) -> bool:
    """Whether the op's sweep ran and failed (its summary names why): its configs are discarded."""
    try:
        data = json.loads(files.summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and bool(data.get("failed"))


def split_cases(case_ids: Sequence[str], devices: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(device, cases) per sweep process, one sweep process per entry of ``devices`` (an id may repeat), the
    cases dealt round-robin in plan order; sweep processes left without a case are dropped."""
    if not devices:
        raise ValueError("a sweep needs at least one device")
    shares: list[list[str]] = [[] for _ in devices]
    for i, case in enumerate(case_ids):
        shares[i % len(devices)].append(case)
    return [(device, tuple(share)) for device, share in zip(devices, shares, strict=True) if share]


def open_shares(devices: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(device, share) per sweep process of an op whose process finds its own cases (a suite's benchmark):
    the op's process numbers its candidate calls 0, 1, 2... and sweep process k of N takes the calls ``i``
    with ``i % N == k`` (harness.child.suite_tune); each share is said in words."""
    if not devices:
        raise ValueError("a sweep needs at least one device")
    count = len(devices)
    return [(device, (f"its calls i with i % {count} == {k}",)) for k, device in enumerate(devices)]


@dataclass(frozen=True)
class Conflict:
    """A (kernel, key) that two sweep processes tuned to different configs; ``kept`` is the sweep process whose
    config the measurement replays."""

    kernel: str
    key: tuple[str, ...]
    kept: int
    others: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "key": list(self.key), "kept": self.kept, "others": list(self.others)}


def _same(a: TunedConfig, b: TunedConfig) -> bool:
    return a.to_json() == b.to_json()


def merge_processes(op: str, procs: Sequence[OpAutotune]) -> tuple[OpAutotune, tuple[Conflict, ...]]:
    """One record of every sweep process's configs; per (kernel, key) the lowest sweep process's choice wins."""
    chosen: dict[tuple[str, tuple[str, ...]], tuple[int, TunedConfig]] = {}
    differing: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    tuners: dict[str, tuple[str, ...]] = {}
    notes: list[str] = []
    for index, proc in enumerate(procs):
        tuners.update({k: v for k, v in proc.tuners.items() if k not in tuners})
        notes += [f"shard {index}: {n}" for n in proc.notes]
        for config in proc.configs:
            slot = (config.kernel, config.key)
            if slot not in chosen:
                chosen[slot] = (index, config)
            elif not _same(chosen[slot][1], config):
                differing.setdefault(slot, []).append(index)
    conflicts = tuple(Conflict(k, key, chosen[(k, key)][0], tuple(dict.fromkeys(others)))
                      for (k, key), others in differing.items())
    merged = OpAutotune(op=op, tuners=tuners, configs=tuple(c for _, c in chosen.values()), notes=tuple(notes))
    return merged, conflicts


@dataclass(frozen=True)
class ProcessOutcome:
    index: int
    device: str
    cases: tuple[str, ...]
    ok: bool
    reason: str = ""  # why it failed
    configs: int = 0
    elapsed_s: float = 0.0
    compile_s: float | None = None


@dataclass(frozen=True)
class SweepSummary:
    """``sweep.json``: what the sweep of one op did."""

    op: str
    devices: tuple[str, ...]
    processes: tuple[ProcessOutcome, ...]
    keys: int = 0  # distinct (kernel, key) pairs tuned
    conflicts: tuple[Conflict, ...] = ()
    elapsed_s: float = 0.0
    failed: str = ""  # why a sweep process failed: the sweep is discarded and the op tunes serially
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def compile_s(self) -> float | None:
        times = [s.compile_s for s in self.processes if s.compile_s is not None]
        return sum(times) if times else None

    def note(self) -> str:
        """The op's line in ops_status.csv."""
        where = ",".join(self.devices)
        if self.extra.get("reused"):
            return f"sweep: reused the earlier sweep's configs ({SWEEP_DIR}/{op_file_stem(self.op)}/configs.json)"
        if self.failed:
            return (f"sweep on {where} failed: {self.failed}; its configs are discarded and the op tunes "
                    "serially in its own process")
        conflicts = (f"; {len(self.conflicts)} key(s) tuned differently by two shards (kept the lower "
                     f"shard's choice; {SWEEP_DIR}/{op_file_stem(self.op)}/sweep.json)") if self.conflicts else ""
        return (f"sweep: {len(self.processes)} shard(s) on {where} tuned {self.keys} key(s) in "
                f"{self.elapsed_s:.1f} s{conflicts}; measured replaying them")

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": 1,
            "op": self.op,
            "devices": list(self.devices),
            "shards": [{**asdict(s), "cases": list(s.cases)} for s in self.processes],
            "keys": self.keys,
            "conflicts": [c.to_json() for c in self.conflicts],
            "elapsed_s": round(self.elapsed_s, 3),
            "compile_s": self.compile_s,
            "failed": self.failed,
            **dict(self.extra),
        }
