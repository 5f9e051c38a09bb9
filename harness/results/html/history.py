"""A static history site built for a thousand ops: a landing page that puts regressions first,
a regressions page, and one page per op, all sharing one copy of the assets (assets/).

Input is plain data: one dict per case per run, with the columns of the history export
(harness/compare/history.py EXPORT_COLUMNS: case_id, fingerprint, backend, device_name,
run_id, started_at, git_commit, status, median_ms, p10_ms, p90_ms, n, torch_median_ms,
cause, ``environment``: the run's software versions, a mapping or its JSON text, and
``library_commit``: the library's commit the run measured, ``git_dirty``: 1 where the run's
harness files differed from ``git_commit``, shown as ``COMMIT+dirty``), any of them may be absent;
optionally ``op`` and a precomputed ``check``/``reason``. Points without a check are judged here with the history rules
(:func:`harness.results.trend.assess_case`).

A series is one case on one backend and device model. A change of software (the
``environment``, else the fingerprint) is a marker on its series saying what changed; it
does not start another series. Each series shows its run-to-run spread and the smallest
lasting slowdown the history rule catches with it (:func:`harness.results.trend.detectable_change`).

Stored bisections (:class:`BisectFinding`, read from bisect.json by
:func:`harness.bisect.report.read_findings`) are matched to the regressions whose library
range they bisected (:func:`bisect_for`), which then show the culprit.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.results.html.charts import trend_chart
from harness.results.html.page import Grid, GridColumn, render_page, site_assets
from harness.results.trend import (
    DETECT_CHANCE,
    MIN_MEASURED_SIGMA,
    HistoryRules,
    assess_case,
    detectable_change,
    history_spread,
)

__all__ = ["BisectFinding", "bisect_command", "bisect_for", "judged_points", "op_page_path", "regression_episodes",
           "render_history_site", "same_commit", "series_detection"]

_FLAGS = ("regression", "suspect")
ASSETS = "assets"
LANDING_REGRESSIONS = 25  # regressions listed on the landing page; the regressions page has all
BISECT = "harness bisect --repo {repo} --good {good} --bad {bad} -- --suite {suite} --ops {op}"


@dataclass(frozen=True)
class BisectFinding:
    """A finished `harness bisect` as the site uses it (its bisect.json)."""

    good: str  # the good and bad commits' hashes (bisect.json's good_sha, bad_sha)
    bad: str
    ops: tuple[str, ...]  # the ops of its run arguments' --ops; empty when they named none
    cases: tuple[str, ...]  # the cases whose change it followed (its check's tracked rows)
    changed: bool  # whether bad differed from good at all
    culprit_sha: str = ""  # the first bad commit, when one was named
    culprit_subject: str = ""
    culprit_link: str = ""
    remaining: tuple[str, ...] = ()  # the commits left when none could be named, oldest first
    origin: str = ""  # where it was read from


def same_commit(a: str, b: str) -> bool:
    """Whether two commit hashes name one commit: equal, or one an abbreviation (7 or more hex
    digits) of the other, as a nightly's library commit may be (a git describe's -gHASH)."""
    a, b = a.strip().lower(), b.strip().lower()
    if len(a) < 7 or len(b) < 7:
        return False
    return a.startswith(b) or b.startswith(a)


def bisect_for(episode: Mapping[str, Any], findings: Sequence[BisectFinding]) -> BisectFinding | None:
    """The stored bisection of a regression: one whose good and bad commits are the library
    commits of the episode's last good and first bad nights, which ran the episode's op (or
    named no ops) and, when it followed some cases, followed this one. One that named a
    culprit comes before one that did not; among equals the last given wins."""
    good, bad = str(episode.get("library_good") or ""), str(episode.get("library_bad") or "")
    if not (good and bad):
        return None
    found = [f for f in findings
             if same_commit(f.good, good) and same_commit(f.bad, bad)
             and (not f.ops or episode["op"] in f.ops)
             and (not f.cases or episode["case_id"] in f.cases)]
    named = [f for f in found if f.culprit_sha]
    return (named or found)[-1] if found else None


def series_detection(medians: Sequence[float | None], rules: HistoryRules) -> tuple[float | None, float | None]:
    """A series' run-to-run spread (sigma of a night's log median, from its nights' medians,
    oldest first: :func:`history_spread`, at least :data:`MIN_MEASURED_SIGMA`) and the
    smallest lasting slowdown the rule flags in time with it (:func:`detectable_change`), both
    fractions; (None, None) with too few nights to measure a spread."""
    sigma = history_spread(medians)
    if sigma is None:
        return None, None
    sigma = max(sigma, MIN_MEASURED_SIGMA)
    return sigma, detectable_change(sigma, rules)


def _op_of(point: Mapping[str, Any]) -> str:
    return str(point.get("op") or str(point["case_id"]).split("[", 1)[0])


def _float(value: Any) -> float | None:
    if value is None or value == "":
        return None
    return float(value)


def _commit_href(commit_url: str | None, commit: str) -> str | None:
    if not commit_url or not commit:
        return None
    return commit_url.replace("{commit}", commit)


def _environment(value: Any) -> dict[str, str]:
    if isinstance(value, str) and value:
        try:
            value = json.loads(value)
        except ValueError:
            return {"environment": value}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return {}


def _change(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What changed between two consecutive points of a series, in words ("" when nothing). The
    software versions are compared where both points carry them (a night stored before versions
    were kept says nothing about them); a version one side does not state reads "absent"."""
    old, new = before["environment"], after["environment"]
    if old and new:
        moved = [f"{k} {old.get(k) or 'absent'} → {new.get(k) or 'absent'}" for k in sorted(set(old) | set(new))
                 if (old.get(k) or "") != (new.get(k) or "")]
        if moved:
            return "; ".join(moved)
    if before["fingerprint"] != after["fingerprint"]:
        return f"run settings or software changed (fingerprint {before['fingerprint'][:8]} → {after['fingerprint'][:8]})"
    return ""


