"""Provider flaggems without a GPU or flag_gems: vendor mapping, the op map, clear skips,
declarative ops and the `list ops --provider flaggems` listing.

flag_gems is replaced by small stand-ins shaped like its public API (``enable(lib=...)``,
``__version__``, ``vendor_name``); the FlagGems "kernels" are the aten ops themselves, so
an adapter that passes arguments the way aten (and so FlagGems' registered function)
expects reproduces the harness's torch baseline exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.backends import BACKENDS, get_backend
from harness.errors import ConfigError, UsageError
from harness.ops.registry import BUILTIN, load_op, load_ops
from harness.options import RunOptions
from harness.providers import PROVIDERS, candidate_for, check_provider
from harness.providers.bindings import BUILTIN_BINDINGS, LAYER_NORM_EPS, RMS_NORM_EPS, GemsCall
from harness.providers.declarative import (
    build_ops,
    declared_shapes,
    is_declaration_file,
    load_declared,
    parse_declarations,
)
from harness.providers.flaggems import (
    GemsRuntime,
    Unavailable,
    binding_for,
    flaggems_candidate,
    identity_facts,
    load_runtime,
    runtime,
)
from harness.providers.inventory import Inventory, render_listing
from harness.providers.vendors import (
    FLAGGEMS_VENDORS,
    VENDOR_FACTS,
    gems_vendor_env,
    unknown_vendor_message,
)
from harness.run.plan import plan_run
from harness.run.spawn import child_env

# -- vendor mapping -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "backend, vendor",
    [("cuda", "nvidia"), ("musa", "mthreads"), ("rocm", "amd"), ("ascend", "ascend"), ("cpu", None)],
)
def test_each_backend_names_the_flaggems_vendor_of_its_hardware(backend: str, vendor: str | None) -> None:
    assert get_backend(backend).gems_vendor == vendor


def test_every_gems_vendor_is_a_name_flaggems_accepts_and_the_docs_table_agrees() -> None:
    for backend in BACKENDS:
        assert backend.gems_vendor is None or backend.gems_vendor in FLAGGEMS_VENDORS
    assert {f.backend: f.vendor for f in VENDOR_FACTS} == {b.name: b.gems_vendor for b in BACKENDS}


def test_op_process_gets_gems_vendor_from_the_backend() -> None:
    assert gems_vendor_env(get_backend("musa"), {"PATH": "/bin"}) == {"GEMS_VENDOR": "mthreads"}
    assert gems_vendor_env(get_backend("cpu"), {}) == {}


@pytest.mark.parametrize("key", ["GEMS_VENDOR", "FLAGGEMS_VENDOR", "GEMS_BACKEND", "FLAGGEMS_BACKEND"])
def test_a_vendor_the_user_chose_is_left_alone(key: str) -> None:
    assert gems_vendor_env(get_backend("cuda"), {key: "metax"}) == {}
    assert gems_vendor_env(get_backend("cuda"), {key: "  "}) == {"GEMS_VENDOR": "nvidia"}  # blank = unset


def _plan(backend: str) -> Any:
    ops = BUILTIN
    return plan_run(RunOptions(backend=backend), get_backend(backend), [ops["add"]], "smoke",
                    {"add": [(4, 64)]}, None, ["0"], "r1")


def test_child_environment_carries_gems_vendor_and_keeps_the_users() -> None:
    env = child_env(get_backend("cuda"), "3", {"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert env["GEMS_VENDOR"] == "nvidia" and env["CUDA_VISIBLE_DEVICES"] == "3"
    assert child_env(get_backend("cuda"), "0", {"GEMS_VENDOR": "hygon"})["GEMS_VENDOR"] == "hygon"
    assert "GEMS_VENDOR" not in child_env(get_backend("cpu"), "cpu", {})


def test_a_misspelt_vendor_is_explained() -> None:
    assert unknown_vendor_message("NVIDIA") is None
    text = unknown_vendor_message("nvida")
    assert text is not None and "ignores it" in text and "nvidia" in text


# -- the op map ---------------------------------------------------------------------------------------


def test_every_builtin_op_has_a_flaggems_binding_matching_its_aten_op() -> None:
    ops = BUILTIN
    assert set(BUILTIN_BINDINGS) == set(tuple(BUILTIN))
    for op_id, binding in BUILTIN_BINDINGS.items():
        if binding.aten is not None:
            assert ops[op_id].aten == f"aten::{binding.aten}"
    assert BUILTIN_BINDINGS["silu_and_mul"].function == "silu_and_mul"  # fused: not an aten op


def test_norm_eps_match_the_harness_ops() -> None:
    from harness.ops import layer_norm, rms_norm

    assert (LAYER_NORM_EPS, RMS_NORM_EPS) == (layer_norm.EPS, rms_norm.EPS)


def _aten_reference(key: str) -> Any:
    """The aten op registered under FlagGems' key: what FlagGems' function stands in for."""
    name, _, overload = key.partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def _silu_and_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(a) * b


SHAPES = {"mm": (8, 5, 6)}


@pytest.mark.parametrize("op_id", tuple(BUILTIN))
def test_each_binding_calls_flaggems_with_atens_arguments(op_id: str) -> None:
    op = load_op(op_id)
    binding = BUILTIN_BINDINGS[op_id]
    fn = _aten_reference(binding.aten) if binding.aten else _silu_and_mul
    gen = torch.Generator().manual_seed(0)
    args = op.make_inputs(SHAPES.get(op_id, (6, 10)), torch.float32, gen, "cpu")
    torch.testing.assert_close(binding.call(fn, args), op.baseline(*args))


# -- the candidate and its clear failures ---------------------------------------------------------------


class FakeGems:
    """Shaped like flag_gems: enable() hands (aten key, fn) pairs to lib.impl, minus unused ops."""

    __version__ = "5.0.2"
    vendor_name = "amd"
    device = "cuda"

    def __init__(self, table: dict[str, Any], unused: tuple[str, ...] = ()) -> None:
        self.table, self.vendor_unused = table, unused
        self.silu_and_mul = _silu_and_mul

    def enable(self, lib: Any = None, unused: Any = None, **_: Any) -> None:
        for key, fn in self.table.items():
            if fn.__name__ not in self.vendor_unused:
                lib.impl(key, fn, "CUDA")


def _named(name: str, fn: Any) -> Any:
    def wrapper(*a: Any, **k: Any) -> Any:
        return fn(*a, **k)

    wrapper.__name__ = name
    return wrapper


def fake_runtime(unused: tuple[str, ...] = ()) -> GemsRuntime:
    table = {b.aten: _named(b.aten.split(".")[0].lstrip("_"), _aten_reference(b.aten))
             for b in BUILTIN_BINDINGS.values() if b.aten}
    rt = load_runtime(lambda name: FakeGems(table, unused))
    assert isinstance(rt, GemsRuntime)
    return rt


def _importer(exc: BaseException) -> Any:
    def imp(name: str) -> Any:
        raise exc

    return imp


def test_flag_gems_not_installed_says_how_to_install_it() -> None:
    rt = load_runtime(_importer(ModuleNotFoundError("No module named 'flag_gems'", name="flag_gems")))
    assert isinstance(rt, Unavailable)
    assert "not installed" in rt.reason and "--no-deps" in rt.reason


def test_a_missing_dependency_of_flag_gems_is_named() -> None:
    rt = load_runtime(_importer(ModuleNotFoundError("No module named 'sqlalchemy'", name="sqlalchemy")))
    assert isinstance(rt, Unavailable) and "'sqlalchemy'" in rt.reason


def test_flag_gems_finding_no_device_is_reported_not_raised() -> None:
    rt = load_runtime(_importer(RuntimeError("No device were detected on your machine !")))
    assert isinstance(rt, Unavailable)
    assert "RuntimeError: No device were detected" in rt.reason and "GEMS_VENDOR" in rt.reason


def test_registrations_are_read_without_registering_anything() -> None:
    rt = fake_runtime()
    assert rt.describe() == "flag_gems 5.0.2 (vendor amd)"
    assert rt.registrations["mm"].__name__ == "mm"
    assert "softmax" in rt.functions


def test_cases_skip_on_a_backend_without_gpu_and_flag_gems_is_not_imported() -> None:
    def must_not_load() -> Any:
        raise AssertionError("flag_gems must not be imported for the cpu backend")

    cand = flaggems_candidate(load_op("softmax"), get_backend("cpu"), load=must_not_load)
    assert isinstance(cand, Unavailable) and "GPU" in cand.reason and "'cpu'" in cand.reason
    with pytest.raises(pytest.skip.Exception, match="GPU"):
        cand(torch.ones(2, 2))


def test_an_op_flaggems_does_not_register_on_this_vendor_skips_naming_it() -> None:
    rt = fake_runtime(unused=("add",))  # FlagGems' _amd backend leaves add to torch
    cand = flaggems_candidate(load_op("add"), get_backend("rocm"), load=lambda: rt)
    assert isinstance(cand, Unavailable)
    assert "does not register aten::add.Tensor" in cand.reason and "vendor amd" in cand.reason


def test_an_op_without_binding_skips_with_the_fix() -> None:
    user_op = load_ops([str(Path(__file__).parents[1] / "data" / "user_ops.py")])["scale3"]
    cand = flaggems_candidate(user_op, get_backend("cuda"), load=fake_runtime)
    assert isinstance(cand, Unavailable) and "no FlagGems binding" in cand.reason and "YAML" in cand.reason


@pytest.mark.parametrize("op_id", ["softmax", "silu_and_mul", "mm"])
def test_the_candidate_runs_flaggems_function_and_matches_the_baseline(op_id: str) -> None:
    op = load_op(op_id)
    cand = flaggems_candidate(op, get_backend("cuda"), load=fake_runtime)
    assert not isinstance(cand, Unavailable)
    args = op.make_inputs(SHAPES.get(op_id, (4, 8)), torch.float32, torch.Generator().manual_seed(1), "cpu")
    torch.testing.assert_close(cand(*args), op.baseline(*args))


def test_provider_flaggems_is_selectable_and_skips_cleanly_on_cpu() -> None:
    assert "flaggems" in PROVIDERS and check_provider("flaggems") == "flaggems"
    cand = candidate_for("flaggems", load_op("gelu"), get_backend("cpu"))
    assert isinstance(cand, Unavailable)
    with pytest.raises(UsageError, match="Known providers: builtin, flaggems"):
        check_provider("gems")


def test_identity_records_flag_gems_only_once_a_process_loaded_it() -> None:
    runtime.cache_clear()
    try:
        assert identity_facts() == {}
        runtime()  # flag_gems is not installed in the test environment
        facts = identity_facts()["flag_gems"]
        assert "unavailable" in facts or facts.get("version")
    finally:
        runtime.cache_clear()


def _installed(site: Path, direct_url: str | None, name: str = "fake_gems_dist") -> None:
    """A distribution ``name`` in ``site`` as pip leaves it, with ``direct_url`` as its PEP 610
    record (None: installed from an index, no record)."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(direct_url)


