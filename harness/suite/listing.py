"""``harness list suite --suite PATH [--csv]``: a FlagGems tree's benchmarks, without a GPU."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.results.store import csv_text
from harness.suite.inventory import UNKNOWN, BenchFunction, read_inventory
from harness.suite.layout import locate_suite
from harness.suite.select import op_catalog

__all__ = ["COLUMNS", "NEEDS_IMPORT", "list_suite", "suite_rows"]

COLUMNS = ("op", "file", "function", "line", "op_marks", "skip_marks", "direction", "dtypes",
           "bench_class", "op_name", "shapes")
NEEDS_IMPORT = ("Read without importing FlagGems (that needs a GPU): files, functions, marks, skip reasons, "
                "classes and literal dtypes. Known only when a benchmark runs: whether a skipif holds, dtypes "
                f"computed at run time ({UNKNOWN}), op_names built at run time, parametrized node ids, shapes a "
                "benchmark computes itself.")


def _shapes(function: BenchFunction) -> str:
    if not function.builds:
        return UNKNOWN
    own = [b for b in function.builds if not b.reads_shape_file]
    return "own (set in the test file)" if len(own) == len(function.builds) else "shape file"


def suite_rows(functions: Iterable[BenchFunction], op_of: Mapping[str, str]) -> list[dict[str, str]]:
    return [{
        "op": op_of.get(f.nodeid, ""),
        "file": f.file,
        "function": f.function,
        "line": str(f.line),
        "op_marks": " ".join(f.marks),
        "skip_marks": " | ".join(f.skips),
        "direction": f.direction,
        "dtypes": " ".join(f.dtypes) or UNKNOWN,
        "bench_class": " ".join(dict.fromkeys(b.bench_class for b in f.builds)),
        "op_name": " ".join(f.op_names),
        "shapes": _shapes(f),
    } for f in functions]


def list_suite(path: Path, csv_format: bool = False) -> str:
    tree = locate_suite(path)
    inventory = read_inventory(tree)
    op_of: dict[str, str] = {}
    for op in op_catalog(inventory).values():
        for function in op.functions:
            op_of.setdefault(function.nodeid, op.id)
    rows = suite_rows(inventory.functions, op_of)
    if csv_format:  # a file that could not be read is a row of its own, saying why
        unread = [{**dict.fromkeys(COLUMNS, ""), "file": name, "line": str(line), "skip_marks": f"not read: {why}"}
                  for name, line, why in inventory.unreadable]
        return csv_text(COLUMNS, rows + unread)
    shown = ("op", "file", "op_marks", "direction", "dtypes", "skip_marks")
    widths = {c: min(34, max([len(c)] + [len(r[c]) for r in rows])) for c in shown[:-1]}
    lines = [f"FlagGems {tree.ref or '(ref unknown)'}: {tree.layout} layout, package {tree.package}, "
             f"{len(inventory.files())} files, {len(rows)} benchmark functions, {len(op_of and set(op_of.values()))} ops"
             + (f", {len(inventory.unreadable)} file(s) not read" if inventory.unreadable else ""),
             *(f"not read: {name} line {line}: {why} (pytest cannot collect it either)"
               for name, line, why in inventory.unreadable),
             "  ".join(c.ljust(widths.get(c, 0)) for c in shown)]
    for row in rows:
        cells = [(row[c][: widths[c] - 1] + "~") if c in widths and len(row[c]) > widths[c] else row[c] for c in shown]
        lines.append("  ".join(cell.ljust(widths.get(c, 0)) for c, cell in zip(shown, cells, strict=True)).rstrip())
    lines.append(NEEDS_IMPORT)
    return "\n".join(lines) + "\n"
