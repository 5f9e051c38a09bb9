"""The IR plugin: each compiled kernel's IR, metadata and compile time, per case.

Installs :class:`harness.ir.capture.IrCapture` as Triton's compilation listener for the op's
process; the kernels compiled while a case runs are written to ``RUN/ir/<op>/<case>/`` and
summarised on the case's record (``Measurement.ir``), with the kernels its untimed candidate
call launched that an earlier case compiled (``CaseContext.watch_launches``). Not loaded on the
interpreter (nothing is compiled there) or with ``--ir off`` / ``--plugins -ir``; with a Triton
that has no compilation listener (before 3.4) it warns and the cases run without.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import Any

import pytest

from harness.child.plugins.records import RESULT_KEY
from harness.child.plugins.session import HarnessSession, get_session
from harness.contract import Case, op_file_stem
from harness.ir.capture import IrCapture

__all__ = ["IR_DIR", "harness_ir"]

IR_DIR = "ir"
CAPTURE_KEY = pytest.StashKey[IrCapture]()


@pytest.fixture(scope="session", autouse=True)
def harness_ir(request: pytest.FixtureRequest, harness_session: HarnessSession) -> Iterator[IrCapture]:
    """Listening from before the first case until the last."""
    # SASS (nvdisasm) costs about as much as the compile itself: only with --ir full.
    capture = IrCapture.started(sass=harness_session.spec.ir_sass)
    if capture is None:  # no listener in this Triton: an idle capture, nothing recorded
        yield IrCapture()
        return
    request.config.stash[CAPTURE_KEY] = capture
    yield capture
    capture.uninstall()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    capture = item.config.stash.get(CAPTURE_KEY, None)
    if capture is not None:
        capture.begin_case()
    yield
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("harness_case") if callspec is not None else None
    if capture is None or not isinstance(case, Case):
        return
    spec = get_session(item.config).spec
    rel = f"{IR_DIR}/{op_file_stem(spec.op)}/{op_file_stem(case.case_id)}"
    summary = capture.end_case(spec.files.root / rel, rel)
    record = item.stash.get(RESULT_KEY, None)
    if summary is not None and record is not None:
        item.stash[RESULT_KEY] = replace(record, ir=summary)
