"""FlagGems' printed result table, as an op's log shows it: the Size Detail items that are the same
in every row are shown once, in a line under the header, and each row keeps the items that change;
with the colour switch (``--table-colour on``), SUCCESS is green and FAILED red. The columns, their
names and the words SUCCESS and FAILED stay FlagGems' own, so a reader of the log (or grep) finds
what it found before. Pure functions: the suite plugin wraps FlagGems' ``BenchmarkResult.__str__``
with :func:`folded_str`."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["LEGEND", "colour_statuses", "fold_details", "folded_str"]

LEGEND = "Size Detail, the same in every row:"
_GREEN, _RED, _RESET = "\x1b[32m", "\x1b[31m", "\x1b[0m"


def fold_details(details: Sequence[Any]) -> tuple[list[tuple[int, str]], list[list[Any]]] | None:
    """(the items the same in every row as (1-based position, repr), each row's other items), or
    None when there is nothing to fold: fewer than two rows, details that are not lists of one
    length, no item the same everywhere, or every item the same (then nothing would be left)."""
    if len(details) < 2 or not all(isinstance(d, list | tuple) for d in details):
        return None
    width = len(details[0])
    if width == 0 or any(len(d) != width for d in details):
        return None
    same = [i for i in range(width) if all(repr(d[i]) == repr(details[0][i]) for d in details)]
    if not same or len(same) == width:
        return None
    legend = [(i + 1, repr(details[0][i])) for i in same]
    return legend, [[d[i] for i in range(width) if i not in same] for d in details]


def colour_statuses(text: str) -> str:
    """Rows that begin with SUCCESS green, with FAILED red (the word itself keeps its place)."""
    lines = []
    for line in text.split("\n"):
        for word, colour in (("SUCCESS", _GREEN), ("FAILED", _RED)):
            if line.startswith(word):
                line = f"{colour}{word}{_RESET}{line[len(word):]}"
                break
        lines.append(line)
    return "\n".join(lines)


def _with_legend(text: str, legend: Sequence[tuple[int, str]]) -> str:
    """``text`` with the legend line after the header's rule (a line of dashes)."""
    lines = text.split("\n")
    rule = next((k for k, line in enumerate(lines) if line and set(line) == {"-"}), None)
    line = f"{LEGEND} " + ", ".join(f"#{position} {item}" for position, item in legend)
    if rule is None:
        return f"{text}\n{line}"
    return "\n".join([*lines[:rule + 1], line, *lines[rule + 1:]])


def folded_str(original: Callable[[Any], str], colour: bool) -> Callable[[Any], str]:
    """A ``__str__`` for FlagGems' BenchmarkResult: ``original`` renders the table from a copy whose
    rows keep only the Size Detail items that change; the others are shown once."""

    def render(result: Any) -> str:
        rows = list(getattr(result, "result", None) or ())
        folded = fold_details([getattr(row, "shape_detail", None) for row in rows])
        if folded is None:
            text = original(result)
        else:
            legend, varying = folded
            shown = copy.copy(result)
            shown.result = []
            for row, detail in zip(rows, varying, strict=True):
                row = copy.copy(row)
                row.shape_detail = detail
                shown.result.append(row)
            text = _with_legend(original(shown), legend)
        return colour_statuses(text) if colour else text

    return render
