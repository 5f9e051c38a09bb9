"""`harness report`: render a run's records again (Markdown, CSV, JUnit or HTML) to stdout, or one
page joining runs of several backends (``--across``).

Read-only: it reads run.json, records.jsonl and the completion markers, never the logs, and
writes nothing into the run directories. ``write_html_report`` is also what every run calls to
write its report.html.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.base import Peaks
from harness.contract import RunFiles
from harness.errors import UsageError
from harness.results.render import Unreached, render_csv, render_junit, render_markdown
from harness.results.runinfo import read_run_info
from harness.results.schema import Measurement
from harness.results.store import atomic_write_text, read_records
from harness.run.execute import stored_ops, unreached_cases
from harness.run.rundir import read_markers

__all__ = ["FORMATS", "RunView", "load_run", "render_across", "render_report", "write_html_report"]

FORMATS = ("md", "csv", "junit", "html")


@dataclass(frozen=True)
class RunView:
    """A run directory as the reports see it."""

    info: dict[str, Any]
    records: list[Measurement]
    unreached: list[Unreached]


def load_run(run_dir: Path) -> RunView:
    files = RunFiles(run_dir)
    info = read_run_info(files.run_info)
    records = read_records(files.records)
    return RunView(info, records, unreached_cases(stored_ops(info), records, read_markers(run_dir)))


def backend_peaks(backend: str) -> Peaks | None:
    from harness.backends import get_backend

    try:
        return get_backend(backend).peaks
    except UsageError:
        return None


def html_report(info: Mapping[str, Any], records: Sequence[Measurement], unreached: Sequence[Unreached]) -> str:
    from harness.results.html import render_run_html  # altair: imported only when a page is made

    return render_run_html(info, records, unreached, backend_peaks(str(info.get("backend"))))


def write_html_report(run_dir: Path, info: Mapping[str, Any], records: Sequence[Measurement],
                      unreached: Sequence[Unreached]) -> str | None:
    """report.html of a run; None when written, else why not (a page that fails to render must not
    cost the run its other outputs: the reason is said, and `harness report RUN --format html`
    can make it again)."""
    try:
        atomic_write_text(run_dir / "report.html", html_report(info, records, unreached))
    except ImportError as exc:
        return f"report.html not written: {exc.name or exc} is not installed (pip install -e . installs it)"
    except Exception as exc:  # noqa: BLE001 - see the docstring
        return f"report.html not written: {type(exc).__name__}: {exc}"
    return None


def render_report(run_dir: Path, fmt: str = "md") -> str:
    if fmt not in FORMATS:
        raise UsageError(f"Unknown report format {fmt!r}. Formats: {', '.join(FORMATS)}.")
    view = load_run(run_dir)
    if fmt == "csv":
        return render_csv(view.records)
    if fmt == "junit":
        return render_junit(view.records, view.unreached)
    if fmt == "html":
        return html_report(view.info, view.records, view.unreached)
    return render_markdown(view.records, view.info, view.unreached)


def render_across(run_dirs: Sequence[Path]) -> str:
    """One page joining runs of different backends or devices, case by case."""
    if len(run_dirs) < 2:
        raise UsageError("--across needs at least two run directories (of different backends or devices).")
    from harness.results.html import render_across_html

    views = [load_run(d) for d in run_dirs]
    return render_across_html([(v.info, v.records) for v in views])
