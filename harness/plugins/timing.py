"""The timer fixture: built once per op process from the timer the parent planned."""

from __future__ import annotations

import pytest

from harness.plugins.session import get_session
from harness.timing.base import Budget, Timer, device_api
from harness.timing.cpu import CpuTimer
from harness.timing.direct import DirectTimer


@pytest.fixture(scope="session")
def harness_timer(request: pytest.FixtureRequest) -> Timer:
    session = get_session(request.config)
    spec = session.spec
    backend = session.backend
    if spec.timer == "cpu":
        sync = None
        if backend.torch_namespace:
            api = device_api(backend.torch_namespace, backend.torch_extension)
            sync = api.synchronize
        timer = CpuTimer(budget=Budget(warmup_ms=spec.warmup_ms, rep_ms=spec.rep_ms, min_reps=3, max_reps=200))
        if sync is not None:
            timer.synchronize = sync
        return timer
    if spec.timer == "direct":
        assert backend.torch_namespace is not None
        return DirectTimer(
            api=device_api(backend.torch_namespace, backend.torch_extension),
            device=session.torch_device,
            l2_bytes=session.identity.get("l2_bytes"),
            flush=spec.cache == "cold",
            budget=Budget(warmup_ms=spec.warmup_ms, rep_ms=spec.rep_ms),
        )
    raise pytest.UsageError(f"timer {spec.timer!r} is not available in this harness version")
