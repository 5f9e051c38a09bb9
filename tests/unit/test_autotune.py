"""Autotune record/replay with fake autotuners that behave as Triton's does (no GPU, no Triton).

A FakeAutotuner has the attributes the harness reads of ``triton.runtime.autotuner.Autotuner``
(``cache``, ``configs``, ``keys``, ``base_fn``/``fn``) and looks its cache up the way
``Autotuner.run`` does; its "benchmark" picks whichever config the test says is fastest.
The real Autotuner, in the Triton interpreter, is exercised by tests/test_autotune_ab_cpu.py.
"""

from __future__ import annotations

import functools
import json
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.autotune.store import (
    AutotuneMeta,
    OpAutotune,
    TunedConfig,
    check_replay_source,
    decode_key,
    encode_key,
    op_autotune_path,
    read_op_autotune,
    write_meta,
)
from harness.autotune.tuners import AutotuneRecorder, find_autotuners, name_tuners
from harness.child.plugins.autotune import module_names
from harness.cli import main
from harness.errors import UsageError


class FakeConfig:
    def __init__(self, kwargs: dict[str, Any], num_warps: int = 4, num_stages: int = 3,
                 num_ctas: int = 1, maxnreg: int | None = None, pre_hook: Callable[..., Any] | None = None) -> None:
        self.kwargs, self.num_warps, self.num_stages = kwargs, num_warps, num_stages
        self.num_ctas, self.maxnreg, self.pre_hook = num_ctas, maxnreg, pre_hook


class FakeTensor:
    def __init__(self, dtype: str) -> None:
        self.dtype = dtype


def _copy_kernel() -> None:
    """Stands for the Python function under @triton.jit."""


class FakeAutotuner:
    def __init__(self, configs: Sequence[FakeConfig], keys: Sequence[str], fastest_block: int,
                 fn: Any = _copy_kernel) -> None:
        self.fn = fn
        self.base_fn = fn
        self.configs = list(configs)
        self.keys = list(keys)
        self.cache: Any = {}
        self.fastest_block = fastest_block
        self.benchmarked = 0

    def run(self, **args: Any) -> Any:
        """Autotuner.run's lookup: key values, then the tensors' dtypes as strings."""
        key = [args[k] for k in self.keys if k in args]
        key += [str(v.dtype) for v in args.values() if hasattr(v, "dtype")]
        key_t = tuple(key)
        if key_t not in self.cache:
            self.benchmarked += 1
            self.cache[key_t] = next(c for c in self.configs if c.kwargs["BLOCK"] == self.fastest_block)
        return self.cache[key_t]


def _note(nargs: dict[str, Any]) -> None:
    """A config pre_hook (a function: it cannot be written to JSON)."""


def configs() -> list[FakeConfig]:
    return [FakeConfig({"BLOCK": 16}, num_warps=1), FakeConfig({"BLOCK": 32}, num_warps=2, pre_hook=_note),
            FakeConfig({"BLOCK": 64}, num_warps=4, maxnreg=128)]


def built(entry: TunedConfig) -> FakeConfig:
    return FakeConfig(dict(entry.kwargs), num_warps=entry.num_warps or 4, num_stages=entry.num_stages or 3,
                      num_ctas=entry.num_ctas or 1, maxnreg=entry.maxnreg)


def case(recorder: AutotuneRecorder, tuner: FakeAutotuner | None = None, **args: Any) -> str:
    recorder.begin_case()
    if tuner is not None:
        tuner.run(**args)
    return recorder.marker()


def record_run(run_dir: Path, fastest_block: int, *sizes: int) -> Path:
    """A recording run: tunes each size live and writes run_dir/autotune/copy.json."""
    tuner = FakeAutotuner(configs(), ["n"], fastest_block)
    recorder = AutotuneRecorder("copy", op_autotune_path(run_dir, "copy"), {"_copy_kernel": tuner}, None, built)
    for n in sizes:
        assert case(recorder, tuner, x=FakeTensor("torch.float16"), n=n) == "live"
        recorder.save()
    return op_autotune_path(run_dir, "copy")


# -- keys and the file ---------------------------------------------------------------------------


def test_keys_come_back_as_the_exact_tuple_after_json() -> None:
    key = (4096, True, 1, 0.1, None, "torch.float16")
    encoded = encode_key(key)
    assert encoded == ("int:4096", "bool:True", "int:1", "float:0.1", "none:", "str:torch.float16")
    back = decode_key(json.loads(json.dumps(encoded)))
    assert back == key and type(back[1]) is bool and type(back[2]) is int
    assert encode_key((np.int64(7),)) == ("int:7",)
    with pytest.raises(ValueError, match="no JSON form"):
        encode_key((np.zeros(3),))  # a tensor-like key value cannot be written


