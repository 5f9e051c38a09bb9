"""A stratified sample of a suite's benchmark functions and the projection of a whole-corpus
nightly from what a sample cost (pure; numpy and scipy only for the interval).

- :func:`category`: an op's stratum (backward, in-place, a custom run, else the base-module
  Benchmark class its class derives from);
- :func:`stratified_sample`: ``size`` ops, every stratum in proportion, in an order whose every
  prefix is stratified (deterministic: ops ranked by a hash of their id);
- :func:`parts_of`: consecutive slices of a sample sized by the parts' time budgets;
- :func:`project`: the corpus's nightly on G devices, each op at its measured cost or its
  stratum's mean, placed longest first (:func:`lpt_makespan`, as the harness shards by weight);
- :func:`project_interval`: how far that could be off from sampling alone (a stratified
  percentile bootstrap of the corpus's total).

benchmarks/flaggems_corpus.py draws its samples with these; harness/suite/costing.py projects the nights.
"""

from __future__ import annotations

import hashlib
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.suite.select import SuiteOp

__all__ = ["GPUS", "category", "lpt_makespan", "parts_of", "project", "project_interval", "stratified_sample"]

GPUS = (1, 2, 8)  # the device counts a projection answers for, unless given


def category(op: SuiteOp, base_classes: frozenset[str]) -> str:
    """The stratum: backward and in-place apart, else the base-module Benchmark class the op's
    class derives from ("Benchmark" for a class of its own test file deriving from it directly)."""
    function = op.functions[0]
    if function.direction == "backward":
        return "backward"
    if any(b.is_inplace for b in function.builds):
        return "inplace"
    if not function.builds:
        return "custom run"
    root = next((c for c in function.builds[0].class_chain if c in base_classes), "Benchmark")
    return "GenericBenchmark*" if root.startswith("GenericBenchmark") else root


