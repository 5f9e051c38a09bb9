"""benchmarks/gate_pairs.py on synthetic pairs of runs, and the spread it measures from them."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.compare.spread import pair_spread
from tests.unit.test_compare import record, write_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gate_pairs  # noqa: E402


def test_the_spread_of_pairs_is_their_rms_over_root_two_with_an_upper_bound_above_it() -> None:
    from scipy import stats

    sigma, upper = pair_spread([0.02, -0.02, 0.02, -0.02])
    assert sigma == pytest.approx(0.02 / math.sqrt(2))
    # the chi-square bound: sum of squares 4 x 0.0004, 4 degrees of freedom, its 5% quantile
    assert upper == pytest.approx(math.sqrt(0.0016 / (2 * stats.chi2.ppf(0.05, 4))))
    with pytest.raises(ValueError, match="no pairs"):
        pair_spread([])


def _pair(runs: Path, k: int, rng: np.random.Generator, wander: float) -> None:
    """Part k cold and warm: 30 graph rows of 20 us to 2 ms, each run's level off by ``wander``."""
    for name in (f"sample-{k}", f"warm-{k}-c1"):
        rows = []
        for i in range(30):
            level = 0.02 * 1.17 ** i * math.exp(rng.normal(0, wander))
            rows.append(record(f"op{k}x{i}", "bfloat16", (64, i + 1), list(level * rng.lognormal(0, 0.01, 60)),
                               timer="graph"))
        write_run(runs / name, rows, timer="graph")


def test_a_and_a_flags_nothing_and_ten_percent_is_caught_with_a_spread_measured_from_other_pairs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(7)
    for k in (1, 2, 3, 4):
        _pair(tmp_path, k, rng, wander=0.003)
    assert gate_pairs.parts("1-2,4") == {1, 2, 4}
    assert [w.name for _, w in gate_pairs.pairs_in(tmp_path)] == ["warm-1-c1", "warm-2-c1", "warm-3-c1", "warm-4-c1"]
    out = tmp_path / "pairs.json"
    assert gate_pairs.main([str(tmp_path), "--fit", "1-2", "--test", "3-4", "--out", str(out)]) == 0
    found = json.loads(out.read_text())
    graph = found["by_timer"]["graph"]
    assert graph["rows"] == 60 and graph["aa_flagged"] == 0
    assert graph["aa"].get("unchanged", 0) >= 54  # the measured spread lets same-code rows read unchanged
    assert graph["ab_detected"] >= 54  # a 10% slowdown stands well above a 0.3% wander
    assert found["fitted_entry"]["timer"] == "graph" and found["fitted_entry"]["classes"][-1]["sigma_pct"] < 2
    assert "sigma_pct" in out.with_suffix(".spread.yaml").read_text()
    printed = capsys.readouterr().out
    assert "A/A flagged" in printed and "run-to-run spread, graph rows" in printed
    # --fit alone judges the parts it did not fit
    assert gate_pairs.main([str(tmp_path), "--fit", "1-3", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["pairs"] == [["sample-4", "warm-4-c1"]]


def _reps(runs: Path, count: int, rng: np.random.Generator, wander: float) -> None:
    """rep-1..rep-count: the same 30 graph rows of 20 us to 2 ms in each, each run's level off by ``wander``."""
    for n in range(1, count + 1):
        rows = [record(f"op{i}", "bfloat16", (64, i + 1),
                       list(0.02 * 1.17 ** i * math.exp(rng.normal(0, wander)) * rng.lognormal(0, 0.01, 60)),
                       timer="graph") for i in range(30)]
        write_run(runs / f"rep-{n}", rows, timer="graph")


def test_reps_judged_in_pairs_with_each_cases_spread_from_a_history_of_the_other_reps(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _reps(tmp_path, 8, np.random.default_rng(11), wander=0.003)
    assert gate_pairs.consecutive_pairs([9, 7, 8, 10, 11]) == [(7, 8), (9, 10)]
    out = tmp_path / "history.json"
    assert gate_pairs.main([str(tmp_path), "--repeats", "--history", "1-4", "--test", "5-8", "--out", str(out)]) == 0
    found = json.loads(out.read_text())
    assert found["pairs"] == [["rep-5", "rep-6"], ["rep-7", "rep-8"]]
    graph = found["by_timer"]["graph"]
    assert graph["rows"] == 60 and graph["aa_flagged"] == 0
    assert graph["aa"].get("unchanged", 0) >= 54  # each case's own 0.3% spread, from the four reps stored
    assert graph["ab_detected"] >= 54
    assert "spread measured in" in found["spread"] and out.with_suffix(".history.sqlite").is_file()
    # the same pairs on the shipped 2% default: same-code rows cannot read unchanged
    assert gate_pairs.main([str(tmp_path), "--repeats", "--test", "5-8", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["by_timer"]["graph"]["aa"].get("unchanged", 0) < 10
    # every pair judged with a history of the six other reps, itself left out
    stored: list[list[str]] = []
    keep = gate_pairs.history_of

    def recorded(runs: list[Path], db: Path) -> Path:
        stored.append([r.name for r in runs])
        return keep(runs, db)

    monkeypatch.setattr(gate_pairs, "history_of", recorded)
    assert gate_pairs.main([str(tmp_path), "--repeats", "--leave-pair-out", "--out", str(out)]) == 0
    found = json.loads(out.read_text())
    assert found["pairs"] == [[f"rep-{a}", f"rep-{a + 1}"] for a in (1, 3, 5, 7)] and "other reps" in found["spread"]
    assert stored == [[f"rep-{n}" for n in range(1, 9) if n not in (a, a + 1)] for a in (1, 3, 5, 7)]
    graph = found["by_timer"]["graph"]
    assert graph["rows"] == 120 and graph["aa_flagged"] == 0 and graph["aa"].get("unchanged", 0) >= 108
    capsys.readouterr()
    for bad in (["--history", "1-4"], ["--leave-pair-out"], ["--repeats", "--leave-pair-out", "--history", "1-4"], ["--repeats", "--history", "1-4", "--test", "5-9"], ["--repeats", "--test", "5"]):
        with pytest.raises(SystemExit) as stop:
            gate_pairs.main([str(tmp_path), *bad, "--out", str(out)])
        assert stop.value.code == 2
    errors = capsys.readouterr().err
    assert "--history and --leave-pair-out take reps" in errors and "not both" in errors and "no rep-N run for [9]" in errors and "fewer than two reps" in errors
