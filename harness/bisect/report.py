"""bisect.json, bisect.md and the summary line, from a finished (or resumed) bisection; and
bisect.json read back for the history site (:func:`read_findings`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.bisect.git import commit_link
from harness.bisect.session import BisectResult, tries_run
from harness.errors import UsageError
from harness.results.render import one_line
from harness.results.text import xml_text

if TYPE_CHECKING:
    from harness.results.html.history import BisectFinding

__all__ = ["FORMAT_VERSION", "RESULT_JSON", "RESULT_MD", "findings_from_json", "named_every_case", "read_findings",
           "render_markdown", "result_json", "summary_line"]

# 2: ``answers``, one per culprit searched for (the cases it answers for); culprit, remaining and
# skipped stay the first answer's. Readers take 1 and 2.
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
RESULT_JSON, RESULT_MD = "bisect.json", "bisect.md"


def md_cell(text: str) -> str:
    """A Markdown table cell: one line, no column separator, no control characters."""
    return xml_text(one_line(text)).replace("|", "/")


def _short(sha: str) -> str:
    return sha[:12]


def result_json(result: BisectResult, facts: Mapping[str, Any], link_base: str) -> dict[str, Any]:
    """Everything bisect.json holds: the inputs (``facts``), the range, every commit tested,
    each answer (the cases it answers for, and its culprit or the range it left; the first
    answer's also at the top, as format 1 had it), the runs and minutes spent."""
    by_sha = {c.sha: c for c in result.commits}

    def commit(sha: str) -> dict[str, str]:
        c = by_sha[sha]
        return {"sha": c.sha, "subject": c.subject, "link": commit_link(link_base, c.sha)}

    answers = [{"cases": list(a.cases),
                "culprit": commit(a.outcome.culprit) if a.outcome.culprit is not None else None,
                "remaining": [] if a.outcome.culprit is not None else
                [commit(c.sha) for c in result.commits[a.outcome.first:a.outcome.last + 1]],
                "skipped": list(a.outcome.skipped)} for a in result.answers]
    first = answers[0] if answers else {"culprit": None, "remaining": [], "skipped": []}
    return {
        "format_version": FORMAT_VERSION,
        **facts,
        "commits_in_range": len(result.commits),
        "check": result.check.to_json(),
        "threshold": result.threshold,
        "tested": [{k: v for k, v in step.items()} | {"link": commit_link(link_base, step["sha"])}
                   for step in result.steps],
        "culprit": first["culprit"],
        "remaining": first["remaining"],
        "skipped": first["skipped"],
        "answers": answers,
        "rounds": result.rounds,
        "runs": result.runs,
        "cached_runs": result.cached_runs,
        "minutes": round(result.seconds / 60.0, 2),
    }


def named_every_case(data: Mapping[str, Any]) -> bool:
    """Whether every case the check tracked has a culprit named (the exit code's 0)."""
    answers = data.get("answers") or []
    return bool(answers) and all(a["culprit"] for a in answers)


def _answer_words(answer: Mapping[str, Any], several: bool) -> str:
    cases = f" ({len(answer['cases'])} case(s))" if several else ""
    if answer["culprit"]:
        c = answer["culprit"]
        return f"{_short(c['sha'])} {c['subject']}{cases}"
    left = answer["remaining"]
    return (f"no single culprit{cases}: {len(left)} commit(s) remain, {_short(left[0]['sha'])}.."
            f"{_short(left[-1]['sha'])}, {len(answer['skipped'])} skipped")


def summary_line(data: Mapping[str, Any]) -> str:
    """One line for stdout."""
    spent = f"{data['rounds']} round(s), {data['runs']} run(s), {data['minutes']:.1f} min"
    if data["cached_runs"]:
        spent += f", {data['cached_runs']} run(s) from the cache"
    if not data["check"]["changed"]:
        return f"bisect: nothing to bisect: {data['check']['reason']} ({spent})"
    answers = data["answers"]
    if len(answers) == 1:
        said = _answer_words(answers[0], False)
        return f"bisect: {'culprit ' if answers[0]['culprit'] else ''}{said} ({spent})"
    return f"bisect: {len(answers)} answers: " + "; ".join(_answer_words(a, True) for a in answers) + f" ({spent})"


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
        ("- metric: verdict (PASS against FAIL or CRASH; no speed threshold)" if data["metric"] == "verdict" else
         f"- metric: {data['metric']}; threshold: {data['threshold']:.2%}"
         + (" (half the change the check saw)" if data.get("threshold_given") is None else " (--threshold)")),
        f"- run arguments: `{md_cell(' '.join(data['run_args']))}`",
        f"- check (bad against good): {md_cell(data['check']['reason'])}",
        "",
    ]
    answers = data["answers"]
    for answer in answers:
        which = f" for {', '.join(f'`{md_cell(c)}`' for c in answer['cases'])}" if len(answers) > 1 else ""
        if answer["culprit"]:
            c = answer["culprit"]
            lines += [f"## Culprit{which}", "", _commit_cell(c["sha"], c["subject"], c["link"]), ""]
        else:
            lines += [f"## Range left{which}", "", "No single commit could be named: the commits below could not "
                      "all be judged (skipped).", ""]
            lines += [f"- {_commit_cell(c['sha'], c['subject'], c['link'])}" for c in answer["remaining"]]
            lines.append("")
    if len(answers) > 1:
        lines += ["Each culprit answers for the cases that changed at it; the cases still as at the good end "
                  "there were followed over the commits after it (search 2, 3, ...).", ""]
    lines += ["## Commits tested", "", "| # | commit | mark | numbers | runs | minutes | why |",
              "|---|---|---|---|---|---|---|"]
    for i, step in enumerate(data["tested"], 1):
        tries = tries_run(step) if step.get("tries") else []  # a later search's step: its own tries
        runs = sum(int(a["runs"]) for a in tries)
        minutes = sum(float(a["seconds"]) for a in tries) / 60.0  # as measured, also for cached runs
        cached = " (cache)" if tries and all(a["cached"] for a in tries) else ""
        search = int(step.get("search") or 1)
        name = ("check: " if step.get("check") else
                f"search {search}, the culprit again for {len(step['settles'])} case(s): " if step.get("settles") else
                f"search {search}: " if search > 1 else "")
        lines.append(f"| {i} | {name}{_commit_cell(step['sha'], step['subject'], step['link'])} | {step['mark']} | "
                     f"{_numbers(step)} | {runs}{cached} | {minutes:.1f} | "
                     f"{md_cell(str(step['reason']))[:300]} |")
    lines += ["", f"{data['rounds']} round(s), {data['runs']} run(s), {data['minutes']:.1f} minute(s); "
              f"{data['cached_runs']} run(s) taken from the cache.", ""]
    return "\n".join(lines)


