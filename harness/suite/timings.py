"""What the harness's stand-in for ``triton.testing.do_bench`` returns and what it writes down.

FlagGems' suite asks do_bench for a latency (``return_mode="median"`` in v5.0.2). The
stand-in measures with the harness timer, returns the statistic asked for, computed from the
raw samples the same way the harness summarises records, and appends a :class:`TimingEntry`
(the returned value plus the raw samples) to a sidecar file. The converter later finds, for
each latency FlagGems logged, the entry that returned exactly that value, so records keep
their raw samples.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.results.schema import Summary, quantile

__all__ = ["RETURN_MODES", "TimingEntry", "bench_result", "parse_timings"]

RETURN_MODES = ("min", "max", "mean", "median", "all")


def bench_result(
    values: Sequence[float], quantiles: Sequence[float] | None = None, return_mode: str = "mean"
) -> float | list[float]:
    """do_bench's return value over ``values`` (ms): quantiles when given (one number for one
    quantile), else the ``return_mode`` statistic, or every sample for "all"."""
    if not values:
        raise ValueError("no samples")
    if quantiles is not None:
        ordered = sorted(values)
        found = [quantile(ordered, float(q)) for q in quantiles]
        return found[0] if len(found) == 1 else found
    if return_mode not in RETURN_MODES:
        raise ValueError(f"return_mode {return_mode!r} is not one of {RETURN_MODES}")
    if return_mode == "all":
        return [float(v) for v in values]
    summary = Summary.of(values)
    return {"min": summary.min, "max": max(values), "mean": summary.mean, "median": summary.median}[return_mode]


@dataclass(frozen=True)
class TimingEntry:
    """One do_bench call made by FlagGems' suite, timed by the harness."""

    seq: int
    result: float | list[float]
    samples_ms: tuple[float, ...]
    timer: str
    noisy: bool = False

    def to_json(self) -> str:
        return json.dumps({"seq": self.seq, "result": self.result, "samples_ms": list(self.samples_ms),
                           "timer": self.timer, "noisy": self.noisy})


def parse_timings(lines: Iterable[str]) -> list[TimingEntry]:
    """Entries of a timings sidecar; a torn last line (the process was killed) is dropped."""
    entries: list[TimingEntry] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        entries.append(TimingEntry(seq=int(data["seq"]), result=data["result"],
                                   samples_ms=tuple(float(x) for x in data["samples_ms"]),
                                   timer=str(data["timer"]), noisy=bool(data.get("noisy", False))))
    return entries