@pytest.mark.parametrize("direct_url, expected", [
    ('{"url": "https://github.com/o/FlagGems.git", "vcs_info": {"vcs": "git", "commit_id": "%s"}}' % ("ab12" * 10),
     {"commit": "ab12" * 10}),  # pip install git+https://...@REF
    ('{"url": "https://github.com/o/FlagGems.git", "vcs_info": {"vcs": "git", "commit_id": "main; rm -rf"}}', {}),
    ('{"url": "file:///wheels/flag_gems-5.3.4-py3-none-any.whl", "archive_info": {}}', {}),  # a wheel file
    ("not json", {}),
    ('["a list"]', {}),
    (None, {}),  # from an index: pip writes no record
])
def test_the_commit_an_installed_library_was_built_from_is_read_from_pips_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct_url: str | None, expected: dict[str, object]) -> None:
    from harness.providers.flaggems import installed_from

    _installed(tmp_path / "site", direct_url)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert installed_from("fake_gems_dist") == expected
    assert installed_from("no_such_dist_xyz") == {}


def test_an_editable_install_of_a_checkout_names_its_commit_and_whether_it_was_edited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip install -e CHECKOUT: the record names the folder; git says its commit, and dirty once a
    tracked file differs. A provider run's library commit (history, bisect) is then that one."""
    import subprocess

    from harness.providers.flaggems import installed_from
    from harness.results.runinfo import library_commit

    checkout = tmp_path / "FlagGems"
    checkout.mkdir()
    (checkout / "ops.py").write_text("x = 1\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for args in (["init", "-q"], ["add", "ops.py"], ["commit", "-qm", "one"]):
        subprocess.run(["git", "-C", str(checkout), *args], check=True, env=env)
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    _installed(tmp_path / "site", json.dumps({"url": checkout.as_uri(), "dir_info": {"editable": True}}))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert installed_from("fake_gems_dist") == {"commit": head, "dirty": False}
    identity = {"flag_gems": {"version": "5.3.4", **installed_from("fake_gems_dist")}}
    assert library_commit({"run_id": "r", "identity": identity}) == head
    (checkout / "ops.py").write_text("x = 2\n")
    assert installed_from("fake_gems_dist") == {"commit": head, "dirty": True}
    edited = {"flag_gems": {"version": "5.3.4", **installed_from("fake_gems_dist")}}
    assert library_commit({"run_id": "r", "identity": edited}) == ""  # the code measured is not that commit's
    assert library_commit({"run_id": "r", "identity": {"flag_gems": {"commit": "not a sha"}}}) == ""
    # a suite run's tree ref decides, as before
    assert library_commit({"run_id": "r", "suite": {"ref": "v5.3.4"}, "identity": identity}) == ""


def test_a_directory_copied_at_install_or_inside_another_repository_names_no_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip install DIR (not editable) copied what the folder held then; a folder without a .git of
    its own inside another repository would get that repository's commit from git: neither names one."""
    import subprocess

    from harness.providers.flaggems import installed_from

    outer = tmp_path / "outer"
    inner = outer / "vendor" / "FlagGems"
    inner.mkdir(parents=True)
    (outer / "f").write_text("x")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for args in (["init", "-q"], ["add", "f"], ["commit", "-qm", "one"]):
        subprocess.run(["git", "-C", str(outer), *args], check=True, env=env)
    _installed(tmp_path / "site", json.dumps({"url": inner.as_uri(), "dir_info": {"editable": True}}))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert installed_from("fake_gems_dist") == {}
    _installed(tmp_path / "site", json.dumps({"url": outer.as_uri(), "dir_info": {}}), "copied_dist")  # at install
    assert installed_from("copied_dist") == {}
    _installed(tmp_path / "site", json.dumps({"url": outer.as_uri(), "dir_info": {"editable": True}}), "live_dist")
    assert installed_from("live_dist")["commit"]  # the same checkout, editable: its commit


# -- declarative ops ------------------------------------------------------------------------------------


LOG_SOFTMAX = {"aten": "_log_softmax", "inputs": ["randn"], "args": [-1, False], "shapes": [[4, 16], [3, 5]]}


def test_a_declared_op_runs_aten_as_baseline_and_flaggems_registered_fn_as_candidate() -> None:
    (decl,) = parse_declarations({"log_softmax": LOG_SOFTMAX}, "gems.yaml")
    assert decl.baseline_path == "torch.ops.aten._log_softmax.default"
    declared = build_ops([decl])
    (op,) = declared.ops
    assert declared.shapes == {"log_softmax": ((4, 16), (3, 5))}
    assert op.shape_rank == 2 and op.aten == "aten::_log_softmax" and op.source == "gems.yaml"
    args = op.make_inputs((4, 16), torch.float32, torch.Generator().manual_seed(0), "cpu")
    assert args[0].shape == (4, 16) and args[1:] == (-1, False)
    # as FlagGems would: its log_softmax registered for _log_softmax
    rt = load_runtime(lambda name: FakeGems({"_log_softmax": _named("log_softmax", torch.ops.aten._log_softmax.default)}))
    cand = flaggems_candidate(op, get_backend("cuda"), load=lambda: rt)
    torch.testing.assert_close(cand(*args), torch.log_softmax(args[0], -1))


def test_a_declared_op_under_the_builtin_provider_skips_with_the_reason() -> None:
    (op,) = build_ops(parse_declarations({"log_softmax": LOG_SOFTMAX}, "gems.yaml")).ops
    assert isinstance(op.candidate, GemsCall)
    with pytest.raises(pytest.skip.Exception, match="--provider flaggems"):
        candidate_for("builtin", op)(torch.ones(2))


def test_declared_inputs_take_dims_fixed_shapes_dtypes_kwargs_and_an_output_index() -> None:
    entry = {  # aten::native_layer_norm(input, normalized_shape, weight, bias, eps) -> (y, mean, rstd)
        "aten": "native_layer_norm",
        "inputs": ["randn", {"sizes": [-1]}, {"maker": "ones", "dims": [-1]}, {"maker": "zeros", "dims": [1]}],
        "args": [1e-5],
        "output": 0,
        "shapes": [[8, 32]],
        "atol": 1e-3,
    }
    (op,) = build_ops(parse_declarations({"ln": entry}, "f.yaml")).ops
    x, sizes, w, b, eps = op.make_inputs((8, 32), torch.float16, torch.Generator().manual_seed(0), "cpu")
    assert (sizes, w.shape, b.shape, w.dtype, eps) == ([32], (32,), (32,), torch.float16, 1e-5)
    args = (x.float(), sizes, w.float(), b.float(), eps)
    out = op.baseline(*args)
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(*args[:1], [32], *args[2:]))
    assert op.tolerance("float16").atol == 1e-3
    assert op.bytes_moved((8, 32), 2) == (8 * 32 * 2 + 32 + 32) * 2
    binding = binding_for(op)
    assert binding is not None and binding.aten == "native_layer_norm"
    torch.testing.assert_close(binding.call(torch.ops.aten.native_layer_norm.default, args), out)


