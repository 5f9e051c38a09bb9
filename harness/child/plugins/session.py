"""Loads the child spec and the op it names; the other plugins read the session from the stash."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.backends import Backend, get_backend
from harness.contract import SPEC_OPTION, ChildSpec
from harness.ops.base import OpSpec

__all__ = ["HarnessSession", "SESSION_KEY", "get_session"]


@dataclass
class HarnessSession:
    spec: ChildSpec
    backend: Backend
    op: OpSpec
    candidate: Any
    identity: dict[str, Any] = field(default_factory=dict)
    torch_device: str = "cpu"
    # Reads the device's clocks at the start and end of each case's timing (set by the device
    # plugin; None on the cpu backend).
    state_reader: Callable[[], Mapping[str, float | None]] | None = None


SESSION_KEY = pytest.StashKey[HarnessSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(SPEC_OPTION, help="child spec JSON written by `harness run`")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption(SPEC_OPTION)
    if not path:
        raise pytest.UsageError(f"the harness plugins need {SPEC_OPTION} PATH (written by `harness run`)")
    try:
        spec = ChildSpec.load(Path(path))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    from harness.ops.registry import load_op
    from harness.providers import candidate_for

    op = load_op(spec.op, spec.ops_modules)
    config.stash[SESSION_KEY] = HarnessSession(
        spec=spec,
        backend=get_backend(spec.backend),
        op=op,
        candidate=candidate_for(spec.provider, op),
    )


def get_session(config: pytest.Config) -> HarnessSession:
    return config.stash[SESSION_KEY]


@pytest.fixture(scope="session")
def harness_session(request: pytest.FixtureRequest) -> HarnessSession:
    return get_session(request.config)