def _text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{where}{key} is {type(value).__name__}, not text")
    return value


def _commit(data: Any, where: str) -> tuple[str, str, str]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} is not a mapping of sha, subject and link")
    sha, subject, link = (_text(data, k, f"{where}.") for k in ("sha", "subject", "link"))
    if link and not link.startswith(("https://", "http://")):
        raise ValueError(f"{where}.link {link!r} is not a web address")
    return sha, subject, link


def _ops(run_args: list[str]) -> tuple[str, ...]:
    """The ops the run arguments name with --ops (comma lists split), as `harness run` reads them."""
    from harness.runargs import named_ops, parse_run_args

    try:
        return named_ops(parse_run_args(run_args))
    except UsageError as exc:
        raise ValueError(f"run_args are not `harness run` arguments ({exc.message})") from None


def _finding(good: str, bad: str, ops: tuple[str, ...], cases: Any, changed: bool, answer: Mapping[str, Any],
             origin: str, where: str) -> BisectFinding:
    from harness.results.html.history import BisectFinding

    if not isinstance(cases, list):
        raise ValueError(f"{where}cases is not a list")
    culprit = answer.get("culprit")
    sha, subject, link = _commit(culprit, f"{where}culprit") if culprit is not None else ("", "", "")
    remaining = answer.get("remaining")
    if not isinstance(remaining, list):
        raise ValueError(f"{where}remaining is not a list")
    left = tuple(_commit(c, f"{where}remaining[{i}]")[0] for i, c in enumerate(remaining))
    return BisectFinding(good=good, bad=bad, ops=ops, cases=tuple(str(t) for t in cases), changed=changed,
                         culprit_sha=sha, culprit_subject=subject, culprit_link=link, remaining=left, origin=origin)


def findings_from_json(data: Any, origin: str) -> tuple[BisectFinding, ...]:
    """What the history site needs of a bisect.json's content, one finding per answer (format 1:
    one, for every case its check tracked); ValueError naming the first thing that is not as
    :func:`result_json` writes it (a ``format_version`` it does not read included)."""
    if not isinstance(data, Mapping):
        raise ValueError("not a JSON object")
    version = data.get("format_version")
    if version not in READ_VERSIONS:
        raise ValueError(f"format_version {version!r}; this harness reads {', '.join(map(str, READ_VERSIONS))}")
    good, bad = _text(data, "good_sha", ""), _text(data, "bad_sha", "")
    run_args = data.get("run_args")
    if not isinstance(run_args, list) or not all(isinstance(a, str) for a in run_args):
        raise ValueError("run_args is not a list of text")
    check = data.get("check")
    if not isinstance(check, Mapping) or not isinstance(check.get("tracked"), list):
        raise ValueError("check is not a mapping with a tracked list")
    ops, changed = _ops(run_args), bool(check.get("changed"))
    # the top level: format 1's one answer, format 2's first (checked either way)
    whole = _finding(good, bad, ops, check["tracked"], changed, data, origin, "")
    if version == 1:
        return (whole,)
    answers = data.get("answers")
    if not isinstance(answers, list) or not all(isinstance(a, Mapping) for a in answers):
        raise ValueError("answers is not a list of mappings")
    if not changed:
        if answers:
            raise ValueError("answers are given though the check found no change")
        return (whole,)
    if not answers:
        raise ValueError("answers is empty though the check found a change")
    found = []
    for i, answer in enumerate(answers):
        cases = answer.get("cases")
        if not isinstance(cases, list) or not cases or not all(isinstance(c, str) for c in cases):
            raise ValueError(f"answers[{i}].cases is not a list of case ids")
        finding = _finding(good, bad, ops, cases, changed, answer, origin, f"answers[{i}].")
        if not finding.culprit_sha and not finding.remaining:
            raise ValueError(f"answers[{i}] names neither a culprit nor the range left")
        found.append(finding)
    return tuple(found)


def read_findings(path: Path, option: str = "--bisect") -> tuple[BisectFinding, ...]:
    """A stored bisection for the history site, one finding per answer: ``path`` is a
    bisect.json, or the folder `harness bisect --out` wrote one into. A file that is missing,
    unreadable, of another format version or not shaped as bisect.json is a UsageError of one
    line (exit 2)."""
    file = path / RESULT_JSON if path.is_dir() else path
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot read {file} ({exc.strerror or exc}); give a bisect.json or the "
                         "folder `harness bisect --out` wrote.") from None
    try:
        return findings_from_json(json.loads(text), str(path))
    except ValueError as exc:  # json.JSONDecodeError included
        raise UsageError(f"{option} {path}: {file} is not a bisect.json this harness reads: "
                         f"{one_line(str(exc))}.") from None
