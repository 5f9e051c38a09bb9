from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import UsageError
from harness.results.schema import (
    SCHEMA_VERSION,
    Correctness,
    Fallback,
    Measurement,
    Summary,
    Timing,
    record_from_dict,
)
from harness.results.store import append_record, read_records, read_records_file


def make_record(**over: object) -> Measurement:
    base = dict(
        run_id="r1", op="softmax", provider="builtin", dtype="bfloat16", shape=(4, 64),
        backend="cuda", device="0", device_name="NVIDIA H200", timer="direct", status="pass",
        cache="cold", seed=7,
        correctness=Correctness(passed=True, max_abs=1e-3, max_rel=2e-3, atol=1.6e-2, rtol=1.6e-2, numel=256),
        baseline=Timing.of([0.010, 0.011, 0.012]), candidate=Timing.of([0.005, 0.006, 0.0055]),
        speedup=2.0, gbps=100.0, tflops=None,
        fallback=Fallback(phase="capture", reason="capture-refused", detail="rng"),
        notes=("a note",), extra={"bytes": 1024},
    )
    base.update(over)
    return Measurement(**base)  # type: ignore[arg-type]


def test_round_trip_through_json() -> None:
    record = make_record()
    data = json.loads(json.dumps(record.to_dict()))
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["case_id"] == "softmax[builtin-bfloat16-4x64]"
    assert record_from_dict(data) == record


def test_summary_statistics() -> None:
    s = Summary.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert s.median == 3.0 and s.min == 1.0 and s.n == 5
    assert s.p10 == pytest.approx(1.4) and s.p90 == pytest.approx(4.6)
    assert s.iqr == pytest.approx(2.0)


def test_failed_case_cannot_carry_a_speedup() -> None:
    with pytest.raises(ValueError):
        make_record(status="fail", speedup=1.5)


def test_unknown_status_and_timer_rejected() -> None:
    with pytest.raises(ValueError):
        make_record(status="ok")
    with pytest.raises(ValueError):
        make_record(timer="stopwatch")


def test_newer_schema_refused_with_clear_error() -> None:
    data = make_record().to_dict()
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(UsageError, match="Upgrade the harness"):
        record_from_dict(data)


def test_store_appends_and_skips_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    append_record(path, make_record())
    append_record(path, make_record(op="add"))
    with open(path, "a") as fh:
        fh.write('{"schema_version": 1, "op": "trunc')  # a crash mid-write
    records = read_records(path)
    assert [r.op for r in records] == ["softmax", "add"]


def test_check_close_reports_shape_mismatch_and_nonfinite_values_serialisably(tmp_path: Path) -> None:
    import torch

    from harness.child.measure import check_close

    wrong_shape = check_close(torch.zeros(3, 4), torch.zeros(4, 3, dtype=torch.float64), 1e-3, 1e-3)
    assert not wrong_shape.passed and wrong_shape.max_abs is None
    assert "[3, 4]" in wrong_shape.shape_mismatch and "[4, 3]" in wrong_shape.shape_mismatch
    ref = torch.ones(5, dtype=torch.float64)
    out = torch.ones(5)
    out[2] = float("inf")
    infinite = check_close(out, ref, 1e-3, 1e-3)
    assert not infinite.passed and infinite.nonfinite == 1 and infinite.max_abs == 0.0
    path = tmp_path / "records.jsonl"
    for correctness in (wrong_shape, infinite):
        append_record(path, make_record(status="fail", speedup=None, gbps=None, baseline=None,
                                        candidate=None, correctness=correctness))
    loaded = read_records(path)
    assert [r.correctness for r in loaded] == [wrong_shape, infinite]


def _ops_seen() -> Any:
    """A torch dispatch mode that notes the name of every aten op run under it (``.seen``)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.seen.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    return Ops()


def test_check_close_takes_its_maxima_over_finite_differences_without_mask_indexing() -> None:
    """A boolean mask (diff[finite]) costs nonzero()'s int64 indices, 24 GiB for a 1G-element
    3-D output on the H200; the maxima are the same without it."""
    import torch

    from harness.child.measure import check_close

    ref = torch.tensor([[1.0, 2.0, 4.0], [8.0, 1e-300, float("nan")]], dtype=torch.float64)
    out = torch.tensor([[1.5, 2.0, float("inf")], [8.0, 0.0, float("nan")]], dtype=torch.float64)
    with _ops_seen() as ops:
        result = check_close(out, ref, 1e-3, 1e-3)
    assert {"nonzero", "index", "masked_select"}.isdisjoint(ops.seen), ops.seen
    assert result.max_abs == 0.5 and result.max_rel == 0.5 and result.nonfinite == 1  # inf and NaN left out
    assert check_close(torch.full((2,), float("nan")), torch.ones(2, dtype=torch.float64), 0, 0).max_abs is None


def test_check_close_passes_identical_outputs_in_one_pass_with_the_same_verdict() -> None:
    """Identical outputs (integer and bool outputs can only pass so) skip the float64 copies,
    which hold about 40 GB for a 1G-element row; the verdict is the float64 path's."""
    import torch

    from harness.child.measure import check_close

    for value in (torch.arange(12, dtype=torch.int32).reshape(3, 4), torch.tensor([True, False]),
                  torch.tensor([1.5, -2.0, float("inf")], dtype=torch.bfloat16)):
        with _ops_seen() as ops:
            fast = check_close(value, value.clone(), 0.0, 0.0)
        assert "_to_copy" not in ops.seen and "sub" not in ops.seen, ops.seen  # no float64 copies, no diff
        slow = check_close(value, value.to(torch.float64), 0.0, 0.0)  # another dtype: the float64 path
        assert fast == slow and fast.passed
    nan = torch.tensor([1.0, float("nan")])
    with _ops_seen() as ops:
        both = check_close(nan, nan.clone(), 0.0, 0.0)
    assert "_to_copy" in ops.seen and both.passed  # NaN is never equal: the full check, where NaN matches NaN
    wrong = check_close(torch.tensor([1, 2], dtype=torch.int64), torch.tensor([1, 3], dtype=torch.int64), 0.0, 0.0)
    assert not wrong.passed and wrong.mismatched == 1 and wrong.max_abs == 1.0


