"""Render a Comparison as compare.md, compare.csv and compare JUnit (pure: data in, text out)."""

from __future__ import annotations

from collections.abc import Sequence

from junit_xml import TestCase, TestSuite

from harness.compare.compare import FAILING, NOT_COMPARED, Comparison, RowComparison, RunData
from harness.compare.history import CaseCheck, HistoryRules
from harness.results.render import commit_label, serialise_junit
from harness.results.store import csv_text
from harness.results.trend import RegressionRange

__all__ = [
    "COMPARE_COLUMNS",
    "fmt_ms",
    "render_compare_csv",
    "render_compare_junit",
    "render_compare_markdown",
    "render_history_junit",
    "render_history_markdown",
]

COMPARE_COLUMNS = (
    "case_id", "op", "dtype", "shape", "timer", "verdict",
    "base_median_ms", "head_median_ms", "ratio", "change_pct", "ci_low", "ci_high",
    "p", "p_adjusted", "n_base", "n_head", "torch_ratio", "base_status", "head_status", "reason",
    "p_samples", "p_runs", "runs_base", "runs_head", "run_spread_pct", "clocks", "autotune_change",
    "head_log",
)

_CORRECTION_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}


def fmt_ms(ms: float | None) -> str:
    """A duration for people: microseconds below a millisecond, milliseconds above."""
    if ms is None:
        return ""
    if ms < 1.0:
        return f"{ms * 1000:.3g} µs"
    return f"{ms:.4g} ms"


def _g(value: float | None, digits: int = 6) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def _csv_row(r: RowComparison) -> dict[str, str]:
    s = r.stats
    return {
        "case_id": r.case_id,
        "op": r.op,
        "dtype": r.dtype,
        "shape": r.shape,
        "timer": r.timer,
        "verdict": r.verdict,
        "base_median_ms": _g(s.base_median if s else None),
        "head_median_ms": _g(s.head_median if s else None),
        "ratio": _g(s.ratio if s else None, 5),
        "change_pct": f"{(s.ratio - 1) * 100:.2f}" if s else "",
        "ci_low": _g(s.ci_low if s else None, 5),
        "ci_high": _g(s.ci_high if s else None, 5),
        "p": _g(s.p if s else None, 3),
        "p_adjusted": _g(r.p_adjusted, 3),
        "n_base": str(s.n_base) if s else "",
        "n_head": str(s.n_head) if s else "",
        "torch_ratio": _g(r.torch_ratio, 5),
        "base_status": r.base_status,
        "head_status": r.head_status,
        "reason": r.reason,
        "p_samples": _g(s.p_samples if s else None, 3),
        "p_runs": _g(s.p_runs if s else None, 3),
        "runs_base": str(s.runs_base) if s else "",
        "runs_head": str(s.runs_head) if s else "",
        "run_spread_pct": f"{s.run_spread * 100:.2f}" if s else "",
        "clocks": r.clocks,
        "autotune_change": r.autotune_change,
        "head_log": r.head_log,
    }


def render_compare_csv(rows: Sequence[RowComparison]) -> str:
    return csv_text(COMPARE_COLUMNS, (_csv_row(r) for r in rows))


def _run_line(label: str, run: RunData) -> str:
    return f"- {label}: `{run.run_id}` ({commit_label(run.info, 12)}, {run.path})"


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _change(r: RowComparison) -> str:
    return f"{(r.stats.ratio - 1) * 100:+.1f}%" if r.stats else ""


def _row_notes(r: RowComparison) -> str:
    parts = []
    if r.clocks:
        parts.append(f"clocks: {r.clocks}")
    if r.autotune_change:
        parts.append(f"autotune: {r.autotune_change}")
    return _cell("; ".join(parts))


