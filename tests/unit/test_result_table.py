"""FlagGems' printed result table in an op's log: Size Detail items the same in every row shown once,
SUCCESS green and FAILED red with the colour switch, columns and words kept as FlagGems prints them."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import Any

from harness.child.plugins.suite import SuitePlugin
from harness.child.result_table import LEGEND, colour_statuses, fold_details, folded_str
from harness.contract import SuiteFacts


@dataclass
class Metrics:  # the fields of FlagGems' BenchmarkMetrics the table prints
    latency: float
    shape_detail: Any
    error_msg: str | None = None


@dataclass
class Result:  # FlagGems' BenchmarkResult's layout: title, column names, a rule, one line per row
    op_name: str
    result: list[Metrics] = field(default_factory=list)

    def __str__(self) -> str:
        names = f"{'Status':<10}{'Gems Latency (ms)':>20} {'Size Detail':>20}\n"
        lines = "".join(f"{'SUCCESS' if m.error_msg is None else 'FAILED':<10}{m.latency:>20.6f}          "
                        f"{m.shape_detail}\n" for m in self.result)
        return f"\nOperator: {self.op_name}  Performance Test\n" + names + "-" * len(names) + "\n" + lines


def _result() -> Result:
    return Result("mm", [Metrics(0.5, ["bf16", (64, 64), True]), Metrics(0.7, ["bf16", (128, 64), True]),
                         Metrics(0.9, ["bf16", (256, 64), True], error_msg="boom")])


def test_items_the_same_in_every_row_are_found_with_their_positions() -> None:
    folded = fold_details([["a", 1, "z"], ["a", 2, "z"]])
    assert folded == ([(1, "'a'"), (3, "'z'")], [[1], [2]])


def test_nothing_is_folded_where_nothing_would_be_gained_or_rows_differ_in_shape() -> None:
    assert fold_details([["a", 1]]) is None  # one row
    assert fold_details([["a", 1], ["a", 1]]) is None  # every item the same: nothing would be left
    assert fold_details([["a", 1], ["b", 2]]) is None  # nothing the same
    assert fold_details([["a", 1], ["a", 1, 2]]) is None  # lengths differ
    assert fold_details(["N/A", "N/A"]) is None  # not lists


def test_the_table_shows_the_common_items_once_under_the_rule_and_keeps_its_columns() -> None:
    result = _result()
    plain = str(result)
    text = folded_str(Result.__str__, colour=False)(result)
    lines = text.split("\n")
    rule = next(k for k, line in enumerate(lines) if line and set(line) == {"-"})
    assert lines[:rule + 1] == plain.split("\n")[:rule + 1]  # title, column names, rule: FlagGems' own
    assert lines[rule + 1] == f"{LEGEND} #1 'bf16', #3 True"
    rows = [line for line in lines if line.startswith(("SUCCESS", "FAILED"))]
    assert [row.split()[0] for row in rows] == ["SUCCESS", "SUCCESS", "FAILED"]
    assert rows[0].endswith("[(64, 64)]") and rows[2].endswith("[(256, 64)]")
    assert "\x1b[" not in text
    assert result.result[0].shape_detail == ["bf16", (64, 64), True]  # the object itself is left alone


def test_the_colour_switch_colours_the_status_words_only() -> None:
    text = folded_str(Result.__str__, colour=True)(_result())
    assert "\x1b[32mSUCCESS\x1b[0m" in text and "\x1b[31mFAILED\x1b[0m" in text
    assert colour_statuses("Status x\nSUCCESS 1\n") == "Status x\n\x1b[32mSUCCESS\x1b[0m 1\n"


def test_the_suite_plugin_wraps_flaggems_table_and_restores_it() -> None:
    module = types.ModuleType("fake_gems_base_for_table")
    original = Result.__str__

    class Benchmark:
        def get_latency(self) -> float:
            return 0.0

        def set_dtypes(self, user_dtypes: Any = None) -> None:
            pass

    Benchmark.__module__ = module.__name__
    module.Benchmark, module.BenchmarkResult = Benchmark, Result  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    plugin: Any = SuitePlugin.__new__(SuitePlugin)
    plugin.seam, plugin.patched = types.SimpleNamespace(), []
    plugin.spec = types.SimpleNamespace(suite=SuiteFacts(suite_dir="x", package="flag_gems", level="core",
                                                         table_colour=True))
    try:
        plugin._patch(Benchmark)
        text = str(_result())
        assert LEGEND in text and "\x1b[32mSUCCESS" in text
        plugin.restore()
        assert Result.__str__ is original and LEGEND not in str(_result())
    finally:
        Result.__str__ = original  # type: ignore[method-assign]
        sys.modules.pop(module.__name__)
