"""Compat plugin for FlagGems' own pytest: drop skip guards that are stale on this device.

FlagGems guards some tests and benchmarks with ``@pytest.mark.skipif(not torch.cuda.is_available(),
...)``. Where torch reaches the device through another namespace (torch_musa's ``torch.musa``:
the backend capability ``stale_cuda_guards``), the guard skips a test FlagGems runs on that
device. This plugin removes such a guard from the collected item when the decorator's condition
and reason match the rules of ``skipguards.yaml`` (data, read from FlagGems v5.3.4) and the file
is not kept; every guard it drops is listed at the end of the session. Planned by
harness.run.plugins for a library's pytest (``PluginPlan.suite_modules``).
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.yamlfile import read_yaml

__all__ = ["GuardRules", "decorator_guards", "load_rules", "stale_reasons"]

RULES_FILE = Path(__file__).with_suffix(".yaml")
DROPPED_KEY = pytest.StashKey[list[str]]()


@dataclass(frozen=True)
class GuardRules:
    conditions: tuple[str, ...]
    reasons: tuple[str, ...]
    keep: Mapping[str, str]  # file name -> why its guards are right

    def stale(self, condition: str, reason: str) -> bool:
        return (any(re.search(p, condition.strip()) for p in self.conditions)
                and any(re.search(p, reason.strip()) for p in self.reasons))


def load_rules(path: Path = RULES_FILE) -> GuardRules:
    data = read_yaml(path, str(path))
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError(f"{path}: not a version 1 rules file")
    keep = {str(k["file"]): str(k.get("why", "")) for k in data.get("keep") or []}
    return GuardRules(tuple(data.get("conditions") or ()), tuple(data.get("reasons") or ()), keep)


@functools.cache
def decorator_guards(function: Any) -> tuple[tuple[str, str], ...]:
    """(condition source, reason) of each ``pytest.mark.skipif`` decorating ``function``."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return ()
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return ()
    guards = []
    for deco in node.decorator_list:
        if not isinstance(deco, ast.Call) or not ast.unparse(deco.func).endswith("mark.skipif") or not deco.args:
            continue
        reason = next((k.value for k in deco.keywords if k.arg == "reason"), None)
        if isinstance(reason, ast.Constant) and isinstance(reason.value, str):
            guards.append((ast.unparse(deco.args[0]), reason.value))
    return tuple(guards)


def stale_reasons(function: Any, rules: GuardRules) -> set[str]:
    """Reasons of ``function``'s guards that the rules call stale."""
    return {reason for condition, reason in decorator_guards(function) if rules.stale(condition, reason)}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rules = load_rules()
    dropped: list[str] = []
    for item in items:
        function = getattr(item, "function", None)
        if function is None or Path(str(item.fspath)).name in rules.keep:
            continue
        stale = stale_reasons(function, rules)
        if not stale:
            continue
        marks = [m for m in item.own_markers
                 if m.name == "skipif" and m.kwargs.get("reason") in stale and m.args and m.args[0] is True]
        for mark in marks:
            item.own_markers.remove(mark)
            dropped.append(f"{item.nodeid}: {mark.kwargs['reason']}")
    config.stash[DROPPED_KEY] = dropped


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    dropped = config.stash.get(DROPPED_KEY, [])
    if dropped:
        terminalreporter.write_line(f"harness skipguards: dropped {len(dropped)} stale CUDA-only skip guard(s):")
        for line in dropped:
            terminalreporter.write_line(f"  {line}")
