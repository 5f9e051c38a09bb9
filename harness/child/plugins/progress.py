"""Progress inside an op: at each case's start, the op process says which case it is on and how
many of its cases are done (harness.contract.CaseProgress), for the parent's display."""

from __future__ import annotations

import os

import pytest

from harness.child.plugins.session import get_session
from harness.contract import Case, CaseProgress

_DONE = pytest.StashKey[int]()


def _case(item: pytest.Item) -> Case | None:
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("harness_case") if callspec is not None else None
    return case if isinstance(case, Case) else None


def pytest_runtest_protocol(item: pytest.Item) -> None:
    case = _case(item)
    if case is None:
        return
    config = item.config
    done = config.stash.get(_DONE, 0)
    spec = get_session(config).spec
    total = len(item.session.items)
    try:
        CaseProgress(op=spec.op, case_id=case.case_id, done=done, total=total, pid=os.getpid()).dump(
            spec.files.progress(spec.op))
    except OSError:
        pass  # progress is a courtesy: never a reason for a case to fail
    config.stash[_DONE] = done + 1
