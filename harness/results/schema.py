"""The Measurement record: one per measured case, versioned, validated at construction.

Every table, CSV, JUnit file and report is rendered from these records; nothing
parses human-readable output. ``SCHEMA_VERSION`` is bumped on any incompatible
change and :func:`record_from_dict` keeps loading older versions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.errors import UsageError
from harness.results.causes import Cause, case_cause, cause_from_dict

__all__ = [
    "CASE_STATUSES",
    "DIRECTIONS",
    "SCHEMA_VERSION",
    "Correctness",
    "Fallback",
    "Measurement",
    "RecordError",
    "Summary",
    "Timing",
    "case_id",
    "quantile",
    "record_from_dict",
    "shape_str",
]

# 2: Correctness gained nonfinite and shape_mismatch, and max_abs/max_rel may be null.
# 3: baseline_wall and candidate_wall (the wall timer: a call with its host dispatch, beside the
#    device time) and ir (a summary of the kernels compiled during the case); all optional, so
#    records of versions 1 and 2 read as before with these empty.
# 4: Timing gained blocks (which run each pooled sample came from) and settled (the noisy note
#    as a field), Measurement gained device_state (clocks, temperature and power at the start and
#    end of the case's timing), and direction (forward or backward: what the row timed; FlagGems'
#    suite benchmarks both). Records of versions 1-3 read as one run, settled unless their notes
#    say noisy, without device state, forward.
# 5: Measurement gained cause (why a case did not pass: library, benchmark, harness, environment
#    or unknown, with its evidence in words; harness/results/causes.py). Optional: a record of
#    versions 1-4, or one written without it, gets it derived from what it holds when read.
SCHEMA_VERSION = 5
CASE_STATUSES = ("pass", "fail", "error", "skip")
TIMERS = ("cpu", "direct", "graph", "profiler")
DIRECTIONS = ("forward", "backward")


def shape_str(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape)


def case_id(op: str, provider: str, dtype: str, shape: Sequence[int]) -> str:
    """The key that pairs rows across runs: op[provider-dtype-shape]."""
    return f"{op}[{provider}-{dtype}-{shape_str(shape)}]"


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values: linear interpolation between closest ranks (numpy's
    default method). The one quantile function of the harness."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True)
class Summary:
    """Order statistics of raw samples, in milliseconds."""

    median: float
    p10: float
    p90: float
    iqr: float
    mean: float
    min: float
    n: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary:
        if not samples:
            raise ValueError("cannot summarise zero samples")
        s = sorted(samples)
        return cls(
            median=statistics.median(s),
            p10=quantile(s, 0.10),
            p90=quantile(s, 0.90),
            iqr=quantile(s, 0.75) - quantile(s, 0.25),
            mean=statistics.fmean(s),
            min=s[0],
            n=len(s),
        )

    @property
    def rel_spread(self) -> float:
        return self.iqr / self.median if self.median > 0 else math.inf


@dataclass(frozen=True)
class Timing:
    """Raw samples and their summary. ``blocks``: how many samples each run contributed, in
    the order of ``samples_ms``, when the samples pool several runs (gate-run, ab); empty when
    they all come from one run. The unit of evidence across runs is the run, so the statistics
    need to know which samples belong together."""

    samples_ms: tuple[float, ...]
    summary: Summary
    blocks: tuple[int, ...] = ()
    settled: bool = True  # False: the timer's spread target was never met (in some run)

    def __post_init__(self) -> None:
        if self.blocks and (sum(self.blocks) != len(self.samples_ms) or min(self.blocks) < 1):
            raise ValueError(f"blocks {list(self.blocks)} do not partition {len(self.samples_ms)} samples")

    @classmethod
    def of(cls, samples: Sequence[float], blocks: Sequence[int] = (), settled: bool = True) -> Timing:
        return cls(samples_ms=tuple(float(x) for x in samples), summary=Summary.of(samples),
                   blocks=tuple(int(b) for b in blocks) if len(blocks) > 1 else (), settled=settled)

    def runs(self) -> list[tuple[float, ...]]:
        """The samples of each run (one group when they come from one run)."""
        if not self.blocks:
            return [self.samples_ms]
        out, start = [], 0
        for size in self.blocks:
            out.append(self.samples_ms[start:start + size])
            start += size
        return out


@dataclass(frozen=True)
class Correctness:
    passed: bool
    max_abs: float | None  # None when the shapes differ (nothing to subtract)
    max_rel: float | None
    atol: float
    rtol: float
    nan: bool = False
    mismatched: int = 0
    numel: int = 0
    nonfinite: int = 0  # inf/NaN where the reference is finite (not in max_abs/max_rel)
    shape_mismatch: str = ""


@dataclass(frozen=True)
class Fallback:
    """Why a row was not timed with the timer asked for (for example a refused graph capture)."""

    phase: str
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class Measurement:
    run_id: str
    op: str
    provider: str
    dtype: str
    shape: tuple[int, ...]
    backend: str
    device: str
    timer: str
    status: str
    device_name: str = ""
    cache: str = "n/a"
    seed: int = 0
    correctness: Correctness | None = None
    baseline: Timing | None = None
    candidate: Timing | None = None
    speedup: float | None = None
    gbps: float | None = None
    tflops: float | None = None
    autotune: str = "live"
    fallback: Fallback | None = None
    message: str = ""
    notes: tuple[str, ...] = ()
    started_at: str = ""
    duration_s: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)
    baseline_wall: Timing | None = None  # wall timer (harness/child/timing/wall.py), warm cache
    candidate_wall: Timing | None = None
    ir: Mapping[str, Any] | None = None  # kernels compiled during the case (harness/ir/meta.py)
    # Per run (one entry; one per repeat in a pooled record): {"start": {...}, "end": {...}}, each
    # the device's sm_clock_mhz, mem_clock_mhz, temperature_c, power_w (null where not exposed),
    # read just before the candidate's timing and just after the baseline's. Empty where the
    # backend exposes nothing (cpu).
    device_state: tuple[Mapping[str, Any], ...] = ()
    direction: str = "forward"  # what was timed: the op's forward call, or a backward pass (schema 4)
    # Why the case did not pass (schema 5); None on a passing case. Derived from the record's own
    # fields when not given (harness/results/causes.py), so every record that does not pass has one.
    cause: Cause | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in CASE_STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {CASE_STATUSES}")
        if self.timer not in TIMERS:
            raise ValueError(f"timer {self.timer!r} is not one of {TIMERS}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r} is not one of {DIRECTIONS}")
        if self.status != "pass" and self.speedup is not None:
            # Correctness before speed: a failed case never reports a speedup.
            raise ValueError("only a passing case may carry a speedup")
        if self.status == "pass" and self.cause is not None:
            raise ValueError("a passing case has no cause")
        if self.status != "pass" and self.cause is None:
            object.__setattr__(self, "cause", case_cause(self))  # a derived field of a frozen record

    @property
    def case_id(self) -> str:
        return case_id(self.op, self.provider, self.dtype, self.shape)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shape"] = list(self.shape)
        data["case_id"] = self.case_id
        for key in ("baseline", "candidate", "baseline_wall", "candidate_wall"):
            if data[key] is not None:
                data[key]["samples_ms"] = list(data[key]["samples_ms"])
                data[key]["blocks"] = list(data[key]["blocks"])
        data["notes"] = list(self.notes)
        data["device_state"] = [dict(s) for s in self.device_state]
        data["extra"] = dict(self.extra)
        data["cause"] = self.cause.to_dict() if self.cause is not None else None
        return data


class RecordError(UsageError, ValueError):
    """A mapping that is not a readable record; the message says what is wrong with it."""


def _number(value: Any, what: str, optional: bool = False, integer: bool = False) -> None:
    if value is None and optional:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ValueError(f"{what} is {value!r}, not {'an integer' if integer else 'a number'}")


def _timing(data: Any, side: str, notes: Sequence[str] = ()) -> Timing | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("summary"), Mapping):
        raise ValueError(f"{side} is {data!r}, not a timing (samples_ms and summary)")
    samples = data["samples_ms"]
    if not isinstance(samples, list | tuple):
        raise ValueError(f"{side}.samples_ms is not a list")
    for value in samples:
        _number(value, f"{side}.samples_ms item")
    for key, value in data["summary"].items():
        _number(value, f"{side}.summary.{key}", integer=key == "n")
    blocks = data.get("blocks") or ()
    if not isinstance(blocks, list | tuple):
        raise ValueError(f"{side}.blocks is not a list")
    for value in blocks:
        _number(value, f"{side}.blocks item", integer=True)
    settled = data.get("settled")
    if settled is None:  # schema 1-3 said so only in a note (measure.py's wording)
        settled = not any(n.startswith(f"{side} noisy") for n in notes)
    elif not isinstance(settled, bool):
        raise ValueError(f"{side}.settled must be true or false")
    return Timing(samples_ms=tuple(samples), summary=Summary(**data["summary"]), blocks=tuple(blocks),
                  settled=settled)


def _correctness(data: Any) -> Correctness | None:
    if not data:
        return None
    if not isinstance(data, Mapping):
        raise ValueError(f"correctness is {data!r}, not an object")
    for key in ("max_abs", "max_rel", "atol", "rtol"):
        _number(data.get(key, 0), f"correctness.{key}", optional=key.startswith("max"))
    for key in ("mismatched", "numel", "nonfinite"):
        _number(data.get(key, 0), f"correctness.{key}", integer=True)
    if not isinstance(data.get("passed"), bool) or not isinstance(data.get("nan", False), bool):
        raise ValueError("correctness.passed and correctness.nan must be true or false")
    if not isinstance(data.get("shape_mismatch", ""), str):
        raise ValueError("correctness.shape_mismatch must be a string")
    return Correctness(**data)


def _fallback(data: Any) -> Fallback | None:
    if not data:
        return None
    if not isinstance(data, Mapping) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError(f"fallback is {data!r}, not an object of strings")
    return Fallback(**data)


_TEXT_FIELDS = ("run_id", "op", "provider", "dtype", "backend", "device", "timer", "status", "device_name",
                "cache", "autotune", "message", "started_at", "direction")


def _check_types(d: Mapping[str, Any]) -> None:
    for key in _TEXT_FIELDS:
        if key in d and not isinstance(d[key], str):
            raise ValueError(f"{key} is {d[key]!r}, not a string")
    shape = d.get("shape")
    if not isinstance(shape, list | tuple) or not all(isinstance(x, int) and not isinstance(x, bool) for x in shape):
        raise ValueError(f"shape is {shape!r}, not a list of integers")
    for key in ("speedup", "gbps", "tflops"):
        _number(d.get(key), key, optional=True)
    _number(d.get("duration_s", 0.0), "duration_s")
    _number(d.get("seed", 0), "seed", integer=True)
    notes = d.get("notes", [])
    if not isinstance(notes, list | tuple) or not all(isinstance(n, str) for n in notes):
        raise ValueError(f"notes is {notes!r}, not a list of strings")
    if not isinstance(d.get("extra", {}), Mapping):
        raise ValueError("extra must be an object")
    if d.get("ir") is not None and not isinstance(d["ir"], Mapping):
        raise ValueError("ir must be an object or null")


def record_from_dict(data: Any) -> Measurement:
    """Load a record written by any schema version up to the current one (a record without
    ``direction`` timed a forward call); anything else raises :class:`RecordError` saying what it
    is (not a record, a newer schema, a damaged record)."""
    if not isinstance(data, Mapping):
        raise RecordError(f"not a record: a JSON {type(data).__name__}, not an object")
    if "schema_version" not in data:
        raise RecordError("not a harness record: it has no schema_version")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RecordError(f"not a harness record: schema_version {version!r} is not a record version")
    if version > SCHEMA_VERSION:
        raise RecordError(
            f"record of schema version {version} is newer than this harness reads "
            f"(1..{SCHEMA_VERSION}). Upgrade the harness to read newer records."
        )
    try:
        d = dict(data)
        d.pop("case_id", None)
        _check_types(d)
        d["shape"] = tuple(d["shape"])
        d["notes"] = tuple(d.get("notes", ()))
        d["correctness"] = _correctness(d.get("correctness"))
        d["fallback"] = _fallback(d.get("fallback"))
        d["baseline"] = _timing(d.get("baseline"), "baseline", d["notes"])
        d["candidate"] = _timing(d.get("candidate"), "candidate", d["notes"])
        d["baseline_wall"] = _timing(d.get("baseline_wall"), "baseline_wall")
        d["candidate_wall"] = _timing(d.get("candidate_wall"), "candidate_wall")
        states = d.get("device_state") or ()
        if not isinstance(states, list | tuple) or not all(isinstance(x, Mapping) for x in states):
            raise ValueError("device_state must be a list of objects")
        d["device_state"] = tuple(dict(x) for x in states)
        d["cause"] = cause_from_dict(d.get("cause")) if d.get("status") != "pass" else None
        return Measurement(**d)
    except (KeyError, TypeError, ValueError) as exc:
        what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise RecordError(f"a damaged record (schema {version}): {what[:200]}") from None
