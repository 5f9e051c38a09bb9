"""The one test function of the harness: each parametrised item is one case."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from harness.autotune.tuners import AutotuneRecorder
from harness.child.measure import CaseContext, measure_case
from harness.child.plugins.records import AUTOTUNE_KEY, RESULT_KEY
from harness.child.plugins.session import HarnessSession
from harness.child.plugins.timing import Timers
from harness.contract import Case


def optional_fixture(request: pytest.FixtureRequest, name: str) -> Any:
    """The value of a fixture from an optional plugin (harness.run.plugins), or None when the
    plugin is not loaded (``--plugins -autotune``)."""
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        return None


class _NoAutotune:
    """Stands for the recorder when the autotune plugin is off: nothing seeded, nothing written."""

    def begin_case(self) -> None:
        return None

    def marker(self) -> str:
        return "live"

    def save(self) -> None:
        return None


def test_case(
    harness_case: Case,
    harness_session: HarnessSession,
    harness_timers: Timers,
    harness_seed: int,
    request: pytest.FixtureRequest,
) -> None:
    spec = harness_session.spec
    op = harness_session.op
    harness_autotune: AutotuneRecorder | _NoAutotune = optional_fixture(request, "harness_autotune") or _NoAutotune()
    wall_timer = optional_fixture(request, "harness_wall_timer")
    ir_capture = optional_fixture(request, "harness_ir")  # the IR plugin's capture (harness.child.plugins.ir)
    harness_autotune.begin_case()
    request.node.stash[AUTOTUNE_KEY] = harness_autotune.marker()
    if harness_case.dtype not in op.dtypes:
        pytest.skip(f"op {op.id!r} does not support dtype {harness_case.dtype} (supports {', '.join(op.dtypes)})")
    ctx = CaseContext(
        run_id=spec.run_id,
        backend=spec.backend,
        device=spec.device,
        torch_device=harness_session.torch_device,
        device_name=str(harness_session.identity.get("device_name", "")),
        timer_name=harness_timers.primary.name,
        cache=spec.cache if harness_timers.primary.name != "cpu" else "n/a",
        peaks=harness_session.backend.peaks,
        read_state=harness_session.state_reader,
        watch_launches=getattr(ir_capture, "watching", None),
    )
    try:
        record = measure_case(ctx, op, harness_session.candidate, harness_case, harness_timers.primary,
                              harness_seed, fallback_timer=harness_timers.fallback, wall_timer=wall_timer)
    finally:
        harness_autotune.save()  # on disk before the next case: a crash later keeps these configs
        request.node.stash[AUTOTUNE_KEY] = harness_autotune.marker()
    record = replace(record, autotune=request.node.stash[AUTOTUNE_KEY])
    request.node.stash[RESULT_KEY] = record
    if record.status == "fail":
        pytest.fail(record.message, pytrace=False)
