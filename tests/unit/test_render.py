from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from harness.results.render import (
    SUMMARY_COLUMNS,
    Unreached,
    render_csv,
    render_junit,
    render_markdown,
)
from tests.unit.test_schema import make_record

XSD = Path(__file__).resolve().parents[1] / "data" / "junit-10.xsd"


def records():
    fail = make_record(status="fail", speedup=None, gbps=None, baseline=None, candidate=None,
                       fallback=None, message="2 of 256 elements outside atol")
    err = make_record(op="add", status="error", speedup=None, gbps=None, message="RuntimeError: boom")
    skip = make_record(op="mm", status="skip", speedup=None, gbps=None, message="no fp32")
    return [make_record(), fail, err, skip]


def test_csv_has_one_row_per_case_and_the_documented_columns() -> None:
    text = render_csv(records())
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0].keys()) == SUMMARY_COLUMNS
    assert len(rows) == 4
    assert rows[0]["speedup"] == "2" and rows[0]["timer"] == "direct"
    assert rows[1]["status"] == "fail" and rows[1]["speedup"] == ""


def test_junit_validates_and_marks_failures() -> None:
    xmlschema = pytest.importorskip("xmlschema")
    text = render_junit(records(), [Unreached(op="gelu", case_id="gelu[builtin-float16-4x64]", status="error", message="op CRASH: killed by SIGSEGV")])
    xmlschema.XMLSchema(str(XSD)).validate(text)
    assert 'failures="1"' in text
    assert 'errors="2"' in text  # the error record and the unreached case
    assert "SIGSEGV" in text
    assert "softmax[builtin-bfloat16-4x64].speedup" in text


def test_markdown_lists_every_case() -> None:
    md = render_markdown(records(), {"run_id": "r1", "backend": "cuda", "identity": {}})
    assert md.count("\n| softmax") == 2
    assert "FAIL" in md and "ERROR" in md and "SKIP" in md
