"""A static history site: an index and one page per op, each case's trend over runs per
backend/device, the commit of each point, and the history rules' regression and suspect
markers.

Input is plain data: one dict per case per run, with the columns of the history export
(harness/compare/history.py EXPORT_COLUMNS: case_id, fingerprint, backend, device_name,
run_id, started_at, git_commit, status, median_ms, p10_ms, p90_ms, n, torch_median_ms),
optionally ``op`` and a precomputed ``check``/``reason``. Points without a check are judged
here with the same rules (:func:`harness.results.trend.assess_case`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.results.html.charts import overview_chart, trend_chart
from harness.results.html.page import Cell, Column, Table, fmt_num, render_page
from harness.results.trend import HistoryRules, assess_case

__all__ = ["judged_points", "op_page_path", "render_history_site"]

_FLAGS = ("regression", "suspect")


def _op_of(point: Mapping[str, Any]) -> str:
    return str(point.get("op") or str(point["case_id"]).split("[", 1)[0])


def _float(value: Any) -> float | None:
    if value is None or value == "":
        return None
    return float(value)


def _series_labels(points: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """fingerprint -> "backend · device" (with the fingerprint where two would read alike)."""
    plain: dict[str, str] = {}
    for p in points:
        fp = str(p.get("fingerprint") or f"{p.get('backend')}/{p.get('device_name')}")
        plain.setdefault(fp, f"{p.get('backend') or '?'} · {p.get('device_name') or '?'}")
    counts: dict[str, int] = {}
    for label in plain.values():
        counts[label] = counts.get(label, 0) + 1
    return {fp: (label if counts[label] == 1 else f"{label} · {fp}") for fp, label in plain.items()}


def _commit_href(commit_url: str | None, commit: str) -> str | None:
    if not commit_url or not commit:
        return None
    return commit_url.replace("{commit}", commit)


def judged_points(points: Sequence[Mapping[str, Any]], rules: HistoryRules | None = None,
                   commit_url: str | None = None) -> list[dict[str, Any]]:
    """Normalised points, oldest first within each series (points with the same start time
    keep their given order, as HistoryStore.export gives them), each with its history check."""
    rules = rules or HistoryRules()
    labels = _series_labels(points)
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in points:
        fp = str(p.get("fingerprint") or f"{p.get('backend')}/{p.get('device_name')}")
        case = str(p["case_id"])
        commit = str(p.get("git_commit") or "")
        status = str(p.get("status") or "")
        median = _float(p.get("median_ms")) if status in ("pass", "") else None
        row = {
            "case_id": case, "op": _op_of(p), "series": labels[fp], "fingerprint": fp,
            "run_id": str(p.get("run_id") or ""), "t": str(p.get("started_at") or ""),
            "commit": commit, "commit_short": commit[:12], "url": _commit_href(commit_url, commit),
            "status": status, "median_ms": median, "p10_ms": _float(p.get("p10_ms")) if median else None,
            "p90_ms": _float(p.get("p90_ms")) if median else None,
            "torch_median_ms": _float(p.get("torch_median_ms")),
            "check": p.get("check"), "reason": p.get("reason"),
            "ratio": _float(p.get("ratio")), "baseline_ms": _float(p.get("baseline_ms")),
        }
        series.setdefault((fp, case), []).append(row)
    out: list[dict[str, Any]] = []
    for key in sorted(series):
        rows = sorted(series[key], key=lambda r: r["t"])
        for i, row in enumerate(rows):
            if row["check"] is None:
                check = assess_case(row["case_id"], [r["median_ms"] for r in rows[:i]], row["median_ms"], rules)
                row.update(check=check.status, reason=check.reason, ratio=check.ratio,
                           baseline_ms=check.baseline_ms)
            out.append(row)
    return out


def op_page_path(op: str, taken: set[str] | None = None) -> str:
    """ops/<stem>.html, with the op id made a file name as for the op's log (a suffix where
    two ids would share a name)."""
    from harness.contract import op_file_stem

    stem = op_file_stem(op)
    path, n = f"ops/{stem}.html", 2
    while taken is not None and path in taken:
        path, n = f"ops/{stem}-{n}.html", n + 1
    if taken is not None:
        taken.add(path)
    return path


def _latest(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The newest point of each (series, case)."""
    last: dict[tuple[str, str], Mapping[str, Any]] = {}
    for p in points:
        last[(p["fingerprint"], p["case_id"])] = p  # points are oldest first per series
    return list(last.values())


