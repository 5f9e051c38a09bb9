#!/usr/bin/env python3
"""Fail unless every zizmor finding carries an explained inline ignore (docs/ci-security.md).

Usage: zizmor --offline --persona P --no-ignores --no-exit-codes --format json-v1 FILES > P.json
       python .ci/zizmor_explained.py regular.json pedantic.json auditor.json

`--no-ignores` makes zizmor report every finding; the JSON still says which ones an ignore comment
covers ("ignored": true) and carries the comment text. A finding passes only when it is covered
and the comment explains itself: `# zizmor: ignore[RULE] -- REASON` with a reason of 20 or more
characters that names docs/ci-security.md, where the reason is argued in full. Anything else is
printed and the exit status is 1. `nox -s lint` runs this over the three personas.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

IGNORE = re.compile(r"#\s*zizmor:\s*ignore\[([a-z0-9,\- ]+)\]\s*(?:--|:)?\s*(.*)$")


def explained(finding: dict[str, Any]) -> str | None:
    """The reason that covers this finding, or None."""
    if not finding.get("ignored"):
        return None
    for loc in finding.get("locations", []):
        for comment in loc.get("concrete", {}).get("comments", []):
            match = IGNORE.search(comment)
            if not match or finding["ident"] not in [r.strip() for r in match.group(1).split(",")]:
                continue
            reason = match.group(2).strip()
            if len(reason) >= 20 and "docs/ci-security.md" in reason:
                return reason
    return None


def where(finding: dict[str, Any]) -> str:
    """FILE:LINE of the finding's primary location (the line zizmor points at), else its first."""
    try:
        locs = finding["locations"]
        loc = next((c for c in locs if c.get("symbolic", {}).get("kind") == "Primary"), locs[0])
        local = loc["symbolic"]["key"]["Local"]
        path = local.get("verbatim_path") or local.get("given_path")
        return f"{path}:{loc['concrete']['location']['start_point']['row'] + 1}"
    except (KeyError, IndexError, TypeError):
        return "?"


def main(paths: list[str]) -> int:
    bad = seen = 0
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().strip()
        findings = json.loads(text) if text else []
        for finding in findings:
            seen += 1
            reason = explained(finding)
            if reason is None:
                bad += 1
                print(f"UNEXPLAINED {path}: {where(finding)} [{finding['ident']}] {finding.get('desc', '')}")
            else:
                print(f"explained   {path}: {where(finding)} [{finding['ident']}] {reason[:100]}")
    print(f"{seen} finding(s), {bad} unexplained")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
