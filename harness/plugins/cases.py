"""Shape selection: one pytest item per (op, provider, dtype, shape) of the child spec."""

from __future__ import annotations

import pytest

from harness.measure import Case
from harness.plugins.session import get_session


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "harness_case" not in metafunc.fixturenames:
        return
    spec = get_session(metafunc.config).spec
    cases = [
        Case(op=spec.op, provider=spec.provider, dtype=dtype, shape=tuple(shape))
        for shape in spec.shapes
        for dtype in spec.dtypes
    ]
    cases = [c for c in cases if c.case_id not in spec.skip_cases]
    metafunc.parametrize("harness_case", cases, ids=[c.case_id for c in cases])
