"""The wall timer fixture (harness/child/timing/wall.py): loaded where the run's timer is a
device timer, so each row also has the time of a call as a user makes it."""

from __future__ import annotations

import pytest

from harness.child.plugins.session import HarnessSession
from harness.child.timing.base import device_api
from harness.child.timing.wall import WallTimer

__all__ = ["harness_wall_timer"]


@pytest.fixture(scope="session")
def harness_wall_timer(harness_session: HarnessSession) -> WallTimer:
    backend = harness_session.backend
    timer = WallTimer()
    if backend.torch_namespace:
        timer.synchronize = device_api(backend.torch_namespace, backend.torch_extension).synchronize
    return timer
