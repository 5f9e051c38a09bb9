"""Render records into summary.csv, junit.xml and report.md (pure: records in, text out)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from junit_xml import TestCase, TestSuite

from harness.results.causes import op_cause
from harness.results.schema import Measurement, shape_str
from harness.results.store import csv_text
from harness.results.text import xml_text

__all__ = ["DISPATCH_BOUND_RATIO", "SUMMARY_COLUMNS", "Unreached", "dispatch_bound", "commit_label", "render_csv", "render_junit", "render_markdown", "serialise_junit"]

SUMMARY_COLUMNS = (
    "case_id",
    "op",
    "provider",
    "dtype",
    "shape",
    "backend",
    "device",
    "device_name",
    "timer",
    "cache",
    "status",
    "baseline_median_ms",
    "candidate_median_ms",
    "speedup",
    "gbps",
    "tflops",
    "max_abs_err",
    "max_rel_err",
    "fallback",
    "notes",
    "baseline_wall_ms",
    "candidate_wall_ms",
    "message",  # why a case failed, errored or was skipped (one line); last, so readers by position read on
)

# A row whose wall time (a call as a user makes it) is this many times its device time is
# dispatch-bound: the host, not the kernel, sets the user's speed.
DISPATCH_BOUND_RATIO = 1.5


def dispatch_bound(r: Measurement) -> float | None:
    """The candidate's wall/device ratio when it is at least DISPATCH_BOUND_RATIO, else None."""
    if r.candidate_wall is None or r.candidate is None or r.candidate.summary.median <= 0:
        return None
    ratio = r.candidate_wall.summary.median / r.candidate.summary.median
    return ratio if ratio >= DISPATCH_BOUND_RATIO else None


@dataclass(frozen=True)
class Unreached:
    """A planned case with no record: its op crashed, hung, or the run stopped first."""

    op: str
    case_id: str
    status: str  # "error" or "skip"
    message: str
    provider: str = ""
    dtype: str = ""
    shape: str = ""  # as in the reports: 1024x1024


def one_line(text: str) -> str:
    """A message on one line (CSV cells, table cells): its lines joined with ' / '."""
    return " / ".join(part.strip() for part in text.splitlines() if part.strip())



def commit_label(run_info: Mapping[str, Any], width: int | None = None) -> str:
    """The run's commit for a report line: ``no git``, the (shortened) hash, with ``+dirty`` when
    the tracked files differed from it (run.json ``git_dirty``)."""
    commit = run_info.get("git_commit")
    if not commit:
        return "no git"
    text = str(commit)[:width] if width else str(commit)
    return text + ("+dirty" if run_info.get("git_dirty") else "")

def _fmt(value: float | None, digits: int = 6) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def _row(r: Measurement) -> dict[str, str]:
    c = r.correctness
    fb = r.fallback
    return {
        "case_id": r.case_id,
        "op": r.op,
        "provider": r.provider,
        "dtype": r.dtype,
        "shape": shape_str(r.shape),
        "backend": r.backend,
        "device": r.device,
        "device_name": r.device_name,
        "timer": r.timer,
        "cache": r.cache,
        "status": r.status,
        "baseline_median_ms": _fmt(r.baseline.summary.median if r.baseline else None),
        "candidate_median_ms": _fmt(r.candidate.summary.median if r.candidate else None),
        "speedup": _fmt(r.speedup, 4),
        "gbps": _fmt(r.gbps, 5),
        "tflops": _fmt(r.tflops, 5),
        "max_abs_err": _fmt(c.max_abs if c else None, 3),
        "max_rel_err": _fmt(c.max_rel if c else None, 3),
        "fallback": f"{fb.phase}:{fb.reason}" if fb else "",
        "notes": "; ".join(r.notes),
        "baseline_wall_ms": _fmt(r.baseline_wall.summary.median if r.baseline_wall else None),
        "candidate_wall_ms": _fmt(r.candidate_wall.summary.median if r.candidate_wall else None),
        "message": one_line(r.message),
    }


def render_csv(records: Sequence[Measurement]) -> str:
    return csv_text(SUMMARY_COLUMNS, (_row(r) for r in records))


def _properties(r: Measurement) -> dict[str, str]:
    props: dict[str, str] = {"timer": r.timer, "backend": r.backend, "device": r.device}
    for key, value in (
        ("baseline_median_ms", r.baseline.summary.median if r.baseline else None),
        ("candidate_median_ms", r.candidate.summary.median if r.candidate else None),
        ("speedup", r.speedup),
        ("gbps", r.gbps),
        ("tflops", r.tflops),
    ):
        if value is not None:
            props[key] = _fmt(value)
    if r.fallback:
        props["fallback"] = f"{r.fallback.phase}:{r.fallback.reason}"
    return props


