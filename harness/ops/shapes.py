"""Shapes per op: the built-in levels and a user's shapes file, validated."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, UsageError
from harness.ops.base import Shape
from harness.yamlfile import read_yaml

__all__ = ["LEVELS", "load_level", "load_shapes_file", "parse_shapes"]

LEVELS: tuple[str, ...] = ("smoke", "core", "comprehensive")
_SHAPES_DIR = Path(__file__).parent / "shapes"


def parse_shapes(data: Any, source: str, known_ops: Collection[str] | None) -> dict[str, list[Shape]]:
    """Validate a mapping ``op id -> list of shapes``; every problem is a ConfigError naming ``source``."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source}: the top level must be a mapping from op id to a list of shapes, "
            f"for example 'softmax: [[1024, 1024], [4096, 4096]]'; got {type(data).__name__}."
        )
    result: dict[str, list[Shape]] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise ConfigError(f"{source}: op id {key!r} must be a string.")
        if known_ops is not None and key not in known_ops:
            raise ConfigError(
                f"{source}: key {key!r} matches no op. Known ops: {', '.join(sorted(known_ops))}. "
                "Fix the key, or load the module defining it with --ops-module."
            )
        if not isinstance(value, list) or not value:
            raise ConfigError(
                f"{source}: {key!r} must be a non-empty list of shapes such as [[1024, 1024]]; "
                f"got {value!r}."
            )
        shapes: list[Shape] = []
        for shape in value:
            if (
                not isinstance(shape, list)
                or not shape
                or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
            ):
                raise ConfigError(
                    f"{source}: {key!r} has the shape {shape!r}; a shape is a list of positive "
                    "integers such as [1024, 1024]."
                )
            shapes.append(tuple(shape))
        result[key] = shapes
    return result


def _read_yaml(path: Path, source: str) -> Any:
    return read_yaml(path, source, "Fix the file; the format is 'op_id: [[dim, dim], ...]'.")


def load_level(level: str) -> dict[str, list[Shape]]:
    if level not in LEVELS:
        raise UsageError(f"Unknown level {level!r}. Levels: {', '.join(LEVELS)}.")
    path = _SHAPES_DIR / f"{level}.yaml"
    return parse_shapes(_read_yaml(path, str(path)), str(path), None)


def load_shapes_file(path: str, known_ops: Collection[str]) -> dict[str, list[Shape]]:
    return parse_shapes(_read_yaml(Path(path), f"shapes file {path}"), f"shapes file {path}", known_ops)
