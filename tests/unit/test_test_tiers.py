"""Every test runs in exactly one step of .ci/run.

pyproject's addopts selects the fast tier (`nox -s tests`); each later `nox -s tests -- -m EXPR`
step and the browser session select by marker. For every combination of the markers those
expressions name, exactly one step must select it: none would drop tests silently, two would run
them twice. Read as text: nothing is run.
"""

from __future__ import annotations

import itertools
import re
import shlex
import tomllib
from pathlib import Path

from _pytest.mark.expression import Expression

ROOT = Path(__file__).resolve().parents[2]


def _default_expression() -> str:
    addopts = shlex.split(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
                          ["addopts"])
    return addopts[addopts.index("-m") + 1]


def _browser_expression() -> str:
    session = re.search(r"def browser\(.*?session\.run\((.*?)\)\n", (ROOT / "noxfile.py").read_text(), re.S)
    assert session is not None, "noxfile.py has no browser session"
    words = re.findall(r'"([^"]*)"', session.group(1))
    pytest_args = words[words.index("pytest") + 1:]
    return pytest_args[pytest_args.index("-m") + 1]


def ci_steps(script: str) -> dict[str, str]:
    """.ci/run's test steps (the nox command, as written) -> the marker expression each runs."""
    steps: dict[str, str] = {}
    for line in script.splitlines():
        words = shlex.split(line, comments=True)
        if "nox" not in words or "-s" not in words:
            continue
        session = words[words.index("-s") + 1]
        args = words[words.index("--") + 1:] if "--" in words else []
        if session == "browser":
            steps[line.strip()] = _browser_expression()
        elif session == "tests":
            steps[line.strip()] = args[args.index("-m") + 1] if "-m" in args else _default_expression()
    return steps


def _names(expression: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expression)) - {"and", "or", "not"}


def _selects(expression: str, marks: set[str]) -> bool:
    def marked(name: str, /, **_: str | int | bool | None) -> bool:
        return name in marks

    return Expression.compile(expression).evaluate(marked)


def uncovered(steps: dict[str, str]) -> list[str]:
    """Each marker combination that no step selects, or more than one does."""
    markers = sorted(set().union(*(_names(e) for e in steps.values())))
    problems = []
    for bits in itertools.product((False, True), repeat=len(markers)):
        marks = {m for m, on in zip(markers, bits, strict=True) if on}
        picked = [cmd for cmd, e in steps.items() if _selects(e, marks)]
        if len(picked) != 1:
            problems.append(f"marked {sorted(marks) or 'nothing'}: selected by {picked or 'no step'}")
    return problems


def test_every_marker_combination_runs_in_exactly_one_ci_step() -> None:
    steps = ci_steps((ROOT / ".ci" / "run").read_text())
    assert len(steps) == 4, steps  # fast, slow, browser, integration
    assert uncovered(steps) == []


def test_a_step_dropped_or_doubled_is_caught() -> None:
    steps = ci_steps((ROOT / ".ci" / "run").read_text())
    slow = next(cmd for cmd, e in steps.items() if e.startswith("slow and"))
    assert uncovered({c: e for c, e in steps.items() if c != slow}) == ["marked ['slow']: selected by no step"]
    doubled = {**steps, slow: "slow"}  # the slow and integration tests would run twice
    assert "marked ['integration', 'slow']: selected by" in "\n".join(uncovered(doubled))


def test_browser_tests_live_where_the_browser_session_looks() -> None:
    here = Path(__file__).resolve()
    outside = [p for p in (ROOT / "tests").rglob("*.py")
               if p != here and "mark.browser" in p.read_text() and (ROOT / "tests" / "browser") not in p.parents]
    assert outside == []
