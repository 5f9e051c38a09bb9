"""Which of a FlagGems tree's benchmarks a run covers, and the op id each gets (pure).

An op of a suite run is one FlagGems benchmark function, run in a process of its own:

- v5.3 layout (one ``test_<op>.py`` per op): the op id is the function's name without
  ``test_`` (``softmax_backward``, ``add_inplace``), the names FlagGems' op marks and the
  capture deny list use; a name found in two files is ``FILE::NAME``
  (``test_router_gemm.py::perf_router_gemm``). Its process runs exactly that pytest node.
- v5.0 layout (``test_<category>_perf.py``, many ops per function, one mark per op): the op id
  is the op mark (``softmax``), and its process runs ``-m MARK`` in the files that carry it.

``--node FILE::FUNC[PARAMS]`` names one pytest node exactly; its op id is the node id.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import UsageError
from harness.suite.inventory import BenchFunction, Inventory

__all__ = ["SuiteOp", "all_ops", "op_catalog", "resolve_nodes", "resolve_ops"]


@dataclass(frozen=True)
class SuiteOp:
    """One op of a suite run: the benchmark function(s) its process runs."""

    id: str
    functions: tuple[BenchFunction, ...]
    mark: str = ""  # v5.0: the mark selecting it in its files; "" = run the node ids
    nodes: tuple[str, ...] = field(default_factory=tuple)  # exact node ids (--node); default: the functions'

    @property
    def files(self) -> tuple[str, ...]:
        """The test files its process collects (relative to benchmark/)."""
        return tuple(dict.fromkeys(f.file for f in self.functions))

    def selected_nodes(self) -> tuple[str, ...]:
        """The node ids it runs: a function's (every parametrization) or exactly those given;
        () for a mark, which selects by itself."""
        return () if self.mark else tuple(self.nodes or (f.nodeid for f in self.functions))

    def describe(self) -> str:
        return f"-m {self.mark} in {' '.join(self.files)}" if self.mark else " ".join(self.selected_nodes())

    @property
    def keys(self) -> tuple[str, ...]:
        """Every name FlagGems and the harness know this op by: its id, its functions' names
        (without test_), marks and op_names. The capture deny list and shapes files match these."""
        names = [self.id, *(f.key for f in self.functions)]
        for function in self.functions:
            names += [*function.marks, *function.op_names]
        return tuple(dict.fromkeys(n for n in names if n))


def _qualified(function: BenchFunction) -> str:
    return f"{function.file}::{function.key}"


def op_catalog(inventory: Inventory) -> dict[str, SuiteOp]:
    """Every op of the tree by id, in file order."""
    if inventory.tree.layout == "v5.0":
        return _by_mark(inventory.functions)
    counts: dict[str, int] = {}
    for function in inventory.functions:
        counts[function.key] = counts.get(function.key, 0) + 1
    ops: dict[str, SuiteOp] = {}
    for function in inventory.functions:
        op_id = function.key if counts[function.key] == 1 else _qualified(function)
        ops[op_id] = SuiteOp(id=op_id, functions=(function,))
    return ops


def _by_mark(functions: Sequence[BenchFunction]) -> dict[str, SuiteOp]:
    marked: dict[str, list[BenchFunction]] = {}
    unmarked: list[BenchFunction] = []
    for function in functions:
        if not function.marks:
            unmarked.append(function)
        for mark in function.marks:
            marked.setdefault(mark, []).append(function)
    ops = {mark: SuiteOp(id=mark, functions=tuple(found), mark=mark) for mark, found in marked.items()}
    for function in unmarked:  # nothing selects it by mark: its node
        op_id = function.key if function.key not in ops else _qualified(function)
        ops[op_id] = SuiteOp(id=op_id, functions=(function,))
    return ops


def all_ops(inventory: Inventory) -> list[SuiteOp]:
    return list(op_catalog(inventory).values())


def _split(name: str) -> tuple[str, str]:
    """``FILE::NAME`` -> (file with .py, NAME without test_); ("", name) when unqualified."""
    file, sep, rest = name.partition("::")
    if not sep:
        return "", name
    file = file if file.endswith(".py") else f"{file}.py"
    return file, rest.removeprefix("test_") or rest


def _hint(name: str, catalog: Mapping[str, SuiteOp], inventory: Inventory) -> str:
    hidden = [nodeid for nodeid, marks in inventory.uncollected if name in marks or nodeid.endswith(f"::{name}")]
    if hidden:
        return f"{hidden[0]} has that mark but pytest does not collect it: its name lacks the test prefix"
    keys = list(catalog) + [f.key for f in inventory.functions]
    close = difflib.get_close_matches(name, list(dict.fromkeys(keys)), n=5, cutoff=0.6)
    return f"closest: {', '.join(close)}" if close else "no close match"


def resolve_ops(inventory: Inventory, names: Sequence[tuple[str, str]]) -> list[SuiteOp]:
    """The ops named (``(name, where it was written)``), in order, without repeats. Every unknown
    or ambiguous name is reported at once, with the closest names."""
    catalog = op_catalog(inventory)
    by_key: dict[str, list[SuiteOp]] = {}
    if inventory.tree.layout != "v5.0":  # there an op is a mark; a function holds many of them
        for each in catalog.values():
            for function in each.functions:
                by_key.setdefault(function.key, []).append(each)
    found: dict[str, SuiteOp] = {}
    problems: list[str] = []
    for name, origin in names:
        where = "" if origin == "--ops" else f" ({origin})"
        op: SuiteOp | None = catalog.get(name)
        if op is None:
            file, key = _split(name)
            matches = [o for o in by_key.get(key, []) if not file or any(f.file == file for f in o.functions)]
            matches = list({o.id: o for o in matches}.values())
            if len(matches) > 1:
                problems.append(f"{name}{where} is in {len(matches)} files: write one of "
                                f"{', '.join(_qualified(f) for o in matches for f in o.functions)}")
                continue
            op = matches[0] if matches else None
        if op is None and by_key:  # an op mark (adaptive_avg_pool2d) naming one function, as in v5.0
            marked = list({o.id: o for o in catalog.values() for f in o.functions
                           if name in f.marks and f.key != name}.values())
            if len(marked) > 1:
                problems.append(f"{name}{where} is the op mark of {len(marked)} benchmarks: write one of "
                                f"{', '.join(o.id for o in marked)}")
                continue
            op = marked[0] if marked else None
        if op is None:
            problems.append(f"{name}{where}: no such benchmark ({_hint(name, catalog, inventory)})")
            continue
        found.setdefault(op.id, op)
    if problems:
        unread = f" Note: {inventory.unreadable_note()}." if inventory.unreadable else ""
        raise UsageError(f"--suite {inventory.tree.suite_dir}: " + "; ".join(problems) + "." + unread
                         + " `harness list suite --suite PATH` lists every benchmark.")
    return list(found.values())


_NODE = re.compile(r"^(?P<file>[^:\[]+\.py)::(?P<function>[A-Za-z_][A-Za-z0-9_]*)(?P<params>\[.*\])?$")


def tree_node(node: str, suite_dir: Path) -> str:
    """``node`` relative to the suite's benchmark/ directory: a leading ``benchmark/`` (a path from
    the repository's root) is dropped, and a file given by an absolute path inside ``suite_dir``
    (the repository's root named in full, as the old driver took it) becomes its path from there.
    An absolute path elsewhere is left as given, for the caller to refuse."""
    file, sep, rest = node.partition("::")
    path = Path(file)
    if path.is_absolute():
        try:
            return path.resolve().relative_to(suite_dir.resolve()).as_posix() + sep + rest
        except ValueError:
            return node
    return node.removeprefix("benchmark/")


def resolve_nodes(inventory: Inventory, nodes: Sequence[str]) -> list[SuiteOp]:
    """``FILE::FUNC[PARAMS]`` node ids (relative to benchmark/, with a leading benchmark/, or with
    the absolute path of a file in the tree): one op each, running exactly that node. The parameters are not checked here (they are known
    only once pytest collects); a node pytest does not find ends its op SKIP."""
    functions = {f.nodeid: f for f in inventory.functions}
    ops: dict[str, SuiteOp] = {}
    problems: list[str] = []
    for node in nodes:
        text = tree_node(node, inventory.tree.suite_dir)
        match = _NODE.match(text)
        function = functions.get(f"{match['file']}::{match['function']}") if match else None
        if match is None or function is None:
            close = difflib.get_close_matches(text.split("[")[0], list(functions), n=5, cutoff=0.6)
            shape = "" if match else " (write FILE::FUNCTION, e.g. test_mm.py::test_mm)"
            if Path(text.partition("::")[0]).is_absolute():
                shape = f" (its file is not in the tree {inventory.tree.suite_dir})"
            problems.append(f"--node {node}: no such benchmark function{shape}"
                            + (f" (closest: {', '.join(close)})" if close else ""))
            continue
        ops.setdefault(text, SuiteOp(id=text, functions=(function,), nodes=(text,)))
    if problems:
        unread = f" Note: {inventory.unreadable_note()}." if inventory.unreadable else ""
        raise UsageError(f"--suite {inventory.tree.suite_dir}: " + "; ".join(problems) + "." + unread)
    return list(ops.values())