def test_a_function_entry_with_a_torch_baseline_and_randint_inputs() -> None:
    entry = {"function": "fused.silu_and_mul", "torch": "torch.mul", "shapes": [[4, 4]],
             "inputs": ["rand", {"maker": "randint", "shape": [4], "high": 3, "dtype": "int64"}]}
    (op,) = build_ops(parse_declarations({"fused": entry}, "f.yaml")).ops
    a, idx = op.make_inputs((4, 4), torch.float32, torch.Generator().manual_seed(0), "cpu")
    assert idx.dtype == torch.int64 and int(idx.max()) < 3 and a.shape == (4, 4)
    assert binding_for(op).target == "flag_gems.fused.silu_and_mul"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "entry, needle",
    [
        ({"inputs": ["randn"]}, "exactly one of 'aten'"),
        ({"aten": "gelu", "function": "gelu", "inputs": ["randn"]}, "exactly one of 'aten'"),
        ({"aten": "gelu", "inputs": ["randnn"]}, "unknown maker 'randnn'"),
        ({"aten": "gelu", "inputs": []}, "non-empty list of makers"),
        ({"aten": "gelu", "inputs": ["randn"], "shapes": [[0, 4]]}, "positive integers"),
        ({"aten": "gelu", "inputs": [{"maker": "randn", "dims": [2]}], "shapes": [[4, 4]]}, "indexes past"),
        ({"aten": "gelu", "inputs": [{"maker": "randint", "dtype": "int64"}]}, "integer 'high'"),
        ({"aten": "gelu", "inputs": [{"maker": "randint", "high": 4}]}, "integer 'dtype'"),
        ({"aten": "gelu", "inputs": [{"maker": "randn", "high": 4}]}, "randint maker only"),
        ({"function": "silu_and_mul", "inputs": ["randn"]}, "need 'torch'"),
        ({"aten": "gelu", "inputs": ["randn"], "shape": [[4]]}, "unknown key(s) shape"),
        ({"aten": "gelu", "inputs": ["randn"], "dtypes": ["float8"]}, "dtypes"),
        ({"aten": "gelu", "inputs": [{"value": 2}]}, "at least one tensor"),
        ({"aten": "gelu", "inputs": ["randn", {"sizes": [3]}], "shapes": [[4, 4]]}, "sizes"),
    ],
)
def test_a_bad_declaration_names_the_file_the_entry_and_the_fix(entry: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_declarations({"my_op": entry}, "gems.yaml")
    assert "gems.yaml: my_op" in err.value.message and needle in err.value.message


def test_a_declaration_naming_an_aten_op_torch_lacks_fails_at_load(tmp_path: Path) -> None:
    path = tmp_path / "gems.yaml"
    path.write_text("typo:\n  aten: _log_softmaxx\n  inputs: [randn]\n")
    with pytest.raises(UsageError, match="torch.ops.aten has no attribute '_log_softmaxx'"):
        load_declared(path)


def test_a_declaration_file_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gems.yaml"
    path.write_text("- gelu\n")
    with pytest.raises(ConfigError, match="map op ids to entries"):
        load_declared(path)


# -- harness list ops --provider flaggems --------------------------------------------------------------


def test_listing_shows_which_harness_ops_flaggems_registers_and_what_else_it_offers() -> None:
    inv = Inventory(version="5.0.2", vendor="amd", device="cuda",
                    registrations={"_softmax": "softmax", "mm": "mm", "abs": "abs", "addmm": "addmm"})
    text = render_listing(load_ops(), inv)
    assert "flag_gems 5.0.2, vendor amd" in text
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and line.split()}
    assert "registered (softmax)" in lines["softmax"]
    assert "NOT registered" in lines["add"]
    assert "direct call" in lines["silu_and_mul"]
    assert "abs, addmm" in text  # registered by FlagGems, no harness case yet


def test_listing_without_flag_gems_still_shows_the_op_map_and_why() -> None:
    text = render_listing(load_ops(), Inventory(unavailable="flag_gems is not installed"))
    assert text.startswith("flag_gems: unavailable here: flag_gems is not installed")
    assert "aten::_softmax" in text and "unknown" in text


def test_inventory_round_trips_through_the_query_process_format() -> None:
    inv = Inventory(version="5.0.2", vendor="nvidia", device="cuda", registrations={"mm": "mm"})
    assert Inventory.from_json(inv.to_json()) == inv
    assert inv.functions == ("mm",)



def test_declared_shapes_come_from_yaml_references_only(tmp_path: Path) -> None:
    path = tmp_path / "gems.yaml"
    path.write_text("log_softmax:\n  aten: _log_softmax\n  inputs: [randn]\n  args: [-1, false]\n"
                    "  shapes: [[64, 32]]\n")
    assert is_declaration_file(str(path)) and not is_declaration_file("my_ops.py")
    assert declared_shapes([str(path), "tests/data/user_ops.py"]) == {"log_softmax": [(64, 32)]}
