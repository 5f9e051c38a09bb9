"""Arrows point one way: no import cycle among harness modules, whether the import is at the top
of a module, inside a function (deferred) or under ``TYPE_CHECKING``. A deferred import is still
a dependency: it only moves the cycle from import time to call time."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Set
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "harness"


def module_names(package: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    names: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join([*here, base] if base else here)
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """module -> the harness modules it imports anywhere in its text (``from a import b`` counts
    as an import of ``a.b`` when that is a module, else of ``a``)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _imported(node, module, path.name == "__init__.py")
            if isinstance(node, ast.ImportFrom):  # a.b when a.b is a module, else a
                names = [n for n in names[:-1] if n in modules] or names[-1:]
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    deps.add(name)
        graph[module] = deps
    return graph


def cycles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_finder_sees_a_cycle_through_a_deferred_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n")
    (pkg / "d.py").write_text("from pkg import a\n")  # imports into the cycle, not part of it
    graph = import_graph(module_names(pkg))
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]


def test_no_import_cycle_among_harness_modules() -> None:
    found = cycles(import_graph(module_names(PACKAGE)))
    assert found == [], "import cycles among harness modules: " + "; ".join(" <-> ".join(c) for c in found)


# (importer package, imported package): arrows that must not exist. Records and their pages sit
# below the commands that read runs; the parent and the op process share only harness.contract.
FORBIDDEN = (
    ("harness.results", "harness.compare"),
    ("harness.run", "harness.child"),
    ("harness.child", "harness.run"),
)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_lower_layers_do_not_import_higher_ones() -> None:
    graph = import_graph(module_names(PACKAGE))
    wrong = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                   for low, high in FORBIDDEN if _within(m, low) and _within(d, high))
    assert wrong == []