def test_the_record_names_kernel_key_and_config(tmp_path: Path) -> None:
    path = record_run(tmp_path, 64, 100)
    data = json.loads(path.read_text())
    assert data["autotuners"] == [{"kernel": "_copy_kernel", "key_args": ["n"]}]
    assert data["configs"] == [{
        "kernel": "_copy_kernel", "key": ["int:100", "str:torch.float16"], "kwargs": {"BLOCK": 64},
        "num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": 128,
    }]
    again = read_op_autotune(path)
    assert OpAutotune.from_json(again.to_json()) == again


def test_a_later_attempt_keeps_what_an_earlier_one_recorded(tmp_path: Path) -> None:
    record_run(tmp_path, 32, 100)
    path = record_run(tmp_path, 32, 200)  # a retry of the op: a new process, the same file
    keys = sorted(c.key[0] for c in read_op_autotune(path).configs)
    assert keys == ["int:100", "int:200"]


# -- replay ---------------------------------------------------------------------------------------


def test_replay_uses_the_recorded_config_and_marks_each_row(tmp_path: Path) -> None:
    recorded = read_op_autotune(record_run(tmp_path / "a", 32, 100))
    # Side B would pick BLOCK 16 if it tuned; replay must keep A's BLOCK 32.
    tuner = FakeAutotuner(configs(), ["n"], fastest_block=16)
    recorder = AutotuneRecorder("copy", op_autotune_path(tmp_path / "b", "copy"), {"_copy_kernel": tuner},
                                recorded, built)
    assert case(recorder, tuner, x=FakeTensor("torch.float16"), n=100) == "replayed"
    assert tuner.benchmarked == 0
    chosen = tuner.cache[(100, "torch.float16")]
    assert chosen is tuner.configs[1]  # B's own config object: its pre_hook comes along
    assert case(recorder, tuner, x=FakeTensor("torch.float16"), n=200) == "replay-miss"
    assert tuner.benchmarked == 1
    assert case(recorder, tuner, x=FakeTensor("torch.float32"), n=100) == "replay-miss"  # dtype is in the key
    assert case(recorder) == "none"  # no autotuned kernel looked up during the case
    recorder.save()
    used = {c.key: c.kwargs["BLOCK"] for c in read_op_autotune(op_autotune_path(tmp_path / "b", "copy")).configs}
    assert used == {("int:100", "str:torch.float16"): 32, ("int:200", "str:torch.float16"): 16,
                    ("int:100", "str:torch.float32"): 16}


def test_a_replayed_config_the_kernel_no_longer_lists_is_rebuilt_unless_it_had_a_pre_hook(tmp_path: Path) -> None:
    recorded = OpAutotune(op="copy", tuners={"_copy_kernel": ("n",)}, configs=(
        TunedConfig("_copy_kernel", ("int:1",), {"BLOCK": 128}, num_warps=8, num_stages=2),
        TunedConfig("_copy_kernel", ("int:2",), {"BLOCK": 256}, num_warps=8, pre_hook=True),
    ))
    tuner = FakeAutotuner(configs(), ["n"], fastest_block=16)
    recorder = AutotuneRecorder("copy", op_autotune_path(tmp_path, "copy"), {"_copy_kernel": tuner}, recorded, built)
    assert case(recorder, tuner, n=1) == "replayed"
    assert tuner.cache[(1,)].kwargs == {"BLOCK": 128} and tuner.cache[(1,)].num_stages == 2
    assert case(recorder, tuner, n=2) == "replay-miss"  # its pre_hook cannot be rebuilt from JSON
    assert any("pre_hook" in note for note in recorder.notes)


def test_configs_of_a_key_with_other_arguments_are_not_replayed(tmp_path: Path) -> None:
    recorded = read_op_autotune(record_run(tmp_path / "a", 32, 100))
    tuner = FakeAutotuner(configs(), ["n", "m"], fastest_block=16)  # the kernel's key changed
    recorder = AutotuneRecorder("copy", op_autotune_path(tmp_path / "b", "copy"), {"_copy_kernel": tuner},
                                recorded, built)
    assert case(recorder, tuner, x=FakeTensor("torch.float16"), n=100) == "replay-miss"
    assert any("key arguments changed" in note for note in recorder.notes)


def test_an_op_the_source_did_not_record_tunes_live_and_says_so(tmp_path: Path) -> None:
    tuner = FakeAutotuner(configs(), ["n"], fastest_block=16)
    recorder = AutotuneRecorder("copy", op_autotune_path(tmp_path, "copy"), {"_copy_kernel": tuner},
                                OpAutotune(op="copy"), built)
    assert case(recorder, tuner, n=5) == "replay-miss"


class LibraryCache:
    """A library's own cache object (FlagGems' LibTuner keeps one): not a dict."""

    def __init__(self) -> None:
        self._data: dict[Any, Any] = {}

    def items(self) -> Any:
        return self._data.items()

    def __contains__(self, key: Any) -> bool:
        return key in self._data

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[key] = value


