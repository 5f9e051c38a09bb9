"""Autotune record and replay: which config Triton's autotuner picked, per kernel and key.

A run records, per op, ``RUN_DIR/autotune/<op>.json``: for every autotuner reachable from the
op, each cache key it tuned (Triton's key tuple, each value written as a tagged string such
as ``int:4096`` or ``str:torch.float16``) and the config it chose (meta-parameters,
num_warps, num_stages, and num_ctas/maxnreg where the config has them). The parent writes
``RUN_DIR/autotune/meta.json`` beside them: backend, device, Triton version.

``harness run --replay-from DIR`` preloads DIR's configs into each autotuner's cache before
the op's cases, so Triton finds them and does not tune; a key DIR lacks is tuned live and the
row says so (``Measurement.autotune``: see ROW_MARKERS).

This module holds the formats and the parent's check of a replay source. Seeding and
watching the autotuners is harness/autotune_tuners.py (plain Python on duck-typed autotuner
objects, unit-tested with fakes); the part that touches Triton (finding
``triton.runtime.autotuner.Autotuner`` instances, building ``triton.Config``) is
harness/plugins/autotune.py.
"""

from __future__ import annotations

import json
import numbers
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.results.store import read_json, write_json

__all__ = [
    "AUTOTUNE_DIR",
    "HOOK_NAME",
    "LIVE",
    "NONE",
    "REPLAYED",
    "REPLAY_MISS",
    "ROW_MARKERS",
    "SCALARS",
    "AutotuneMeta",
    "OpAutotune",
    "TunedConfig",
    "check_replay_source",
    "decode_key",
    "encode_key",
    "op_autotune_path",
    "read_meta",
    "read_op_autotune",
    "write_meta",
]

AUTOTUNE_DIR = "autotune"
META_FILE = "meta.json"
FORMAT_VERSION = 1
# An ops module may define harness_autotuners() -> iterable of autotuners that its globals do not
# show (built in a factory, kept in a dict). Optional; read from the candidate's module.
HOOK_NAME = "harness_autotuners"

# Measurement.autotune values.
LIVE = "live"  # no replay asked: whatever the autotuner chose in this run
REPLAYED = "replayed"  # every autotuned kernel of the case found a replayed config
REPLAY_MISS = "replay-miss"  # some kernel of the case was tuned live during a replay
NONE = "none"  # replay asked, and no autotuned kernel was looked up during the case
ROW_MARKERS = (LIVE, REPLAYED, REPLAY_MISS, NONE)


# ---------------------------------------------------------------------------------------------
# Keys: Triton's cache key is a tuple of the key arguments' values then the tensor dtypes
# (as strings). Each value becomes "type:text" so the exact tuple comes back.


def _encode(value: Any) -> str:
    if value is None:
        return "none:"
    if isinstance(value, bool):
        return f"bool:{value}"
    if isinstance(value, numbers.Integral):  # numpy's integers too; they hash as Python's do
        return f"int:{int(value)}"
    if isinstance(value, float):
        return f"float:{value!r}"
    if isinstance(value, str):
        return f"str:{value}"
    raise ValueError(f"a key value of type {type(value).__name__} ({str(value)[:60]}) has no JSON form")


def _decode(text: str) -> Any:
    tag, sep, body = text.partition(":")
    if not sep:
        raise ValueError(f"key part {text!r} has no type tag")
    if tag == "none":
        return None
    if tag == "bool" and body in ("True", "False"):
        return body == "True"
    if tag == "int":
        return int(body)
    if tag == "float":
        return float(body)
    if tag == "str":
        return body
    raise ValueError(f"key part {text!r} has an unknown type tag {tag!r}")


def encode_key(key: Iterable[Any]) -> tuple[str, ...]:
    """Triton's key tuple as JSON-safe strings; ValueError for a value with no such form."""
    return tuple(_encode(v) for v in key)


def decode_key(parts: Iterable[str]) -> tuple[Any, ...]:
    """The exact tuple :func:`encode_key` was given."""
    return tuple(_decode(p) for p in parts)


# ---------------------------------------------------------------------------------------------
# The recorded file of one op


SCALARS = (bool, int, float, str, type(None))


@dataclass(frozen=True)
class TunedConfig:
    """One autotuner decision: for ``kernel`` at ``key``, this config."""

    kernel: str
    key: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    num_warps: int | None = None
    num_stages: int | None = None
    num_ctas: int | None = None
    maxnreg: int | None = None
    pre_hook: bool = False  # the config carried a pre_hook (a function: not recorded, found again on replay)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kernel": self.kernel, "key": list(self.key), "kwargs": dict(self.kwargs)}
        for name in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.pre_hook:
            data["pre_hook"] = True
        return data

    @classmethod
    def from_json(cls, data: Any) -> TunedConfig:
        if not isinstance(data, dict) or not isinstance(data.get("kernel"), str):
            raise ValueError(f"a config entry must be an object with a 'kernel' name, got {str(data)[:80]}")
        key, kwargs = data.get("key"), data.get("kwargs", {})
        if not isinstance(key, list) or not all(isinstance(k, str) for k in key):
            raise ValueError(f"config of {data['kernel']}: 'key' must be a list of strings")
        if not isinstance(kwargs, dict) or not all(isinstance(v, SCALARS) for v in kwargs.values()):
            raise ValueError(f"config of {data['kernel']}: 'kwargs' must map names to numbers or strings")
        decode_key(key)  # a tag this version cannot read is a malformed file, not a silent miss
        ints = {}
        for name in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
            value = data.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"config of {data['kernel']}: {name} must be an integer")
            ints[name] = value
        return cls(kernel=data["kernel"], key=tuple(key), kwargs=dict(kwargs),
                   pre_hook=bool(data.get("pre_hook", False)), **ints)


