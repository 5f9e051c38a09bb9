"""bisect.json, bisect.md and the summary line, from a finished (or resumed) bisection."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.bisect.git import commit_link
from harness.bisect.session import BisectResult
from harness.results.render import one_line
from harness.results.text import xml_text

__all__ = ["FORMAT_VERSION", "render_markdown", "result_json", "summary_line"]

FORMAT_VERSION = 1


def md_cell(text: str) -> str:
    """A Markdown table cell: one line, no column separator, no control characters."""
    return xml_text(one_line(text)).replace("|", "/")


def _short(sha: str) -> str:
    return sha[:12]


def result_json(result: BisectResult, facts: Mapping[str, Any], link_base: str) -> dict[str, Any]:
    """Everything bisect.json holds: the inputs (``facts``), the range, every commit tested,
    the culprit or the range left, the runs and minutes spent."""
    out = result.outcome
    culprit = None
    remaining: list[dict[str, str]] = []
    if out is not None:
        by_sha = {c.sha: c for c in result.commits}
        if out.culprit is not None:
            c = by_sha[out.culprit]
            culprit = {"sha": c.sha, "subject": c.subject, "link": commit_link(link_base, c.sha)}
        else:
            remaining = [{"sha": c.sha, "subject": c.subject, "link": commit_link(link_base, c.sha)}
                         for c in result.commits[out.first:out.last + 1]]
    return {
        "format_version": FORMAT_VERSION,
        **facts,
        "commits_in_range": len(result.commits),
        "check": result.check.to_json(),
        "threshold": result.threshold,
        "tested": [{k: v for k, v in step.items()} | {"link": commit_link(link_base, step["sha"])}
                   for step in result.steps],
        "culprit": culprit,
        "remaining": remaining,
        "skipped": list(out.skipped) if out else [],
        "rounds": result.rounds,
        "runs": result.runs,
        "cached_runs": result.cached_runs,
        "minutes": round(result.seconds / 60.0, 2),
    }


def summary_line(data: Mapping[str, Any]) -> str:
    """One line for stdout."""
    spent = f"{data['rounds']} round(s), {data['runs']} run(s), {data['minutes']:.1f} min"
    if data["cached_runs"]:
        spent += f", {data['cached_runs']} run(s) from the cache"
    if not data["check"]["changed"]:
        return f"bisect: nothing to bisect: {data['check']['reason']} ({spent})"
    if data["culprit"]:
        c = data["culprit"]
        return f"bisect: culprit {_short(c['sha'])} {c['subject']} ({spent})"
    left = data["remaining"]
    return (f"bisect: no single culprit: {len(left)} commit(s) remain, {_short(left[0]['sha'])}.."
            f"{_short(left[-1]['sha'])}, {len(data['skipped'])} skipped ({spent})")


def _commit_cell(sha: str, subject: str, link: str) -> str:
    ref = f"[{_short(sha)}]({link})" if link else f"`{_short(sha)}`"
    return f"{ref} {md_cell(subject)}"


def _numbers(step: Mapping[str, Any]) -> str:
    tries = step.get("tries") or []
    if not tries:
        return ""
    rows = tries[-1].get("rows") or []
    parts = []
    for row in rows[:4]:
        ratio = row.get("ratio")
        span = (f" [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
                if row.get("ci_low") is not None and row.get("ci_high") is not None else "")
        parts.append(f"{row['case_id']} " + (f"x{ratio:.3f}{span}" if ratio is not None else row["verdict"]))
    if len(rows) > 4:
        parts.append(f"... {len(rows) - 4} more")
    return md_cell("; ".join(parts))


def render_markdown(data: Mapping[str, Any]) -> str:
    lines = [f"# Bisect: {data['good']} .. {data['bad']}", "", summary_line(data), ""]
    lines += [
        f"- repository: `{md_cell(str(data['repo']))}`, source path `{md_cell(str(data['source_path']))}`",
        f"- {data['commits_in_range']} first-parent commit(s) change the source between good and bad",
        f"- metric: {data['metric']}; threshold: {data['threshold']:.2%}"
        + (" (half the change the check saw)" if data.get("threshold_given") is None else " (--threshold)"),
        f"- run arguments: `{md_cell(' '.join(data['run_args']))}`",
        f"- check (bad against good): {md_cell(data['check']['reason'])}",
        "",
    ]
    if data["culprit"]:
        c = data["culprit"]
        lines += ["## Culprit", "", _commit_cell(c["sha"], c["subject"], c["link"]), ""]
    elif data["check"]["changed"]:
        lines += ["## Range left", "", "No single commit could be named: the commits below could not all be "
                  "judged (skipped).", ""]
        lines += [f"- {_commit_cell(c['sha'], c['subject'], c['link'])}" for c in data["remaining"]]
        lines.append("")
    lines += ["## Commits tested", "", "| # | commit | mark | numbers | runs | minutes | why |",
              "|---|---|---|---|---|---|---|"]
    for i, step in enumerate(data["tested"], 1):
        tries = step.get("tries") or []
        runs = sum(int(a["runs"]) for a in tries)
        minutes = sum(float(a["seconds"]) for a in tries) / 60.0  # as measured, also for cached runs
        cached = " (cache)" if tries and all(a["cached"] for a in tries) else ""
        name = "check: " if step.get("check") else ""
        lines.append(f"| {i} | {name}{_commit_cell(step['sha'], step['subject'], step['link'])} | {step['mark']} | "
                     f"{_numbers(step)} | {runs}{cached} | {minutes:.1f} | "
                     f"{md_cell(str(step['reason']))[:300]} |")
    lines += ["", f"{data['rounds']} round(s), {data['runs']} run(s), {data['minutes']:.1f} minute(s); "
              f"{data['cached_runs']} run(s) taken from the cache.", ""]
    return "\n".join(lines)
