"""The run-to-run spread known per device and kernel size: harness/compare/run_spread.yaml.

One run a side cannot show how far a run's median wanders between runs; this table says how
far it is known to wander (a standard deviation of the log of one run's median), so that a
change smaller than that is not called a regression. :func:`load_spread` reads and checks a
table (the shipped one, or ``--spread FILE``); :meth:`SpreadTable.lookup` answers for one row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from harness.compare.stats import pooled_spread
from harness.errors import UsageError
from harness.results.schema import TIMERS
from harness.results.trend import MIN_MEASURED_SIGMA, history_spread
from harness.yamlfile import load_yaml

__all__ = ["MIN_MEASURED_SIGMA", "SHIPPED", "KnownSpread", "SizeClass", "SpreadTable", "history_series",
           "load_spread", "measured_spread", "pair_spread", "parse_spread"]

FORMAT_VERSION = 1
SHIPPED = "run_spread.yaml"


@dataclass(frozen=True)
class SizeClass:
    below_us: float  # math.inf for the last class
    sigma: float  # a fraction (0.02 = 2%)


@dataclass(frozen=True)
class KnownSpread:
    """The answer for one row: sigma (a fraction) and where it comes from."""

    sigma: float
    source: str


@dataclass(frozen=True)
class _Entry:
    source: str
    classes: tuple[SizeClass, ...]
    ops: Mapping[str, tuple[SizeClass, ...]] = field(default_factory=dict)
    backend: str = ""
    device_name: str = ""
    timer: str = ""
    # the default's classes for rows of one timer (timer -> classes): ``direct`` rows are timed
    # on the host around calls that cannot be captured, and wander far more than a graph's
    timers: Mapping[str, tuple[SizeClass, ...]] = field(default_factory=dict)


def _pick(classes: Sequence[SizeClass], median_us: float) -> float:
    for c in classes:
        if median_us < c.below_us:
            return c.sigma
    return classes[-1].sigma


@dataclass(frozen=True)
class SpreadTable:
    default: _Entry
    devices: tuple[_Entry, ...] = ()
    origin: str = SHIPPED
    # Each case's own spread, measured from a history of runs (case id -> spread): it comes
    # before the device's size classes (:func:`measured_spread`, a table's ``cases``).
    cases: Mapping[str, KnownSpread] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        """Whether the table holds measured spreads (per case, or of some device)."""
        return bool(self.cases or self.devices)

    def with_cases(self, cases: Mapping[str, KnownSpread], origin: str) -> SpreadTable:
        """This table with the spreads of ``cases`` taken before its own (a later one wins)."""
        return SpreadTable(self.default, self.devices, f"{self.origin}; {origin}", {**self.cases, **cases})

    def lookup(self, backend: str, device_name: str, timer: str, op: str, median_ms: float,
               case_id: str = "") -> KnownSpread:
        """The known spread of a row of ``op`` whose kernel takes ``median_ms`` on this device: the
        case's own measured spread where the table has one."""
        if case_id in self.cases:
            return self.cases[case_id]
        us = median_ms * 1000.0
        mine = [e for e in self.devices
                if e.device_name == device_name and (not e.backend or e.backend == backend) and e.timer in ("", timer)]
        # A device entry that names the row's timer comes first; the default's classes for that
        # timer come before a device entry that names none (measured on the graph timer).
        ordered = [e for e in mine if e.timer] + ([] if timer in self.default.timers else [e for e in mine if not e.timer])
        if ordered:
            entry = ordered[0]
            classes = entry.ops.get(op) or entry.classes
            where = f"{entry.device_name} calibration" + (f" ({op})" if op in entry.ops else "")
            return KnownSpread(_pick(classes, us), where)
        if timer in self.default.timers:
            return KnownSpread(_pick(self.default.timers[timer], us), f"{self.default.source}, {timer} timer")
        return KnownSpread(_pick(self.default.classes, us), self.default.source)


