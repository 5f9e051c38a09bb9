"""A run's rendered outputs and what they are rendered from: the op plans and op rows run.json
keeps, the planned cases without a record, and every output file (summary.csv, junit.xml,
report.md, ops_status.csv, report.html). `harness run` (finalize), `harness report` and
`harness merge` all render through here, so a run's outputs are one function of its records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.backends.base import Peaks
from harness.errors import UsageError
from harness.results.render import Unreached, render_csv, render_junit, render_markdown
from harness.results.runinfo import RunInfo
from harness.results.schema import Measurement, shape_str
from harness.results.store import RecordsFile, atomic_write_text
from harness.run.decide import (
    INTERRUPTED,
    PENDING,
    OpOutcome,
    StatusFacts,
    record_counts,
    render_status,
    with_causes,
)
from harness.run.plan import OpPlan
from harness.run.rundir import read_markers

__all__ = ["OUTPUT_FILES", "backend_peaks", "html_report", "render_outputs", "stored_ops", "stored_outcomes",
           "unreached_cases", "write_html_report"]


def _stored_dtypes(o: Mapping[str, Any]) -> tuple[str, ...] | None:
    value = o.get("supported_dtypes")
    return None if value is None else tuple(str(d) for d in value)


def _stored_open(o: Mapping[str, Any]) -> int | None:
    value = o.get("open_cases")
    return None if value is None else int(value)


def stored_ops(info: Mapping[str, Any] | RunInfo) -> tuple[OpPlan, ...]:
    """The op plans a run.json holds (KeyError, TypeError or ValueError when it is damaged)."""
    plan = info.plan if isinstance(info, RunInfo) else info["plan"]
    return tuple(
        OpPlan(op=str(o["op"]), device=str(o["device"]), dtypes=tuple(str(d) for d in o["dtypes"]),
               shapes=tuple(tuple(int(x) for x in s) for s in o["shapes"]), provider=str(o["provider"]),
               autotuned=o.get("autotuned"), supported_dtypes=_stored_dtypes(o), open_cases=_stored_open(o))
        for o in plan
    )


def stored_outcomes(info: Mapping[str, Any], run_dir: Path) -> list[OpOutcome]:
    """The op rows run.json keeps (what its outputs were rendered from); a run.json without them
    (the harness died before its end) gives the completion markers'."""
    rows = info.get("ops")
    if isinstance(rows, list):
        try:
            return [OpOutcome.from_json(row) for row in rows]
        except ValueError as exc:
            raise UsageError(f"{run_dir}/run.json: {exc}; the file is damaged.") from None
    return list(read_markers(run_dir).values())


def _unreached_message(outcome: OpOutcome | None, first: bool) -> tuple[str, str]:
    """(JUnit status, message) for a planned case that has no record (and its op supports its dtype)."""
    if outcome is None or outcome.status in (PENDING, INTERRUPTED):
        return "error", "not run: the run was interrupted first; finish it with `harness run --resume RUN_DIR`"
    if outcome.status == "PASS":  # an op passes only with every case recorded: this record was lost since
        return "error", ("no record: the op passed, so this case's record was written, and records.jsonl no "
                         "longer holds it (damaged or edited since; its lines that are not records are listed)")
    why = "; ".join(outcome.notes)
    tries = f" after {outcome.attempts} attempts" if outcome.attempts > 1 else ""
    if outcome.status == "SKIP":
        return "skip", "op skipped" + (f": {why}" if why else "")
    if outcome.status in ("CRASH", "TIMEOUT"):
        where = "during this case" if first else "before reaching this case"
        return "error", f"op {outcome.status} {where}{tries}" + (f": {why}" if why else "")
    return "error", f"not run: op {outcome.status}{tries}" + (f": {why}" if why else "")


def unreached_cases(ops: Sequence[OpPlan], records: list[Any], outcomes: Mapping[str, OpOutcome]) -> list[Unreached]:
    """Every planned case without a record, with why: cases are never silently missing."""
    seen = {r.case_id for r in records}
    ops_recorded = {r.op for r in records}
    missing: list[Unreached] = []
    for op_plan in ops:
        outcome = outcomes.get(op_plan.op)
        if op_plan.is_open:  # its cases are known only from its records: unreached when it has none
            if op_plan.op not in ops_recorded:
                status, message = _unreached_message(outcome, first=True)
                missing.append(Unreached(op=op_plan.op, case_id=op_plan.op, status=status, message=message))
            continue
        cases = [c for c in op_plan.cases() if c.case_id not in seen]
        if not op_plan.cases() and op_plan.op not in seen:  # a dismissed op may have no shapes
            status, message = _unreached_message(outcome, first=True)
            missing.append(Unreached(op=op_plan.op, case_id=op_plan.op, status=status, message=message))
        supported = op_plan.supported_dtypes
        reached = 0
        for case in cases:
            where = dict(provider=case.provider, dtype=case.dtype, shape=shape_str(case.shape))
            if supported is not None and case.dtype not in supported and not (outcome and outcome.status == "SKIP"):
                # the op would have skipped it: not run is no error (the op's own wording)
                message = f"op {op_plan.op!r} does not support dtype {case.dtype} (supports {', '.join(supported)})"
                missing.append(Unreached(op=op_plan.op, case_id=case.case_id, status="skip", message=message, **where))
                continue
            status, message = _unreached_message(outcome, first=reached == 0)
            reached += 1
            missing.append(Unreached(op=op_plan.op, case_id=case.case_id, status=status, message=message, **where))
    return missing


OUTPUT_FILES = {"csv": "summary.csv", "junit": "junit.xml", "md": "report.md", "status": "ops_status.csv"}


def _status_facts(info: Mapping[str, Any]) -> StatusFacts:
    """The run facts every ops_status.csv row repeats, from run.json."""
    options = info.get("options")
    options = options if isinstance(options, Mapping) else {}
    return StatusFacts.of_run(str(info.get("backend") or ""), str(info.get("timer") or ""),
                              str(options["out"]) if options.get("out") else None,
                              str(options.get("reports_dir") or "reports"), str(info.get("run_id") or ""))


def render_outputs(ops: Sequence[OpPlan], info: Mapping[str, Any], found: RecordsFile,
                   outcomes: Sequence[OpOutcome]) -> dict[str, str]:
    """Every rendered output of a run (file name -> text), from its plan, run.json facts, records
    and op rows: what finalize writes and `harness report` prints, from one function."""
    records = list(found.records)
    outcomes = with_causes(outcomes, records)  # a run.json of an older harness has none
    unreached = unreached_cases(ops, records, {o.op: o for o in outcomes})
    notes = {o.op: f"{o.status} {'; '.join(o.notes)}".strip() for o in outcomes}
    return {
        OUTPUT_FILES["csv"]: render_csv(records),
        OUTPUT_FILES["junit"]: render_junit(records, unreached, op_notes=notes),
        OUTPUT_FILES["md"]: render_markdown(records, info, unreached, [p.describe() for p in found.problems]),
        OUTPUT_FILES["status"]: render_status(outcomes, _status_facts(info), record_counts(records)),
    }


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
    except OSError:
        raise  # the system refused the write (a full disk, a quota): the command fails, as for any output
    except Exception as exc:  # noqa: BLE001 - see the docstring
        return f"report.html not written: {type(exc).__name__}: {exc}"
    return None
