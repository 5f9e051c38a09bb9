from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError, UsageError
from harness.ops.base import OpSpec
from harness.run.select import read_dismiss_file, read_ops_file, select_run_ops, source_label


def _op(op_id: str, source: str = "builtin") -> OpSpec:
    return OpSpec(id=op_id, baseline=abs, candidate=abs, make_inputs=lambda *a: (), bytes_moved=lambda s, i: 0,
                  flops=lambda s: 0, source=source)


CATALOG = {op.id: op for op in (_op("softmax"), _op("add"), _op("mm"), _op("my_scale", "/repo/ops/my_ops.py"))}


def test_no_ops_named_means_every_op() -> None:
    assert [o.id for o in select_run_ops(CATALOG).ops] == ["softmax", "add", "mm", "my_scale"]


def test_ops_then_ops_file_in_order_without_repeats(tmp_path: Path) -> None:
    listing = tmp_path / "ops.txt"
    listing.write_text("# nightly list\nmm\n\nadd, softmax   # two on a line\nmm\n")
    chosen = select_run_ops(CATALOG, ["softmax"], str(listing))
    assert [o.id for o in chosen.ops] == ["softmax", "mm", "add"]


def test_unknown_op_in_a_file_names_file_and_line(tmp_path: Path) -> None:
    listing = tmp_path / "ops.txt"
    listing.write_text("add\nsoftmaxx\n")
    with pytest.raises(UsageError, match=r"softmaxx \(.*ops.txt line 2\).*Known ops"):
        select_run_ops(CATALOG, (), str(listing))


def test_missing_or_empty_ops_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        read_ops_file(str(tmp_path / "nope.txt"))
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(UsageError, match="names no op"):
        read_ops_file(str(tmp_path / "empty.txt"))


def test_source_prefixes_check_where_an_op_comes_from() -> None:
    assert source_label(CATALOG["my_scale"]) == "my_ops"
    chosen = select_run_ops(CATALOG, ["builtin:softmax", "my_ops:my_scale", "/repo/ops/my_ops.py:my_scale"])
    assert [o.id for o in chosen.ops] == ["softmax", "my_scale"]
    with pytest.raises(UsageError, match="'softmax' comes from 'builtin'. Write 'builtin:softmax'"):
        select_run_ops(CATALOG, ["flaggems:softmax"])


def test_dismissed_ops_stay_selected_with_their_reason(tmp_path: Path) -> None:
    dismiss = tmp_path / "dismiss.yaml"
    dismiss.write_text("builtin:mm: hangs on driver 535 (bug 123)\nsoftmax: not selected here\n")
    chosen = select_run_ops(CATALOG, ["add", "mm"], dismiss=str(dismiss))
    assert [o.id for o in chosen.ops] == ["add", "mm"]
    assert chosen.dismissed == {"mm": "hangs on driver 535 (bug 123)"}
    assert [o.id for o in chosen.to_run] == ["add"]


@pytest.mark.parametrize(
    "text, error, needle",
    [
        ("mm:\n", ConfigError, "has no reason"),
        ("- mm\n- add\n", ConfigError, "must map each op to the reason"),
        ("mm: [unclosed\n", ConfigError, "not valid YAML"),
        ("mmm: typo\n", UsageError, "Unknown op(s): mmm"),
    ],
)
def test_bad_dismiss_files(tmp_path: Path, text: str, error: type[Exception], needle: str) -> None:
    dismiss = tmp_path / "dismiss.yaml"
    dismiss.write_text(text)
    with pytest.raises(error) as info:
        select_run_ops(CATALOG, dismiss=str(dismiss))
    assert needle in str(info.value)


def test_empty_dismiss_file_dismisses_nothing(tmp_path: Path) -> None:
    dismiss = tmp_path / "dismiss.yaml"
    dismiss.write_text("# nothing dismissed this week\n")
    assert read_dismiss_file(str(dismiss)) == {}
