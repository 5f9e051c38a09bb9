"""Suite mode's planning without a GPU or a process: which tree a path is, what it holds, which
benchmarks a run selects, their shapes, dtypes and versions (tests/data stand-in trees of both
FlagGems layouts, written to a temporary directory)."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from harness.backends import get_backend
from harness.errors import EnvironmentProblem, UsageError
from harness.options import DTYPES, SUITE_DTYPES, RunOptions, resolve_run_options
from harness.run.plan import assign_parts
from harness.run.plugins import PluginPlan
from harness.sources import prepare
from harness.suite.inventory import Inventory, read_inventory
from harness.suite.layout import locate_suite, major_minor
from harness.suite.listing import list_suite
from harness.suite.runner import (
    installed_version,
    plan_suite_ops,
    suite_command,
    unchecked_reason,
)
from harness.suite.select import SuiteOp, all_ops, op_catalog, resolve_nodes, resolve_ops
from harness.suite.shapefile import (
    SuiteShape,
    check_override_keys,
    plan_op_shapes,
    read_shapes_override,
    read_suite_shapes,
    suite_shape_config,
)
from tests.data.fake_flaggems_suite import FakeSuite, write_fake_suite


@pytest.fixture(scope="module")
def v53(tmp_path_factory: pytest.TempPathFactory) -> FakeSuite:
    return write_fake_suite(tmp_path_factory.mktemp("v53"))


@pytest.fixture(scope="module")
def v50(tmp_path_factory: pytest.TempPathFactory) -> FakeSuite:
    return write_fake_suite(tmp_path_factory.mktemp("v50"), layout="v5.0", version="5.0.2")


@pytest.fixture(scope="module")
def inv53(v53: FakeSuite) -> Inventory:
    return read_inventory(locate_suite(v53.benchmark))


@pytest.fixture(scope="module")
def inv50(v50: FakeSuite) -> Inventory:
    return read_inventory(locate_suite(v50.benchmark))


def ops(inventory: Inventory, *names: str) -> list[SuiteOp]:
    return resolve_ops(inventory, [(n, "--ops") for n in names])


# -- layouts -------------------------------------------------------------------------------------


def test_both_layouts_and_the_vllm_variant_are_told_apart_by_their_files(tmp_path: Path) -> None:
    new = locate_suite(write_fake_suite(tmp_path / "a").benchmark)
    old = locate_suite(write_fake_suite(tmp_path / "b", layout="v5.0", version="5.0.2").benchmark)
    vllm = locate_suite(write_fake_suite(tmp_path / "c", package="flaggems_vllm", version="0.3.0").benchmark)
    assert (new.layout, new.package, new.version) == ("v5.3", "flag_gems", (5, 3))
    assert (old.layout, old.base_module.name, old.version) == ("v5.0", "performance_utils.py", (5, 0))
    assert (vllm.layout, vllm.package) == ("v5.3", "flaggems_vllm")


def test_a_path_that_is_no_flaggems_tree_is_refused_naming_what_is_there(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such directory"):
        locate_suite(tmp_path / "missing")
    (tmp_path / "bench").mkdir()
    with pytest.raises(UsageError, match="must be named benchmark"):
        locate_suite(tmp_path / "bench")
    other = tmp_path / "x" / "benchmark"
    other.mkdir(parents=True)
    (other / "base.py").write_text("")  # base.py alone (no consts.py) is not the v5.3 layout
    (other / "run.sh").write_text("")
    with pytest.raises(UsageError, match="found base.py, run.sh"):
        locate_suite(other)
    (other / "consts.py").write_text("")
    with pytest.raises(UsageError, match="lacks conftest.py and core_shapes.yaml"):
        locate_suite(other)
    (other / "conftest.py").write_text("import torch\n")
    (other / "core_shapes.yaml").write_text("{}\n")
    with pytest.raises(UsageError, match="imports none of flaggems_vllm, flag_gems"):
        locate_suite(other)


def test_the_ref_comes_from_flaggems_ref_else_the_trees_version_file(tmp_path: Path) -> None:
    suite = write_fake_suite(tmp_path, ref=None)
    assert locate_suite(suite.benchmark).ref == ""
    version = tmp_path / "src" / "flag_gems" / "_version.py"
    version.parent.mkdir(parents=True)
    version.write_text("version = '5.3.4'\n")
    assert locate_suite(suite.benchmark).ref == "5.3.4"
    assert major_minor("master (v5.3.4-166-ged2508bcb, ed2508b)") == (5, 3)
    assert major_minor("flag_gems 10.12.1rc") == (10, 12)
    assert major_minor("master") is None


# -- inventory ---------------------------------------------------------------------------------


def test_the_inventory_reads_marks_skips_directions_classes_and_dtypes(inv53: Inventory) -> None:
    by_node = {f.nodeid: f for f in inv53.functions}
    softmax_bwd = by_node["test_softmax.py::test_softmax_backward"]
    assert softmax_bwd.key == "softmax_backward" and softmax_bwd.direction == "backward"
    assert softmax_bwd.op_names == ("softmax_backward",)
    add = by_node["test_add.py::test_add"]
    assert add.dtypes == ("float16", "float32", "bfloat16", "complex64") and add.direction == "forward"
    assert by_node["test_add.py::test_add_inplace"].marks == ("add_",)
    assert by_node["test_add.py::test_add_inplace"].builds[0].is_inplace
    assert by_node["test_skipped.py::test_skipped_op"].skips == (
        "skipif(flag_gems.vendor_name == 'fake'): Issue 1: not on the fake vendor",)
    norm = by_node["test_layer_norm.py::test_layer_norm"].builds[0]
    assert norm.class_chain == ("NormBenchmark", "GenericBenchmark", "Benchmark")  # test file, then base
    assert not by_node["test_own_shapes.py::test_own_shapes"].builds[0].reads_shape_file
    assert by_node["test_bitwise_not.py::test_bitwise_not"].dtypes == ("int16", "int32", "bool")
    assert by_node["test_amin.py::test_amin"].dtypes == ("float32", "float16")  # from its parametrize
    assert {"NormBenchmark", "OwnShapesBenchmark", "BlasBenchmark"} <= inv53.class_names


def test_v50_ops_are_marks_including_marks_on_parameters(inv50: Inventory) -> None:
    catalog = op_catalog(inv50)
    assert set(catalog) == {"softmax", "sum", "abs", "neg"}
    assert catalog["softmax"].files == ("test_reduction_perf.py",) and catalog["softmax"].mark == "softmax"
    assert catalog["softmax"].selected_nodes() == ()
    assert inv50.uncollected == (("test_norm_perf.py::tes_rms_norm", ("rms_norm",)),)


def test_list_suite_prints_a_table_and_a_csv_without_importing_flaggems(v53: FakeSuite) -> None:
    table = list_suite(v53.benchmark)
    assert "v5.3 layout, package flag_gems" in table and "Issue 1: not on the fake vendor" in table
    rows = list(csv.DictReader(io.StringIO(list_suite(v53.benchmark, csv_format=True))))
    assert len(rows) == 14
    row = next(r for r in rows if r["function"] == "test_softmax_backward")
    assert (row["op"], row["op_marks"], row["direction"], row["dtypes"]) == (
        "softmax_backward", "softmax_backward", "backward", "float16 float32 bfloat16")
    assert {r["op"] for r in rows if r["function"] == "test_nextafter_"} == {
        "test_nextafter.py::nextafter_", "test_nextafter_.py::nextafter_"}


# -- selection ---------------------------------------------------------------------------------


def test_ops_are_function_names_without_test_and_run_exactly_their_node(inv53: Inventory) -> None:
    (softmax, add_) = ops(inv53, "softmax", "add_inplace")
    assert softmax.selected_nodes() == ("test_softmax.py::test_softmax",)  # not test_softmax_backward
    assert add_.id == "add_inplace" and "add_" in add_.keys


def test_a_name_in_two_files_must_be_qualified(inv53: Inventory) -> None:
    with pytest.raises(UsageError, match="nextafter_ is in 2 files: write one of test_nextafter.py::nextafter_, "
                                         "test_nextafter_.py::nextafter_"):
        ops(inv53, "nextafter_")
    (op,) = ops(inv53, "test_nextafter_.py::test_nextafter_")
    assert op.id == "test_nextafter_.py::nextafter_" and op.selected_nodes() == ("test_nextafter_.py::test_nextafter_",)


def test_unknown_names_are_reported_together_with_the_closest_ones(inv53: Inventory) -> None:
    with pytest.raises(UsageError) as caught:
        ops(inv53, "softmx", "add_", "nothing_like_it")
    message = caught.value.message
    assert "softmx: no such benchmark (closest: softmax" in message
    assert "add_" not in message  # the op mark of one benchmark, add_inplace: that one
    assert "nothing_like_it: no such benchmark (no close match)" in message


def test_an_op_mark_names_the_one_benchmark_that_carries_it_or_is_refused_as_ambiguous(inv53: Inventory) -> None:
    import dataclasses

    (op,) = ops(inv53, "add_")
    assert op.id == "add_inplace" and ops(inv53, "add_", "add_inplace") == [op]
    add_inplace = next(f for f in inv53.functions if f.key == "add_inplace")
    twin = dataclasses.replace(add_inplace, file="test_add_twin.py", function="test_add_twice")
    both = dataclasses.replace(inv53, functions=(*inv53.functions, twin))
    with pytest.raises(UsageError, match="add_ is the op mark of 2 benchmarks: write one of add_inplace, add_twice"):
        ops(both, "add_")


def test_nodes_run_exactly_the_node_given(inv53: Inventory) -> None:
    (op,) = resolve_nodes(inv53, ["benchmark/test_mm.py::test_mm[x-1]"])
    assert op.id == "test_mm.py::test_mm[x-1]" and op.selected_nodes() == ("test_mm.py::test_mm[x-1]",)
    with pytest.raises(UsageError, match="no such benchmark function .*closest: test_mm.py::test_mm"):
        resolve_nodes(inv53, ["test_mm.py::test_mmm"])


def test_all_covers_every_function_once(inv53: Inventory) -> None:
    every = all_ops(inv53)
    assert len(every) == len(inv53.functions) == len({o.id for o in every})


# -- shapes ------------------------------------------------------------------------------------


def test_a_shapes_file_matches_op_then_class_chain_and_checks_the_arity(v53: FakeSuite, inv53: Inventory,
                                                                       tmp_path: Path) -> None:
    upstream = read_suite_shapes(locate_suite(v53.benchmark).shapes_yaml)
    override: dict[str, list[SuiteShape]] = {"GenericBenchmark": [(2, 4, 8)], "softmax": [(7, 9)],
                                             "UnaryReductionBenchmark": [(1, 1)], "mm": [(64, 64)],
                                             "own_shapes": [(3, 3)]}
    check_override_keys(override, inv53)
    norm = plan_op_shapes(ops(inv53, "layer_norm")[0], override, upstream)
    assert norm.entries == {"layer_norm": [(2, 4, 8)]}  # NormBenchmark -> GenericBenchmark (a class of its chain)
    config = suite_shape_config(upstream, norm.entries)
    assert config["layer_norm"]["shapes"] == [[2, 4, 8]] and config["NormBenchmark"] == upstream["NormBenchmark"]
    softmax = plan_op_shapes(ops(inv53, "softmax")[0], override, upstream)
    assert softmax.entries == {"softmax": [(7, 9)]}  # the op before its class
    assert plan_op_shapes(ops(inv53, "softmax_backward")[0], override, upstream).entries == {
        "softmax_backward": [(1, 1)]}
    mm = plan_op_shapes(ops(inv53, "mm")[0], override, upstream)
    # [2] dimensions against BlasBenchmark's [4]: not written into FlagGems' file; the input seam says why
    assert not mm.entries and not mm.notes and mm.inputs == {"mm": [(64, 64)]}
    own = plan_op_shapes(ops(inv53, "own_shapes")[0], override, upstream)
    # its set_shapes is its own: not in FlagGems' file, given where it builds its inputs instead
    assert not own.entries and not own.notes and own.inputs == {"own_shapes": [(3, 3)]}
    assert norm.inputs == norm.entries


def test_shapes_file_keys_that_match_nothing_are_refused_with_the_closest(inv53: Inventory, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("softmaxx: [[4, 4]]\nNormBenchmark: {shapes: [[1, 2, 3]]}\n")
    override = read_shapes_override(str(path))  # FlagGems' own {shapes: ...} form is read too
    assert override["NormBenchmark"] == [(1, 2, 3)]
    with pytest.raises(UsageError, match="'softmaxx' \\(closest: softmax"):
        check_override_keys(override, inv53)
    path.write_text("softmax: [[4, -1]]\n")
    with pytest.raises(UsageError, match="lists of integers >= 0"):
        read_shapes_override(str(path))


# -- dtypes, versions, the op's command ----------------------------------------------------------


def test_suite_runs_accept_any_dtype_flaggems_benchmarks_and_built_in_runs_do_not() -> None:
    wanted = "int32,bool,complex64,float64,fp8,float8_e5m2"
    suite = resolve_run_options({"suite": "x", "dtypes": [wanted]}, {})
    assert suite.dtypes == ("int32", "bool", "complex64", "float64", "float8_e4m3fn", "float8_e5m2")
    assert set(suite.dtypes) <= set(SUITE_DTYPES)
    assert resolve_run_options({"suite": "x"}, {}).dtypes == ()  # each benchmark's own
    assert resolve_run_options({}, {}).dtypes == DTYPES
    with pytest.raises(UsageError, match="--dtypes: Unknown dtype 'int32' for the harness's own ops"):
        resolve_run_options({"dtypes": ["int32"]}, {})
    with pytest.raises(UsageError, match="HARNESS_DTYPES: Unknown dtype 'bool'"):
        resolve_run_options({}, {"HARNESS_DTYPES": "bool"})
    with pytest.raises(UsageError, match="Unknown dtype 'int3'"):
        resolve_run_options({"suite": "x", "dtypes": ["int3"]}, {})


def test_the_installed_version_is_read_from_metadata_where_the_op_processes_import(v53: FakeSuite) -> None:
    assert installed_version("flag_gems", {"PYTHONPATH": str(v53.site)}) == "5.3.4"
    assert installed_version("flaggems_vllm", {"PYTHONPATH": str(v53.site)}) is None


def test_a_version_mismatch_is_refused_unless_allowed(tmp_path: Path) -> None:
    suite = write_fake_suite(tmp_path / "fg", version="5.0.2", ref="v5.3.4 (v5.3.4, f7c55cb)")
    env = {"PYTHONPATH": str(suite.site)}
    options = RunOptions(backend="cpu", suite=str(suite.benchmark), ops=("softmax",), out=str(tmp_path / "run"))
    with pytest.raises(UsageError, match="the tree is FlagGems 5.3 .* installed flag_gems is 5.0.2"):
        prepare(options, env)
    prepared = prepare(RunOptions(**{**options.to_dict(), "ops": ("softmax",), "allow_version_mismatch": True}), env)
    assert prepared.runner.run_info({})["suite"]["installed"] == "5.0.2"  # type: ignore[attr-defined]
    with pytest.raises(EnvironmentProblem, match="flag_gems, which is not installed here"):
        prepare(options, {"PYTHONPATH": str(tmp_path)})
    assert not (tmp_path / "run").exists()


def test_prepare_plans_open_ops_with_their_own_dtypes_and_refuses_bad_selections(v53: FakeSuite, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(v53.site)}
    options = RunOptions(backend="cpu", suite=str(v53.benchmark), dtypes=(), out=str(tmp_path / "run"))
    prepared = prepare(options, env, all_ops=True)
    plan = prepared.plan
    assert len(plan.ops) == 14 and all(o.is_open and o.shapes == () and o.dtypes == () for o in plan.ops)
    assert plan.level == "core" and plan.timer == "cpu"
    by_op = {o.op: o for o in plan.ops}
    assert by_op["add"].open_cases == 8  # 4 declared dtypes x the 2 shapes of the Benchmark key
    with pytest.raises(UsageError, match="needs --ops"):
        prepare(options, env)
    with pytest.raises(UsageError, match="cannot be combined"):
        prepare(RunOptions(**{**options.to_dict(), "ops": ("mm",)}), env, all_ops=True)
    with pytest.raises(UsageError, match="smoke is the harness's own tiny level"):
        prepare(RunOptions(**{**options.to_dict(), "ops": ("mm",), "level": "smoke"}), env)
    assert not (tmp_path / "run").exists()


def test_the_op_process_runs_flaggems_pytest_on_its_node_with_the_plugin(v53: FakeSuite, inv53: Inventory) -> None:
    tree = locate_suite(v53.benchmark)
    (op,) = ops(inv53, "softmax")
    args = suite_command(tree, op, "core", tree.shapes_yaml, Path("/w/spec.json"))
    assert args[0] == f"{tree.suite_dir}/test_softmax.py"  # the plugin keeps test_softmax alone (its spec)
    joined = " ".join(args)
    for part in ("--level core", f"--shape_file {tree.shapes_yaml}", "-p harness.child.plugins.suite",
                 "--harness-suite-spec /w/spec.json", f"--rootdir {tree.root}", f"-c {'/dev/null'}"):
        assert part in joined
    assert "--dtypes" not in args and "--mode" not in args and "--record" not in args


def test_random_ops_are_not_compared_and_deny_listed_ops_are_not_captured(v53: FakeSuite, inv53: Inventory) -> None:
    assert unchecked_reason(SuiteOp(id="uniform_", functions=())) == "outputs not compared: random output ('uniform_')"
    assert unchecked_reason(ops(inv53, "softmax")[0]) == ""
    assert unchecked_reason(SuiteOp(id="scatter_src_", functions=())).startswith("outputs not compared: undefined output")
    assert unchecked_reason(SuiteOp(id="scatter_add", functions=())) == ""  # a sum: compared, with its tolerance
    assert unchecked_reason(SuiteOp(id="rrelu_with_noise_functional", functions=())).startswith(
        "outputs not compared: random output (in training mode")
    musa = get_backend("musa")
    tree = locate_suite(v53.benchmark)
    plans = plan_suite_ops(tree, inv53, ops(inv53, "softmax"), musa, RunOptions(dtypes=()))
    assert plans["softmax"].capture_denied == ""
    denied = SuiteOp(id="unique2", functions=())
    assert plan_suite_ops(tree, inv53, [denied], musa, RunOptions())["unique2"].capture_denied == (
        "'unique2' is on the musa capture deny list")


def test_shape_config_keeps_flaggems_desc_and_leaves_its_input_alone() -> None:
    upstream = {"BlasBenchmark": {"shapes": [[2, 8, 8, 8]], "shape_desc": "B, M, N, K"}}
    config = suite_shape_config(upstream, {"BlasBenchmark": [(1, 4, 4, 4)]})
    assert yaml.safe_load(yaml.safe_dump(config))["BlasBenchmark"] == {"shapes": [[1, 4, 4, 4]],
                                                                         "shape_desc": "B, M, N, K"}
    assert upstream["BlasBenchmark"]["shapes"] == [[2, 8, 8, 8]]


def test_flaggems_pytest_gets_the_compat_plugins_planned_for_a_librarys_pytest(v53: FakeSuite, inv53: Inventory) -> None:
    from harness.suite.runner import suite_plugins

    musa = suite_plugins(get_backend("musa"), RunOptions())
    assert musa.modules == ("harness.child.plugins.suite",) and musa.timer == "graph"
    assert musa.suite_pytest_args() == ["-p", "harness.child.plugins.device_inputs",
                                        "-p", "harness.child.plugins.skipguards"]
    assert suite_plugins(get_backend("cuda"), RunOptions()).suite_modules == ("harness.child.plugins.device_inputs",)
    assert suite_plugins(get_backend("musa"), RunOptions(plugins=("-skipguards", "-device_inputs"))).suite_modules == ()
    tree = locate_suite(v53.benchmark)
    args = suite_command(tree, ops(inv53, "mm")[0], "core", tree.shapes_yaml, Path("/s.json"), musa.suite_pytest_args())
    assert args[args.index("harness.child.plugins.suite") + 3:][:4] == ["-p", "harness.child.plugins.device_inputs",
                                                                        "-p", "harness.child.plugins.skipguards"]


def test_the_runner_says_when_pytest_found_nothing_or_a_function_timed_nothing(v53: FakeSuite, inv53: Inventory,
                                                                               tmp_path: Path) -> None:
    from harness.run.context import BatchContext
    from harness.run.decide import AttemptExit
    from harness.run.plan import OpPlan, RunPlan
    from harness.run.spawn import StopToken
    from harness.suite.runner import SuiteRunner

    tree = locate_suite(v53.benchmark)
    plans = plan_suite_ops(tree, inv53, ops(inv53, "mm"), get_backend("cpu"), RunOptions(dtypes=()))
    runner = SuiteRunner(tree, plans)
    op_plan = OpPlan("mm", "cpu", (), (), "flaggems-suite", open_cases=1)
    plan = RunPlan(run_id="r", backend=get_backend("cpu"), level="core", plugins=_plugins_for_cpu(), devices=("cpu",),
                   ops=(op_plan,), options=RunOptions())
    ctx = BatchContext(plan, tmp_path, {}, StopToken(), None, runner)  # type: ignore[arg-type]
    assert "pytest collected no benchmark for test_mm.py::test_mm" in runner.collect(ctx, op_plan, AttemptExit(5, pytest_exit=5))[0]
    assert "timed nothing" in runner.collect(ctx, op_plan, AttemptExit(0, pytest_exit=0))[0]
    assert runner.collect(ctx, op_plan, None) == ()


def _plugins_for_cpu() -> PluginPlan:
    from harness.suite.runner import suite_plugins

    return suite_plugins(get_backend("cpu"), RunOptions())


def test_the_suite_plugin_does_the_autotune_ir_and_wall_plugins_work_as_toggled() -> None:
    from harness.suite.runner import suite_features, suite_plugins

    cpu, cuda = get_backend("cpu"), get_backend("cuda")
    assert suite_features(cpu, RunOptions()) == {"autotune": True, "ir": False, "wall": False}
    assert suite_features(cuda, RunOptions()) == {"autotune": True, "ir": True, "wall": True}
    assert suite_features(cuda, RunOptions(plugins=("-autotune", "-wall"), ir="off")) == {
        "autotune": False, "ir": False, "wall": False}
    assert suite_features(cpu, RunOptions(plugins=("+wall",)))["wall"] is True
    plan = suite_plugins(cpu, RunOptions(plugins=("-autotune",), extra_plugins=("tests.data.extra_plugin",)))
    assert plan.modules == ("harness.child.plugins.suite", "tests.data.extra_plugin")
    assert "autotune: off, inside the suite plugin" in plan.reasons[0]
    assert any(line.startswith("autotune: off") for line in plan.off)
    with pytest.raises(UsageError, match="unknown plugin 'bogus'"):
        suite_plugins(cpu, RunOptions(plugins=("+bogus",)))


def _ctx(runner: object, tmp_path: Path, options: RunOptions, sweep: object = None) -> object:
    from harness.run.context import BatchContext
    from harness.run.plan import OpPlan, RunPlan
    from harness.run.spawn import StopToken
    from harness.suite.runner import suite_plugins

    op_plan = OpPlan("mm", "cpu", (), (), "flaggems-suite", open_cases=1)
    plan = RunPlan(run_id="r", backend=get_backend("cpu"), level="core", plugins=suite_plugins(get_backend("cpu"), options),
                   devices=("cpu",), ops=(op_plan,), options=options)
    return BatchContext(plan, tmp_path, {}, StopToken(), None, runner, sweep=sweep)  # type: ignore[arg-type]


def test_the_measuring_process_replays_and_a_sweep_shard_tunes_its_share(v53: FakeSuite, inv53: Inventory,
                                                                          tmp_path: Path) -> None:
    from harness.contract import ChildSpec, Replay, SweepTask
    from harness.run.sweep import SweepStep
    from harness.suite.runner import SuiteRunner, suite_features

    tree = locate_suite(v53.benchmark)
    options = RunOptions(dtypes=(), replay_from="/runs/earlier", extra_plugins=("tests.data.extra_plugin",),
                         cap_ms=250.0)
    plans = plan_suite_ops(tree, inv53, ops(inv53, "mm"), get_backend("cpu"), options)
    runner = SuiteRunner(tree, plans, features=suite_features(get_backend("cpu"), options))
    sweep = SweepStep(("cpu", "cpu", "cpu"), launcher=runner.sweep_launch)
    ctx = _ctx(runner, tmp_path, options, sweep)
    op_plan = ctx.plan.ops[0]  # type: ignore[attr-defined]

    launch = runner.launch(ctx, op_plan, 1, ())  # type: ignore[arg-type]
    spec = ChildSpec.load(tmp_path / "specs" / "mm.json")
    assert spec.cap_ms == 250.0  # --cap-ms reaches the measuring process
    assert spec.replay == Replay(run_dir="/runs/earlier", file=str(tmp_path / "sweep" / "mm" / "configs.json"))
    assert spec.suite is not None and spec.suite.nodes == tuple(plans["mm"].op.selected_nodes())
    assert (spec.suite.autotune, spec.suite.ir, spec.suite.wall) == (True, False, False)
    assert spec.sweep is None and spec.capture_off == ""
    runner.launch(ctx, op_plan, 2, (), capture_off="poisoned earlier")  # type: ignore[arg-type]
    assert ChildSpec.load(tmp_path / "specs" / "mm.json").capture_off == "poisoned earlier"
    assert " ".join(launch.pytest_args).endswith("-p tests.data.extra_plugin -c /dev/null --rootdir "
                                                 f"{tree.root} -p no:cacheprovider -p no:unraisableexception "
                                                 "-p no:hypothesispytest -q -rN -s -W "
                                                 "ignore::pytest.PytestUnknownMarkWarning")

    shard = runner.sweep_launch(ctx, op_plan, 2, "cpu", ("its calls i with i % 3 == 2",))  # type: ignore[arg-type]
    folder = tmp_path / "sweep" / "mm"
    spec = ChildSpec.load(folder / "shard-2.spec.json")
    assert spec.cap_ms == 250.0
    assert spec.sweep == SweepTask(configs_out=str(folder / "shard-2.json"), result=str(folder / "shard-2.result.json"),
                                   index=2, count=3)
    assert spec.replay == Replay() and spec.suite is not None  # a sweep process tunes: it replays nothing
    assert shard.exit_path == folder / "shard-2.exit" and shard.cwd == folder
    assert "-p harness.child.plugins.suite" in " ".join(shard.pytest_args)
    assert "--harness-suite-spec " + str(folder / "shard-2.spec.json") in " ".join(shard.pytest_args)


def test_shard_k_of_n_deals_a_suite_selection_as_the_harness_deals_its_own_ops(v53: FakeSuite,
                                                                               tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(v53.site)}
    dismiss = tmp_path / "dismiss.yaml"
    dismiss.write_text("mm: hangs on the fake vendor\n")
    options = RunOptions(backend="cpu", suite=str(v53.benchmark), dtypes=(), dismiss=str(dismiss),
                         out=str(tmp_path / "run"))
    whole = prepare(options, env, all_ops=True)
    assert whole.part is None
    # The split is the built-in ops' (assign_parts), each op weighed by its expected rows.
    expected = assign_parts(whole.plan.ops, 3, weightless=whole.dismissed)
    parts = [prepare(replace(options, shard=(k, 3)), env, all_ops=True)
             for k in (1, 2, 3)]
    for k, part in enumerate(parts, start=1):
        assert part.part is not None and part.part["index"] == k and part.part["count"] == 3
        assert part.part["ops"] == [o.op for o in part.plan.ops] == [op for op, p in expected.items() if p == k]
        assert part.part["all_ops"] == [o.op for o in whole.plan.ops]
        assert {o.op: o.open_cases for o in part.plan.ops} == {o.op: o.open_cases for o in whole.plan.ops
                                                               if expected[o.op] == k}
        assert set(part.dismissed) <= set(part.part["ops"]) and part.runner is not None
    shards = [dict(p.part or {}) for p in parts]
    assert sorted(op for shard in shards for op in shard["ops"]) == sorted(o.op for o in whole.plan.ops)
    assert "mm" in next(p.dismissed for p, shard in zip(parts, shards, strict=True) if "mm" in shard["ops"])
    assert len({shard["plan_digest"] for shard in shards}) == 1
    digest = shards[0]["plan_digest"]

    def digest_of(suite: FakeSuite, **over: object) -> str:
        changed = RunOptions(**{**options.to_dict(), "suite": str(suite.benchmark), "shard": (1, 3), **over})
        prepared = prepare(changed, {"PYTHONPATH": str(suite.site)}, all_ops=True)
        return str((prepared.part or {}).get("plan_digest"))

    # The same tree elsewhere (another machine's checkout) is the same plan; another tag, other
    # shapes (the same number of them), other dtypes or budgets are not, and merge refuses them.
    assert digest_of(write_fake_suite(tmp_path / "elsewhere")) == digest
    assert digest_of(write_fake_suite(tmp_path / "other", ref="fake-v5.3.5")) != digest
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("softmax: [[16, 32]]\n")
    assert digest_of(v53, shapes_file=str(shapes)) != digest
    assert digest_of(v53, dtypes=("float32",)) != digest
    assert digest_of(v53, rep_ms=2.0) != digest
    assert digest_of(v53, cap_ms=300.0) != digest  # the time cap changes what a noisy row measures
    assert digest_of(v53, devices=("cpu",), run_id="elsewhere") == digest
    assert not (tmp_path / "run").exists()


def test_a_suite_run_is_swept_with_the_suites_own_shard_processes(v53: FakeSuite, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(v53.site)}
    options = RunOptions(backend="cpu", suite=str(v53.benchmark), dtypes=(), ops=("mm",), sweep_devices="cpu,cpu",
                         out=str(tmp_path / "run"))
    prepared = prepare(options, env)
    assert prepared.sweep is not None and prepared.sweep.devices == ("cpu", "cpu")
    assert prepared.sweep.launcher == prepared.runner.sweep_launch  # type: ignore[attr-defined]
    assert prepared.sweep.applies(prepared.plan.ops[0])
    source = tmp_path / "rec"
    (source / "autotune").mkdir(parents=True)
    (source / "autotune" / "meta.json").write_text(
        '{"format_version": 1, "backend": "cpu", "device_name": "", "device_arch": "", "triton_version": "3.7.1", '
        '"run_id": "r"}')
    with pytest.raises(UsageError, match="give one of them"):
        prepare(RunOptions(**{**options.to_dict(), "replay_from": str(source)}), env)
    replaying = prepare(RunOptions(**{**options.to_dict(), "replay_from": str(source), "sweep_devices": None}), env)
    assert replaying.sweep is None and replaying.plan.options.replay_from == str(source.resolve())
    assert not (tmp_path / "run").exists()
