"""The test function of a sweep process: each case's candidate is called once, so its
autotuners tune that case's keys; nothing is checked or timed, and no record is written
(the measurement that follows replays what was tuned here; harness/run/sweep.py)."""

from __future__ import annotations

import pytest

from harness.autotune.tuners import AutotuneRecorder
from harness.child.plugins.session import HarnessSession
from harness.child.timing.base import device_api
from harness.contract import Case


def test_tune(
    harness_case: Case,
    harness_session: HarnessSession,
    harness_seed: int,
    harness_autotune: AutotuneRecorder,
) -> None:
    import torch

    op, backend = harness_session.op, harness_session.backend
    if harness_case.dtype not in op.dtypes:
        pytest.skip(f"op {op.id!r} does not support dtype {harness_case.dtype}")
    device = harness_session.torch_device
    gen = torch.Generator(device=device)
    gen.manual_seed(harness_seed)
    args = op.make_inputs(harness_case.shape, getattr(torch, harness_case.dtype), gen, device)
    harness_autotune.begin_case()
    try:
        harness_session.candidate(*args)
        if backend.torch_namespace:
            device_api(backend.torch_namespace, backend.torch_extension).synchronize()
    finally:
        harness_autotune.save()  # on disk before the next case
