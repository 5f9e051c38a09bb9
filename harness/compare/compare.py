"""Pair the rows of two runs by case id and judge each pair.

Pure functions do the work (``run_mismatches``, ``pair_records``,
``compare_records``); ``load_run`` and ``compare_runs`` are the thin layer
that reads run directories. Only rows that passed on both sides, with raw
candidate samples on both sides and the same timer, are compared; every other
row is reported with the reason it was not.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.compare.stats import Criteria, RowStats, adjust_pvalues, decide, row_stats
from harness.errors import UsageError
from harness.results.runinfo import ALIKE_FIELDS, alike_values, read_run_info
from harness.results.schema import Measurement, shape_str
from harness.results.store import read_records

__all__ = [
    "ALIKE_KEYS",
    "Comparison",
    "Mismatch",
    "Pair",
    "RowComparison",
    "RunData",
    "check_alike",
    "compare_records",
    "compare_runs",
    "load_run",
    "pair_records",
    "run_mismatches",
]

# What must match for two runs to be compared, by the names shown to the user (the fields of the
# fingerprint: harness.results.runinfo).
ALIKE_KEYS: tuple[str, ...] = tuple(ALIKE_FIELDS)

# Verdicts of rows that were not compared; "failing" also fails the gate.
NOT_COMPARED = "not compared"
FAILING = "failing"


@dataclass(frozen=True)
class RunData:
    """One run directory as compare sees it: its run.json and its records."""

    path: Path
    info: Mapping[str, Any]
    records: tuple[Measurement, ...]

    @property
    def run_id(self) -> str:
        return str(self.info.get("run_id") or self.path.name)


@dataclass(frozen=True)
class Mismatch:
    key: str
    base: str
    head: str


@dataclass(frozen=True)
class Pair:
    case_id: str
    base: Measurement | None
    head: Measurement | None


@dataclass(frozen=True)
class RowComparison:
    """The judgement of one case: a verdict, why, and the numbers behind it."""

    case_id: str
    op: str
    dtype: str
    shape: str
    verdict: str
    reason: str
    base_status: str
    head_status: str
    timer: str
    stats: RowStats | None = None
    p_adjusted: float | None = None
    torch_ratio: float | None = None  # the torch baseline's own change: a drift indicator

    @property
    def compared(self) -> bool:
        return self.stats is not None


@dataclass(frozen=True)
class Comparison:
    base: RunData
    head: RunData
    criteria: Criteria
    mismatches: tuple[Mismatch, ...]
    rows: tuple[RowComparison, ...]

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.rows if r.verdict == verdict)

    @property
    def regressions(self) -> tuple[RowComparison, ...]:
        return tuple(r for r in self.rows if r.verdict == "regression")

    @property
    def failing(self) -> tuple[RowComparison, ...]:
        return tuple(r for r in self.rows if r.verdict == FAILING)

    @property
    def compared(self) -> int:
        return sum(1 for r in self.rows if r.compared)

    @property
    def gate_failed(self) -> bool:
        """The gate fails on a regression, on a row that passed in base and not in head, or
        when no row at all could be compared (a gate that compared nothing proves nothing)."""
        return bool(self.regressions or self.failing or not self.compared)


def run_mismatches(base_info: Mapping[str, Any], head_info: Mapping[str, Any]) -> list[Mismatch]:
    """The identity fields on which two runs differ (empty when they are alike)."""
    out = []
    base_values, head_values = alike_values(base_info), alike_values(head_info)
    for key in ALIKE_KEYS:
        b, h = base_values[key], head_values[key]
        if b != h:
            out.append(Mismatch(key=key, base=b or "?", head=h or "?"))
    return out


def check_alike(base: RunData, head: RunData, allow_mismatch: bool) -> list[Mismatch]:
    """Refuse to compare unlike runs unless the user said they know."""
    found = run_mismatches(base.info, head.info)
    if found and not allow_mismatch:
        detail = "; ".join(f"{m.key}: {m.base!r} in base, {m.head!r} in head" for m in found)
        raise UsageError(
            f"Runs {base.path} and {head.path} are unlike ({detail}), so their timings do not "
            f"measure the same thing. Compare runs of the same {', '.join(ALIKE_KEYS)}, or pass "
            "--allow-mismatch to compare them anyway."
        )
    return found


def pair_records(base: Sequence[Measurement], head: Sequence[Measurement]) -> list[Pair]:
    """Rows paired by case id: base order first, then rows only head has."""
    head_by_id = {r.case_id: r for r in head}
    base_ids = set()
    pairs = []
    for r in base:
        base_ids.add(r.case_id)
        pairs.append(Pair(case_id=r.case_id, base=r, head=head_by_id.get(r.case_id)))
    pairs.extend(Pair(case_id=r.case_id, base=None, head=r) for r in head if r.case_id not in base_ids)
    return pairs


def _why_not_compared(pair: Pair, allow_timer_mismatch: bool) -> tuple[str, str] | None:
    b, h = pair.base, pair.head
    if b is None:
        return NOT_COMPARED, "only in head (a new case, or base did not reach it)"
    if h is None:
        return NOT_COMPARED, "only in base (removed, or head did not reach it)"
    if b.status == "pass" and h.status in ("fail", "error"):
        first_line = (h.message.splitlines() or [""])[0][:160]
        return FAILING, f"passed in base, {h.status} in head" + (f": {first_line}" if first_line else "")
    if b.status != "pass" or h.status != "pass":
        return NOT_COMPARED, f"{b.status} in base, {h.status} in head"
    if b.timer != h.timer and not allow_timer_mismatch:
        return NOT_COMPARED, f"timed with {b.timer} in base, {h.timer} in head"
    return None


def _torch_ratio(b: Measurement, h: Measurement) -> float | None:
    if b.baseline is None or h.baseline is None or b.baseline.summary.median <= 0:
        return None
    return h.baseline.summary.median / b.baseline.summary.median


def _row_timer(pair: Pair) -> str:
    timers = sorted({r.timer for r in (pair.base, pair.head) if r is not None})
    return "/".join(timers)


def compare_records(
    base: Sequence[Measurement],
    head: Sequence[Measurement],
    criteria: Criteria | None = None,
    allow_timer_mismatch: bool = False,
) -> list[RowComparison]:
    """Judge every case of either run; p-values are adjusted over the rows compared."""
    criteria = criteria or Criteria()
    pairs = pair_records(base, head)
    measured: dict[int, tuple[RowStats, float | None]] = {}
    skipped: dict[int, tuple[str, str]] = {}
    for i, pair in enumerate(pairs):
        why = _why_not_compared(pair, allow_timer_mismatch)
        b, h = pair.base, pair.head
        if why is not None or b is None or h is None or b.candidate is None or h.candidate is None:
            skipped[i] = why or (NOT_COMPARED, "no candidate samples on one side")
            continue
        stats = row_stats(
            b.candidate.samples_ms, h.candidate.samples_ms, criteria,
            seed=zlib.crc32(pair.case_id.encode()),
        )
        measured[i] = (stats, _torch_ratio(b, h))
    order = sorted(measured)
    adjusted = dict(zip(order, adjust_pvalues([measured[i][0].p for i in order], criteria.correction), strict=True))
    rows = []
    for i, pair in enumerate(pairs):
        some = pair.base or pair.head
        if some is None:  # pair_records never builds an empty pair
            continue
        common: dict[str, Any] = {
            "case_id": pair.case_id,
            "op": some.op,
            "dtype": some.dtype,
            "shape": shape_str(some.shape),
            "base_status": pair.base.status if pair.base else "absent",
            "head_status": pair.head.status if pair.head else "absent",
            "timer": _row_timer(pair),
        }
        if i in skipped:
            verdict, reason = skipped[i]
            rows.append(RowComparison(verdict=verdict, reason=reason, **common))
            continue
        stats, torch_ratio = measured[i]
        verdict, reason = decide(stats, adjusted[i], criteria)
        rows.append(RowComparison(
            verdict=verdict, reason=reason, stats=stats, p_adjusted=adjusted[i],
            torch_ratio=torch_ratio, **common,
        ))
    return rows


def load_run(path: Path) -> RunData:
    """Read run.json and records.jsonl; a directory that is not a run is a usage error."""
    info = read_run_info(path / "run.json")
    try:
        records = tuple(read_records(path / "records.jsonl"))
    except ValueError as exc:
        raise UsageError(f"{path / 'records.jsonl'} cannot be read: {exc}. Re-run that run.") from exc
    if info.get("status") == "running":
        raise UsageError(
            f"Run {path} is still running or was killed before it finished (status 'running'). "
            f"Finish it with `harness run --resume {path}` first."
        )
    return RunData(path=path, info=info, records=records)


def compare_runs(
    base_dir: Path, head_dir: Path, criteria: Criteria, allow_mismatch: bool = False
) -> Comparison:
    base, head = load_run(base_dir), load_run(head_dir)
    mismatches = check_alike(base, head, allow_mismatch)
    rows = compare_records(base.records, head.records, criteria, allow_timer_mismatch=allow_mismatch)
    return Comparison(base=base, head=head, criteria=criteria, mismatches=tuple(mismatches), rows=tuple(rows))
