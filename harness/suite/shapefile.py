"""Shapes for a suite op: FlagGems' own by default; a user's ``--shapes-file`` overrides per op.

FlagGems' ``Benchmark.set_shapes`` (both layouts) loads its shape file (``--shape_file``,
``core_shapes.yaml`` by default), takes ``yaml[op_name]`` when the benchmark's op_name has an
entry, else the first class of ``type(self).__mro__`` that has one, else its DEFAULT_SHAPES; at
``--level comprehensive`` it then adds the shapes of the class's ``set_more_shapes``.

A ``--shapes-file`` entry (``KEY: [[...], ...]``, or FlagGems' own ``KEY: {shapes: [...]}``, so
``benchmark/models_shapes/qwen25.yaml`` works as it is) is matched to each benchmark the way
FlagGems matches its own: the op (its id, function name, marks, op_name), then its class chain
from the most to the least specific class. The matched shapes are written, under the
benchmark's op_name, into a copy of FlagGems' file private to the op's process, so FlagGems'
own lookup takes them first. An entry whose shapes have a number of dimensions the benchmark's
own shapes never have (``[4096, 4096]`` for a ``(B, M, N, K)`` BlasBenchmark) is not written
there. A benchmark that sets its shapes in the test file
(a ``set_shapes`` of its own, a ``get_input_iter`` walking a list of its own) never reads that
file. Every matched entry goes to the op process too (``ShapePlan.inputs``), which gives it to
the benchmark where it builds its inputs, or keeps the benchmark's shapes and says on its rows why
(a number of dimensions its own shapes never have, inputs made from sizes of its own;
harness.child.input_shapes).
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError, UsageError
from harness.results.store import atomic_write_text
from harness.suite.inventory import BenchBuild, Inventory
from harness.suite.select import SuiteOp, op_catalog
from harness.yamlfile import read_yaml

__all__ = [
    "ShapePlan",
    "check_override_keys",
    "plan_op_shapes",
    "read_shapes_override",
    "read_suite_shapes",
    "suite_shape_config",
    "write_shape_file",
]

SuiteShape = tuple[int, ...]


def read_suite_shapes(path: Path) -> dict[str, Any]:
    """FlagGems' core_shapes.yaml as a mapping (anchors and merge keys resolved)."""
    data = read_yaml(path, f"FlagGems' shape file {path}")
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: FlagGems' shape file should map names to {{shapes: [...]}}; "
                          f"got {type(data).__name__}.")
    return dict(data)


def _shape(value: Any) -> SuiteShape | None:
    if isinstance(value, list) and value and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                 for d in value):
        return tuple(value)
    return None


def read_shapes_override(path: str) -> dict[str, list[SuiteShape]]:
    """``KEY -> shapes`` from a --shapes-file; every malformed entry is a ConfigError naming it."""
    source = f"--shapes-file {path}"
    data = read_yaml(Path(path), source)
    if not isinstance(data, Mapping) or not data:
        raise ConfigError(f"{source}: must map benchmark names (op, op_name or Benchmark class) to shapes, "
                          "e.g. 'softmax: [[4096, 4096]]' or 'BlasBenchmark: {shapes: [[1, 4096, 4096, 4096]]}'.")
    found: dict[str, list[SuiteShape]] = {}
    for key, value in data.items():
        shapes = value.get("shapes") if isinstance(value, Mapping) else value
        parsed = [_shape(s) for s in shapes] if isinstance(shapes, list) and shapes else [None]
        if any(s is None for s in parsed):
            raise ConfigError(f"{source}: {key!r} must be a non-empty list of shapes (lists of integers >= 0), "
                              f"or {{shapes: [...]}}; got {value!r}.")
        found[str(key)] = [s for s in parsed if s is not None]
    return found


def check_override_keys(override: Mapping[str, object], inventory: Inventory) -> None:
    """Refuse keys that match nothing in the tree (a typo would otherwise leave FlagGems' shapes)."""
    known: set[str] = set(inventory.class_names)
    for op in op_catalog(inventory).values():
        known.update(op.keys)
        known.update(f.nodeid for f in op.functions)
    unknown = [k for k in override if k not in known]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6)
            hints.append(f"{key!r}" + (f" (closest: {', '.join(close)})" if close else ""))
        raise UsageError(f"--shapes-file: {len(unknown)} key(s) match no benchmark, op_name, mark or Benchmark "
                         f"class of {inventory.tree.suite_dir}: {'; '.join(hints)}. Fix or remove them.")


