"""Seeding and watching Triton's autotuners in the op's process (record/replay: harness/autotune.py).

Plain Python on duck-typed autotuner objects: what is used of one is ``cache`` (a dict of
key tuple -> config), ``configs``, ``keys`` and ``base_fn``/``fn``; a config's ``kwargs``,
``num_warps``, ``num_stages``, ``num_ctas``, ``maxnreg`` and ``pre_hook``. Which objects are
autotuners, and how a config is built, the caller passes in (harness/plugins/autotune.py
passes Triton's), so all of this is unit-tested with fakes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.autotune.store import (
    HOOK_NAME,
    LIVE,
    NONE,
    REPLAY_MISS,
    REPLAYED,
    SCALARS,
    OpAutotune,
    TunedConfig,
    decode_key,
    encode_key,
    read_op_autotune,
)
from harness.results.store import write_json

__all__ = [
    "AutotuneRecorder",
    "LibraryCache",
    "is_library_cache",
    "TrackingCache",
    "config_matches",
    "find_autotuners",
    "kernel_name",
    "name_tuners",
    "preload",
    "row_marker",
    "snapshot",
]


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


def is_library_cache(cache: Any) -> bool:
    """A library autotuner's persistent config cache, as FlagGems' LibTuner has (its
    ``flag_gems.utils.libentry.ConfigCache``: ``table_name``, ``model``, ``get``/``set`` and the
    mapping methods ``in``, ``[key]``, ``[key] = config``, backed by an SQLite database)."""
    return (not isinstance(cache, Mapping) and hasattr(cache, "table_name")
            and callable(getattr(cache, "get", None)) and callable(getattr(cache, "set", None)))


class LibraryCache:
    """Stands in for a library's persistent config cache (FlagGems' LibTuner.cache): replayed
    configs answer first, and every lookup is seen.

    LibTuner.run asks ``key not in self.cache``, stores the winner with ``self.cache[key] = best``
    after tuning and reads ``self.cache[key]``; a key its database already held (an earlier run,
    outside this harness) is neither replayed nor tuned here: it counts as ``stored``, so a
    replaying row that used one is marked replay-miss.
    """

    def __init__(self, inner: Any, replayed: Mapping[Any, Any] | None = None) -> None:
        self.inner = inner
        self.replayed = dict(replayed or {})
        self.seen: dict[Any, Any] = {}  # key -> config used or tuned in this process
        self.hits = self.tuned = self.stored = 0
        self._tuned_keys: set[Any] = set()

    def __getattr__(self, name: str) -> Any:  # table_name, model, ... of the library's cache
        return getattr(self.inner, name)

    def __contains__(self, key: Any) -> bool:
        return key in self.replayed or key in self.inner

    def get(self, key: Any) -> Any:
        if key in self.replayed:
            self.hits += 1
            self.seen[key] = self.replayed[key]
            return self.replayed[key]
        value = self.inner.get(key)
        if value is not None:
            if key not in self._tuned_keys:
                self.stored += 1
            self.seen[key] = value
        return value

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key)
        if value is None:
            raise KeyError(f"Key {key} not found in the config cache.")
        return value

    def set(self, key: Any, config: Any) -> None:
        self.replayed.pop(key, None)
        self.tuned += 1
        self._tuned_keys.add(key)
        self.seen[key] = config
        self.inner.set(key, config)

    def __setitem__(self, key: Any, config: Any) -> None:
        self.set(key, config)

    def reset(self) -> None:
        self.hits = self.tuned = self.stored = 0

    def recorded_items(self) -> Iterator[tuple[Any, Any]]:
        """What this process used or tuned (a library's database cannot be listed)."""
        yield from self.seen.items()


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
    if isinstance(cache, TrackingCache | LibraryCache):
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
        if not all(isinstance(v, SCALARS) for v in kwargs.values()):
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
) -> tuple[TrackingCache | LibraryCache, list[str]]:
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
    cache: TrackingCache | LibraryCache
    if is_library_cache(tuner.cache) or isinstance(tuner.cache, LibraryCache):
        inner = tuner.cache.inner if isinstance(tuner.cache, LibraryCache) else tuner.cache
        cache = LibraryCache(inner, entries)
    else:
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
        self.replay = replay
        self.make_config = make_config
        self.caches: dict[str, TrackingCache | LibraryCache] = {}
        self.notes: list[str] = []
        self.opaque: list[str] = []
        for name, tuner in self.tuners.items():
            self._watch(name, tuner)

    def _watch(self, name: str, tuner: Any) -> None:
        """Seed (when replaying) and watch one autotuner's cache."""
        if is_library_cache(getattr(tuner, "cache", None)):
            self._wrap_library(name, tuner)
            return
        if type(getattr(tuner, "cache", None)) not in (dict, TrackingCache):
            if self.replaying:
                self.opaque.append(name)
                self.notes.append(f"{name}: its cache is a {type(tuner.cache).__name__}, not Triton's "
                                  "dict, so it was not replayed; its rows are marked replay-miss")
            return
        if self.replay is not None:
            self.caches[name], notes = preload(name, tuner, self.replay, self.make_config)
            self.notes += notes
        else:
            self.caches[name] = tuner.cache = TrackingCache(tuner.cache)

    def adopt(self, tuners: Sequence[Any]) -> list[str]:
        """Watch autotuners found after the recorder was made (a module a benchmark imported
        late), each under a name not yet taken; the ones already watched are left alone.
        Returns the new names."""
        known = {id(t) for t in self.tuners.values()}
        added: list[str] = []
        for tuner in tuners:
            if id(tuner) in known:
                continue
            known.add(id(tuner))
            base = kernel_name(tuner)
            name, n = base, 1
            while name in self.tuners:
                n += 1
                name = f"{base}#{n}"
            self.tuners[name] = tuner
            self._watch(name, tuner)
            added.append(name)
        return added

    def _wrap_library(self, name: str, tuner: Any) -> None:
        if self.replay is not None:
            self.caches[name], notes = preload(name, tuner, self.replay, self.make_config)
            self.notes += [n for n in notes if n not in self.notes]
        else:
            self.caches[name] = tuner.cache = LibraryCache(tuner.cache)

    def _rewrap(self) -> list[str]:
        """Library tuners whose cache object was replaced since it was wrapped (FlagGems' FlagTune
        switches a LibTuner's table, and so its cache, at run time): wrapped again, and named."""
        replaced = []
        for name, cache in list(self.caches.items()):
            tuner = self.tuners[name]
            if isinstance(cache, LibraryCache) and tuner.cache is not cache:
                replaced.append(name)
                if is_library_cache(tuner.cache):
                    self._wrap_library(name, tuner)
        return replaced

    def begin_case(self) -> None:
        self._rewrap()
        for cache in self.caches.values():
            cache.reset()

    def marker(self) -> str:
        """The ``autotune`` value of the case since :meth:`begin_case`."""
        replaced = self._rewrap()
        for name in replaced:
            note = f"{name}: its cache was replaced during a case (FlagTune?); that case is marked replay-miss"
            if self.replaying and note not in self.notes:
                self.notes.append(note)
        hits = sum(c.hits for c in self.caches.values())
        tuned = sum(c.tuned + (c.stored if isinstance(c, LibraryCache) else 0) for c in self.caches.values())
        return row_marker(self.replaying, hits, tuned, bool(self.opaque) or bool(replaced))

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
