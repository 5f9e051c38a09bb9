"""Records: one Measurement per case, appended to records.jsonl the moment the case completes."""

from __future__ import annotations

import datetime as _dt
import os
import sys
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.child.plugins.session import get_session
from harness.contract import POISONED_EXIT, UNRECORDED_EXIT, Case
from harness.errors import ContextPoisoned
from harness.results.schema import Measurement
from harness.results.store import append_record

RESULT_KEY = pytest.StashKey[Measurement]()
# The case's autotune marker (harness.autotune.ROW_MARKERS), for the rows written here (skip, error).
AUTOTUNE_KEY = pytest.StashKey[str]()


def write_record(path: Path, record: Measurement) -> None:
    """Append ``record``, or end this op's process under ``UNRECORDED_EXIT`` when the system took
    it only in part (a full disk, a file size limit, a quota): the parent marks the op ERROR, and no
    case is measured whose record would be lost. The cause goes to the op's log first."""
    try:
        append_record(path, record)
    except OSError as exc:
        print(f"harness: error: {exc.filename or path}: the record of {record.case_id} could not be written "
              f"whole ({exc.strerror or exc}); this op's process stops", file=sys.stderr, flush=True)
        os._exit(UNRECORDED_EXIT)


def _error_record(item: pytest.Item, case: Case, status: str, message: str) -> Measurement:
    session = get_session(item.config)
    return Measurement(
        run_id=session.spec.run_id,
        op=case.op,
        provider=case.provider,
        dtype=case.dtype,
        shape=tuple(case.shape),
        backend=session.spec.backend,
        device=session.spec.device,
        device_name=str(session.identity.get("device_name", "")),
        timer=session.spec.timer,
        cache=session.spec.cache,
        status=status,
        message=message,
        autotune=item.stash.get(AUTOTUNE_KEY, "live"),
        started_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("harness_case") if callspec is not None else None
    if not isinstance(case, Case):
        return
    record = item.stash.get(RESULT_KEY, None)
    if report.when == "call":
        if record is None:
            if report.skipped:
                reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
                record = _error_record(item, case, "skip", str(reason).removeprefix("Skipped: "))
            else:
                text = call.excinfo.exconly() if call.excinfo else str(report.longrepr)
                record = _error_record(item, case, "error", text[-2000:])
    elif report.when == "setup" and not report.passed:
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
            record = _error_record(item, case, "skip", str(reason).removeprefix("Skipped: "))
        else:
            text = call.excinfo.exconly() if call.excinfo else str(report.longrepr)
            record = _error_record(item, case, "error", f"setup: {text[-2000:]}")
    else:
        return
    if call.excinfo is not None and call.excinfo.errisinstance(ContextPoisoned):
        record = _error_record(item, case, "error", f"poisoned: {call.excinfo.value}")
        record = replace(record, notes=("poisoned",))
        write_record(get_session(item.config).spec.records_path, record)
        # The device context is dead: stop this op's process now, under its own exit code,
        # so the parent marks the op and moves on to the next one.
        os._exit(POISONED_EXIT)
    write_record(get_session(item.config).spec.records_path, record)
