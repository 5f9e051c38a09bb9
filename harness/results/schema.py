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

__all__ = [
    "CASE_STATUSES",
    "SCHEMA_VERSION",
    "Correctness",
    "Fallback",
    "Measurement",
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
SCHEMA_VERSION = 3
CASE_STATUSES = ("pass", "fail", "error", "skip")
TIMERS = ("cpu", "direct", "graph", "profiler")


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
    samples_ms: tuple[float, ...]
    summary: Summary

    @classmethod
    def of(cls, samples: Sequence[float]) -> Timing:
        return cls(samples_ms=tuple(float(x) for x in samples), summary=Summary.of(samples))


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
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in CASE_STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {CASE_STATUSES}")
        if self.timer not in TIMERS:
            raise ValueError(f"timer {self.timer!r} is not one of {TIMERS}")
        if self.status != "pass" and self.speedup is not None:
            # Correctness before speed: a failed case never reports a speedup.
            raise ValueError("only a passing case may carry a speedup")

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
        data["notes"] = list(self.notes)
        data["extra"] = dict(self.extra)
        return data


def _timing(data: Mapping[str, Any] | None) -> Timing | None:
    if data is None:
        return None
    return Timing(samples_ms=tuple(data["samples_ms"]), summary=Summary(**data["summary"]))


def record_from_dict(data: Mapping[str, Any]) -> Measurement:
    """Load a record written by any schema version up to the current one."""
    version = data.get("schema_version")
    if not isinstance(version, int) or version < 1 or version > SCHEMA_VERSION:
        raise UsageError(
            f"record of schema version {version!r} cannot be read by this harness "
            f"(reads 1..{SCHEMA_VERSION}). Upgrade the harness to read newer records."
        )
    d = dict(data)
    d.pop("case_id", None)
    d["shape"] = tuple(d["shape"])
    d["notes"] = tuple(d.get("notes", ()))
    d["correctness"] = Correctness(**d["correctness"]) if d.get("correctness") else None
    d["fallback"] = Fallback(**d["fallback"]) if d.get("fallback") else None
    d["baseline"] = _timing(d.get("baseline"))
    d["candidate"] = _timing(d.get("candidate"))
    d["baseline_wall"] = _timing(d.get("baseline_wall"))
    d["candidate_wall"] = _timing(d.get("candidate_wall"))
    return Measurement(**d)
