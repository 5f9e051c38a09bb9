"""Pair the rows of two runs by case id and judge each pair.

Pure functions do the work (``run_mismatches``, ``pair_records``,
``compare_records``); ``load_run`` and ``compare_runs`` are the thin layer
that reads run directories. Only rows that passed on both sides, with raw
candidate samples on both sides and the same timer, are compared; every other
row is reported with the reason it was not, and a row that passed in base but
failed, crashed, hung or is missing in head fails the gate.

Before any row is judged, the runs must be alike (the fingerprint), have measured with the
same software (torch, Triton, driver, flag_gems, harness), and come from a backend whose
timings mean something (not the cpu backend's); each refusal can be overridden and is then
named at the top of the report.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

from harness.compare.configs import config_change, read_configs
from harness.compare.spread import SpreadTable, load_spread
from harness.compare.stats import (
    Criteria,
    RowStats,
    adjust_pvalues,
    decide,
    resolvable_change,
    row_stats,
)
from harness.errors import UsageError
from harness.results.runinfo import (
    ALIKE_FIELDS,
    alike_values,
    environment_differences,
    read_run_info,
)
from harness.results.schema import Measurement, Timing, shape_str
from harness.results.store import read_records_strict

__all__ = [
    "ALIKE_KEYS",
    "Comparison",
    "Mismatch",
    "Pair",
    "RowComparison",
    "RunData",
    "check_alike",
    "check_comparable_backend",
    "check_environment",
    "clock_note",
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
# An SM clock that moved by more than this within a row's timing, or between the sides, is named.
CLOCK_MOVE_FRACTION = 0.10
# Op statuses (ops_status.csv) of an op that did not end well.
_BAD_OP_STATUSES = ("FAIL", "ERROR", "CRASH", "TIMEOUT", "INTERRUPTED")


@dataclass(frozen=True)
class RunData:
    """One run directory as compare sees it: its run.json and its records."""

    path: Path
    info: Mapping[str, Any]
    records: tuple[Measurement, ...]

    @property
    def run_id(self) -> str:
        return str(self.info.get("run_id") or self.path.name)

    def op_status(self, op: str) -> tuple[str, str]:
        """(status, notes) of ``op`` as run.json's ``ops`` says (ops_status.csv); ("", "") when
        the run does not list it."""
        for row in self.info.get("ops") or ():
            if isinstance(row, Mapping) and row.get("op") == op:
                return str(row.get("status") or ""), str(row.get("notes") or "")
        return "", ""


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
    clocks: str = ""  # the device's clocks moved during this row's timing or between the sides
    autotune_change: str = ""  # base and head chose different autotune configs for this row
    head_log: str = ""  # the op's log in head, for a row failing there

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
    # Lines that head the report: each refusal overridden (--allow-mismatch, --allow-cpu).
    warnings: tuple[str, ...] = ()
    spread_origin: str = ""  # the run-spread table used
    resolution: str = ""  # what size of change one run a side resolves with an assumed spread, else ""

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

    def failures(self) -> list[str]:
        """Why the gate fails, one phrase each (empty when it passes): what every report heads with."""
        found = []
        if self.regressions:
            found.append(f"{len(self.regressions)} regression(s)")
        if self.failing:
            found.append(f"{len(self.failing)} case(s) failing in head")
        if not self.compared:
            found.append("no row could be compared")
        return found


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


def check_environment(base: RunData, head: RunData, allow_mismatch: bool,
                      deliberate: tuple[str, ...] = ()) -> list[str]:
    """Refuse runs that measured with different software unless the user said they know; the
    warning lines otherwise. ``deliberate``: fields whose difference is the point of the
    comparison (gate-run compares two versions of the harness's own tree), named but allowed."""
    found = [(k, f"{k} {b!r} in base, {h!r} in head") for k, b, h in environment_differences(base.info, head.info)]
    # a run merged from parts of different software (harness merge --allow-mismatch) differs within
    found += [("merged parts", f"{run.path} was merged from parts of different software: {line}")
              for run in (base, head) for line in run.info.get("software_mismatch") or ()]
    refused = [line for k, line in found if k not in deliberate]
    if refused and not allow_mismatch:
        raise UsageError(
            f"Runs {base.path} and {head.path} measured with different software ({'; '.join(refused)}), so a "
            "change between them may be the software's, not the code's. Compare runs made with the same "
            "versions, use `harness ab` to measure the effect of a version on purpose, or pass "
            "--allow-mismatch to compare them anyway."
        )
    return [f"different software (allowed): {line}" if k in deliberate else
            f"different software compared (--allow-mismatch): {line}" for k, line in found]


def check_comparable_backend(base: RunData, head: RunData, allow_cpu: bool) -> list[str]:
    """Refuse to judge runs of a backend whose timings only show that the pipeline runs (cpu)."""
    from harness.backends import get_backend

    names = sorted({str(r.info.get("backend") or "") for r in (base, head)} - {""})
    pipeline_only = []
    for name in names:
        try:
            if not get_backend(name).timings_comparable:
                pipeline_only.append(name)
        except UsageError:
            continue  # an unknown backend is the fingerprint check's business
    if pipeline_only and not allow_cpu:
        raise UsageError(
            f"Runs {base.path} and {head.path} are {', '.join(pipeline_only)} backend runs: their timings "
            "show that the pipeline runs, not how fast the kernels are (the Triton interpreter against "
            "torch on a shared host), so they are not judged. Compare runs made on an accelerator, or "
            "pass --allow-cpu to compare them anyway (a test of the pipeline)."
        )
    return [f"{name} backend timings compared (--allow-cpu): they show the pipeline, not kernel speed"
            for name in pipeline_only]


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


def _head_op(head: RunData | None, op: str) -> tuple[str, str]:
    """What head's run says of the op: ("CRASH (signal SIGSEGV)", "HEAD/logs/op.log")."""
    if head is None:
        return "", ""
    status, notes = head.op_status(op)
    log = head.path / "logs" / f"{op}.log"
    said = f"op {status}" + (f" ({notes})" if notes else "") if status else ""
    return said, str(log) if log.exists() or status else ""


def _why_not_compared(pair: Pair, allow_timer_mismatch: bool,
                      head_run: RunData | None = None) -> tuple[str, str] | None:
    b, h = pair.base, pair.head
    if b is None:
        return NOT_COMPARED, "only in head (a new case, or base did not reach it)"
    if h is None:
        if b.status != "pass":
            return NOT_COMPARED, f"{b.status} in base, absent in head"
        said, log = _head_op(head_run, b.op)
        if said and any(said.startswith(f"op {s}") for s in _BAD_OP_STATUSES):
            why = f"passed in base; in head no record: {said}"
        elif said:
            why = f"passed in base; in head no record ({said}): the case was not run"
        else:
            why = "passed in base; absent in head (not run there: removed, not selected, or lost)"
        return FAILING, why + (f"; see {log}" if log else "")
    if b.status == "pass" and h.status in ("fail", "error"):
        first_line = (h.message.splitlines() or [""])[0][:160]
        said, log = _head_op(head_run, h.op)
        where = f" ({said})" if said and not said.startswith("op PASS") else ""
        return FAILING, (f"passed in base, {h.status} in head{where}" + (f": {first_line}" if first_line else "")
                         + (f"; see {log}" if log else ""))
    if b.status != "pass" or h.status != "pass":
        return NOT_COMPARED, f"{b.status} in base, {h.status} in head"
    if b.timer != h.timer and not allow_timer_mismatch:
        return NOT_COMPARED, f"timed with {b.timer} in base, {h.timer} in head"
    return None


def _level(t: Timing) -> float:
    """A timing's level as the statistics see it: the geometric mean of its runs' medians."""
    import statistics

    medians = [statistics.median(r) for r in t.runs()]
    if min(medians) <= 0:
        return statistics.fmean(medians)
    return statistics.geometric_mean(medians)


def _torch_ratio(b: Measurement, h: Measurement) -> float | None:
    if b.baseline is None or h.baseline is None:
        return None
    base = _level(b.baseline)
    return _level(h.baseline) / base if base > 0 else None


def _sm_clocks(states: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    out = []
    for s in states:
        start, end = (s.get("start") or {}), (s.get("end") or {})
        a, z = start.get("sm_clock_mhz"), end.get("sm_clock_mhz")
        if isinstance(a, (int, float)) and isinstance(z, (int, float)) and a > 0 and z > 0:
            out.append((float(a), float(z)))
    return out


def clock_note(base: Measurement, head: Measurement) -> str:
    """Why the device's clocks make this row suspect: the SM clock moved by more than
    CLOCK_MOVE_FRACTION during the row's timing (in some run), or differs that much between
    the sides; "" when they held (or were not read)."""
    notes = []
    for side, record in (("base", base), ("head", head)):
        for a, z in _sm_clocks(record.device_state):
            if abs(z - a) / max(a, z) > CLOCK_MOVE_FRACTION:
                notes.append(f"SM clock moved {a:.0f}->{z:.0f} MHz during {side}'s timing")
                break
    b, h = _sm_clocks(base.device_state), _sm_clocks(head.device_state)
    if b and h:
        mb = sum(x + y for x, y in b) / (2 * len(b))
        mh = sum(x + y for x, y in h) / (2 * len(h))
        if abs(mh - mb) / max(mb, mh) > CLOCK_MOVE_FRACTION:
            notes.append(f"SM clock {mb:.0f} MHz in base, {mh:.0f} MHz in head")
    return "; ".join(notes)


def _row_timer(pair: Pair) -> str:
    timers = sorted({r.timer for r in (pair.base, pair.head) if r is not None})
    return "/".join(timers)


def compare_records(
    base: Sequence[Measurement],
    head: Sequence[Measurement],
    criteria: Criteria | None = None,
    allow_timer_mismatch: bool = False,
    spread: SpreadTable | None = None,
    head_run: RunData | None = None,
    base_run: RunData | None = None,
) -> list[RowComparison]:
    """Judge every case of either run; p-values are adjusted over the rows compared.

    ``spread``: the run-to-run spread known per device (default: the shipped table).
    ``head_run``/``base_run``: the run directories, when the records come from them: the op
    status and log of a case failing in head, and the autotune configs each side chose."""
    criteria = criteria or Criteria()
    spread = spread or load_spread()
    pairs = pair_records(base, head)
    measured: dict[int, RowStats] = {}
    skipped: dict[int, tuple[str, str]] = {}
    for i, pair in enumerate(pairs):
        why = _why_not_compared(pair, allow_timer_mismatch, head_run)
        b, h = pair.base, pair.head
        if why is not None or b is None or h is None or b.candidate is None or h.candidate is None:
            skipped[i] = why or (NOT_COMPARED, "no candidate samples on one side")
            continue
        if _level(b.candidate) <= 0 and _level(h.candidate) <= 0:
            # FlagGems' transpose and resize_ on the H200: a view or a metadata change, no kernel
            skipped[i] = (NOT_COMPARED, "no device time on either side (0 ms: the op ran no kernel)")
            continue
        known = spread.lookup(b.backend, b.device_name, b.timer, b.op, _level(b.candidate), case_id=pair.case_id)
        measured[i] = row_stats(
            b.candidate.runs(), h.candidate.runs(), known.sigma, criteria,
            seed=zlib.crc32(pair.case_id.encode()), spread_source=known.source,
        )
    order = sorted(measured)
    adjusted = dict(zip(order, adjust_pvalues([measured[i].p for i in order], criteria.correction), strict=True))
    configs: dict[tuple[str, str], Any] = {}

    def op_configs(side: str, run: RunData | None, op: str) -> Any:
        if run is None:
            return None
        if (side, op) not in configs:
            configs[(side, op)] = read_configs(run.path, op)
        return configs[(side, op)]

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
            log = _head_op(head_run, some.op)[1] if verdict == FAILING else ""
            rows.append(RowComparison(verdict=verdict, reason=reason, head_log=log, **common))
            continue
        b, h = pair.base, pair.head
        assert b is not None and h is not None and b.candidate is not None and h.candidate is not None
        stats = measured[i]
        torch_ratio = _torch_ratio(b, h)
        unsettled = [side for side, r in (("base", b), ("head", h)) if r.candidate and not r.candidate.settled]
        verdict, reason = decide(stats, adjusted[i], criteria, torch_ratio, unsettled)
        clocks = clock_note(b, h)
        if clocks and verdict in ("regression", "improvement"):
            reason += f"; note: {clocks}"
        change = config_change(op_configs("base", base_run, b.op), op_configs("head", head_run, h.op),
                               b.dtype, b.shape)
        rows.append(RowComparison(
            verdict=verdict, reason=reason, stats=stats, p_adjusted=adjusted[i],
            torch_ratio=torch_ratio, clocks=clocks, autotune_change=change, **common,
        ))
    return rows


def load_run(path: Path) -> RunData:
    """Read run.json and records.jsonl; a directory that is not a run is a usage error, and so
    is a run whose records have an unreadable line (only a run that did not finish may end in a
    torn one: its writer was killed mid-line)."""
    info = read_run_info(path / "run.json")
    if info.get("status") == "running":
        raise UsageError(
            f"Run {path} is still running or was killed before it finished (status 'running'). "
            f"Finish it with `harness run --resume {path}` first."
        )
    finished = info.get("status") != "interrupted"
    try:
        records = tuple(read_records_strict(path / "records.jsonl", finished=finished))
    except ValueError as exc:
        raise UsageError(
            f"{path / 'records.jsonl'} is damaged: {exc}. Its rows cannot be judged with records missing. "
            "Run it again (or restore the file from where it was copied)."
        ) from exc
    return RunData(path=path, info=info, records=records)


def compare_runs(
    base_dir: Path, head_dir: Path, criteria: Criteria, allow_mismatch: bool = False,
    allow_cpu: bool = False, spread: SpreadTable | None = None, deliberate: tuple[str, ...] = (),
) -> Comparison:
    """Load both runs, check that they may be compared, judge every row.

    ``deliberate``: software fields whose difference is the point (see check_environment)."""
    base, head = load_run(base_dir), load_run(head_dir)
    if base_dir.resolve() == head_dir.resolve():  # (two runs may share a run id: --run-id, gate-run's pools)
        raise UsageError(f"base and head are one run directory ({base_dir}): a run compared with itself shows no "
                         "change whatever the code. Give two runs, base then head.")
    mismatches = check_alike(base, head, allow_mismatch)
    warnings = check_environment(base, head, allow_mismatch, deliberate)
    warnings += check_comparable_backend(base, head, allow_cpu)
    spread = spread or load_spread()
    rows = compare_records(base.records, head.records, criteria, allow_timer_mismatch=allow_mismatch,
                           spread=spread, head_run=head, base_run=base)
    return Comparison(base=base, head=head, criteria=criteria, mismatches=tuple(mismatches), rows=tuple(rows),
                      warnings=tuple(warnings), spread_origin=spread.origin,
                      resolution=resolution_line(rows, spread, criteria))


def resolution_line(rows: Sequence[RowComparison], spread: SpreadTable, criteria: Criteria) -> str:
    """One line on what one run a side can resolve where the run-to-run spread was assumed (the
    table's default, not measured for the case or the device); "" when no such row was compared."""
    assumed = [r.stats for r in rows if r.stats is not None and r.stats.runs_base == r.stats.runs_head == 1
               and r.stats.spread_source == spread.default.source]
    if not assumed:
        return ""
    compared = sum(1 for r in rows if r.stats is not None)
    sigmas = sorted({s.run_spread for s in assumed})
    flagged = [resolvable_change(sigma, criteria, compared) for sigma in sigmas]
    z = float(NormalDist().inv_cdf(0.5 + criteria.confidence / 2.0))
    blurred = any(math.expm1(z * sigma * math.sqrt(2.0)) > criteria.threshold for sigma in sigmas)
    size = (f"about {flagged[0]:.0%}" if len(flagged) == 1 else f"about {flagged[0]:.0%} to {flagged[-1]:.0%}")
    spreads = ", ".join(f"{s:.1%}" for s in sigmas)
    return (f"One run a side resolves a change of {size} or more here ({len(assumed)} of {compared} row(s) judged on "
            f"an assumed run-to-run spread of {spreads} per run, {spread.default.source}"
            + ("; an unchanged row may read noisy" if blurred else "")
            + "): give the spread measured from a history (`harness gate A B --history DB`), or compare several "
            "runs a side (`harness gate-run --repeats N`) or a series of nights (`harness history check`).")
