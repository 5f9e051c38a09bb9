"""Deterministic seeding: each case gets a seed derived from the run seed and its case id."""

from __future__ import annotations

import hashlib

import pytest

from harness.child.plugins.session import get_session
from harness.contract import Case


def case_seed(base_seed: int, case_id: str) -> int:
    digest = hashlib.sha256(f"{base_seed}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


@pytest.fixture
def harness_seed(request: pytest.FixtureRequest, harness_case: Case) -> int:
    import torch

    seed = case_seed(get_session(request.config).spec.seed, harness_case.case_id)
    torch.manual_seed(seed)
    return seed
