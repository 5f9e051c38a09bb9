from __future__ import annotations

from harness.backends.state import clock_drop, parse_state

NVSMI = "0, 1980, 3201, 41, 120.55\n1, 1755, 3201, 39, [N/A]\n"


def test_parse_state_reads_every_device_and_tolerates_na() -> None:
    states = parse_state(NVSMI)
    assert states["0"] == {"sm_clock_mhz": 1980.0, "mem_clock_mhz": 3201.0, "temperature_c": 41.0, "power_w": 120.55}
    assert states["1"]["power_w"] is None
    assert parse_state("garbage\n") == {}


def test_clock_drop_flags_throttling_after_the_peak_only() -> None:
    assert clock_drop([{"sm_clock_mhz": 1980}, {"sm_clock_mhz": 1965}, {"sm_clock_mhz": 1980}]) is None
    # idle clocks before the first op are not a drop
    assert clock_drop([{"sm_clock_mhz": 345}, {"sm_clock_mhz": 1980}]) is None
    flagged = clock_drop([{"sm_clock_mhz": 1980}, {"sm_clock_mhz": 1500}])
    assert flagged is not None and flagged["drop_fraction"] > 0.2


def test_summarize_states_flags_a_drop_under_load_only(tmp_path) -> None:
    from harness.backends.state import summarize_states

    lines = [
        '{"op": "<run start>", "device": "0", "sm_clock_mhz": 345}',
        '{"op": "softmax", "device": "0", "sm_clock_mhz": 1980}',
        '{"op": "mm", "device": "0", "sm_clock_mhz": 1400}',
        '{"op": "<run end>", "device": "0", "sm_clock_mhz": 300}',
        '{"op": "trunc',
    ]
    (tmp_path / "device_state.jsonl").write_text("\n".join(lines) + "\n")
    summary = summarize_states(tmp_path)
    assert len(summary["readings"]) == 4
    assert summary["clock_drop"]["0"]["min_sm_clock_mhz_after"] == 1400
    assert summarize_states(tmp_path / "nothing") == {}
