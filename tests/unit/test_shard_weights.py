"""`--shard K/N --shard-weights OPS_STATUS_CSV`: the parts balanced by an earlier run's op times
(the corpus nightly gives last night's), every op still in exactly one part."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.run.execute import read_op_seconds
from harness.run.plan import OpPlan, assign_parts, plan_part, weigh_by_seconds


def _open(name: str, rows: int) -> OpPlan:
    return OpPlan(op=name, device="0", dtypes=(), shapes=(), provider="flaggems-suite", open_cases=rows)


# Forty suite ops of five rows each: by the plan they weigh the same. Last night, two of them took
# 600 s (compiling) and the rest 10 s.
OPS = [_open(f"op{i:02d}", 5) for i in range(40)]
SECONDS = {o.op: (600.0 if o.op in ("op03", "op17") else 10.0) for o in OPS}


def _loads(parts: dict[str, int], count: int) -> list[float]:
    return [sum(SECONDS[op] for op, k in parts.items() if k == part) for part in range(1, count + 1)]


def test_parts_weighed_by_last_nights_times_balance_that_time() -> None:
    plain = _loads(assign_parts(OPS, 2), 2)
    weighed = _loads(assign_parts(weigh_by_seconds(OPS, SECONDS), 2), 2)
    total = sum(SECONDS.values())
    assert max(weighed) <= total / 2 + 10.0  # within one short op of even
    assert max(plain) >= max(weighed)
    parts = assign_parts(weigh_by_seconds(OPS, SECONDS), 2)
    assert parts["op03"] != parts["op17"]  # the two long ops never share a part
    assert sorted(parts) == sorted(o.op for o in OPS)


def test_an_op_last_night_did_not_run_is_weighed_at_the_measured_rate() -> None:
    weighed = {o.op: o for o in weigh_by_seconds([*OPS, _open("new", 5)], SECONDS)}
    rate = sum(SECONDS.values()) / sum(1.0 + 5 * o.case_cost for o in OPS)
    assert 1.0 + 5 * weighed["new"].case_cost == pytest.approx((1.0 + 5 * _open("new", 5).case_cost) * rate)
    assert weigh_by_seconds(OPS, {}) == tuple(OPS)


def test_every_part_keeps_its_planned_ops_unchanged() -> None:
    mine, shard = plan_part(OPS, 1, 2, ["0"], digest="d", seconds=SECONDS)
    assert all(o.case_cost == OPS[0].case_cost for o in mine)  # the weights only choose the parts
    other, _ = plan_part(OPS, 2, 2, ["0"], digest="d", seconds=SECONDS)
    assert sorted(o.op for o in [*mine, *other]) == sorted(o.op for o in OPS)


def test_an_ops_status_csv_is_read_and_anything_else_refused(tmp_path: Path) -> None:
    good = tmp_path / "ops_status.csv"
    good.write_text("op,device,status,attempts,elapsed_s,rows,notes\nadd,0,PASS,1,12.50,4,\nmm,0,TIMEOUT,1,530,0,x\n")
    assert read_op_seconds(good) == {"add": 12.5, "mm": 530.0}
    bad = tmp_path / "bad.csv"
    for text, says in (("a,b\n", "not an ops_status.csv"), ("op,elapsed_s\nadd,soon\n", "not a number")):
        bad.write_text(text)
        with pytest.raises(UsageError) as err:
            read_op_seconds(bad)
        assert says in err.value.message and "\n" not in err.value.message
