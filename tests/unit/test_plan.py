from __future__ import annotations

from collections import Counter

import pytest

from harness.backends import get_backend
from harness.errors import UsageError
from harness.ops.registry import BUILTIN
from harness.ops.shapes import load_level
from harness.options import RunOptions
from harness.run.plan import OP_START_COST, assign_device, plan_run


def _plan(devices: list[str], ops: list[str] | None = None):
    catalog = BUILTIN
    chosen = [catalog[o] for o in (ops or list(catalog))]
    return plan_run(RunOptions(), get_backend("cuda"), chosen, "core", load_level("core"), None, devices, "r")


def test_plan_run_shards_ops_over_every_device_in_balance() -> None:
    plan = _plan(["0", "1"])
    load: Counter[str] = Counter()
    for op in plan.ops:
        load[op.device] += OP_START_COST + len(op.cases()) * op.case_cost
    assert set(load) == {"0", "1"}  # balanced in weight (cases x case cost), within one light op
    assert max(load.values()) - min(load.values()) <= min(OP_START_COST + len(o.cases()) for o in plan.ops)


def test_plan_is_stable_under_reordering() -> None:
    a = {o.op: o.device for o in _plan(["0", "1", "2"]).ops}
    b = {o.op: o.device for o in _plan(["2", "0", "1"], list(reversed(list(a)))).ops}
    assert a == b


def test_assign_device_ignores_device_order() -> None:
    assert assign_device("softmax", ["0", "1", "2"]) == assign_device("softmax", ["2", "1", "0"])


def test_user_shapes_override_and_bad_shapes_are_refused() -> None:
    catalog = BUILTIN
    plan = plan_run(RunOptions(), get_backend("cpu"), [catalog["add"]], "smoke", load_level("smoke"),
                    {"add": [(3, 5)]}, ["cpu"], "r")
    assert plan.ops[0].shapes == ((3, 5),)
    with pytest.raises(UsageError, match="2 dimensions"):
        plan_run(RunOptions(), get_backend("cpu"), [catalog["softmax"]], "smoke", load_level("smoke"),
                 {"softmax": [(3, 5, 7)]}, ["cpu"], "r")
