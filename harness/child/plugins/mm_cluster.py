"""Compat plugin for FlagGems' process: keep mm and mm_out off the Hopper cluster path.

FlagGems v5.3.4's Hopper mm (``runtime/backend/_nvidia/hopper/ops/mm.py``, loaded as the top-level
module ``hopper.ops.mm``) sends an input to ``cluster_remote_mm``, a 2-CTA thread-block cluster
kernel, when ``HAS_TLE and BLOCK_CLUSTER_MESH is not None`` and ``cluster_remote_mm_scenario``
accepts it; otherwise to split-K or ``general_mm``. ``BLOCK_CLUSTER_MESH`` is None unless FlagTree's
TLE device mesh exists, so on stock Triton the path is dead code. FlagGems has no setting that turns
it off; this plugin does, by setting the module's ``BLOCK_CLUSTER_MESH`` to None where the path is
live (the functions read that name at each call). Where the path is not live it changes nothing.

It loads into FlagGems' process, whichever runs it: the harness's op process (``--provider
flaggems``) and FlagGems' own pytest (``--suite``); off by default, ``--plugins +mm_cluster``
where the backend has the capability ``hopper_cluster_mm`` (harness.run.plugins). The modules are
looked for at the end of collection (FlagGems' conftest or benchmarks have imported flag_gems by
then) and again before each test (a module imported later), each handled once. What it found is
one line of the op's log per module (``harness mm_cluster: hopper.ops.mm: ...``), said once per
process; a process that never loaded such a module says so at its end (and one first met then,
imported during the last test, is reported and left as it is). docs/plugins.md.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

from harness.child.plugins.autotune import library_modules
from harness.child.plugins.oplog import say

__all__ = ["PREFIX", "SCENARIO", "ClusterGuard", "Outcome", "cluster_modules", "turn_off"]

PACKAGE = "flag_gems"
SCENARIO = "cluster_remote_mm_scenario"  # the function that marks a module with the cluster path
PREFIX = "harness mm_cluster:"  # each line this plugin writes to the op's log
NONE_FOUND = "no FlagGems module with a cluster path loaded"
GUARD_KEY = pytest.StashKey["ClusterGuard"]()


@dataclass(frozen=True)
class Outcome:
    module: str
    changed: bool  # the cluster path was live and is now off
    line: str  # what the op's log says (after PREFIX)


def cluster_modules(package: str = PACKAGE) -> list[tuple[str, ModuleType]]:
    """The loaded modules of ``package`` (harness.child.plugins.autotune.library_modules: its
    submodules and the modules loaded from files inside its folders, such as ``hopper.ops.mm``)
    that define ``cluster_remote_mm_scenario`` themselves (a module re-exporting it is not one)."""
    found: list[tuple[str, ModuleType]] = []
    for name in library_modules(package):
        module = sys.modules.get(name)
        fields: dict[str, Any] = vars(module) if hasattr(module, "__dict__") else {}
        scenario = fields.get(SCENARIO)
        if module is not None and callable(scenario) and getattr(scenario, "__module__", name) == module.__name__:
            found.append((name, module))
    return found


def turn_off(name: str, module: ModuleType, late: bool = False) -> Outcome:
    """Set ``module.BLOCK_CLUSTER_MESH`` to None where the cluster path is live; say what was found.
    ``late``: first seen when the session ends (imported during the last test), so left as it is."""
    fields = vars(module)
    if "HAS_TLE" not in fields or "BLOCK_CLUSTER_MESH" not in fields:
        return Outcome(name, False, f"{name}: left alone: it defines {SCENARIO} but not HAS_TLE and "
                                    "BLOCK_CLUSTER_MESH (not the layout of FlagGems 5.3.4)")
    if not fields["HAS_TLE"]:
        return Outcome(name, False, f"{name}: not applicable: HAS_TLE is False (stock Triton; the cluster path "
                                    "is dead code)")
    if fields["BLOCK_CLUSTER_MESH"] is None:
        return Outcome(name, False, f"{name}: not applicable: BLOCK_CLUSTER_MESH is None (TLE without its device "
                                    "mesh; the cluster path is dead code)")
    if late:
        return Outcome(name, False, f"{name}: cluster path live and left on: imported during the last test, after "
                                    "the plugin's last check")
    fields["BLOCK_CLUSTER_MESH"] = None  # the module's own namespace: mm and mm_out read it at each call
    return Outcome(name, True, f"{name}: cluster path off (was live: HAS_TLE, mesh set); mm and mm_out take "
                               "split-K or general_mm")


@dataclass
class ClusterGuard:
    """The modules handled in this process, each once."""

    package: str = PACKAGE
    outcomes: dict[int, Outcome] = field(default_factory=dict)  # by id() of the module

    def check(self, late: bool = False) -> list[Outcome]:
        """Handle the modules with a cluster path loaded since the last check; their outcomes."""
        new = []
        for name, module in cluster_modules(self.package):
            if id(module) not in self.outcomes:
                self.outcomes[id(module)] = outcome = turn_off(name, module, late)
                new.append(outcome)
        return new


def _check(config: pytest.Config, late: bool = False) -> ClusterGuard:
    guard = config.stash.get(GUARD_KEY, None)
    if guard is None:
        guard = config.stash[GUARD_KEY] = ClusterGuard()
    for outcome in guard.check(late):
        say(config, PREFIX, outcome.line)
    return guard


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    _check(session.config)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the test's fixtures, so before any of its mm calls."""
    _check(item.config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """What a module imported during the last test holds, or that none was ever loaded."""
    if not _check(session.config, late=True).outcomes:
        say(session.config, PREFIX, NONE_FOUND)
