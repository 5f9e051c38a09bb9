"""The sweep's pure parts: shares, merging with conflicts, shard failures, the device locks."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from harness.autotune.store import OpAutotune, TunedConfig
from harness.autotune.sweep import SweepFiles, merge_processes, open_shares, split_cases
from harness.backends import get_backend
from harness.contract import SweepResult
from harness.errors import UsageError
from harness.run.context import DeviceLocks
from harness.run.decide import AttemptExit
from harness.run.sweep import (
    _process_reason,
    _SweepProcess,
    resolve_sweep_devices,
    sweep_plugins,
)


def test_cases_are_dealt_round_robin_one_share_per_device_entry() -> None:
    assert split_cases(["a", "b", "c", "d", "e"], ["0", "1"]) == [("0", ("a", "c", "e")), ("1", ("b", "d"))]
    assert split_cases(["a"], ["0", "0", "1"]) == [("0", ("a",))]  # shares without a case are dropped
    with pytest.raises(ValueError):
        split_cases(["a"], [])


def test_an_op_with_open_cases_is_shared_by_the_number_of_its_calls_one_share_per_device_entry() -> None:
    assert open_shares(["0", "0", "1"]) == [("0", ("its calls i with i % 3 == 0",)),
                                            ("0", ("its calls i with i % 3 == 1",)),
                                            ("1", ("its calls i with i % 3 == 2",))]
    with pytest.raises(ValueError):
        open_shares([])


def _cfg(key: int, block: int) -> TunedConfig:
    return TunedConfig(kernel="k", key=(f"int:{key}",), kwargs={"BLOCK": block}, num_warps=4)


def test_merging_keeps_the_lowest_shard_and_counts_keys_tuned_differently() -> None:
    shards = [OpAutotune("op", {"k": ("n",)}, (_cfg(128, 32), _cfg(256, 32))),
              OpAutotune("op", {"k": ("n",)}, (_cfg(128, 16), _cfg(512, 16), _cfg(256, 32)), notes=("n1",))]
    merged, conflicts = merge_processes("op", shards)
    assert {c.key[0]: c.kwargs["BLOCK"] for c in merged.configs} == {"int:128": 32, "int:256": 32, "int:512": 16}
    assert [(c.key, c.kept, c.others) for c in conflicts] == [(("int:128",), 0, (1,))]  # 256 agreed
    assert merged.notes == ("shard 1: n1",) and merged.tuners == {"k": ("n",)}


def test_sweep_devices_are_a_count_over_the_run_devices_or_ids() -> None:
    cpu, cuda = get_backend("cpu"), get_backend("cuda")
    assert resolve_sweep_devices("3", cpu, ["cpu"], {}) == ("cpu", "cpu", "cpu")
    assert resolve_sweep_devices("0,1", cpu, ["cpu"], {}) == ("0", "1")  # labels on the cpu backend
    assert resolve_sweep_devices("0,0", cuda, ["0"], {}) == ("0", "0")
    assert resolve_sweep_devices("1,0", cuda, ["5"], {"CUDA_VISIBLE_DEVICES": "5,6"}) == ("6", "5")
    with pytest.raises(UsageError):  # 3 is no index into the two visible devices
        resolve_sweep_devices("3,0", cuda, ["5"], {"CUDA_VISIBLE_DEVICES": "5,6"})


def test_a_shard_runs_without_timing_records_or_ir_but_always_records_configs() -> None:
    modules = ["harness.child.plugins.session", "harness.child.plugins.ir", "harness.child.plugins.timing",
               "harness.child.plugins.wall", "harness.child.plugins.records", "my.timing"]
    args = sweep_plugins(modules)
    assert args[1::2] == ["harness.child.plugins.session", "my.timing", "harness.child.plugins.autotune",
                          "harness.child.plugins.tune"]


def test_a_sweep_result_reads_back_as_written_and_a_damaged_one_is_none() -> None:
    full = SweepResult({"n=100": "ok", "n=300": "error: RuntimeError"}, compile_ms=12.5, calls=9, share=(1, 3))
    assert SweepResult.from_json(json.loads(json.dumps(full.to_json()))) == full
    assert SweepResult.from_json({"cases": {"a": "ok"}, "compile_ms": None}) == SweepResult({"a": "ok"})
    assert SweepResult.from_json(["not", "a", "result"]) is None


def test_why_a_shard_failed() -> None:
    shard = _SweepProcess(1, "3", ("a", "b"))
    assert _process_reason(shard, AttemptExit(0, pytest_exit=0), SweepResult({"a": "ok", "b": "skip: x"}), 60) == ""
    reason = _process_reason(shard, AttemptExit(1, pytest_exit=1),
                             SweepResult({"a": "error: RuntimeError: boom", "b": "error: x"}), 60)
    assert reason == "shard 1 on device 3: a: RuntimeError: boom (and 1 more)"
    assert "killed by SIGKILL" in _process_reason(shard, AttemptExit(-9), None, 60)
    assert "--op-timeout 60s" in _process_reason(shard, AttemptExit(-15, timed_out=True), None, 60)
    assert "wrote no result" in _process_reason(shard, AttemptExit(0, pytest_exit=0), None, 60)


def test_a_sweep_waits_for_ops_measured_on_its_devices_and_holds_them() -> None:
    locks = DeviceLocks()
    log: list[str] = []
    measuring_1 = threading.Event()
    release_1 = threading.Event()

    def measure_on_1() -> None:
        with locks.measuring("1"):
            measuring_1.set()
            release_1.wait(5)
            log.append("op on 1 done")
        with locks.measuring("1"):
            log.append("next op on 1")

    def sweep_from_0() -> None:
        with locks.measuring("0"):
            measuring_1.wait(5)
            with locks.sweeping("0", ["0", "1"]):
                log.append("sweep")
            log.append("measure on 0")

    threads = [threading.Thread(target=measure_on_1), threading.Thread(target=sweep_from_0)]
    for t in threads:
        t.start()
    measuring_1.wait(5)
    release_1.set()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert log.index("op on 1 done") < log.index("sweep") < log.index("measure on 0")
    assert locks.lock("0").acquire(blocking=False) and locks.lock("1").acquire(blocking=False)  # all let go


def test_sweep_files_live_under_the_run(tmp_path: Path) -> None:
    files = SweepFiles(tmp_path, "src:my op")
    assert files.configs == tmp_path / "sweep" / "src_my_op" / "configs.json"
    assert files.process_configs(2).name == "shard-2.json"
