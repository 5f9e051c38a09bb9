"""Autotune record and replay: which config Triton's autotuner picked, per kernel and key.

A run records, per op, ``RUN_DIR/autotune/<op>.json``: for every autotuner reachable from the
op, each cache key it tuned (Triton's key tuple, each value written as a tagged string such
as ``int:4096`` or ``str:torch.float16``) and the config it chose (meta-parameters,
num_warps, num_stages, and num_ctas/maxnreg where the config has them). The parent writes
``RUN_DIR/autotune/meta.json`` beside them: backend, device, Triton version.

``harness run --replay-from DIR`` preloads DIR's configs into each autotuner's cache before
the op's cases, so Triton finds them and does not tune; a key DIR lacks is tuned live and the
row says so (``Measurement.autotune``: see ROW_MARKERS).

Everything here is plain Python on duck-typed autotuner objects (``cache``, ``configs``,
``keys``, ``base_fn``/``fn``), so it is unit-tested with fakes; the Triton-touching part
(finding ``triton.runtime.autotuner.Autotuner`` instances, building ``triton.Config``) is
harness/plugins/autotune.py.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
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
    "AutotuneMeta",
    "AutotuneRecorder",
    "OpAutotune",
    "TrackingCache",
    "TunedConfig",
    "check_replay_source",
    "decode_key",
    "encode_key",
    "find_autotuners",
    "kernel_name",
    "name_tuners",
    "op_autotune_path",
    "read_meta",
    "read_op_autotune",
    "row_marker",
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
    if isinstance(value, int) or (hasattr(value, "__index__") and not isinstance(value, float)):
        return f"int:{int(value.__index__())}"
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


_SCALARS = (bool, int, float, str, type(None))


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
        if not isinstance(kwargs, dict) or not all(isinstance(v, _SCALARS) for v in kwargs.values()):
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


# ---------------------------------------------------------------------------------------------
# Finding and naming autotuners (duck-typed: the predicate decides what is one)


def kernel_name(tuner: Any) -> str:
    """The name of the Python function under the autotuner (Triton keeps it as ``base_fn``)."""
    fn = getattr(tuner, "base_fn", None) or getattr(tuner, "fn", None)
    for _ in range(8):
        if fn is None or inspect.isfunction(fn) or not hasattr(fn, "fn"):
            break
        fn = fn.fn
    return str(getattr(fn, "__name__", None) or type(tuner).__name__)


def _wrapped(obj: Any) -> Any:
    """What a Triton wrapper (heuristics, autotuner) wraps, read from the instance's own fields
    so that no module-level ``__getattr__`` (torch's lazy submodules) is triggered."""
    if isinstance(obj, (ModuleType, type)) or not hasattr(obj, "__dict__"):
        return None
    return vars(obj).get("fn")


def find_autotuners(modules: Sequence[ModuleType], is_autotuner: Callable[[Any], bool]) -> list[Any]:
    """Autotuners in the modules' globals (directly or under a wrapper such as heuristics),
    plus what each module's optional ``harness_autotuners()`` returns; each once, in a stable order."""
    found: dict[int, Any] = {}
    for module in modules:
        hook = vars(module).get(HOOK_NAME)
        if callable(hook):
            for obj in hook():
                if is_autotuner(obj):
                    found.setdefault(id(obj), obj)
        for _, value in sorted(vars(module).items()):
            obj = value
            for _ in range(4):
                if obj is None:
                    break
                if is_autotuner(obj):
                    found.setdefault(id(obj), obj)
                    break
                obj = _wrapped(obj)
    return list(found.values())


def name_tuners(tuners: Sequence[Any]) -> dict[str, Any]:
    """Each autotuner under its kernel's name; a second one of the same name becomes ``name#2``."""
    named: dict[str, Any] = {}
    for tuner in tuners:
        base = kernel_name(tuner)
        name, n = base, 1
        while name in named:
            n += 1
            name = f"{base}#{n}"
        named[name] = tuner
    return named


# ---------------------------------------------------------------------------------------------
# Watching and seeding an autotuner's cache


class TrackingCache(dict):  # type: ignore[type-arg]
    """An autotuner's cache that knows which lookups a replayed config answered.

    Triton's ``Autotuner.run`` tests ``key not in self.cache``, stores the winner with
    ``self.cache[key] = best`` after tuning, then reads ``self.cache[key]``; a dict subclass
    sees each of these without patching Triton.
    """

    def __init__(self, initial: Mapping[Any, Any] | None = None, replayed: Iterable[Any] = ()) -> None:
        super().__init__(initial or {})
        self.replayed = set(replayed)  # keys preloaded from the replay source
        self.used: set[Any] = set()
        self.hits = 0  # lookups answered by a replayed config, since reset()
        self.tuned = 0  # configs stored by the autotuner itself (tuned live), since reset()

    def __getitem__(self, key: Any) -> Any:
        value = super().__getitem__(key)
        self.used.add(key)
        if key in self.replayed:
            self.hits += 1
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.replayed.discard(key)
        self.tuned += 1

    def reset(self) -> None:
        self.hits = self.tuned = 0

    def recorded_items(self) -> Iterator[tuple[Any, Any]]:
        """What this process used: tuned keys, and replayed keys that were looked up."""
        for key, value in dict.items(self):
            if key not in self.replayed or key in self.used:
                yield key, value


def row_marker(replaying: bool, hits: int, tuned: int, opaque: bool) -> str:
    """A row's ``autotune`` value from what the op's autotuners did during its case.

    ``opaque``: the op has an autotuner whose cache could not be seeded (not a plain dict,
    as FlagGems' LibTuner's): it may have tuned, so the row cannot claim a replay.
    """
    if not replaying:
        return LIVE
    if tuned or opaque:
        return REPLAY_MISS
    return REPLAYED if hits else NONE


def config_matches(entry: TunedConfig, config: Any) -> bool:
    if dict(getattr(config, "kwargs", None) or {}) != dict(entry.kwargs):
        return False
    return all(getattr(config, name, None) == getattr(entry, name)
               for name in ("num_warps", "num_stages", "num_ctas", "maxnreg"))


def snapshot(name: str, tuner: Any) -> tuple[list[TunedConfig], list[str]]:
    """The configs an autotuner holds, as records; and notes on what could not be recorded."""
    cache = getattr(tuner, "cache", None)
    if isinstance(cache, TrackingCache):
        items: Iterable[tuple[Any, Any]] = cache.recorded_items()
    elif isinstance(cache, Mapping) or callable(getattr(cache, "items", None)):
        try:
            items = list(cache.items())  # type: ignore[union-attr]
        except Exception as exc:  # a library's own cache object: record what it lets us read
            return [], [f"{name}: its cache ({type(cache).__name__}) could not be read: {exc}"]
    else:
        return [], [f"{name}: its cache ({type(cache).__name__}) cannot be listed"]
    configs, notes = [], []
    for key, config in items:
        try:
            encoded = encode_key(key if isinstance(key, tuple) else (key,))
        except ValueError as exc:
            notes.append(f"{name}: a key was not recorded: {exc}")
            continue
        kwargs = dict(getattr(config, "kwargs", None) or {})
        if not all(isinstance(v, _SCALARS) for v in kwargs.values()):
            notes.append(f"{name}: the config for key {list(encoded)} has non-scalar meta-parameters")
            continue
        configs.append(TunedConfig(
            kernel=name, key=encoded, kwargs=kwargs,
            num_warps=getattr(config, "num_warps", None), num_stages=getattr(config, "num_stages", None),
            num_ctas=getattr(config, "num_ctas", None), maxnreg=getattr(config, "maxnreg", None),
            pre_hook=getattr(config, "pre_hook", None) is not None,
        ))
    return configs, notes


def preload(
    name: str,
    tuner: Any,
    recorded: OpAutotune,
    make_config: Callable[[TunedConfig], Any],
) -> tuple[TrackingCache, list[str]]:
    """Seed ``tuner``'s cache with the recorded configs of kernel ``name``; returns the cache
    installed and notes on what was not replayed (those keys are tuned live, and marked).

    A recorded config is replayed as the autotuner's own config object when one matches, so
    a config's pre_hook comes along; otherwise a new one is built with ``make_config``.
    """
    notes: list[str] = []
    entries: dict[Any, Any] = {}
    key_args = tuple(getattr(tuner, "keys", ()) or ())
    recorded_args = recorded.tuners.get(name)
    mine = [c for c in recorded.configs if c.kernel == name]
    if mine and recorded_args is not None and recorded_args != key_args:
        notes.append(f"{name}: its key arguments changed ({', '.join(recorded_args)} recorded, "
                     f"{', '.join(key_args)} now); its configs were not replayed")
        mine = []
    candidates = list(getattr(tuner, "configs", ()) or ())
    for entry in mine:
        key = decode_key(entry.key)
        own = next((c for c in candidates if config_matches(entry, c)), None)
        if own is None and entry.pre_hook:
            notes.append(f"{name}: the config for key {list(entry.key)} had a pre_hook and is no longer "
                         "one of the kernel's configs; not replayed")
            continue
        entries[key] = own if own is not None else make_config(entry)
    cache = TrackingCache({**dict(tuner.cache), **entries}, replayed=entries)
    tuner.cache = cache
    return cache, notes


class AutotuneRecorder:
    """One op process's autotuners: seeded before the cases when replaying, watched per case,
    and written to ``autotune/<op>.json`` after each case."""

    def __init__(
        self,
        op: str,
        path: Path,
        tuners: Mapping[str, Any],
        replay: OpAutotune | None,
        make_config: Callable[[TunedConfig], Any],
    ) -> None:
        self.op, self.path, self.tuners = op, path, dict(tuners)
        self.replaying = replay is not None
        self.caches: dict[str, TrackingCache] = {}
        self.notes: list[str] = []
        self.opaque: list[str] = []
        for name, tuner in self.tuners.items():
            if type(getattr(tuner, "cache", None)) not in (dict, TrackingCache):
                if self.replaying:
                    self.opaque.append(name)
                    self.notes.append(f"{name}: its cache is a {type(tuner.cache).__name__}, not Triton's "
                                      "dict, so it was not replayed; its rows are marked replay-miss")
                continue
            if replay is not None:
                self.caches[name], notes = preload(name, tuner, replay, make_config)
                self.notes += notes
            else:
                self.caches[name] = tuner.cache = TrackingCache(tuner.cache)

    def begin_case(self) -> None:
        for cache in self.caches.values():
            cache.reset()

    def marker(self) -> str:
        """The ``autotune`` value of the case since :meth:`begin_case`."""
        hits = sum(c.hits for c in self.caches.values())
        tuned = sum(c.tuned for c in self.caches.values())
        return row_marker(self.replaying, hits, tuned, bool(self.opaque))

    def current(self) -> OpAutotune:
        configs: list[TunedConfig] = []
        notes = list(self.notes)
        for name, tuner in self.tuners.items():
            found, why = snapshot(name, tuner)
            configs += found
            notes += why
        tuners = {name: tuple(getattr(t, "keys", ()) or ()) for name, t in self.tuners.items()}
        return OpAutotune(op=self.op, tuners=tuners, configs=tuple(configs), notes=tuple(notes))

    def save(self) -> None:
        """Write what this process chose, kept together with earlier attempts' choices."""
        record = self.current()
        if self.path.is_file():
            try:
                record = record.merged_over(read_op_autotune(self.path))
            except ValueError:
                pass  # a torn or foreign file: this attempt's record replaces it
        write_json(self.path, record.to_json())
