"""`harness report`: render a run's records again (Markdown, CSV, JUnit or HTML) to stdout, or one
page joining runs of several backends (``--across``).

Read-only: it reads run.json, records.jsonl and the completion markers, never the logs, and
writes nothing into the run directories. ``write_html_report`` is also what every run calls to
write its report.html.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from harness.contract import RunFiles
from harness.errors import UsageError
from harness.results.render import Unreached
from harness.results.runinfo import read_run_info
from harness.results.schema import Measurement
from harness.results.store import RecordsFile, read_records_file
from harness.run.outputs import (
    OUTPUT_FILES,
    html_report,
    render_outputs,
    stored_ops,
    stored_outcomes,
    unreached_cases,
)

__all__ = ["FORMATS", "RunView", "load_run", "render_across", "render_report"]

FORMATS = ("md", "csv", "junit", "html")


@dataclass(frozen=True)
class RunView:
    """A run directory as the reports see it."""

    info: dict[str, Any]
    records: list[Measurement]
    unreached: list[Unreached]


def _ops(info: Mapping[str, Any], files: RunFiles) -> Any:
    try:
        return stored_ops(info)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{files.run_info}: the run's plan cannot be read ({exc}); the file is damaged.") from None


def _require_records(run_dir: Path, files: RunFiles) -> None:
    """Refuse a folder without records.jsonl: every report is rendered from the records, and
    without them each planned case would read as not run."""
    if not files.records.is_file():
        raise UsageError(f"{run_dir} has no {files.records.name}: the reports are rendered from a run's records, "
                         "and this folder keeps none (a committed results folder holds summary.csv only).")


def load_run(run_dir: Path) -> RunView:
    """A run for a page joining runs: a records.jsonl with corrupt lines is refused (the page would
    not show them), naming each one."""
    files = RunFiles(run_dir)
    info = read_run_info(files.run_info)  # a missing or damaged run.json is named before the records
    _require_records(run_dir, files)
    found: RecordsFile = read_records_file(files.records)
    found.check()
    records = list(found.records)
    outcomes = {o.op: o for o in stored_outcomes(info, run_dir)}
    return RunView(info, records, unreached_cases(_ops(info, files), records, outcomes))


def render_report(run_dir: Path, fmt: str = "md", warnings: TextIO | None = None) -> str:
    """The run's summary.csv, junit.xml, report.md or report.html as the run wrote them, rendered
    again from run.json and records.jsonl. Lines of records.jsonl that are not records are listed
    in the Markdown and, one line each, on ``warnings`` (stderr)."""
    if fmt not in FORMATS:
        raise UsageError(f"Unknown report format {fmt!r}. Formats: {', '.join(FORMATS)}.")
    files = RunFiles(run_dir)
    info = read_run_info(files.run_info)  # a missing or damaged run.json is named before the records
    ops = _ops(info, files)
    outcomes = stored_outcomes(info, run_dir)
    _require_records(run_dir, files)
    found = read_records_file(files.records)
    for problem in found.problems:
        print(f"harness: warning: {files.records} {problem.describe()}", file=warnings or sys.stderr)
    if fmt == "html":
        records = list(found.records)
        return html_report(info, records, unreached_cases(ops, records, {o.op: o for o in outcomes}))
    return render_outputs(ops, info, found, outcomes)[OUTPUT_FILES[fmt]]


def render_across(run_dirs: Sequence[Path]) -> str:
    """One page joining runs of different backends or devices, case by case."""
    if len(run_dirs) < 2:
        raise UsageError("--across needs at least two run directories (of different backends or devices).")
    from harness.results.html import render_across_html

    views = [load_run(d) for d in run_dirs]
    return render_across_html([(v.info, v.records) for v in views])
