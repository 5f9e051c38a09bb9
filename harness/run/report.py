"""`harness report RUN_DIR`: render a run's records again (Markdown, CSV or JUnit) to stdout.

Read-only: it reads run.json, records.jsonl and the completion markers, never the
logs, and writes nothing into the run directory.
"""

from __future__ import annotations

from pathlib import Path

from harness.contract import RunFiles
from harness.errors import UsageError
from harness.results.render import render_csv, render_junit, render_markdown
from harness.results.runinfo import read_run_info
from harness.results.store import read_records
from harness.run.execute import stored_ops, unreached_cases
from harness.run.rundir import read_markers

__all__ = ["FORMATS", "render_report"]

FORMATS = ("md", "csv", "junit")


def render_report(run_dir: Path, fmt: str = "md") -> str:
    if fmt not in FORMATS:
        raise UsageError(f"Unknown report format {fmt!r}. Formats: {', '.join(FORMATS)}.")
    files = RunFiles(run_dir)
    info = read_run_info(files.run_info)
    records = read_records(files.records)
    if fmt == "csv":
        return render_csv(records)
    unreached = unreached_cases(stored_ops(info), records, read_markers(run_dir))
    if fmt == "junit":
        return render_junit(records, unreached)
    return render_markdown(records, info, unreached)