def _measured_table(rows: Sequence[RowComparison], confidence: float) -> list[str]:
    lines = [
        f"| case | timer | runs | base | head | change | {confidence:.0%} CI of ratio | adjusted p | torch change | notes |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in rows:
        s = r.stats
        if s is None:
            continue
        torch = f"{(r.torch_ratio - 1) * 100:+.1f}%" if r.torch_ratio is not None else ""
        lines.append(
            f"| `{_cell(r.case_id)}` | {r.timer} | {s.runs_base} vs {s.runs_head} | {fmt_ms(s.base_median)} | "
            f"{fmt_ms(s.head_median)} | {_change(r)} | [{s.ci_low:.3f}, {s.ci_high:.3f}] | "
            f"{_g(r.p_adjusted, 2)} | {torch} | {_row_notes(r)} |"
        )
    return lines


def _reason_table(rows: Sequence[RowComparison]) -> list[str]:
    lines = ["| case | base | head | why |", "|---|---|---|---|"]
    lines += [f"| `{_cell(r.case_id)}` | {r.base_status} | {r.head_status} | {_cell(r.reason)} |" for r in rows]
    return lines


def render_compare_markdown(c: Comparison, title: str = "Performance comparison",
                            context: Sequence[str] = ()) -> str:
    """compare.md: the verdict first, then what needs a look, then every row folded away.

    ``context``: lines shown under the two runs (what `harness ab` compared, for example)."""
    crit = c.criteria
    compared = [r for r in c.rows if r.compared]
    if c.gate_failed:
        headline = f"## {title}: FAIL ({', '.join(c.failures())})"
    else:
        headline = f"## {title}: PASS"
    info = c.head.info
    ident = info.get("identity") or {}
    lines = [
        headline,
        "",
        _run_line("base", c.base),
        _run_line("head", c.head),
        *(f"- {line}" for line in context),
        f"- backend {info.get('backend', '?')}, device {ident.get('device_name', '?')}, "
        f"timer {info.get('timer', '?')}, level {info.get('level', '?')}",
        f"- rule: a regression is a candidate more than {crit.threshold:.0%} slower that stands out from "
        "the samples' noise (Mann-Whitney) *and* from the run-to-run spread (of the repeats, never "
        f"less than the device's known spread, {c.spread_origin or 'the shipped table'}), p below "
        f"{crit.alpha:g} after {_CORRECTION_NAMES[crit.correction]} over {len(compared)} compared "
        "row(s); `drift` when torch's own time moved as much in the same runs; a row whose samples did "
        f"not settle is not a regression on its own; intervals are {crit.confidence:.0%} bootstrap "
        "intervals of head/base widened by the run-to-run spread",
    ]
    if c.resolution:
        lines.append(f"- {c.resolution}")
    lines = [lines[0], "", *(f"- **warning**: {w}" for w in c.warnings), *lines[2:]] if c.warnings else lines
    for m in c.mismatches:
        lines.append(f"- **warning**: unlike runs compared (--allow-mismatch): {m.key} "
                     f"{m.base!r} in base, {m.head!r} in head")
    counts = {v: c.count(v) for v in ("regression", FAILING, "improvement", "drift", "noisy", "unchanged",
                                      NOT_COMPARED)}
    lines += ["", "Rows: " + ", ".join(f"{k} {v}" for k, v in counts.items()), ""]
    sections = (
        ("Regressions", "regression", True),
        ("Failing in head", FAILING, False),
        ("Improvements", "improvement", True),
        ("Drift (torch moved as much: suspect the machine)", "drift", True),
    )
    for heading, verdict, measured in sections:
        chosen = [r for r in c.rows if r.verdict == verdict]
        if chosen:
            lines += [f"### {heading}", ""]
            lines += _measured_table(chosen, crit.confidence) if measured else _reason_table(chosen)
            lines.append("")
    noisy = [r for r in c.rows if r.verdict == "noisy"]
    if noisy:
        lines += ["### Noisy (not judged)", "", "| case | change | why |", "|---|---:|---|"]
        lines += [f"| `{_cell(r.case_id)}` | {_change(r)} | {_cell(r.reason)} |" for r in noisy]
        lines.append("")
    retuned = [r for r in c.rows if r.autotune_change]
    if retuned:
        lines += ["### Autotune configs differ between base and head", "", "| case | verdict | base -> head |",
                  "|---|---|---|"]
        lines += [f"| `{_cell(r.case_id)}` | {r.verdict} | {_cell(r.autotune_change)} |" for r in retuned]
        lines.append("")
    skipped = [r for r in c.rows if r.verdict == NOT_COMPARED]
    if skipped:
        lines += ["### Not compared", ""] + _reason_table(skipped) + [""]
    if compared:
        lines += ["<details><summary>All compared rows</summary>", ""]
        lines += _measured_table(compared, crit.confidence)
        lines += ["", "</details>", ""]
    return "\n".join(lines)


def render_compare_junit(c: Comparison, suite_name: str = "compare") -> str:
    """One testsuite per op; a regression or a case failing in head is a failing testcase."""
    by_op: dict[str, list[TestCase]] = {}
    for r in c.rows:
        details = _csv_row(r)
        tc = TestCase(
            name=r.case_id,
            classname=f"{suite_name}.{r.op}",
            elapsed_sec=0.0,
            stdout="\n".join(f"{k}={v}" for k, v in details.items() if v),
        )
        if r.verdict == "regression":
            tc.add_failure_info(message=r.reason, failure_type="regression")
        elif r.verdict == FAILING:
            tc.add_failure_info(message=r.reason, failure_type="failing")
        elif r.verdict == NOT_COMPARED:
            tc.add_skipped_info(message=r.reason)
        by_op.setdefault(r.op, []).append(tc)
    suites = [TestSuite(name=f"{suite_name}.{op}", test_cases=cases) for op, cases in by_op.items()]
    if not suites:
        suites.append(TestSuite(name=suite_name, test_cases=[]))
    return serialise_junit(suites)


def _history_counts(checks: Sequence[CaseCheck]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for c in checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    return counts


def render_history_markdown(run: RunData, checks: Sequence[CaseCheck], rules: HistoryRules, db: str,
                            ranges: Sequence[RegressionRange] = (), unnamed: Sequence[str] = ()) -> str:
    """history-check.md: flagged cases first, then suspects, then improvements; then where each
    regression's slowdown began, as library commits to bisect (``ranges``, ``unnamed``)."""
    regressions = [c for c in checks if c.status == "regression"]
    waiting = [c for c in checks if c.status == "no baseline"]
    judged = [c for c in checks if c.status not in ("no baseline", "not measured")]
    headline = (f"## History check: FAIL ({len(regressions)} regression(s))" if regressions
                else "## History check: PASS" + ("" if judged or not waiting else " (nothing judged yet: no baseline)"))
    ident = run.info.get("identity") or {}
    lines = [
        headline,
        "",
        f"- run `{run.run_id}` ({commit_label(run.info, 12)}), backend "
        f"{run.info.get('backend', '?')}, device {ident.get('device_name', '?')}, level "
        f"{run.info.get('level', '?')}, fingerprint `{run.info.get('fingerprint', '?')}`",
        f"- rule: baseline = median of the last {rules.window} runs of this fingerprint in `{db}`; "
        f"a case more than {rules.threshold:.0%} slower is suspect, and flagged when it is so in "
        f"{rules.persist} consecutive runs, or at once beyond {rules.large:.0%}",
        "",
        "Cases: " + ", ".join(f"{k} {v}" for k, v in sorted(_history_counts(checks).items())),
        "",
    ]
    if run.info.get("backend") == "cpu":
        lines += ["Backend cpu: the Triton interpreter's times say nothing of a device's speed; on it this check "
                  "tests the pipeline (docs/compare.md, \"The cpu backend\").", ""]
    if waiting:
        most = max(c.history for c in waiting)
        lines += [f"{len(waiting)} case(s) not judged: no baseline yet (at most {most} earlier run(s) of this "
                  f"fingerprint in `{db}`; {rules.min_history} needed). `harness history add` stores each run; "
                  "they are judged once enough are stored.", ""]
    for heading, status in (("Regressions", "regression"), ("Suspect (flagged if the next run is "
                                                             "slower too)", "suspect"),
                            ("Improvements", "improvement")):
        chosen = [c for c in checks if c.status == status]
        if not chosen:
            continue
        lines += [f"### {heading}", "", "| case | baseline | now | change | why |", "|---|---:|---:|---:|---|"]
        for c in chosen:
            change = f"{(c.ratio - 1) * 100:+.1f}%" if c.ratio is not None else ""
            lines.append(f"| `{_cell(c.case_id)}` | {fmt_ms(c.baseline_ms)} | {fmt_ms(c.current_ms)} | "
                         f"{change} | {_cell(c.reason)} |")
        lines.append("")
    if ranges or unnamed:
        lines += ["### Where the slowdowns began", "",
                  "The library commit of the last run before each slowdown (good) and of its first slow run "
                  "(bad); `harness bisect` names the commit between them (LIBRARY_GIT: a clone of the "
                  "library, TREE: the benchmark tree these runs measured).", ""]
        for found in ranges:  # ops are plain ids (regression_ranges): no line break, no markup
            lines.append(_cell(f"- {found.good[:12]}..{found.bad[:12]}: {len(found.cases)} case(s) of "
                               f"{', '.join(f'`{op}`' for op in found.ops)}: `harness bisect --repo LIBRARY_GIT "
                               f"--good {found.good} --bad {found.bad} -- --suite TREE --ops {' '.join(found.ops)}`"))
        lines += [f"- {_cell(line)}" for line in unnamed]
        lines.append("")
    return "\n".join(lines)


def render_history_junit(checks: Sequence[CaseCheck], suite_name: str = "history") -> str:
    cases = []
    for c in checks:
        op = c.case_id.split("[", 1)[0]
        tc = TestCase(name=c.case_id, classname=f"{suite_name}.{op}", elapsed_sec=0.0,
                      stdout=f"status={c.status}\n{c.reason}")
        if c.status == "regression":
            tc.add_failure_info(message=c.reason, failure_type="regression")
        elif c.status in ("not measured", "no baseline"):
            tc.add_skipped_info(message=c.reason)
        cases.append(tc)
    return serialise_junit([TestSuite(name=suite_name, test_cases=cases)])