@dataclass(frozen=True)
class OpAutotune:
    """``autotune/<op>.json``: the autotuners found for an op and the configs they chose."""

    op: str
    tuners: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # kernel -> key argument names
    configs: tuple[TunedConfig, ...] = ()
    notes: tuple[str, ...] = ()  # what could not be recorded, and why

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "op": self.op,
            "autotuners": [{"kernel": k, "key_args": list(v)} for k, v in self.tuners.items()],
            "configs": [c.to_json() for c in self.configs],
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: Any) -> OpAutotune:
        if not isinstance(data, dict) or not isinstance(data.get("op"), str):
            raise ValueError("not an autotune record (no 'op')")
        version = data.get("format_version")
        if not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
            raise ValueError(f"format_version {version!r} is not one this harness reads (1..{FORMAT_VERSION})")
        tuners = {}
        for t in data.get("autotuners", []):
            if not isinstance(t, dict) or not isinstance(t.get("kernel"), str):
                raise ValueError("each 'autotuners' entry needs a 'kernel' name")
            tuners[t["kernel"]] = tuple(str(a) for a in t.get("key_args", []))
        configs = tuple(TunedConfig.from_json(c) for c in data.get("configs", []))
        return cls(op=data["op"], tuners=tuners, configs=configs,
                   notes=tuple(str(n) for n in data.get("notes", [])))

    def merged_over(self, older: OpAutotune) -> OpAutotune:
        """This record with what an earlier attempt of the op recorded and this one did not."""
        mine = {(c.kernel, c.key) for c in self.configs}
        kept = tuple(c for c in older.configs if (c.kernel, c.key) not in mine)
        notes = tuple(dict.fromkeys(older.notes + self.notes))
        return OpAutotune(op=self.op, tuners={**older.tuners, **self.tuners},
                          configs=kept + self.configs, notes=notes)


def op_autotune_path(run_dir: Path, op: str) -> Path:
    return Path(run_dir) / AUTOTUNE_DIR / (re.sub(r"[^A-Za-z0-9_.-]", "_", op) + ".json")


def read_op_autotune(path: Path) -> OpAutotune:
    """Read one op's record; ValueError names what is wrong with it."""
    try:
        data = read_json(path)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from exc
    return OpAutotune.from_json(data)


# ---------------------------------------------------------------------------------------------
# The sidecar, and the parent's check before a replay


@dataclass(frozen=True)
class AutotuneMeta:
    backend: str
    device_name: str
    device_arch: str
    triton_version: str
    run_id: str

    def to_json(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "backend": self.backend, "device_name": self.device_name,
                "device_arch": self.device_arch, "triton_version": self.triton_version, "run_id": self.run_id}


def write_meta(run_dir: Path, meta: AutotuneMeta) -> None:
    write_json(Path(run_dir) / AUTOTUNE_DIR / META_FILE, meta.to_json())


def read_meta(path: Path) -> AutotuneMeta:
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("backend"), str):
        raise ValueError("no 'backend' in it")
    version = data.get("format_version")
    if not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise ValueError(f"format_version {version!r} is not one this harness reads (1..{FORMAT_VERSION}): "
                         "written by a newer harness? Upgrade the harness to replay it")
    return AutotuneMeta(
        backend=data["backend"], device_name=str(data.get("device_name", "")),
        device_arch=str(data.get("device_arch", "")), triton_version=str(data.get("triton_version", "")),
        run_id=str(data.get("run_id", "")),
    )


def check_replay_source(source: Path, backend: str) -> AutotuneMeta:
    """Refuse a --replay-from directory that cannot be replayed on ``backend``, before anything runs."""
    meta_path = Path(source) / AUTOTUNE_DIR / META_FILE
    if not meta_path.is_file():
        raise UsageError(
            f"--replay-from {source}: there is no {AUTOTUNE_DIR}/{META_FILE} in it, so it is not a run "
            "directory with recorded autotune configs (the directory does not exist, or the run was "
            "made by a harness without autotune recording). Give the --out directory of an earlier "
            f"`harness run` on backend {backend}."
        )
    try:
        meta = read_meta(meta_path)
    except ValueError as exc:
        raise UsageError(f"--replay-from {source}: {meta_path} is not a valid autotune sidecar ({exc}). "
                         "Record the configs again with a fresh `harness run`.") from exc
    if meta.backend != backend:
        raise UsageError(
            f"--replay-from {source}: its autotune configs were recorded on backend {meta.backend!r} "
            f"({meta.device_name or 'unknown device'}), but this run is on backend {backend!r}. Configs "
            "do not carry across backends (another compiler, other meta-parameters and limits). Replay "
            f"a run made on {backend}, or drop --replay-from to tune live."
        )
    for path in sorted(meta_path.parent.glob("*.json")):
        if path.name == META_FILE:
            continue
        try:
            read_op_autotune(path)
        except ValueError as exc:
            raise UsageError(f"--replay-from {source}: {path} cannot be read: {exc}. Record the configs "
                             "again with a fresh `harness run`, or remove that file to tune that op live.") from exc
    return meta
