"""FlagGems' LibTuner: record and replay through a stand-in with the real one's attribute shape.

The stand-in copies what flag_gems 5.3.4 (src/flag_gems/utils/libentry.py) does with its cache:
``LibTuner.cache`` is a ``ConfigCache`` (``table_name``, ``model``, ``get``/``set``, ``in``,
``[key]``, ``[key] = config``) over an SQLite model; ``run`` computes the strategy-normalised key
(``get_key``: the key arguments through each strategy, then the tensor dtypes as strings), asks
``key not in self.cache``, tunes and stores ``self.cache[key] = best``, then reads
``self.cache[key]``, and swaps a cached config for the kernel's own one of the same kwargs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.autotune.store import OpAutotune, TunedConfig, read_op_autotune
from harness.autotune.tuners import AutotuneRecorder, LibraryCache, is_library_cache


@dataclass
class Config:
    kwargs: dict[str, Any]
    num_warps: int = 4
    num_stages: int = 2
    num_ctas: int = 1
    maxnreg: int | None = None
    pre_hook: Any = None

    def all_kwargs(self) -> dict[str, Any]:
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages, "num_ctas": self.num_ctas}


@dataclass
class Model:
    """SQLPersistantModel's role: configs by (table, key); survives a 'run' like the database."""

    rows: dict[tuple[str, tuple[Any, ...]], Config] = field(default_factory=dict)

    def get_config(self, table: str, key: tuple[Any, ...]) -> Config | None:
        return self.rows.get((table, key))

    def put_config(self, table: str, key: tuple[Any, ...], config: Config) -> None:
        self.rows[(table, key)] = config


class ConfigCache:
    def __init__(self, table_name: str, model: Model) -> None:
        self.table_name, self.model = table_name, model

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        return self.get(key) is not None

    def __getitem__(self, key: tuple[Any, ...]) -> Config:
        ret = self.get(key)
        if ret is None:
            raise KeyError(key)
        return ret

    def __setitem__(self, key: tuple[Any, ...], config: Config) -> None:
        self.set(key, config)

    def get(self, key: tuple[Any, ...]) -> Config | None:
        return self.model.get_config(self.table_name, key)

    def set(self, key: tuple[Any, ...], config: Config) -> None:
        self.model.put_config(self.table_name, key, config)


def mm_kernel() -> None:  # the @triton.jit function's role (base_fn)
    return None


class FakeLibTuner:
    def __init__(self, model: Model, favour: int) -> None:
        self.configs = [Config({"BLOCK_M": b}) for b in (32, 64, 128)]
        self.keys = ["M", "N"]
        self.base_fn = mm_kernel
        self.cache = ConfigCache("mm_kernel_abc", model)
        self.favour = favour
        self.benchmarked = 0

    def get_key(self, args: dict[str, Any]) -> tuple[Any, ...]:
        align32 = (args["M"] + 31) // 32 * 32  # strategy "align32" on M, "default" on N
        return (align32, args["N"], "torch.float16")

    def run(self, M: int, N: int) -> Config:
        key = self.get_key({"M": M, "N": N})
        if key not in self.cache:
            self.benchmarked += 1
            best = next(c for c in self.configs if c.kwargs["BLOCK_M"] == self.favour)
            self.cache[key] = best
            config = self.cache[key]
        else:
            config = self.cache[key]
        if config.pre_hook is None:
            config = next((c for c in self.configs if c.all_kwargs() == config.all_kwargs()), config)
        return config


def make_config(entry: TunedConfig) -> Config:
    return Config(dict(entry.kwargs), num_warps=entry.num_warps or 4, num_stages=entry.num_stages or 2,
                  num_ctas=entry.num_ctas or 1)


def recorder(tuner: FakeLibTuner, path: Path, replay: OpAutotune | None) -> AutotuneRecorder:
    return AutotuneRecorder(op="mm", path=path, tuners={"mm_kernel": tuner}, replay=replay, make_config=make_config)


def test_a_libtuner_cache_is_recognised_and_wrapped_not_left_opaque(tmp_path: Path) -> None:
    tuner = FakeLibTuner(Model(), favour=64)
    assert is_library_cache(tuner.cache) and not is_library_cache({})
    rec = recorder(tuner, tmp_path / "mm.json", None)
    assert isinstance(tuner.cache, LibraryCache) and tuner.cache.table_name == "mm_kernel_abc"
    assert rec.opaque == []


