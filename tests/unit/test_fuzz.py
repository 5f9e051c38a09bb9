"""Fuzzing the inputs a user or a damaged file hands the harness (issue 17): shapes files,
[tool.harness] tables, records.jsonl lines and run.json files. Whatever they hold, the harness
answers with a result or a HarnessError (a message and an exit code), never another exception
(a traceback). Bounded: a few hundred examples in all, a few seconds."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import HarnessError
from harness.options import (
    _CONTAINER_KEYS,
    _PARSERS,
    read_pyproject,
    resolve_history_db,
    resolve_run_options,
)
from harness.results.render import render_csv, render_junit, render_markdown
from harness.results.store import RecordsCorrupt, read_records, read_records_file
from tests.unit.test_bad_inputs import RECORD, _run_json

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KNOWN_OPS = ("softmax", "add", "mm")

# Any text, lone surrogates and control characters included.
TEXT = st.text(st.characters(codec=None, blacklist_categories=()), max_size=20)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), TEXT)
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)


def _ok_or_harness_error(call: Any) -> Any:
    try:
        return call()
    except HarnessError:
        return None


# -- shapes files ----------------------------------------------------------------------------

SHAPE_DATA = st.one_of(
    JSONISH,
    st.dictionaries(st.sampled_from(KNOWN_OPS) | TEXT,
                    st.one_of(st.lists(st.lists(st.integers(-3, 5) | st.booleans() | st.floats(), max_size=3),
                                       max_size=3), SCALARS), max_size=3),
)


@FUZZ
@given(data=SHAPE_DATA, raw=st.binary(max_size=60), as_yaml=st.booleans())
def test_shapes_files_never_traceback(data: Any, raw: bytes, as_yaml: bool) -> None:
    from harness.ops.shapes import load_shapes_file

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "shapes.yaml"
        if as_yaml:
            try:
                path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8", errors="surrogateescape")
            except (yaml.YAMLError, UnicodeEncodeError):
                path.write_bytes(raw)
        else:
            path.write_bytes(raw)
        shapes = _ok_or_harness_error(lambda: load_shapes_file(str(path), KNOWN_OPS))
    if shapes is not None:  # what passes is what the harness can plan with
        assert all(op in KNOWN_OPS for op in shapes)
        assert all(s and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in s)
                   for v in shapes.values() for s in v)


# -- [tool.harness] tables ---------------------------------------------------------------------

TOML_SCALARS = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True), TEXT,
                         st.datetimes(), st.dates(), st.times())
TOML_VALUES = st.recursive(TOML_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                 st.dictionaries(TEXT, inner, max_size=3)),
                           max_leaves=8)
KEYS = st.sampled_from([k.replace("_", "-") for k in _PARSERS] + list(_PARSERS) + ["history-db", "container"]) | TEXT
CONTAINER = st.dictionaries(st.sampled_from(_CONTAINER_KEYS) | TEXT, TOML_VALUES, max_size=3)
GOOD = {"backend": st.sampled_from(["cpu", "auto", "nv"]), "ops": st.lists(st.sampled_from(KNOWN_OPS), max_size=2),
        "dtypes": st.sampled_from(["bf16", "float32,fp16"]), "seed": st.integers(), "rep-ms": st.floats(0.1, 1e3),
        "level": st.sampled_from(["smoke", "core"]), "devices": st.just(["cpu"])}


@FUZZ
@given(table=st.dictionaries(KEYS, TOML_VALUES, max_size=4), container=CONTAINER,
       good=st.fixed_dictionaries({}, optional=GOOD), raw=st.binary(max_size=80))
def test_pyproject_tables_never_traceback(table: dict[str, Any], container: dict[str, Any],
                                          good: dict[str, Any], raw: bytes) -> None:
    from harness.options import resolve_container_options

    for config in (table, {**table, "container": container}, good):
        options = _ok_or_harness_error(lambda c=config: resolve_run_options({}, {}, c))  # type: ignore[misc]
        if options is not None:
            json.dumps(options.to_dict(), allow_nan=False)  # what is accepted is finite and storable
        _ok_or_harness_error(lambda c=config: resolve_history_db({}, {}, c))  # type: ignore[misc]
        _ok_or_harness_error(lambda c=config: resolve_container_options(  # type: ignore[misc]
            {}, {}, c, repo_dir=Path("/nonexistent-repo"), backends=["cpu"]))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "pyproject.toml"
        path.write_bytes(b"[tool.harness]\n" + raw)
        _ok_or_harness_error(lambda: read_pyproject(path))


# -- records.jsonl lines -----------------------------------------------------------------------

GOOD_RECORD = json.loads(RECORD)


@st.composite
def record_lines(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["mutated", "dropped", "cut", "bytes", "json"]))
    if kind == "mutated":
        data = dict(GOOD_RECORD)
        data[draw(st.sampled_from(sorted(data)) | TEXT)] = draw(JSONISH)
        return json.dumps(data).encode("utf-8", "surrogateescape")
    if kind == "dropped":
        data = {k: v for k, v in GOOD_RECORD.items() if k != draw(st.sampled_from(sorted(GOOD_RECORD)))}
        return json.dumps(data).encode()
    if kind == "cut":
        return RECORD.encode()[: draw(st.integers(0, len(RECORD) - 1))]
    if kind == "json":
        return json.dumps(draw(JSONISH)).encode()
    return draw(st.binary(max_size=60))


@FUZZ
@given(lines=st.lists(record_lines(), max_size=5), good_first=st.booleans(), newline_at_end=st.booleans())
def test_records_lines_never_traceback(lines: list[bytes], good_first: bool, newline_at_end: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "records.jsonl"
        body = b"\n".join(([RECORD.encode()] if good_first else []) + lines)
        path.write_bytes(body + (b"\n" if newline_at_end else b""))
        found = read_records_file(path)
        try:
            strict = read_records(path)
            assert not found.corrupt and strict == list(found.records)
        except RecordsCorrupt as exc:
            assert found.corrupt and f"line {found.corrupt[0].line}:" in exc.message
        records = list(found.records)
        assert len(records) + len(found.problems) <= len([x for x in body.split(b"\n") if x.strip()])
        ET.fromstring(render_junit(records))
        render_csv(records).encode("utf-8")
        render_markdown(records, {}, (), [p.describe() for p in found.problems]).encode("utf-8")


# -- run.json: harness report and resume -------------------------------------------------------

RUN_INFO = st.one_of(
    JSONISH,
    st.builds(lambda key, value: {**json.loads(_run_json()), key: value},
              st.sampled_from(["plan", "ops", "options", "backend", "devices", "level", "dismissed", "run_id",
                               "schema_version", "status", "identity"]), JSONISH),
)


@settings(max_examples=60, deadline=None)
@given(info=RUN_INFO)
def test_run_json_never_tracebacks_in_report_or_resume(info: Any) -> None:
    from harness.cli import main

    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "run"
        run.mkdir()
        text = json.dumps(info, default=str).encode("utf-8", "surrogateescape")
        (run / "run.json").write_bytes(text)
        (run / "records.jsonl").write_text(RECORD + "\n")
        for args in (["report", str(run)], ["report", str(run), "--format", "junit"]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(args, {"PATH": os.environ.get("PATH", "")})
            assert code in (0, 2) and "Traceback" not in err.getvalue()
        from harness.sources import prepare_resume

        _ok_or_harness_error(lambda: prepare_resume(run, {}))  # planned, never executed here