def _unreached_case(item: Unreached, classname: str) -> TestCase:
    """A planned case without a record: skipped, or an error of type not-run."""
    tc = TestCase(name=item.case_id, classname=classname, elapsed_sec=0.0)
    if item.status == "skip":
        tc.add_skipped_info(message=item.message)
    else:
        tc.add_error_info(message=item.message, error_type="not-run")
    return tc


def _record_case(r: Measurement, classname: str, numbers: Mapping[str, str]) -> TestCase:
    """One record's testcase: its numbers in system-out, its status as JUnit's."""
    tc = TestCase(name=r.case_id, classname=classname, elapsed_sec=max(r.duration_s, 0.0),
                  stdout="\n".join(f"{k}={v}" for k, v in numbers.items()))
    if r.status == "fail":
        tc.add_failure_info(message=r.message or "correctness check failed", failure_type="mismatch")
    elif r.status == "error":
        tc.add_error_info(message=r.message or "error", error_type="error")
    elif r.status == "skip":
        tc.add_skipped_info(message=r.message or "skipped")
    return tc


def render_junit(
    records: Sequence[Measurement],
    unreached: Sequence[Unreached] = (),
    suite_name: str = "harness",
    op_notes: Mapping[str, str] | None = None,
) -> str:
    """One testsuite per op, one testcase per case; numbers as properties.

    The Jenkins JUnit schema allows <properties> only on a testsuite, so each
    case's numbers are testsuite properties named "<case id>.<metric>", and the
    same numbers are repeated in the testcase's system-out.
    """
    by_op: dict[str, list[Any]] = {}
    for record in records:
        by_op.setdefault(record.op, []).append(record)
    for u in unreached:
        by_op.setdefault(u.op, []).append(u)
    suites: list[TestSuite] = []
    for op, items in by_op.items():
        cases: list[TestCase] = []
        props: dict[str, str] = {}
        if op_notes and op in op_notes:
            props["op_status"] = op_notes[op]
        for item in items:
            if isinstance(item, Unreached):
                cases.append(_unreached_case(item, f"{suite_name}.{op}"))
                continue
            numbers = _properties(item)
            props.update({f"{item.case_id}.{k}": v for k, v in numbers.items()})
            cases.append(_record_case(item, f"{suite_name}.{op}", numbers))
        suites.append(TestSuite(name=f"{suite_name}.{op}", test_cases=cases, properties=props or None))
    if not suites:
        suites.append(TestSuite(name=suite_name, test_cases=[]))
    return serialise_junit(suites)


