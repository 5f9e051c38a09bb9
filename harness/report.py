"""`harness report RUN_DIR`: render a run's records again (Markdown, CSV or JUnit) to stdout.

Read-only: it reads run.json, records.jsonl and the completion markers, never the
logs, and writes nothing into the run directory.
"""

from __future__ import annotations

from pathlib import Path

from harness.batch import read_markers
from harness.errors import UsageError
from harness.results.render import render_csv, render_junit, render_markdown
from harness.results.store import read_json, read_records
from harness.run import prepare_resume, unreached_cases

__all__ = ["FORMATS", "render_report"]

FORMATS = ("md", "csv", "junit")


def render_report(run_dir: Path, fmt: str = "md") -> str:
    if fmt not in FORMATS:
        raise UsageError(f"Unknown report format {fmt!r}. Formats: {', '.join(FORMATS)}.")
    if not (run_dir / "run.json").is_file():
        raise UsageError(f"{run_dir}: no run.json there. Give the directory of a run (reports/<run-id>).")
    info = read_json(run_dir / "run.json")
    records = read_records(run_dir / "records.jsonl")
    if fmt == "csv":
        return render_csv(records)
    plan = prepare_resume(run_dir, {}).plan
    unreached = unreached_cases(plan, records, read_markers(run_dir))
    if fmt == "junit":
        return render_junit(records, unreached)
    return render_markdown(records, info, unreached)
