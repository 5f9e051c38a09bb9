"""FlagGems' benchmark results (its ``--record log`` file) turned into harness records (pure).

With ``--record log`` FlagGems' suite (benchmark/conftest.py, v5.0.2) writes, per
(op, dtype), one line ``[INFO] {json}``: ``BenchmarkResult.to_json()``, i.e. ``op_name``,
``dtype`` ("torch.float16"), ``mode``, ``level`` and ``result``, a list of per-input
metrics (``shape_detail``, ``latency_base`` = torch, ``latency`` = FlagGems, in ms,
``speedup``, ``gbps``/``gbps_base``, ``tflops``, ``error_msg``...). That is a structured
record, not a rendered table, so it is read as such. Other lines (its "logger enabled"
banner, query-mode dict reprs, indented attribute dumps) are skipped and counted.

Latencies are paired with the harness timer's raw samples (harness.suite.timings) by
the exact value the timer returned; a latency no harness timing returned (FlagGems timed
it itself) becomes a single-sample row saying so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.ops.base import Shape
from harness.results.schema import Measurement, Timing
from harness.suite.nodes import SuiteNode
from harness.suite.timings import TimingEntry

__all__ = [
    "SUITE_PROVIDER",
    "Conversion",
    "RecordContext",
    "SuiteResult",
    "convert_results",
    "match_timings",
    "parse_record_log",
]

SUITE_PROVIDER = "flaggems-suite"  # rows measured through FlagGems' own benchmark code
_PREFIX = "[INFO] "
NOT_CHECKED = "FlagGems suite row: correctness not checked (FlagGems' benchmarks do not compare outputs)"


@dataclass(frozen=True)
class SuiteResult:
    """One logged BenchmarkResult: one op and dtype, one metrics entry per input."""

    op_name: str
    dtype: str
    mode: str
    level: str
    metrics: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class LogParse:
    results: tuple[SuiteResult, ...]
    skipped: int  # "[INFO] {" lines that were not a BenchmarkResult (e.g. query-mode reprs)


def parse_record_log(lines: Iterable[str]) -> LogParse:
    results: list[SuiteResult] = []
    skipped = 0
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line.startswith(_PREFIX + "{"):
            continue
        try:
            data = json.loads(line[len(_PREFIX):])
        except json.JSONDecodeError:
            skipped += 1
            continue
        metrics = data.get("result") if isinstance(data, dict) else None
        if not isinstance(metrics, list) or "op_name" not in data:
            skipped += 1
            continue
        results.append(SuiteResult(
            op_name=str(data["op_name"]),
            dtype=str(data.get("dtype", "")).removeprefix("torch."),
            mode=str(data.get("mode", "")),
            level=str(data.get("level", "")),
            metrics=tuple(m for m in metrics if isinstance(m, dict)),
        ))
    return LogParse(results=tuple(results), skipped=skipped)


def match_timings(values: Sequence[float | None], entries: Sequence[TimingEntry]) -> list[TimingEntry | None]:
    """For each logged latency (in log order), the timing entry that returned exactly it.

    Entries are consumed in order, so two calls that happened to return the same value are
    told apart; timings whose result never reached the log (a benchmark that failed half-way,
    another op's calls) are passed over.
    """
    matched: list[TimingEntry | None] = []
    start = 0
    for value in values:
        if value is None:
            matched.append(None)
            continue
        found = next((i for i in range(start, len(entries)) if entries[i].result == value), None)
        if found is None:
            matched.append(None)
        else:
            matched.append(entries[found])
            start = found + 1
    return matched


@dataclass(frozen=True)
class RecordContext:
    """What every record of this op's run shares."""

    run_id: str
    backend: str
    device: str
    device_name: str
    cache: str
    started_at: str = ""
    provider: str = SUITE_PROVIDER


@dataclass(frozen=True)
class Conversion:
    records: tuple[Measurement, ...]
    other_ops: tuple[str, ...] = ()  # op_names the selection also ran (not recorded)
    unmatched: int = 0  # latencies without harness samples


def _timing(entry: TimingEntry | None, value: float) -> Timing:
    return Timing.of(entry.samples_ms) if entry is not None and entry.samples_ms else Timing.of([value])


def _float(metric: Mapping[str, Any], key: str) -> float | None:
    value = metric.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def convert_results(
    results: Sequence[SuiteResult],
    timings: Sequence[TimingEntry],
    node: SuiteNode,
    ctx: RecordContext,
    bytes_moved: Callable[[Shape, int], int] | None = None,
    flops: Callable[[Shape], int] | None = None,
    itemsize: Mapping[str, int] | None = None,
) -> Conversion:
    """One Measurement per metrics entry of ``node``'s op; ``bytes_moved``/``flops`` (the harness
    op's models, in harness shapes) replace FlagGems' own GB/s and TFLOP/s when given."""
    sizes = {"float16": 2, "bfloat16": 2, "float32": 4, **(itemsize or {})}
    values: list[float | None] = []
    for result in results:
        for metric in result.metrics:
            values += [_float(metric, "latency_base"), _float(metric, "latency")]
    matched = iter(match_timings(values, timings))
    records: list[Measurement] = []
    others: list[str] = []
    seen: dict[str, int] = {}
    unmatched = 0
    for result in results:
        pairs = [(metric, next(matched), next(matched)) for metric in result.metrics]
        if result.op_name != node.op_name:
            if result.op_name not in others:
                others.append(result.op_name)
            continue
        for metric, base_entry, cand_entry in pairs:
            shape = node.from_suite(metric.get("shape_detail"))
            provider = ctx.provider
            key = f"{result.dtype}/{shape}"
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:  # FlagGems made several inputs of one shape: keep each, apart
                provider = f"{ctx.provider}.v{seen[key]}"
            common: dict[str, Any] = dict(
                run_id=ctx.run_id, op=node.op, provider=provider, dtype=result.dtype, shape=shape,
                backend=ctx.backend, device=ctx.device, device_name=ctx.device_name,
                cache=ctx.cache, started_at=ctx.started_at,
            )
            suite_facts = {"op_name": result.op_name, "mode": result.mode, "level": result.level,
                           **{k: metric.get(k) for k in ("shape_detail", "latency_base", "latency", "speedup",
                                                         "gbps_base", "gbps", "tflops")}}
            base_ms, cand_ms = _float(metric, "latency_base"), _float(metric, "latency")
            error = metric.get("error_msg")
            if error or base_ms is None or cand_ms is None:
                timer = cand_entry.timer if cand_entry else "direct"
                message = str(error) if error else "FlagGems reported no latency for this input"
                records.append(Measurement(status="error", timer=timer, message=message, notes=(NOT_CHECKED,),
                                           extra={"suite": suite_facts}, **common))
                continue
            notes = [NOT_CHECKED]
            if base_entry is None or cand_entry is None:
                unmatched += 1
                notes.append("latency as FlagGems' own timer reported it (one value, no raw samples)")
            for side, entry in (("candidate", cand_entry), ("baseline", base_entry)):
                if entry is not None and entry.noisy:
                    notes.append(f"{side} noisy (IQR/median did not settle)")
            baseline, candidate = _timing(base_entry, base_ms), _timing(cand_entry, cand_ms)
            cand_s = candidate.summary.median * 1e-3
            nbytes = bytes_moved(shape, sizes.get(result.dtype, 0)) if bytes_moved and shape else None
            nflops = flops(shape) if flops and shape else None
            gbps = nbytes / cand_s / 1e9 if nbytes and cand_s > 0 else _float(metric, "gbps")
            tflops = nflops / cand_s / 1e12 if nflops and cand_s > 0 else _float(metric, "tflops")
            extra: dict[str, Any] = {"suite": suite_facts}
            if nbytes:
                extra["bytes"] = nbytes
                extra["baseline_gbps"] = nbytes / (baseline.summary.median * 1e-3) / 1e9
            if nflops:
                extra["flops"] = nflops
            records.append(Measurement(
                status="pass",
                timer=timed_by.timer if (timed_by := cand_entry or base_entry) is not None else "direct",
                baseline=baseline,
                candidate=candidate,
                speedup=baseline.summary.median / candidate.summary.median if candidate.summary.median > 0 else None,
                gbps=gbps,
                tflops=tflops,
                notes=tuple(notes),
                extra=extra,
                **common,
            ))
    return Conversion(records=tuple(records), other_ops=tuple(others), unmatched=unmatched)
