"""benchmarks/gate_calibration.py's judging, on synthetic runs (the device part needs a GPU)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from benchmarks.gate_calibration import (
    calibration_shapes,
    judge_mode,
    measured_spread,
    mode_pairs,
    proposed_entry,
    split_slowed,
)
from harness.compare.spread import parse_spread
from harness.compare.stats import Criteria
from harness.results.schema import Measurement, Timing

SPREAD = parse_spread({"format_version": 1, "default": {"source": "t", "classes": [{"sigma_pct": 1.0}]}}, "t")
LEVELS = {"softmax": 0.05, "add": 0.1, "mm": 0.2}


def _row(op: str, level: float, torch: float, rng: np.random.Generator) -> Measurement:
    cand = Timing.of([float(x) for x in level * rng.lognormal(0, 0.005, 80)])
    base = Timing.of([float(x) for x in torch * rng.lognormal(0, 0.005, 80)])
    return Measurement(run_id="r", op=op, provider="builtin", dtype="bfloat16", shape=(4096, 4096), backend="cuda",
                       device="0", timer="graph", status="pass", device_name="NVIDIA H200", baseline=base,
                       candidate=cand, speedup=1.0)


def _run(rng: np.random.Generator) -> list[Measurement]:
    """One run: each op at its level with a 0.4% run wander; the slowed softmax does 10% more work
    for torch too."""
    rows = []
    for op, level in LEVELS.items():
        wander = math.exp(rng.normal(0, 0.004))
        rows.append(_row(op, level * wander, level * 2, rng))
        if op == "softmax":
            rows.append(_row("softmax_slow", level * 1.1 * wander, level * 2 * 1.1, rng))
    return rows


@pytest.fixture(scope="module")
def independent() -> dict[str, Any]:
    rng = np.random.default_rng(14)
    return {"runs": [_run(rng) for _ in range(3)]}


def test_the_slowed_copy_replaces_heads_candidate_and_keeps_its_torch(independent: dict[str, Any]) -> None:
    run = independent["runs"][0]
    suite, swapped = split_slowed(run, ["softmax"])
    assert [r.op for r in suite] == ["softmax", "add", "mm"]
    slowed = next(r for r in run if r.op == "softmax_slow")
    assert swapped[0].candidate == slowed.candidate and swapped[0].baseline == suite[0].baseline
    assert swapped[1:] == suite[1:]


def test_pairs_are_each_pair_once_for_a_a_and_both_ways_for_a_b(independent: dict[str, Any]) -> None:
    assert len(mode_pairs("independent", independent, ordered=False)) == 3
    assert len(mode_pairs("independent", independent, ordered=True)) == 6
    pooled: dict[str, list[Measurement]] = {"base": [], "head": []}
    assert len(mode_pairs("gate-run", pooled, ordered=False)) == 1
    assert len(mode_pairs("gate-run", pooled, ordered=True)) == 2


def test_a_calibration_of_steady_runs_flags_nothing_and_catches_the_slowdown(independent: dict[str, Any]) -> None:
    result = judge_mode("independent", independent, ["softmax"], Criteria(), SPREAD, min_us=10.0)
    assert result["aa"]["rows"] == 9 and result["aa"]["flagged"] == 0 and result["aa"]["mm_rows"] == 3
    assert result["ab"]["target_rows"] == 6 and result["ab"]["detected"] == 6
    assert all(d["realized_ratio_in_run"] == pytest.approx(1.1, abs=0.02) for d in result["ab_rows"])
    assert result["ab"]["other_rows"]["flagged"] == 0


def test_the_measured_spread_gives_a_table_entry_with_an_upper_bound(independent: dict[str, Any]) -> None:
    measured = measured_spread(independent["runs"], ["softmax"])
    large = measured["large"]
    assert large["dof"] == 6 and large["cases"] == 3
    assert large["upper_pct"] > large["sigma_pct"] > 0.1
    entry = proposed_entry(measured, "NVIDIA H200", "cuda", "graph", "test")
    assert entry is not None and entry["classes"][1]["sigma_pct"] == pytest.approx(max(0.1, round(large["upper_pct"], 2)))
    parse_spread({"format_version": 1, "default": {"source": "t", "classes": [{"sigma_pct": 1}]}, "devices": [entry]}, "t")


def test_reduced_shapes_keep_the_slowed_copy_in_step() -> None:
    core = {"softmax": [[4096, 1024], [8192, 4096], [16384, 8192], [16384, 16384]], "mm": [[4096, 4096, 4096]],
            "add": [[1024, 1024], [8192, 8192], [16384, 16384]]}
    shapes = calibration_shapes(core, ["softmax", "add", "mm"], ["softmax"], reduced=True)
    assert shapes["softmax"] == [[8192, 4096], [16384, 8192]] == shapes["softmax_slow"]
    assert shapes["add"] == [[1024, 1024], [8192, 8192]]
    assert shapes["mm"] == [[4096, 4096, 4096]]  # the reduced set is not all in this level: kept whole
    assert calibration_shapes(core, ["add"], [], reduced=False)["add"] == core["add"]
