"""compare.html for compare, gate, gate-run and ab: a forest plot and every row, worst first.
Built from harness.results.html's page parts; it lives here, above both, because it reads a
Comparison (harness.results never imports harness.compare).

The page reads a Comparison only through :func:`compare_rows`, which maps it to plain row
dicts; the template and the chart read those dicts. When the comparison's statistics
change, this adapter is the one place to follow them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.compare.compare import Comparison, RowComparison, RunData
from harness.results.html.charts import forest_chart
from harness.results.html.page import Cell, Column, Table, fmt_num, render_page
from harness.results.render import commit_label
from harness.results.schema import Measurement

__all__ = ["VERDICT_ORDER", "compare_rows", "render_compare_html", "torch_change"]

# Worst first: what needs a look comes to the top of the table and the plot.
VERDICT_ORDER = ("regression", "failing", "noisy", "drift", "improvement", "unchanged", "not compared")
_CORRECTIONS = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}


def torch_change(row: RowComparison, base: Measurement | None,
                 head: Measurement | None) -> tuple[float | None, float | None, float | None, str]:
    """The torch baseline's own change for one row: (ratio, interval low, interval high, source).

    HOOK for the statistics rework: today compare.py gives a point ratio
    (RowComparison.torch_ratio) for compared rows only and no interval. Rows it did not
    compare get the ratio of the records' baseline medians here (source "records"); the
    interval stays None until the comparison provides one."""
    if row.torch_ratio is not None:
        return row.torch_ratio, None, None, "compare"
    if base is None or head is None or base.baseline is None or head.baseline is None:
        return None, None, None, ""
    b = base.baseline.summary.median
    if b <= 0:
        return None, None, None, ""
    return head.baseline.summary.median / b, None, None, "records"


def _rank(verdict: str) -> int:
    return VERDICT_ORDER.index(verdict) if verdict in VERDICT_ORDER else len(VERDICT_ORDER)


def compare_rows(c: Comparison) -> list[dict[str, Any]]:
    """One plain dict per row of ``c``, regressions and failing rows first, then the rest;
    within a verdict the largest slowdown first."""
    base_by_id = {r.case_id: r for r in c.base.records}
    head_by_id = {r.case_id: r for r in c.head.records}
    out = []
    for row in c.rows:
        s = row.stats
        torch, torch_low, torch_high, torch_source = torch_change(
            row, base_by_id.get(row.case_id), head_by_id.get(row.case_id))
        out.append({
            "case_id": row.case_id, "op": row.op, "dtype": row.dtype, "shape": row.shape,
            "timer": row.timer, "verdict": row.verdict, "reason": row.reason,
            "base_status": row.base_status, "head_status": row.head_status,
            "base_ms": s.base_median if s else None, "head_ms": s.head_median if s else None,
            "ratio": s.ratio if s else None, "ci_low": s.ci_low if s else None,
            "ci_high": s.ci_high if s else None, "p": s.p if s else None,
            "p_adjusted": row.p_adjusted, "n_base": s.n_base if s else None,
            "n_head": s.n_head if s else None,
            "torch_ratio": torch, "torch_ci_low": torch_low, "torch_ci_high": torch_high,
            "torch_source": torch_source,
            "clocks": row.clocks, "autotune_change": row.autotune_change,
        })
    out.sort(key=_worst_first)
    return out


def _worst_first(row: Mapping[str, Any]) -> tuple[int, float, str]:
    ratio = row["ratio"]
    return _rank(str(row["verdict"])), -(float(ratio) if ratio is not None else 0.0), str(row["case_id"])


def _pct(ratio: float | None) -> str:
    return "" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


COMPARE_COLUMNS = (
    Column("case_id", "case"),
    Column("verdict", "verdict"),
    Column("change", "change", numeric=True, title="head/base candidate median − 1"),
    Column("interval", "interval of ratio", numeric=True),
    Column("p_adjusted", "adjusted p", numeric=True),
    Column("base_ms", "base ms", numeric=True),
    Column("head_ms", "head ms", numeric=True),
    Column("torch", "torch change", numeric=True, title="the torch baseline's own change (drift)"),
    Column("timer", "timer"),
    Column("statuses", "base / head"),
    Column("reason", "why"),
)


def _table(rows: Sequence[Mapping[str, Any]]) -> Table:
    cells = []
    for r in rows:
        interval = (f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r["ci_low"] is not None and
                    r["ci_high"] is not None else "")
        torch_note = " (from the records)" if r["torch_source"] == "records" else ""
        cells.append({
            "case_id": Cell(r["case_id"], cls="mono"),
            "verdict": Cell(r["verdict"], sort=f"{_rank(r['verdict'])}",
                            cls=f"status-{r['verdict'].replace(' ', '-')}"),
            "change": Cell(_pct(r["ratio"]), sort=repr(r["ratio"]) if r["ratio"] is not None else ""),
            "interval": Cell(interval, sort=repr(r["ci_low"]) if r["ci_low"] is not None else ""),
            "p_adjusted": Cell(fmt_num(r["p_adjusted"], 2), sort=repr(r["p_adjusted"]) if r["p_adjusted"] is not None else ""),
            "base_ms": Cell(fmt_num(r["base_ms"]), sort=repr(r["base_ms"]) if r["base_ms"] is not None else ""),
            "head_ms": Cell(fmt_num(r["head_ms"]), sort=repr(r["head_ms"]) if r["head_ms"] is not None else ""),
            "torch": Cell(_pct(r["torch_ratio"]) + torch_note,
                          sort=repr(r["torch_ratio"]) if r["torch_ratio"] is not None else ""),
            "timer": Cell(r["timer"]),
            "statuses": Cell(f"{r['base_status']} / {r['head_status']}"),
            "reason": Cell(r["reason"]),
        })
    verdicts = [v for v in VERDICT_ORDER if any(r["verdict"] == v for r in rows)]
    ops = list(dict.fromkeys(str(r["op"]) for r in rows))
    return Table(
        table_id="row-table", columns=COMPARE_COLUMNS, rows=cells,
        row_attrs=[{"verdict": str(r["verdict"]), "op": str(r["op"])} for r in rows],
        filters=(("verdict", "verdict", verdicts), ("op", "op", ops)),
    )


def _run_line(label: str, run: RunData) -> dict[str, str]:
    return {"label": label, "run_id": run.run_id, "commit": commit_label(run.info, 12), "path": str(run.path)}


def render_compare_html(c: Comparison, title: str = "Performance comparison",
                        context: Sequence[str] = ()) -> str:
    """compare.html of a Comparison (compare, gate, gate-run, ab); ``context``: lines shown
    under the two runs, as in compare.md."""
    rows = compare_rows(c)
    crit = c.criteria
    problems = c.failures()
    info = c.head.info
    ident = info.get("identity") or {}
    measured = [r for r in rows if r["ratio"] is not None and r["ci_low"] is not None]
    charts = [forest_chart("chart-forest", [
        {k: r[k] for k in ("case_id", "verdict", "ratio", "ci_low", "ci_high", "p_adjusted",
                           "torch_ratio", "reason")} for r in measured], crit.threshold, crit.confidence)]
    rule = (f"A regression is a candidate more than {crit.threshold:.0%} slower that stands out from the "
            "samples' noise (Mann-Whitney) and from the run-to-run spread, p below "
            f"{crit.alpha:g} after {_CORRECTIONS.get(crit.correction, crit.correction)} over {c.compared} "
            "compared row(s); drift when torch's own time moved as much; intervals are "
            f"{crit.confidence:.0%} bootstrap intervals of head/base widened by the run-to-run spread "
            "(docs/compare.md).")
    return render_page(
        "compare.html",
        title=title,
        passed=not c.gate_failed,
        problems=problems,
        runs=[_run_line("base", c.base), _run_line("head", c.head)],
        context=[*(f"warning: {w}" for w in c.warnings), *context],
        setting=(f"backend {info.get('backend', '?')}, device {ident.get('device_name', '?')}, "
                 f"timer {info.get('timer', '?')}, level {info.get('level', '?')}"),
        rule=rule,
        mismatches=[{"key": m.key, "base": m.base, "head": m.head} for m in c.mismatches],
        counts=[(v, sum(1 for r in rows if r["verdict"] == v)) for v in VERDICT_ORDER],
        attention=[r for r in rows if r["verdict"] in ("regression", "failing")],
        charts=charts,
        table=_table(rows),
    )
