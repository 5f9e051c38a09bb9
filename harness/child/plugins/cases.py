"""Shape selection: one pytest item per (op, provider, dtype, shape) of the child spec."""

from __future__ import annotations

import pytest

from harness.child.plugins.session import get_session
from harness.contract import Case


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "harness_case" not in metafunc.fixturenames:
        return
    cases: list[Case] = get_session(metafunc.config).spec.cases()
    metafunc.parametrize("harness_case", cases, ids=[c.case_id for c in cases])
