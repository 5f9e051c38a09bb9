"""Our shapes, written where FlagGems' suite reads its own (its ``--shape_file`` YAML).

FlagGems' ``Benchmark.set_shapes`` (performance_utils.py, v5.0.2) loads the YAML, takes
``yaml[op_name]["shapes"]`` when the op has a key of its own, else walks the Benchmark class
chain (``BlasBenchmark``, ``UnaryReductionBenchmark``..., finally ``Benchmark``) and uses the
first class name found, else its built-in DEFAULT_SHAPES. Writing a key named after the op
therefore wins over every class-level entry without touching their loader; every other entry
of their file is kept, so benchmarks the same mark also selects keep their own shapes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError
from harness.results.store import atomic_write_text

__all__ = ["read_suite_shapes", "suite_shape_config", "write_shape_file"]


def suite_shape_config(
    upstream: Mapping[str, Any],
    overrides: Mapping[str, Sequence[Sequence[int]]],
    shape_desc: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """FlagGems' shape configuration with ``overrides`` (op_name -> shapes in FlagGems' own
    convention for that benchmark) as per-op entries; ``upstream`` is not modified."""
    config: dict[str, Any] = copy.deepcopy(dict(upstream))
    for op_name, shapes in overrides.items():
        if not shapes:
            raise ValueError(f"no shapes for {op_name!r}")
        previous = config.get(op_name)
        desc = (shape_desc or {}).get(op_name)
        if desc is None and isinstance(previous, Mapping):
            desc = previous.get("shape_desc")
        entry: dict[str, Any] = {"shapes": [[int(d) for d in shape] for shape in shapes]}
        if desc:
            entry["shape_desc"] = desc
        config[op_name] = entry
    return config


def read_suite_shapes(path: Path) -> dict[str, Any]:
    """FlagGems' core_shapes.yaml as a mapping (anchors and merge keys resolved)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read FlagGems' shape file ({exc}).") from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: FlagGems' shape file should map names to {{shapes: [...]}}; "
                          f"got {type(data).__name__}.")
    return dict(data)


class _PlainDumper(yaml.SafeDumper):
    """Writes shared entries out in full (no &id001 anchors): the file is read by people too."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def write_shape_file(path: Path, config: Mapping[str, Any]) -> None:
    text = yaml.dump(dict(config), Dumper=_PlainDumper, sort_keys=False, default_flow_style=None)
    atomic_write_text(path, "# written by `harness run --suite`: FlagGems' shapes, with the harness's "
                            "shapes for the ops it runs\n" + text)
