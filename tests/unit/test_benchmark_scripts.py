"""The scripts under benchmarks/ run on lent GPU machines, where a stale import costs device time:
every name they import from the harness must exist (read with ast; the scripts are not run)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


def _harness_imports(path: Path) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "harness":
            found += [(node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_every_harness_name_a_benchmark_script_imports_exists(script: Path) -> None:
    missing = []
    for module, name in _harness_imports(script):
        owner = importlib.import_module(module)
        if not hasattr(owner, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    assert not missing, f"{script.name} imports names the harness no longer has: {missing}"