def _classes(value: Any, where: str) -> tuple[SizeClass, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: expected a non-empty list of size classes")
    out: list[SizeClass] = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or set(item) - {"below_us", "sigma_pct"}:
            raise ValueError(f"{where}[{i}]: a class is {{below_us: N, sigma_pct: P}} (below_us left out "
                             "in the last class)")
        sigma = item.get("sigma_pct")
        if not isinstance(sigma, (int, float)) or isinstance(sigma, bool) or not 0 < sigma < 100:
            raise ValueError(f"{where}[{i}]: sigma_pct must be a percentage above 0, got {sigma!r}")
        below = item.get("below_us", math.inf)
        last = i == len(value) - 1
        if (below == math.inf) != last:
            raise ValueError(f"{where}[{i}]: every class but the last needs below_us, and the last has none")
        if not isinstance(below, (int, float)) or below <= 0 or (out and below <= out[-1].below_us):
            raise ValueError(f"{where}[{i}]: below_us must be positive and increase from class to class")
        out.append(SizeClass(below_us=float(below), sigma=float(sigma) / 100.0))
    return tuple(out)


def _entry(data: Any, where: str, device: bool) -> _Entry:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping")
    known = {"source", "classes", "ops"} | ({"backend", "device_name", "timer"} if device else {"timers"})
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    if device and not data.get("device_name"):
        raise ValueError(f"{where}: a device entry needs device_name (as run.json's identity.device_name)")
    if not isinstance(data.get("source"), str) or not data["source"].strip():
        raise ValueError(f"{where}: say where the numbers come from in 'source' (date, machine, command)")
    ops = data.get("ops") or {}
    if not isinstance(ops, dict):
        raise ValueError(f"{where}.ops: expected a mapping of op -> size classes")
    timers = data.get("timers") or {}
    if not isinstance(timers, dict):
        raise ValueError(f"{where}.timers: expected a mapping of timer -> size classes")
    unknown_timers = sorted(set(map(str, timers)) - set(TIMERS))
    if unknown_timers:
        raise ValueError(f"{where}.timers: {', '.join(unknown_timers)} is not a timer ({', '.join(TIMERS)})")
    return _Entry(
        source=data["source"], classes=_classes(data.get("classes"), f"{where}.classes"),
        ops={str(op): _classes(c, f"{where}.ops.{op}") for op, c in ops.items()},
        backend=str(data.get("backend") or ""), device_name=str(data.get("device_name") or ""),
        timer=str(data.get("timer") or ""),
        timers={str(name): _classes(c, f"{where}.timers.{name}") for name, c in timers.items()},
    )


def _cases(data: Any) -> dict[str, KnownSpread]:
    """A table's ``cases``: ``{source: TEXT, sigma_pct: {CASE_ID: PCT, ...}}``."""
    if data is None:
        return {}
    if not isinstance(data, dict) or set(data) - {"source", "sigma_pct"}:
        raise ValueError("cases: expected {source: TEXT, sigma_pct: {case id: percent}}")
    source = data.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ValueError("cases: say where the numbers come from in 'source' (the history, its runs)")
    values = data.get("sigma_pct")
    if not isinstance(values, dict):
        raise ValueError("cases.sigma_pct: expected a mapping of case id -> percent")
    found: dict[str, KnownSpread] = {}
    for case, pct in values.items():
        if not isinstance(pct, (int, float)) or isinstance(pct, bool) or not 0 < pct < 100:
            raise ValueError(f"cases.sigma_pct[{case!r}]: a percentage above 0, got {pct!r}")
        found[str(case)] = KnownSpread(float(pct) / 100.0, source)
    return found


def measured_spread(series: Mapping[str, Sequence[float]], source: str, min_runs: int = 4) -> dict[str, KnownSpread]:
    """Each case's run-to-run spread from its medians over a history of runs (oldest first;
    harness.results.trend.history_spread), at least :data:`MIN_MEASURED_SIGMA`; cases with fewer
    than ``min_runs`` runs are left out (the table's classes answer for them)."""
    found: dict[str, KnownSpread] = {}
    for case, medians in series.items():
        sigma = history_spread(medians, min_runs)
        if sigma is not None:
            runs = sum(1 for m in medians if m)
            found[case] = KnownSpread(max(sigma, MIN_MEASURED_SIGMA), f"{source}, {runs} runs")
    return found


def pair_spread(log_changes: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Sigma of one run's log median from pairs of independent runs of the same code, and its
    upper ``confidence`` bound: each pair's change of log median is a group of two
    (harness.compare.stats.pooled_spread: one degree of freedom a pair, its root mean square over
    sqrt(2); a plain RMS, so the tails a gate must not flag count in full); ValueError without pairs."""
    found = pooled_spread((0.0, float(x)) for x in log_changes)
    if found is None:
        raise ValueError("no pairs to measure a spread from")
    return found[0], found[1]


def history_series(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Each case's medians in time order from a history's export (rows ordered by case, then
    time; a row that did not pass has no median and is left out)."""
    series: dict[str, list[float]] = {}
    for row in rows:
        median = row.get("median_ms")
        if isinstance(median, (int, float)) and median > 0:
            series.setdefault(str(row["case_id"]), []).append(float(median))
    return series


def parse_spread(data: Any, origin: str) -> SpreadTable:
    """A spread table from parsed YAML; ValueError naming the bad part."""
    if not isinstance(data, dict):
        raise ValueError("not a mapping")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"format_version {version!r}; this harness reads {FORMAT_VERSION}")
    devices = data.get("devices") or []
    if not isinstance(devices, list):
        raise ValueError("devices: expected a list")
    return SpreadTable(
        default=_entry(data.get("default"), "default", device=False),
        devices=tuple(_entry(d, f"devices[{i}]", device=True) for i, d in enumerate(devices)),
        origin=origin,
        cases=_cases(data.get("cases")),
    )


def load_spread(path: Path | None = None) -> SpreadTable:
    """The table at ``path``, or the one shipped with the harness."""
    try:
        if path is None:
            text = resources.files("harness.compare").joinpath(SHIPPED).read_text(encoding="utf-8")
            origin = f"harness/compare/{SHIPPED}"
        else:
            text = path.read_text(encoding="utf-8")
            origin = str(path)
    except OSError as exc:
        raise UsageError(f"Cannot read the run-spread table {path} ({exc.strerror}). Give an existing "
                         "file with --spread, or leave it out to use the shipped table.") from None
    data = load_yaml(text, f"Run-spread table {origin}", f"Fix it as described at the top of harness/compare/{SHIPPED}.")
    try:
        return parse_spread(data, origin)
    except ValueError as exc:
        raise UsageError(f"Run-spread table {origin} is not usable: {exc}. Fix it as described at the top "
                         f"of harness/compare/{SHIPPED}.") from None