def test_record_then_replay_then_miss(tmp_path: Path) -> None:
    # Record: the recording run tunes M=100 and M=1000 (favouring BLOCK_M 64).
    first = FakeLibTuner(Model(), favour=64)
    rec = recorder(first, tmp_path / "a.json", None)
    for m in (100, 1000):
        rec.begin_case()
        first.run(m, 256)
        assert rec.marker() == "live"
        rec.save()
    recorded = read_op_autotune(tmp_path / "a.json")
    assert {c.key: c.kwargs["BLOCK_M"] for c in recorded.configs} == {
        ("int:128", "int:256", "str:torch.float16"): 64, ("int:1024", "int:256", "str:torch.float16"): 64}

    # Replay in a fresh process (a new database) that would favour 32: the recorded 64 is used.
    second = FakeLibTuner(Model(), favour=32)
    rep = recorder(second, tmp_path / "b.json", recorded)
    rep.begin_case()
    assert second.run(100, 256).kwargs["BLOCK_M"] == 64 and second.benchmarked == 0
    assert rep.marker() == "replayed"
    rep.begin_case()
    assert second.run(110, 256).kwargs["BLOCK_M"] == 64  # 110 aligns to the recorded key 128
    assert rep.marker() == "replayed"
    # A key the record lacks is tuned live, and the row says so.
    rep.begin_case()
    assert second.run(5000, 256).kwargs["BLOCK_M"] == 32 and second.benchmarked == 1
    assert rep.marker() == "replay-miss"
    rep.save()
    used = read_op_autotune(tmp_path / "b.json")
    assert {c.key[0]: c.kwargs["BLOCK_M"] for c in used.configs} == {"int:128": 64, "int:5024": 32}


def test_a_key_from_flaggems_own_database_is_not_a_replay(tmp_path: Path) -> None:
    model = Model()
    model.put_config("mm_kernel_abc", (128, 256, "torch.float16"), Config({"BLOCK_M": 128}))
    tuner = FakeLibTuner(model, favour=32)
    rep = recorder(tuner, tmp_path / "r.json", OpAutotune(op="mm"))  # replaying, the record is empty
    rep.begin_case()
    assert tuner.run(100, 256).kwargs["BLOCK_M"] == 128 and tuner.benchmarked == 0
    assert rep.marker() == "replay-miss"  # chosen by an earlier run's database, not by the replay
    rep.save()
    assert [c.kwargs["BLOCK_M"] for c in read_op_autotune(tmp_path / "r.json").configs] == [128]


def test_a_cache_swapped_at_run_time_is_wrapped_again_and_the_case_marked(tmp_path: Path) -> None:
    tuner = FakeLibTuner(Model(), favour=64)
    rec = AutotuneRecorder(op="mm", path=tmp_path / "x.json", tuners={"mm_kernel": tuner},
                           replay=OpAutotune(op="mm"), make_config=make_config)
    rec.begin_case()
    tuner.cache = ConfigCache("mm_kernel_flagtune", Model())  # as LibTuner._set_configs_and_strategy does
    tuner.run(64, 64)
    assert rec.marker() == "replay-miss"
    assert isinstance(tuner.cache, LibraryCache) and tuner.cache.table_name == "mm_kernel_flagtune"


def test_autotuners_found_later_are_adopted_under_free_names_and_seeded(tmp_path: Path) -> None:
    first = FakeLibTuner(Model(), favour=64)
    rec = recorder(first, tmp_path / "a.json", None)
    rec.begin_case()
    first.run(100, 256)
    rec.save()
    recorded = read_op_autotune(tmp_path / "a.json")

    # Replaying: the op's process finds a second tuner of the same kernel name after it started.
    replayed = FakeLibTuner(Model(), favour=32)
    rep = AutotuneRecorder(op="mm", path=tmp_path / "b.json", tuners={}, replay=recorded, make_config=make_config)
    assert rep.adopt([replayed]) == ["mm_kernel"] and rep.adopt([replayed]) == []  # once
    late = FakeLibTuner(Model(), favour=32)
    assert rep.adopt([replayed, late]) == ["mm_kernel#2"]
    rep.begin_case()
    assert replayed.run(100, 256).kwargs["BLOCK_M"] == 64 and replayed.benchmarked == 0  # seeded on adoption
    assert rep.marker() == "replayed"
    rep.begin_case()
    late.run(100, 256)  # mm_kernel#2 was not recorded: tuned live
    assert rep.marker() == "replay-miss"


def test_library_modules_include_the_backends_a_library_imports_under_names_of_their_own(
        tmp_path: Path, monkeypatch: Any) -> None:
    """FlagGems 5.3.4 imports runtime/backend/_nvidia/hopper/ops/mm.py as ``hopper.ops.mm`` (its folder
    put on sys.path); on an H200 the mm it dispatches to and its LibTuner live there."""
    import importlib
    import sys

    from harness.child.plugins.autotune import library_modules

    package = tmp_path / "libtuner_test_lib"
    arch = package / "backend" / "libtuner_test_arch"
    arch.mkdir(parents=True)
    for path in (package / "__init__.py", package / "kernels.py", arch / "__init__.py", arch / "ops.py",
                 tmp_path / "libtuner_test_other.py"):
        path.write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(package / "backend"))
    names = ["libtuner_test_lib", "libtuner_test_lib.kernels", "libtuner_test_arch", "libtuner_test_arch.ops",
             "libtuner_test_other"]
    try:
        for name in names:
            importlib.import_module(name)
        assert library_modules("libtuner_test_lib") == sorted(names[:4])
        assert library_modules("libtuner_test_absent") == []
    finally:
        for name in names:
            sys.modules.pop(name, None)
