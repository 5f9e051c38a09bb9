"""Deterministic seeding: each case gets a seed derived from the run seed and its case id, and
every generator an op's code may draw from (Python's `random`, numpy's global generator, torch's
generators on every device) is seeded with it."""

from __future__ import annotations

import hashlib

import pytest

from harness.child.plugins.session import get_session
from harness.contract import Case


def case_seed(base_seed: int, case_id: str) -> int:
    digest = hashlib.sha256(f"{base_seed}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def seed_generators(seed: int) -> None:
    """Seed Python's `random`, numpy's global generator (when numpy is installed) and torch's
    generators with one seed, so inputs drawn from any of them are the same every run."""
    import random

    import torch

    random.seed(seed)
    try:
        import numpy
    except ImportError:
        pass
    else:
        numpy.random.seed(seed % 2**32)  # numpy takes 32-bit seeds only
    torch.manual_seed(seed)


@pytest.fixture
def harness_seed(request: pytest.FixtureRequest, harness_case: Case) -> int:
    seed = case_seed(get_session(request.config).spec.seed, harness_case.case_id)
    seed_generators(seed)
    return seed