def test_check_close_in_slices_gives_the_whole_tensors_verdict_and_figures() -> None:
    """The comparison runs over slices so its float64 temporaries stay small (a 1G-element
    float64 row ran the H200 out of memory whole); maxima and counts are the whole tensors',
    for any slice length, strided inputs and NaN, infinities and exact matches included."""
    import torch

    from harness.child.measure import check_close

    gen = torch.Generator().manual_seed(7)
    ref = torch.randn(6, 50, generator=gen, dtype=torch.float64)
    ref[0, :3] = torch.tensor([float("inf"), float("nan"), -float("inf")], dtype=torch.float64)
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        out = (ref + 1e-3 * torch.randn(ref.shape, generator=gen, dtype=torch.float64)).to(dtype)
        out[1, 3], out[2, 9], out[3, 0] = float("nan"), float("inf"), ref[3, 0].item()
        out[0, :3] = ref[0, :3].to(dtype)  # equal infinities and NaN against NaN match
        cases += [(out, ref), (out.t(), ref.t()), (out[:, ::3], ref[:, ::3])]  # strided: a flat copy
    for out, ref_ in cases:
        whole = check_close(out, ref_, 1e-3, 1e-3, chunk=ref_.numel())
        assert not whole.passed and whole.nan and whole.nonfinite == 2 and whole.mismatched >= 2
        for chunk in (1, 7, 64, ref_.numel() - 1, 10 * ref_.numel(), 0):
            assert check_close(out, ref_, 1e-3, 1e-3, chunk=chunk) == whole, chunk
    ok = check_close(ref.to(torch.float32), ref, 1e-3, 1e-3, chunk=5)
    assert ok.passed and ok.numel == ref.numel() and ok.max_abs is not None and ok.max_abs < 1e-6
    empty = check_close(torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.float64), 0.0, 0.0, chunk=2)
    assert empty.passed and empty.numel == 0


def test_version_1_records_still_load() -> None:
    data = make_record().to_dict()
    data["schema_version"] = 1
    for key in ("nonfinite", "shape_mismatch"):
        data["correctness"].pop(key)
    correctness = record_from_dict(data).correctness
    assert correctness is not None and correctness.nonfinite == 0


def test_a_torn_line_in_the_middle_does_not_cost_later_records(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    append_record(path, make_record(op="first"))
    with open(path, "a") as fh:
        fh.write('{"schema_version": 2, "op": "tor')  # a child killed mid-write
    append_record(path, make_record(op="after"))  # another child appends afterwards
    records = read_records(path)  # a torn line is no corruption: nothing is raised
    assert [r.op for r in records] == ["first", "after"]
    found = read_records_file(path)
    assert [(p.line, p.kind) for p in found.problems] == [(2, "torn")]


def test_roofline_percentages_use_the_backends_datasheet_peaks() -> None:
    from harness.backends import get_backend
    from harness.child.measure import roofline

    peaks = get_backend("cuda").peaks
    assert peaks is not None
    got = roofline(peaks, gbps=2400.0, tflops=494.5, dtype="bfloat16")
    assert got["pct_peak_bandwidth"] == 50.0 and got["pct_peak_bf16_tflops"] == 50.0
    assert "pct_peak_bf16_tflops" not in roofline(peaks, 2400.0, 40.0, "float32")
    assert roofline(None, 1.0, 1.0, "float16") == {}


def test_schema_4_keeps_runs_settling_and_device_state_through_json() -> None:
    pooled = Timing.of([1.0, 1.1, 1.2, 0.9, 1.0], blocks=[2, 3], settled=False)
    state = ({"start": {"sm_clock_mhz": 1980.0, "power_w": None}, "end": {"sm_clock_mhz": 1965.0}},)
    record = make_record(candidate=pooled, device_state=state)
    data = json.loads(json.dumps(record.to_dict()))
    assert data["candidate"]["blocks"] == [2, 3] and data["candidate"]["settled"] is False
    again = record_from_dict(data)
    assert again == record
    assert again.candidate is not None and again.candidate.runs() == [(1.0, 1.1), (1.2, 0.9, 1.0)]
    assert Timing.of([1.0, 2.0], blocks=[2]).blocks == ()  # one run is no partition
    with pytest.raises(ValueError, match="partition"):
        Timing.of([1.0, 2.0], blocks=[1, 2])


def test_a_version_3_record_is_read_its_noisy_note_as_unsettled_samples() -> None:
    data = make_record(notes=("candidate noisy (IQR/median did not settle)",)).to_dict()
    data["schema_version"] = 3
    for side in ("baseline", "candidate"):
        del data[side]["blocks"], data[side]["settled"]
    del data["device_state"]
    old = record_from_dict(data)
    assert old.candidate is not None and not old.candidate.settled and old.candidate.blocks == ()
    assert old.baseline is not None and old.baseline.settled
    assert old.device_state == ()