def _rank(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def stratified_sample(ops: Sequence[SuiteOp], size: int, base_classes: frozenset[str],
                      seed: str = "") -> list[SuiteOp]:
    """``size`` ops, every stratum in proportion (at least 2 each), in round-robin order over the
    strata so any prefix of the list is stratified too; deterministic for one ``seed``. Within a
    stratum ops are taken in the order of a hash of the seed and the op's id: another seed draws
    another sample of the same proportions (the empty seed is the sample drawn before seeds)."""
    strata: dict[str, list[SuiteOp]] = defaultdict(list)
    for op in sorted(ops, key=lambda o: _rank(f"{seed}:{o.id}" if seed else o.id)):
        strata[category(op, base_classes)].append(op)
    total = sum(len(v) for v in strata.values())
    quota = {k: min(len(v), max(2, round(size * len(v) / total))) for k, v in strata.items()}
    picked = {k: v[: quota[k]] for k, v in strata.items()}
    order: list[SuiteOp] = []
    for i in range(max(quota.values())):
        for name in sorted(picked):
            if i < len(picked[name]):
                order.append(picked[name][i])
    return order


def parts_of(sample: Sequence[SuiteOp], weights: Sequence[float]) -> list[list[SuiteOp]]:
    """Consecutive slices of the sample, sized by ``weights`` (the parts' time budgets). The sample's
    order is stratified prefix by prefix, so a part cut short by its budget stays stratified."""
    total, bounds, acc = sum(weights), [0], 0.0
    for w in weights:
        acc += w
        bounds.append(round(len(sample) * acc / total))
    return [list(sample[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]




def lpt_makespan(costs: Iterable[float], gpus: int) -> float:
    """Longest processing time first onto ``gpus`` devices: the harness shards by weight likewise."""
    loads = [0.0] * gpus
    for cost in sorted(costs, reverse=True):
        loads[loads.index(min(loads))] += cost
    return max(loads)


def project(ops: Sequence[SuiteOp], measured: Mapping[str, float], base_classes: frozenset[str],
            gpus: Sequence[int] = GPUS, start_s: float = 10.0) -> dict[str, Any]:
    """The full corpus's nightly on 1, 2, 8 GPUs: each op costs what it cost in the sample, an op not
    sampled the mean of its stratum (else of all); one process start per device is added."""
    strata = {op.id: category(op, base_classes) for op in ops}
    by_stratum: dict[str, list[float]] = defaultdict(list)
    for op in ops:
        if op.id in measured:
            by_stratum[strata[op.id]].append(measured[op.id])
    overall = statistics.fmean(measured.values()) if measured else 0.0
    means = {k: statistics.fmean(v) for k, v in by_stratum.items()}
    costs = [measured.get(op.id, means.get(strata[op.id], overall)) for op in ops]
    return {"ops": len(ops), "measured_ops": len(measured), "mean_op_s": round(overall, 2),
            "per_stratum_mean_s": {k: round(v, 2) for k, v in sorted(means.items())},
            "hours": {str(g): round((lpt_makespan(costs, g) + start_s) / 3600, 3) for g in gpus}}


def project_interval(ops: Sequence[SuiteOp], measured: Mapping[str, float], base_classes: frozenset[str],
                     gpus: Sequence[int] = GPUS, start_s: float = 10.0, confidence: float = 0.95,
                     resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """How far the projection could be off from sampling alone: a stratified percentile bootstrap
    (scipy.stats.bootstrap, each stratum's costed ops resampled on their own) of the corpus's
    total, the measured ops at their own cost and every other op at its stratum's resampled mean
    (a stratum with no costed op at the resampled overall mean). Hours on G GPUs are the total
    over G plus one process start (the longest-first makespan of this corpus is within a few
    seconds of that). A stratum with one costed op and others to stand in for cannot be
    resampled: its mean is taken as fixed, and named. The costed ops are taken as a random draw
    of their stratum, which the sample's hashed order makes them, less the ops that never ran
    alone."""
    import numpy as np
    from scipy import stats as sps

    strata = {op.id: category(op, base_classes) for op in ops}
    costed: dict[str, list[float]] = defaultdict(list)
    left: Counter[str] = Counter()
    for op in ops:
        if op.id in measured:
            costed[strata[op.id]].append(measured[op.id])
        else:
            left[strata[op.id]] += 1
    fixed_s = sum(measured[op.id] for op in ops if op.id in measured)
    varied = sorted(k for k in costed if left[k] and len(costed[k]) >= 2)
    held = sorted(k for k in costed if left[k] and len(costed[k]) == 1)
    fixed_s += sum(left[k] * costed[k][0] for k in held)
    orphans = sum(n for k, n in left.items() if k not in costed)  # strata no costed op speaks for
    fixed_n = sum(len(costed[k]) for k in costed if k not in varied)
    fixed_sum = sum(sum(costed[k]) for k in costed if k not in varied)
    samples = [np.asarray(costed[k], dtype=float) for k in varied]

    def total(*resampled: Any, axis: int = -1) -> Any:
        sums = [np.sum(x, axis=axis) for x in resampled]
        count = fixed_n + sum(x.shape[axis] for x in resampled)
        overall = (fixed_sum + sum(sums)) / count if count else 0.0  # nothing costed: nothing to project
        return fixed_s + sum(left[k] * m for k, m in zip(varied, (np.mean(x, axis=axis) for x in resampled),
                                                            strict=True)) + orphans * overall

    point = float(total(*samples))
    if samples:
        from harness.compare.stats import bootstrap_rng

        result = sps.bootstrap(tuple(samples), total, n_resamples=resamples, confidence_level=confidence,
                               method="percentile", vectorized=True, paired=False, batch=250, **bootstrap_rng(seed))
        low, high = (float(v) for v in result.confidence_interval)
    else:
        low = high = point
    return {"confidence": confidence, "resamples": resamples, "method": "stratified percentile bootstrap",
            "total_s": round(point, 1), "strata_resampled": varied, "strata_fixed": held,
            "hours": {str(g): [round((low / g + start_s) / 3600, 3), round((high / g + start_s) / 3600, 3)]
                      for g in gpus}}