def test_an_autotuner_with_its_own_cache_is_recorded_but_its_rows_never_claim_a_replay(tmp_path: Path) -> None:
    tuner = FakeAutotuner(configs(), ["n"], fastest_block=64)
    tuner.cache = LibraryCache()
    recorder = AutotuneRecorder("copy", op_autotune_path(tmp_path, "copy"), {"_copy_kernel": tuner}, None, built)
    assert case(recorder, tuner, n=7) == "live"
    recorder.save()
    assert [c.kwargs for c in read_op_autotune(op_autotune_path(tmp_path, "copy")).configs] == [{"BLOCK": 64}]
    replaying = AutotuneRecorder("copy", op_autotune_path(tmp_path / "b", "copy"), {"_copy_kernel": tuner},
                                 read_op_autotune(op_autotune_path(tmp_path, "copy")), built)
    assert case(replaying) == "replay-miss"
    assert isinstance(tuner.cache, LibraryCache)  # left alone


# -- finding the autotuners -----------------------------------------------------------------------


class Heuristics:
    """Stands for triton.heuristics: a wrapper whose ``fn`` is the autotuner."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn


def _other_kernel() -> None:
    pass


def test_autotuners_are_found_in_globals_under_wrappers_and_through_the_hook() -> None:
    direct = FakeAutotuner(configs(), ["n"], 16)
    wrapped = FakeAutotuner(configs(), ["n"], 16, fn=_other_kernel)
    hidden = FakeAutotuner(configs(), ["n"], 16)  # same kernel name as `direct`
    module = types.ModuleType("user_ops")
    module.tuned = direct  # type: ignore[attr-defined]
    module.also_tuned = direct  # type: ignore[attr-defined]
    module.heuristic = Heuristics(wrapped)  # type: ignore[attr-defined]
    module.json = json  # type: ignore[attr-defined]
    module.table = {"k": hidden}  # type: ignore[attr-defined]
    module.harness_autotuners = lambda: [hidden]  # type: ignore[attr-defined]
    found = find_autotuners([module], lambda obj: isinstance(obj, FakeAutotuner))
    assert len(found) == 3
    named = name_tuners(found)
    assert sorted(named) == ["_copy_kernel", "_copy_kernel#2", "_other_kernel"]
    assert named["_other_kernel"] is wrapped


def test_the_modules_searched_include_what_a_candidate_wraps() -> None:
    @functools.wraps(_other_kernel)
    def wrapper() -> None:
        pass

    class Bound:
        def __init__(self, fn: Any) -> None:
            self.fn = fn

    names = module_names([Bound(functools.partial(wrapper)), json.dumps])
    assert names == [__name__, "json"]


# -- the replay source, and the command line --------------------------------------------------------


def _source(path: Path, backend: str) -> Path:
    write_meta(path, AutotuneMeta(backend=backend, device_name="NVIDIA H200", device_arch="sm_90",
                                  triton_version="3.7.1", run_id="r1"))
    return path


def test_a_replay_source_must_exist_match_the_backend_and_be_readable(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no autotune/meta.json"):
        check_replay_source(tmp_path / "nowhere", "cuda")
    source = _source(tmp_path / "run", "rocm")
    with pytest.raises(UsageError, match="recorded on backend 'rocm'.*this run is on backend 'cuda'"):
        check_replay_source(source, "cuda")
    source = _source(tmp_path / "run", "cuda")
    assert check_replay_source(source, "cuda").device_name == "NVIDIA H200"
    (source / "autotune" / "mm.json").write_text('{"format_version": 1, "op": "mm", "configs": [{"kernel": 3}]}')
    with pytest.raises(UsageError, match="mm.json cannot be read"):
        check_replay_source(source, "cuda")
    meta = source / "autotune" / "meta.json"
    meta.write_text(meta.read_text().replace('"format_version": 1', '"format_version": 99'))
    with pytest.raises(UsageError, match="format_version 99 is not one this harness reads.*newer harness"):
        check_replay_source(source, "cuda")


def test_harness_run_refuses_a_replay_from_another_backend_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _source(tmp_path / "gpu-run", "cuda")
    out = tmp_path / "run"
    code = main(["run", "--backend", "cpu", "--ops", "add", "--replay-from", str(source), "--out", str(out)], env={})
    assert code == 2
    err = capsys.readouterr().err
    assert "recorded on backend 'cuda'" in err and "drop --replay-from" in err
    assert not out.exists()
    code = main(["run", "--backend", "cpu", "--ops", "add", "--out", str(out)],
                env={"HARNESS_REPLAY_FROM": str(tmp_path / "missing")})
    assert code == 2 and "no autotune/meta.json" in capsys.readouterr().err
    assert not out.exists()
    # A suite run replays too, and is refused another backend's configs the same way, before its tree is read.
    code = main(["run", "--suite", str(tmp_path), "--replay-from", str(source), "--out", str(out)], env={})
    assert code == 2 and "recorded on backend 'cuda'" in capsys.readouterr().err
    assert not out.exists()
