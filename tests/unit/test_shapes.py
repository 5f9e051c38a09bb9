from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.ops.registry import BUILTIN
from harness.ops.shapes import LEVELS, load_level, load_shapes_file, parse_shapes


@pytest.mark.parametrize("level", LEVELS)
def test_every_level_covers_every_builtin_op(level: str) -> None:
    shapes = load_level(level)
    assert set(tuple(BUILTIN)) <= set(shapes)
    for op, items in shapes.items():
        assert items, op


def test_user_file_parses(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("softmax:\n  - [8, 16]\n  - [3, 5]\n")
    assert load_shapes_file(str(f), tuple(BUILTIN)) == {"softmax": [(8, 16), (3, 5)]}


@pytest.mark.parametrize(
    "text, needle",
    [
        ("softmax: [[8, 16]\n", "not valid YAML at line"),
        ("- [8, 16]\n", "top level must be a mapping"),
        ("softmx: [[8, 16]]\n", "matches no op"),
        ("softmax: [[8, -1]]\n", "positive"),
        ("softmax: [[8, 'x']]\n", "positive"),
        ("softmax: []\n", "non-empty list"),
        ("softmax: [8, 16]\n", "a shape is a list"),
    ],
)
def test_bad_shapes_files(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=needle) as err:
        load_shapes_file(str(f), tuple(BUILTIN))
    assert str(f) in str(err.value)


def test_parse_shapes_rejects_bool_dims() -> None:
    with pytest.raises(ConfigError):
        parse_shapes({"add": [[True, 4]]}, "x", None)