@dataclass(frozen=True)
class ShapePlan:
    """The entries an op's private shape file gets, and what its rows should say."""

    entries: Mapping[str, list[SuiteShape]]  # FlagGems shape-file key -> shapes
    notes: tuple[str, ...] = ()
    # op_name or Benchmark class -> shapes, for the op process's input seam (harness.child.input_shapes):
    # every matched benchmark, so one that sets its own shapes or walks a list of its own gets them too
    inputs: Mapping[str, list[SuiteShape]] = field(default_factory=dict)

    @property
    def overrides(self) -> bool:
        return bool(self.entries)


def _upstream_entry(build: BenchBuild, upstream: Mapping[str, Any]) -> tuple[str, list[SuiteShape]] | None:
    """The entry FlagGems' own lookup would take for ``build``: op_name, then its class chain."""
    for key in (build.recorded_op_name, *build.class_chain):
        entry = upstream.get(key) if key else None
        if isinstance(entry, Mapping) and isinstance(entry.get("shapes"), list):
            return key, [s for s in (_shape(x) for x in entry["shapes"]) if s is not None]
    return None


def _match(names: Iterable[str], override: Mapping[str, list[SuiteShape]]) -> str | None:
    return next((n for n in names if n and n in override), None)


def plan_op_shapes(op: SuiteOp, override: Mapping[str, list[SuiteShape]], upstream: Mapping[str, Any]) -> ShapePlan:
    """Which --shapes-file entry each benchmark of ``op`` takes, if any (pure)."""
    if not override:
        return ShapePlan(entries={})
    op_names = [op.id, *(f.nodeid for f in op.functions), *(f.key for f in op.functions)]
    entries: dict[str, list[SuiteShape]] = {}
    inputs: dict[str, list[SuiteShape]] = {}
    notes: list[str] = []
    builds = [b for f in op.functions for b in f.builds]
    for build in builds:
        key = _match([*op_names, *(m for f in op.functions for m in f.marks), build.recorded_op_name,
                      *build.class_chain], override)
        if key is None:
            continue
        shapes = override[key]
        label = build.recorded_op_name or build.bench_class
        inputs[label] = list(shapes)
        if not build.reads_shape_file:  # its set_shapes is its own: only the input seam gives them
            continue
        own = _upstream_entry(build, upstream)
        dims = sorted({len(s) for s in own[1]}) if own else []
        if any(dims and len(s) not in dims for s in shapes):
            continue  # not for FlagGems' file; the input seam checks them against what the benchmark walks
        entries[label] = list(shapes)
    if not builds:  # no Benchmark construction could be read: FlagGems' op_names are its marks
        key = _match([*op_names, *(m for f in op.functions for m in f.marks)], override)
        if key is not None:
            for mark in [m for f in op.functions for m in f.marks] or [op.id]:
                entries[mark] = list(override[key])
                inputs[mark] = list(override[key])
            notes.append(f"--shapes-file entry {key!r} written under the op marks "
                         f"({', '.join(entries)}): the benchmark's classes could not be read without running it")
    return ShapePlan(entries=entries, notes=tuple(dict.fromkeys(notes)), inputs=inputs)


def suite_shape_config(upstream: Mapping[str, Any], entries: Mapping[str, Sequence[Sequence[int]]]) -> dict[str, Any]:
    """FlagGems' shape configuration with ``entries`` as entries of their own (each keeps the
    ``shape_desc`` the key already had); ``upstream`` is not modified."""
    config: dict[str, Any] = copy.deepcopy(dict(upstream))
    for key, shapes in entries.items():
        if not shapes:
            raise ValueError(f"no shapes for {key!r}")
        previous = config.get(key)
        entry: dict[str, Any] = {"shapes": [[int(d) for d in shape] for shape in shapes]}
        if isinstance(previous, Mapping) and previous.get("shape_desc"):
            entry["shape_desc"] = previous["shape_desc"]
        config[key] = entry
    return config


class _PlainDumper(yaml.SafeDumper):
    """Writes shared entries out in full (no &id001 anchors): the file is read by people too."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def write_shape_file(path: Path, config: Mapping[str, Any]) -> None:
    text = yaml.dump(dict(config), Dumper=_PlainDumper, sort_keys=False, default_flow_style=None)
    atomic_write_text(path, "# written by `harness run --suite`: FlagGems' shapes, with the --shapes-file "
                            "entries for this op\n" + text)