def _flag(value: Any) -> bool:
    """A yes/no column as the store gives it (1/0, None) or as its CSV export does ("1", "0", "")."""
    return value is True or value == 1 or str(value).strip().lower() in ("1", "true")


def judged_points(points: Sequence[Mapping[str, Any]], rules: HistoryRules | None = None,
                  commit_url: str | None = None) -> list[dict[str, Any]]:
    """Normalised points grouped by series (case, backend, device model), oldest first within
    each (points with the same start time keep their given order), each with its history check
    and, where the software changed since the point before, what changed."""
    rules = rules or HistoryRules()
    series: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for p in points:
        case = str(p["case_id"])
        backend, device = str(p.get("backend") or "?"), str(p.get("device_name") or "?")
        commit = str(p.get("git_commit") or "")
        library = str(p.get("library_commit") or "")
        status = str(p.get("status") or "")
        median = _float(p.get("median_ms")) if status in ("pass", "") else None
        row = {
            "case_id": case, "op": _op_of(p), "series": f"{backend} · {device}",
            "fingerprint": str(p.get("fingerprint") or f"{backend}/{device}"),
            "run_id": str(p.get("run_id") or ""), "t": str(p.get("started_at") or ""),
            "commit": commit, "commit_short": commit[:12] + ("+dirty" if _flag(p.get("git_dirty")) else ""),
            "url": _commit_href(commit_url, commit),
            "library_commit": library, "environment": _environment(p.get("environment")),
            "status": status or "pass", "median_ms": median,
            "p10_ms": _float(p.get("p10_ms")) if median else None,
            "p90_ms": _float(p.get("p90_ms")) if median else None,
            "torch_median_ms": _float(p.get("torch_median_ms")),
            "check": p.get("check"), "reason": p.get("reason"),
            "ratio": _float(p.get("ratio")), "baseline_ms": _float(p.get("baseline_ms")), "change": "",
        }
        series.setdefault((case, backend, device), []).append(row)
    out: list[dict[str, Any]] = []
    for key in sorted(series):
        rows = sorted(series[key], key=lambda r: r["t"])
        for i, row in enumerate(rows):
            if i:
                row["change"] = _change(rows[i - 1], row)
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


