"""Manual checks: write the HTML pages of run directories already on disk.

Not wired into the CLI (``harness run`` / ``harness report`` will call the renderers
themselves); for a look at a page during development::

    python -c "from pathlib import Path; from harness.results.html.preview import write_run_page; \\
               print(write_run_page(Path('reports/RUN'), Path('/tmp/report.html')))"

Only this module reads run directories; the renderers stay pure.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.backends.base import Peaks
from harness.errors import UsageError
from harness.results.html.across import render_across_html
from harness.results.html.run import render_run_html
from harness.results.render import Unreached
from harness.results.schema import Measurement
from harness.results.store import atomic_write_text, read_json, read_records

__all__ = ["load_run_dir", "write_across_page", "write_run_page"]


def backend_peaks(backend: str) -> Peaks | None:
    from harness.backends import get_backend

    try:
        return get_backend(backend).peaks
    except UsageError:
        return None


def load_run_dir(run_dir: Path) -> tuple[dict[str, Any], list[Measurement], list[Unreached]]:
    """run.json, the records, and the planned cases without a record (as harness report finds them)."""
    from harness.batch import read_markers

    # Imported by name: mypy, given this package alone, mistakes harness/ops/shapes/ (the YAML
    # folder) for the harness.ops.shapes module that harness.run imports.
    run_module = importlib.import_module("harness.run")
    info: dict[str, Any] = read_json(run_dir / "run.json")
    records = read_records(run_dir / "records.jsonl") if (run_dir / "records.jsonl").is_file() else []
    try:
        plan = run_module.prepare_resume(run_dir, {}).plan
        unreached: list[Unreached] = run_module.unreached_cases(plan, records, read_markers(run_dir))
    except (UsageError, KeyError, TypeError):  # a run.json whose plan this harness cannot rebuild
        unreached = []
    return info, records, unreached


def write_run_page(run_dir: Path, out: Path | None = None) -> Path:
    """report.html of a run directory, written to ``out`` (default: inside the run)."""
    info, records, unreached = load_run_dir(run_dir)
    path = out or run_dir / "report.html"
    atomic_write_text(path, render_run_html(info, records, unreached, backend_peaks(str(info.get("backend")))))
    return path


def write_across_page(run_dirs: Sequence[Path], out: Path,
                      peaks: Mapping[str, Peaks | None] | None = None) -> Path:
    """The cross-vendor page of several run directories."""
    runs = [load_run_dir(d)[:2] for d in run_dirs]
    atomic_write_text(out, render_across_html(runs, peaks))
    return out
