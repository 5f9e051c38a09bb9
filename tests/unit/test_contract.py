"""harness.contract: what the parent writes is what the op process reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.contract import CHILD_MODULE, ChildArgs, ChildSpec, Replay, SuiteFacts, SweepTask


@pytest.mark.parametrize("args", [
    ChildArgs("/r/specs/add.exit", ("-q", "test_cases.py")),
    ChildArgs("/r/specs/add.exit", ("--", "-x"), hold=True),
    ChildArgs("/r/specs/mm.exit", ("a", "b"), hold=True, preload=("flag_gems", "vllm"), warm_profiler=True),
])
def test_the_op_process_reads_back_the_command_line_the_parent_builds(args: ChildArgs) -> None:
    argv = args.argv()
    assert argv[:2] == ["-m", CHILD_MODULE]
    assert ChildArgs.parse(argv[2:]) == args


def test_preload_and_the_profiler_warm_up_belong_to_a_held_process_only() -> None:
    argv = ChildArgs("/e", ("t.py",), preload=("flag_gems",), warm_profiler=True).argv()
    assert argv == ["-m", CHILD_MODULE, "/e", "--", "t.py"]


@pytest.mark.parametrize("argv", [[], ["/e"], ["/e", "t.py"], ["/e", "--preload", "x", "--", "t.py"],
                                  ["/e", "--hold", "--bogus", "--", "t.py"]])
def test_a_line_that_is_not_an_op_process_line_is_refused(argv: list[str]) -> None:
    assert ChildArgs.parse(argv) is None


def _spec(**more: object) -> ChildSpec:
    base = ChildSpec(run_id="r", run_dir="/r", backend="cpu", device="cpu", op="mm", provider="flaggems-suite",
                     dtypes=("float16",), shapes=((2, 3),), seed=0, timer="cpu")
    return ChildSpec(**{**base.__dict__, **more})  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", [
    _spec(),
    _spec(capture_off="poisoned earlier", ir_sass=True, replay=Replay(run_dir="/runs/a", file="/r/sweep/mm.json")),
    _spec(sweep=SweepTask(configs_out="/r/sweep/mm/shard-1.json", result="/r/sweep/mm/shard-1.result.json",
                          index=1, count=3),
          suite=SuiteFacts(suite_dir="/fg/benchmark", package="flag_gems", level="core", nodes=("test_mm.py::mm",),
                           notes=("shapes from a file",), unchecked="random output", autotune=True, wall=True)),
])
def test_a_spec_survives_its_file(spec: ChildSpec, tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    spec.dump(path)
    assert ChildSpec.load(path) == spec
    assert "extra" not in json.loads(path.read_text())  # every section is typed


def test_two_op_ids_that_map_to_one_file_name_are_found_and_a_run_of_them_is_refused() -> None:
    from harness.contract import op_file_stem, stem_clashes
    from harness.errors import UsageError
    from harness.run.execute import check_file_stems

    assert op_file_stem("test_pow.py::pow_scalar") == "test_pow.py__pow_scalar"
    ops = ["softmax", "test_pow.py::pow_scalar", "add", "test_pow.py__pow_scalar", "test_pow.py:?pow_scalar"]
    assert stem_clashes(ops) == [("test_pow.py::pow_scalar", "test_pow.py__pow_scalar"),
                                 ("test_pow.py::pow_scalar", "test_pow.py:?pow_scalar")]
    assert stem_clashes(["softmax", "add", "Add"]) == []  # another case is another file name on Linux
    check_file_stems(["softmax", "add"])  # nothing to refuse
    with pytest.raises(UsageError, match=r"ops 'test_pow.py::pow_scalar' and 'test_pow.py__pow_scalar' would share "
                                         r"the file name 'test_pow.py__pow_scalar'"):
        check_file_stems(ops)
