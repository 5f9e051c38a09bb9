""".ci/zizmor_explained.py names a finding by the line zizmor points at (its primary location)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _location(kind: str, row: int, comments: list[str]) -> dict[str, object]:
    return {"symbolic": {"key": {"Local": {"verbatim_path": ".github/workflows/x.yml"}}, "kind": kind},
            "concrete": {"location": {"start_point": {"row": row}}, "comments": comments}}


def test_the_primary_location_names_the_line(tmp_path: Path) -> None:
    """zizmor 1.33's unsafe-checkout lists the whole step first (Hidden), then the flagged key."""
    reason = "# zizmor: ignore[unsafe-checkout] -- the tree is data, never run (docs/ci-security.md)"
    finding = {"ident": "unsafe-checkout", "desc": "unsafe Git checkout", "ignored": True,
               "locations": [_location("Hidden", 116, []), _location("Related", 117, ["# v7.0.1"]),
                             _location("Primary", 129, [reason])]}
    report = tmp_path / "regular.json"
    report.write_text(json.dumps([finding]))
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "zizmor_explained.py"), str(report)],
                          capture_output=True, text=True, check=True)
    assert f"explained   {report}: .github/workflows/x.yml:130 [unsafe-checkout]" in done.stdout
    assert done.stdout.splitlines()[-1] == "1 finding(s), 0 unexplained"