def _runs(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for p in points:
        r = runs.setdefault((p["series"], p["run_id"]), {
            "run_id": p["run_id"], "series": p["series"], "t": p["t"], "commit": p["commit"],
            "commit_short": p["commit_short"], "url": p["url"], "cases": 0, "regression": 0, "suspect": 0})
        r["cases"] += 1
        if p["check"] in _FLAGS:
            r[p["check"]] += 1
    return sorted(runs.values(), key=lambda r: (r["t"], r["series"], r["run_id"]), reverse=True)


_LATEST_COLUMNS = (
    Column("case_id", "case"), Column("series", "backend / device"), Column("check", "latest check"),
    Column("median", "latest ms", numeric=True), Column("baseline", "baseline ms", numeric=True),
    Column("change", "change", numeric=True), Column("runs", "runs", numeric=True),
    Column("commit", "latest commit"), Column("reason", "why"),
)


def _latest_table(table_id: str, latest: Sequence[Mapping[str, Any]], counts: Mapping[tuple[str, str], int],
                  links: Mapping[str, str] | None = None) -> Table:
    rows, attrs = [], []
    for p in latest:
        ratio = p["ratio"]
        rows.append({
            "case_id": Cell(p["case_id"], cls="mono", href=(links or {}).get(p["op"])),
            "series": Cell(p["series"]),
            "check": Cell(str(p["check"]), cls=f"status-{str(p['check']).replace(' ', '-')}"),
            "median": Cell(fmt_num(p["median_ms"]), sort=repr(p["median_ms"]) if p["median_ms"] is not None else ""),
            "baseline": Cell(fmt_num(p["baseline_ms"]), sort=repr(p["baseline_ms"]) if p["baseline_ms"] is not None else ""),
            "change": Cell(f"{(ratio - 1) * 100:+.1f}%" if ratio is not None else "",
                           sort=repr(ratio) if ratio is not None else ""),
            "runs": Cell(str(counts[(p["fingerprint"], p["case_id"])]),
                         sort=str(counts[(p["fingerprint"], p["case_id"])])),
            "commit": Cell(p["commit_short"], cls="mono", href=p["url"]),
            "reason": Cell(str(p["reason"] or "")),
        })
        attrs.append({"check": str(p["check"]), "series": str(p["series"]), "op": str(p["op"])})
    checks = [c for c in ("regression", "suspect", "improvement", "ok", "no baseline", "not measured")
              if any(p["check"] == c for p in latest)]
    series = sorted({str(p["series"]) for p in latest})
    return Table(table_id=table_id, columns=_LATEST_COLUMNS, rows=rows, row_attrs=attrs,
                 filters=(("check", "latest check", checks), ("series", "backend / device", series)))


def render_history_site(points: Sequence[Mapping[str, Any]], *, rules: HistoryRules | None = None,
                        commit_url: str | None = None,
                        title: str = "Performance history") -> dict[str, str]:
    """The site as {relative path: page text}: ``index.html`` and ``ops/<op>.html``.

    ``commit_url``: a link for each point's commit, with ``{commit}`` where the hash goes
    (``https://github.com/OWNER/REPO/commit/{commit}``); without it commits are plain text."""
    if commit_url is not None and not commit_url.startswith(("https://", "http://", "file://")):
        raise ValueError(f"commit_url must be an http(s) (or file) URL with {{commit}} in it, got {commit_url!r}")
    normal = judged_points(points, rules, commit_url)
    ops = list(dict.fromkeys(p["op"] for p in sorted(normal, key=lambda p: p["op"])))
    taken: set[str] = set()
    paths = {op: op_page_path(op, taken) for op in ops}
    counts: dict[tuple[str, str], int] = {}
    for p in normal:
        if p["median_ms"] is not None:
            counts[(p["fingerprint"], p["case_id"])] = counts.get((p["fingerprint"], p["case_id"]), 0) + 1
    for p in normal:
        counts.setdefault((p["fingerprint"], p["case_id"]), 0)
    series = sorted({p["series"] for p in normal})
    latest = _latest(normal)
    site: dict[str, str] = {}
    for op in ops:
        of_op = [p for p in normal if p["op"] == op]
        chart_points = [{k: p[k] for k in ("case_id", "series", "t", "median_ms", "p10_ms", "p90_ms",
                                           "torch_median_ms", "run_id", "commit_short", "url",
                                           "check", "reason")} for p in of_op]
        op_series = [s for s in series if any(p["series"] == s for p in of_op)]
        site[paths[op]] = render_page(
            "history_op.html",
            title=f"{op}: history",
            site_title=title,
            index="../index.html",
            charts=[trend_chart("chart-trend", chart_points, op_series)],
            table=_latest_table("latest-table", [p for p in latest if p["op"] == op], counts),
            runs=_runs(of_op),
        )
    per_op = []
    for op in ops:
        last = [p for p in latest if p["op"] == op]
        per_op.append({"op": op, "href": paths[op], "cases": len({p["case_id"] for p in last}),
                       "series": len({p["series"] for p in last}),
                       "regression": sum(p["check"] == "regression" for p in last),
                       "suspect": sum(p["check"] == "suspect" for p in last)})
    overview = [{"op": p["op"], "case_id": p["case_id"], "series": p["series"], "ratio": p["ratio"],
                 "check": p["check"], "reason": p["reason"], "page": paths[p["op"]]} for p in latest]
    site["index.html"] = render_page(
        "history_index.html",
        title=title,
        per_op=per_op,
        charts=[overview_chart("chart-overview", overview, series)],
        table=_latest_table("flagged-table", [p for p in latest if p["check"] in _FLAGS], counts, paths),
        runs=_runs(normal),
        rules=rules or HistoryRules(),
    )
    return dict(sorted(site.items()))