def _by_series(points: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for p in points:  # judged_points gives each series contiguous and oldest first
        out.setdefault((p["case_id"], p["series"]), []).append(p)
    return out


def _now(p: Mapping[str, Any]) -> str:
    """A point's state in words: its check, or "failing" when the night did not pass."""
    if p["status"] not in ("pass", ""):
        return "failing"
    return str(p["check"])


def bisect_command(op: str, good: str, bad: str) -> str:
    """The command that would bisect a range of the library's commits (`harness bisect`; GIT_DIR
    and TREE are the user's checkout of the library and its benchmark tree)."""
    return BISECT.format(repo="GIT_DIR", good=good, bad=bad, suite="TREE", op=op)


def regression_episodes(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every stretch of a series that the rules flagged as a regression: its first bad night
    (where the slowdown began: the first of the suspect nights leading to the flag), the last
    good night before it, its size (the largest ratio to the baseline in the stretch), the
    harness's and the library's commit ranges, the series' state now and the command that
    would bisect the library's range (or why there is none). Largest first."""
    out = []
    for (case, series), rows in _by_series(points).items():
        i = 0
        while i < len(rows):
            if rows[i]["check"] != "regression":
                i += 1
                continue
            start = i
            while start > 0 and rows[start - 1]["check"] == "suspect":
                start -= 1
            end = i
            while end + 1 < len(rows) and rows[end + 1]["check"] in _FLAGS:
                end += 1
            good = next((rows[k] for k in range(start - 1, -1, -1) if rows[k]["median_ms"] is not None), None)
            bad = rows[start]
            size = max(float(r["ratio"]) for r in rows[start:end + 1] if r["ratio"] is not None)
            lib_good, lib_bad = str((good or {}).get("library_commit") or ""), str(bad["library_commit"])
            if good is None:
                bisect = "no good night before it"
            elif not (lib_good and lib_bad):
                bisect = "the nights recorded no library commit: no range to bisect"
            elif lib_good == lib_bad:
                bisect = "the library did not change between the nights: the harness, the software or the machine did"
            else:
                bisect = bisect_command(bad["op"], lib_good, lib_bad)
            out.append({
                "case_id": case, "op": bad["op"], "series": series, "size": size,
                "first_bad": bad["t"], "first_bad_run": bad["run_id"],
                "last_good": good["t"] if good else "", "last_good_run": good["run_id"] if good else "",
                "harness_range": _range(good["commit"] if good else "", bad["commit"]),
                "library_range": _range(lib_good, lib_bad) if (lib_good or lib_bad) else "not recorded",
                "library_good": lib_good, "library_bad": lib_bad,
                "now": _now(rows[-1]), "now_t": rows[-1]["t"], "change": bad["change"], "bisect": bisect,
            })
            i = end + 1
    return sorted(out, key=lambda e: (-e["size"], e["case_id"], e["series"]))


def _web_link(link: str) -> str | None:
    """A stored link, only where it is a web address (a bisect.json is a file from elsewhere)."""
    return link if link.startswith(("https://", "http://")) else None


def _range(good: str, bad: str) -> str:
    if not good:
        return f"… {bad[:12]}" if bad else ""
    if good == bad:
        return f"{bad[:12]} (same commit)"
    return f"{good[:12]} .. {bad[:12]}"


def _runs(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for p in points:
        r = runs.setdefault((p["series"], p["run_id"]), {
            "run_id": p["run_id"], "series": p["series"], "t": p["t"], "commit": p["commit"],
            "commit_short": p["commit_short"], "url": p["url"], "cases": 0, "regression": 0, "suspect": 0,
            "failing": 0})
        r["cases"] += 1
        if p["check"] in _FLAGS:
            r[p["check"]] += 1
        if p["status"] not in ("pass", ""):
            r["failing"] += 1
    return sorted(runs.values(), key=lambda r: (r["t"], r["series"], r["run_id"]), reverse=True)


LATEST_COLUMNS = (
    GridColumn("case_id", "case", kind="code", width=330),
    GridColumn("series", "backend · device", width=170),
    GridColumn("now", "now", kind="status", width=110),
    GridColumn("median", "latest ms", kind="num", width=80),
    GridColumn("baseline", "baseline ms", kind="num", width=86),
    GridColumn("change_pct", "change %", kind="num", digits=3, width=72),
    GridColumn("runs", "nights", kind="num", width=60),
    GridColumn("spread_pct", "spread %", kind="num", digits=2, width=70,
               title="how far a night's median wanders from night to night: sigma of its log, from this series' "
                     "nights, as `harness gate --history` measures it"),
    GridColumn("detects_pct", "detects %", kind="num", digits=3, width=76,
               title=f"the smallest lasting slowdown the history rule flags in time, {DETECT_CHANCE:.0%} of the "
                     "time, given the spread"),
    GridColumn("commit", "latest commit", kind="code", href="url", width=110),
    GridColumn("reason", "why"),
)

OP_COLUMNS = (
    GridColumn("op", "op", href="href", width=300),
    GridColumn("cases", "cases", kind="num", width=70),
    GridColumn("series", "devices", kind="num", title="backend · device pairs", width=80),
    GridColumn("regression", "regressions", kind="num", title="cases flagged as a regression in their latest night",
               width=110),
    GridColumn("suspect", "suspects", kind="num", title="cases suspect in their latest night", width=90),
    GridColumn("failing", "failing", kind="num", title="cases failing in their latest night", width=80),
    GridColumn("worst", "worst change %", kind="num", digits=3, width=130,
               title="the largest latest-against-baseline change of its cases"),
    GridColumn("state", "state", kind="status"),
)


def _latest_rows(rows_by_series: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
                 rules: HistoryRules) -> list[dict[str, Any]]:
    out = []
    for rows in rows_by_series.values():
        p = rows[-1]
        ratio = p["ratio"]
        sigma, detects = series_detection([r["median_ms"] for r in rows], rules)
        out.append({"case_id": p["case_id"], "series": p["series"], "now": _now(p), "op": p["op"],
                    "median": p["median_ms"], "baseline": p["baseline_ms"],
                    "change_pct": (ratio - 1) * 100 if ratio is not None else None,
                    "runs": sum(r["median_ms"] is not None for r in rows),
                    "spread_pct": sigma * 100 if sigma is not None else None,
                    "detects_pct": detects * 100 if detects is not None else None,
                    "commit": p["commit_short"], "url": p["url"], "reason": str(p["reason"] or "")})
    return out


def _worst_op_first(o: Mapping[str, Any]) -> tuple[int, float, str]:
    worst = float(o["worst"]) if o["worst"] is not None else float("-inf")
    return ("regression", "failing", "suspect", "ok").index(str(o["state"])), -worst, str(o["op"])


_CHART_KEYS = ("case_id", "series", "t", "median_ms", "p10_ms", "p90_ms", "torch_median_ms", "run_id",
               "commit_short", "url", "check", "reason", "status", "change")


def render_history_site(points: Sequence[Mapping[str, Any]], *, rules: HistoryRules | None = None,
                        commit_url: str | None = None,
                        title: str = "Performance history",
                        bisects: Sequence[BisectFinding] = ()) -> dict[str, str]:
    """The site as {relative path: text}: ``index.html`` (regressions first, then every op,
    then the nights), ``regressions.html``, ``ops/<op>.html`` and the shared ``assets/``.

    ``commit_url``: a link for each point's commit, with ``{commit}`` where the hash goes
    (``https://github.com/OWNER/REPO/commit/{commit}``); without it commits are plain text.
    ``bisects``: stored bisections; a regression one of them bisected (:func:`bisect_for`)
    shows its culprit (linked as its bisect.json links it), or the range it left."""
    if commit_url is not None and not commit_url.startswith(("https://", "http://", "file://")):
        raise ValueError(f"commit_url must be an http(s) (or file) URL with {{commit}} in it, got {commit_url!r}")
    rules = rules or HistoryRules()
    normal = judged_points(points, rules, commit_url)
    of_op: dict[str, list[dict[str, Any]]] = {}
    for p in normal:
        of_op.setdefault(p["op"], []).append(p)
    ops = sorted(of_op)
    taken: set[str] = set()
    paths = {op: op_page_path(op, taken) for op in ops}
    episodes = regression_episodes(normal)
    used: set[int] = set()
    for e in episodes:
        e["href"] = paths[e["op"]]
        found = bisect_for(e, bisects)
        e["found"] = found
        e["culprit_href"] = _web_link(found.culprit_link) if found else None
        if found is not None:
            used.add(id(found))
    unmatched = [f for f in bisects if id(f) not in used]
    site: dict[str, str] = dict(site_assets(ASSETS))
    per_op: list[dict[str, Any]] = []
    for op in ops:
        series_rows = _by_series(of_op[op])
        latest = _latest_rows(series_rows, rules)
        op_series = sorted({p["series"] for p in of_op[op]})
        # Only what a point's tooltip or link shows: a thousand ops' pages stay small.
        chart_points = [{k: p[k] for k in _CHART_KEYS if p[k] not in (None, "")
                         and not (k == "reason" and p["check"] not in _FLAGS)} for p in of_op[op]]
        site[paths[op]] = render_page(
            "history_op.html",
            title=f"{op}: history",
            assets=f"../{ASSETS}/",
            site_title=title,
            index="../index.html",
            regressions_href="../regressions.html",
            charts=[trend_chart("chart-trend", chart_points)],
            episodes=[e for e in episodes if e["op"] == op],
            rules=rules,
            chance=DETECT_CHANCE,
            table=Grid("latest-grid", "latest per case", LATEST_COLUMNS, latest,
                       filters=(("now", "now"), ("series", "backend · device")), page_size=50),
        )
        changes = [r["change_pct"] for r in latest if r["change_pct"] is not None]
        counts = Counter(r["now"] for r in latest)
        per_op.append({"op": op, "href": paths[op], "cases": len({r["case_id"] for r in latest}),
                       "series": len(op_series), "regression": counts["regression"],
                       "suspect": counts["suspect"], "failing": counts["failing"],
                       "worst": max(changes) if changes else None,
                       "state": next((s for s in ("regression", "failing", "suspect") if counts[s]), "ok")})
    current = [e for e in episodes if e["now"] in (*_FLAGS, "failing")]
    landing = sorted(episodes, key=lambda e: (e["now"] not in (*_FLAGS, "failing"), -e["size"]))
    per_op.sort(key=_worst_op_first)
    runs = _runs(normal)
    site["regressions.html"] = render_page(
        "history_regressions.html", title=f"{title}: regressions", assets=f"{ASSETS}/",
        index="index.html", site_title=title, episodes=episodes, rules=rules, unmatched=unmatched)
    site["index.html"] = render_page(
        "history_index.html",
        title=title,
        assets=f"{ASSETS}/",
        landing=landing[:LANDING_REGRESSIONS],
        current=len(current),
        episodes=len(episodes),
        op_grid=Grid("op-grid", "ops", OP_COLUMNS, per_op, filters=(("state", "state"),), page_size=50),
        op_count=len(ops),
        series_count=len({p["series"] for p in normal}),
        nights=len({r["run_id"] for r in runs}),
        runs=runs[:60],
        runs_total=len(runs),
        rules=rules,
    )
    return dict(sorted(site.items()))