def serialise_junit(suites: Sequence[TestSuite]) -> str:
    """junit-xml builds the elements; attributes the Jenkins schema rejects are dropped and
    times are written as plain decimals (the schema's SUREFIRE_TIME has no exponent)."""
    root = ET.Element("testsuites")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    total_time = 0.0
    for suite in suites:
        element = suite.build_xml_doc()
        _xml_clean(element)
        element.attrib.pop("disabled", None)
        for case in element.iter("testcase"):
            case.attrib.pop("status", None)
            case.attrib.pop("file", None)
            case.attrib.pop("line", None)
            case.attrib.pop("log", None)
            case.attrib.pop("url", None)
            case.attrib.pop("timestamp", None)
            if "time" in case.attrib:
                case.set("time", f"{float(case.get('time') or 0):.6f}")
        suite_time = sum(float(c.get("time") or 0) for c in element.iter("testcase"))
        element.set("time", f"{suite_time:.6f}")
        for key in totals:
            totals[key] += int(element.get(key, "0"))
        total_time += suite_time
        root.append(element)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{total_time:.6f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _pipeline_only(run_info: Mapping[str, Any]) -> list[str]:
    """A warning line for a backend whose timings are not for comparison (cpu)."""
    from harness.backends import get_backend
    from harness.errors import UsageError

    try:
        backend = get_backend(str(run_info.get("backend", "")))
    except UsageError:
        return []
    if backend.timings_comparable:
        return []
    return [f"- **These timings are not for comparison.** The {backend.name} backend shows that the pipeline "
            "runs (correctness, records, reports); its numbers time the Triton interpreter and torch on "
            "this host's cores, not kernels on an accelerator. `harness compare` and `gate` refuse them "
            "unless --allow-cpu."]


def _xml_clean(element: ET.Element) -> None:
    """Every attribute value and text of ``element``'s tree as XML 1.0 can hold it (an op's
    message may carry ANSI colour codes, NUL bytes or lone surrogates): escaped, never dropped."""
    for node in element.iter():
        for key, value in node.attrib.items():
            node.set(key, xml_text(value))
        if node.text:
            node.text = xml_text(node.text)
        if node.tail:
            node.tail = xml_text(node.tail)


def _cell(text: str) -> str:
    """A Markdown table cell: one line, no column separator, no control characters."""
    return xml_text(one_line(text)).replace("|", "/")


def _causes_section(records: Sequence[Measurement], run_info: Mapping[str, Any]) -> list[str]:
    """report.md's "Causes": one line per op that did not pass, with its cause and evidence (its
    row's, else derived from its status, notes and records: harness/results/causes.py)."""
    by_op: dict[str, list[Measurement]] = {}
    for r in records:
        by_op.setdefault(r.op, []).append(r)
    found: list[str] = []
    rows = run_info.get("ops")
    for row in rows if isinstance(rows, list) else []:  # a damaged run.json's ops are left out, not raised on
        if not isinstance(row, Mapping) or row.get("status") in (None, "PASS"):
            continue
        notes = row.get("notes", "")
        notes = notes.split("; ") if isinstance(notes, str) else [str(n) for n in notes] if isinstance(notes, list) else []
        kind, evidence = str(row.get("cause") or ""), str(row.get("evidence") or "")
        if not kind:
            cause = op_cause(str(row["status"]), notes, by_op.get(str(row.get("op")), ()))
            kind, evidence = (cause.kind, cause.evidence) if cause else ("unknown", "")
        found.append(f"- {_cell(str(row.get('op')))} ({_cell(str(row['status']))}): **{kind}**, {_cell(evidence)}")
    return ["## Causes", "", *found, ""] if found else []


def _markdown_note(r: Measurement, row: Mapping[str, Any]) -> str:
    """A record's notes cell in report.md: fallback, dispatch-bound, then the first line of a
    failure's message before the record's own notes."""
    note = str(row["notes"])
    if r.fallback:
        note = f"fallback {row['fallback']}; {note}".strip("; ")
    bound = dispatch_bound(r)
    if bound is not None:
        note = f"dispatch-bound (wall {bound:.1f}x device); {note}".strip("; ")
    if r.status in ("fail", "error") and r.message:
        first = next((part for part in r.message.splitlines() if part.strip()), "")
        note = (first[:120] + ("; " + note if note else ""))
    return note


def render_markdown(records: Sequence[Measurement], run_info: Mapping[str, Any], unreached: Sequence[Unreached] = (),
                    record_problems: Sequence[str] = ()) -> str:
    """report.md; ``record_problems`` are the lines of records.jsonl that are not records
    (harness.results.store.LineProblem.describe), listed so the totals never hide them."""

    def fact(*keys: str) -> str:
        """A run.json fact for the header, "?" when the run does not say (a damaged run.json too)."""
        value: Any = run_info
        for key in keys:
            value = value.get(key, "?") if isinstance(value, Mapping) else "?"
        return xml_text(one_line(str(value)))

    lines = [
        f"# Run {fact('run_id')}",
        "",
        f"- backend: **{fact('backend')}**, device: {fact('identity', 'device_name')}"
        f" ({fact('identity', 'device_arch')}), driver {fact('identity', 'driver')}",
        f"- torch {fact('identity', 'torch')}, triton {fact('identity', 'triton')}, harness "
        f"{fact('harness_version')} ({commit_label(run_info)})",
        f"- level {fact('level')}, timer {fact('timer')}, cache {fact('options', 'cache')}, status {fact('status')}",
        *_pipeline_only(run_info),
        "",
        "| op | provider | dtype | shape | timer | status | torch ms | candidate ms | speedup | GB/s | TFLOP/s "
        "| wall ms torch / cand | notes |",
        "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in records:
        row = _row(r)
        note = _markdown_note(r, row)
        wall = f"{row['baseline_wall_ms']} / {row['candidate_wall_ms']}" if r.candidate_wall else ""
        lines.append(
            f"| {_cell(r.op)} | {_cell(r.provider)} | {_cell(r.dtype)} | {row['shape']} | {r.timer} | "
            f"{r.status.upper()} | {row['baseline_median_ms']} | {row['candidate_median_ms']} | {row['speedup']} | "
            f"{row['gbps']} | {row['tflops']} | {wall} | {_cell(note)} |"
        )
    for u in unreached:
        status = "SKIP (not run)" if u.status == "skip" else "NOT RUN"
        lines.append(f"| {_cell(u.op)} | {_cell(u.provider)} | {_cell(u.dtype)} | {_cell(u.shape)} | | {status} "
                     f"| | | | | | | {_cell(u.message)} |")
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    for u in unreached:
        label = "skip (not run)" if u.status == "skip" else "not run"
        counts[label] = counts.get(label, 0) + 1
    lines += ["", "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), ""]
    lines += _causes_section(records, run_info)
    if record_problems:
        lines += ["records.jsonl has lines that are not records (not in the table or the totals):", ""]
        lines += [f"- {_cell(p)}" for p in record_problems]
        lines.append("")
    return "\n".join(lines)
