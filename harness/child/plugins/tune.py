"""A sweep process's report: how each case of its share went, and its compile time.

Loaded instead of the timing and records plugins in a sweep process (harness/run/sweep.py):
writes ``spec.sweep.result`` when pytest finishes, so the parent can say why a sweep process
failed without reading its log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.child.plugins.session import SESSION_KEY
from harness.contract import Case, SweepResult
from harness.ir.capture import IrCapture
from harness.results.store import write_json

__all__ = ["OUTCOMES_KEY"]

OUTCOMES_KEY = pytest.StashKey[dict[str, str]]()
CAPTURE_KEY = pytest.StashKey[IrCapture]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[OUTCOMES_KEY] = {}
    try:
        capture = IrCapture(keep_files=False)
        capture.install()  # compile times only
        config.stash[CAPTURE_KEY] = capture
    except ImportError:
        pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("harness_case") if callspec is not None else None
    if not isinstance(case, Case) or (report.when != "call" and report.passed):
        return
    outcomes = item.config.stash[OUTCOMES_KEY]
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
        outcomes[case.case_id] = f"skip: {str(reason).removeprefix('Skipped: ')}"
    elif report.failed:
        text = call.excinfo.exconly() if call.excinfo else str(report.longrepr)
        outcomes[case.case_id] = f"error: {text.strip().splitlines()[-1][:500] if text.strip() else 'failed'}"
    elif case.case_id not in outcomes:
        outcomes[case.case_id] = "ok"


def pytest_sessionfinish(session: pytest.Session) -> None:
    harness = session.config.stash.get(SESSION_KEY, None)
    if harness is None or harness.spec.sweep is None:
        return
    capture = session.config.stash.get(CAPTURE_KEY, None)
    compile_ms = None
    if capture is not None:
        summary = capture.end_case(None)
        capture.uninstall()
        compile_ms = summary["compile_ms"] if summary else None
    outcomes: dict[str, str] = session.config.stash[OUTCOMES_KEY]
    write_json(Path(harness.spec.sweep.result), SweepResult(cases=outcomes, compile_ms=compile_ms).to_json())
