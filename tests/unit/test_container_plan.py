"""Container planning for every backend, image tags and image resolution: no docker needed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from harness.backends import BACKENDS, all_visibility_keys, get_backend
from harness.container.host import probe_host
from harness.container.image import (
    base_identity,
    content_tag,
    declared_args,
    ensure_image,
    image_ref,
    load_recipe,
    resolve_steps,
)
from harness.container.launch import assemble, device_choice, prepare_run
from harness.container.plan import (
    CONTAINER_REPO,
    DeviceChoice,
    DevicePlan,
    Hardening,
    HostView,
    NodeInfo,
    container_user,
    plan_container,
    plan_devices,
    plan_invocation,
)
from harness.errors import EnvironmentProblem, UsageError
from harness.options import ContainerOptions, resolve_container_options

ROOT = Path(__file__).resolve().parents[2]
CHAR = NodeInfo(kind="char", gids=(44,))
ALIASES = {alias: b.name for b in BACKENDS for alias in (b.name, *b.aliases)}

# One host that has every vendor's nodes and driver files: each plan must pick only its own.
EVERY_NODE = {
    "/dev/nvidiactl": CHAR, "/dev/nvidia0": CHAR,
    "/dev/kfd": NodeInfo(kind="char", gids=(110,)),
    "/dev/dri": NodeInfo(kind="dir", gids=(44, 110)),
    "/dev/dri/renderD128": CHAR, "/dev/dri/renderD129": CHAR, "/dev/dri/card0": CHAR, "/dev/dri/card1": CHAR,
    "/dev/mtgpu.0": CHAR, "/dev/mtgpu.1": CHAR,
    "/dev/davinci0": NodeInfo(kind="char", gids=(1001,)), "/dev/davinci1": NodeInfo(kind="char", gids=(1001,)),
    "/dev/davinci_manager": CHAR, "/dev/devmm_svm": CHAR, "/dev/hisi_hdc": CHAR,
}
EVERY_PATH = frozenset({
    "/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/bin/npu-smi",
    "/etc/ascend_install.info", "/usr/bin/mthreads-gmi",
})
DEVICE_IDS = {"rocm": ("0", "1"), "musa": ("0", "1"), "ascend": ("0", "1"), "cuda": (), "cpu": ()}
ALL = DeviceChoice(ids=None)
# What sysfs says about the nodes: each GPU's own nodes link to its PCI device.
PCI = "/sys/devices/pci0000:00/0000:0{}:00.0"
NODE_DEVICES = {
    "/dev/mtgpu.0": PCI.format(1), "/dev/dri/card0": PCI.format(1), "/dev/dri/renderD128": PCI.format(1),
    "/dev/mtgpu.1": PCI.format(2), "/dev/dri/card1": PCI.format(2), "/dev/dri/renderD129": PCI.format(2),
}


def host_for(backend: str, runtimes: frozenset[str] = frozenset(), **kw: object) -> HostView:
    values: dict[str, object] = dict(
        nodes=EVERY_NODE, device_ids=DEVICE_IDS[backend], paths=EVERY_PATH, runtimes=runtimes,
        groups={"video": 44, "render": 110}, node_devices=NODE_DEVICES,
    )
    values.update(kw)
    return HostView(**values)  # type: ignore[arg-type]


def other_backends_nodes(name: str) -> set[str]:
    own = {
        "cuda": {"/dev/nvidia"}, "rocm": {"/dev/kfd", "/dev/dri"}, "musa": {"/dev/mtgpu", "/dev/dri"},
        "ascend": {"/dev/davinci", "/dev/devmm_svm", "/dev/hisi_hdc"}, "cpu": set(),
    }[name]
    return {p for p in EVERY_NODE if not any(p.startswith(o) for o in own)}


# -- device plans per backend ------------------------------------------------------------


def test_cpu_passes_no_device_and_refuses_a_device_choice() -> None:
    plan = plan_devices(get_backend("cpu"), host_for("cpu"), ALL)
    assert plan.mode == "none" and not plan.devices and plan.gpu_request is None and plan.runtime is None
    with pytest.raises(UsageError, match="no devices to pass"):
        plan_devices(get_backend("cpu"), host_for("cpu"), DeviceChoice(ids=("0",), source="--devices"))


def test_cuda_uses_gpu_requests_for_the_chosen_gpus() -> None:
    cuda = get_backend("cuda")
    every = plan_devices(cuda, host_for("cuda"), ALL)
    assert every.mode == "gpu-requests" and every.gpu_request is not None
    assert every.gpu_request.device_ids == () and every.gpu_request.flag() == "all"
    some = plan_devices(cuda, host_for("cuda"), DeviceChoice(ids=("2", "GPU-8f2c"), source="--devices"))
    assert some.gpu_request is not None and some.gpu_request.device_ids == ("2", "GPU-8f2c")
    assert some.devices == () and ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility") in some.environment
    assert some.ipc_mode is None  # a private IPC namespace: no CUDA IPC between processes is needed


def test_cuda_without_driver_node_is_refused_before_any_container() -> None:
    nodes = {k: v for k, v in EVERY_NODE.items() if k != "/dev/nvidiactl"}
    with pytest.raises(EnvironmentProblem) as err:
        plan_devices(get_backend("cuda"), host_for("cuda", nodes=nodes), ALL)
    assert "/dev/nvidiactl" in err.value.message and "No container was started" in err.value.message


def test_rocm_every_gpu_passes_kfd_and_each_render_node_never_the_whole_dri() -> None:
    plan = plan_devices(get_backend("rocm"), host_for("rocm"), ALL)
    assert plan.mode == "device-nodes"
    assert [(d.host, d.container) for d in plan.devices] == [
        ("/dev/kfd", "/dev/kfd"), ("/dev/dri/renderD128", "/dev/dri/renderD128"),
        ("/dev/dri/renderD129", "/dev/dri/renderD129"),
    ]
    assert plan.security_opt == () and plan.ipc_mode is None and plan.cap_add == ()
    assert set(plan.group_add) == {44, 110}


def test_rocm_chosen_gpu_passes_only_its_render_node() -> None:
    plan = plan_devices(get_backend("rocm"), host_for("rocm"), DeviceChoice(ids=("1",), source="--devices"))
    assert [d.container for d in plan.devices] == ["/dev/kfd", "/dev/dri/renderD129"]


def test_rocm_prefers_the_amd_runtime_when_the_engine_has_it() -> None:
    plan = plan_devices(get_backend("rocm"), host_for("rocm", frozenset({"runc", "amd"})),
                        DeviceChoice(ids=("0", "1"), source="--devices"))
    assert plan.mode == "runtime" and plan.runtime == "amd" and plan.devices == ()
    assert ("AMD_VISIBLE_DEVICES", "0,1") in plan.environment


def test_musa_without_runtime_maps_the_chosen_cards_nodes_only() -> None:
    plan = plan_devices(get_backend("musa"), host_for("musa"), DeviceChoice(ids=("1",), source="--devices"))
    assert plan.mode == "device-nodes"
    assert [d.container for d in plan.devices] == ["/dev/mtgpu.1", "/dev/dri/card1", "/dev/dri/renderD129"]
    assert [m.target for m in plan.mounts] == ["/usr/bin/mthreads-gmi"]
    assert not any(k == "MTHREADS_VISIBLE_DEVICES" for k, _ in plan.environment)
    every = plan_devices(get_backend("musa"), host_for("musa"), ALL)
    assert "/dev/dri" not in {d.container for d in every.devices}
    assert {d.container for d in every.devices} == set(NODE_DEVICES)


def test_musa_refuses_when_the_cards_dri_nodes_cannot_be_told_apart() -> None:
    unlinked = {k: v for k, v in NODE_DEVICES.items() if not k.startswith("/dev/mtgpu.1")}
    host = host_for("musa", node_devices=unlinked, device_root="/tmp/fake")
    with pytest.raises(EnvironmentProblem) as err:
        plan_devices(get_backend("musa"), host, DeviceChoice(ids=("1",), source="--devices"))
    text = err.value.message
    assert "/tmp/fake/dev/mtgpu.1" in text and "No container was started" in text and "mthreads" in text
    # the runtime maps the devices itself: no sysfs needed then
    runtime = plan_devices(get_backend("musa"), host_for("musa", frozenset({"mthreads"}), node_devices={}), ALL)
    assert runtime.mode == "runtime"


def test_musa_with_mthreads_runtime_sets_its_visibility_variable() -> None:
    host = host_for("musa", frozenset({"runc", "mthreads"}))
    assert ("MTHREADS_VISIBLE_DEVICES", "all") in plan_devices(get_backend("musa"), host, ALL).environment
    chosen = plan_devices(get_backend("musa"), host, DeviceChoice(ids=("0", "1"), source="x"))
    assert chosen.runtime == "mthreads" and ("MTHREADS_VISIBLE_DEVICES", "0,1") in chosen.environment


def test_ascend_without_runtime_maps_nodes_and_driver_read_only() -> None:
    plan = plan_devices(get_backend("ascend"), host_for("ascend"), DeviceChoice(ids=("1",), source="--devices"))
    assert [d.container for d in plan.devices] == [
        "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc", "/dev/davinci1",
    ]
    assert {m.target for m in plan.mounts} == {
        "/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/bin/npu-smi", "/etc/ascend_install.info",
    }
    assert all(m.read_only for m in plan.mounts)
    assert 1001 in plan.group_add
    # ASCEND_VISIBLE_DEVICES is the runtime's: set by hand it would make a default
    # ascend runtime map devices a second time.
    assert not any(k.startswith("ASCEND") for k, _ in plan.environment)


def test_ascend_runtime_lists_devices_because_it_has_no_all() -> None:
    plan = plan_devices(get_backend("ascend"), host_for("ascend", frozenset({"ascend"})), ALL)
    assert plan.runtime == "ascend" and ("ASCEND_VISIBLE_DEVICES", "0,1") in plan.environment
    assert plan.mounts == ()


def test_ascend_without_driver_files_is_refused() -> None:
    with pytest.raises(EnvironmentProblem) as err:
        plan_devices(get_backend("ascend"), host_for("ascend", paths=frozenset()), ALL)
    assert "/usr/local/Ascend/driver" in err.value.message and "runtime (ascend)" in err.value.message


@pytest.mark.parametrize("name", [b.name for b in BACKENDS])
def test_no_plan_carries_another_backends_nodes_or_visibility(name: str) -> None:
    backend = get_backend(name)
    plan = plan_devices(backend, host_for(name), ALL)
    mapped = {d.container for d in plan.devices}
    assert not mapped & other_backends_nodes(name)
    other_vars = set(all_visibility_keys()) | {
        k for b in BACKENDS if b.name != name for k in b.passthrough.runtime_env
    }
    assert not {k for k, _ in plan.environment} & other_vars
    assert "--privileged" not in " ".join(
        plan_container(image="img", image_digest="sha256:1", invocation=plan_invocation(backend, [], "r"),
                       devices=plan, uid=1, gid=1, repo_dir="/src", reports_dir="/src/reports",
                       forwarded_env={}, backend=name).docker_args()
    )


@pytest.mark.parametrize("name", ["rocm", "musa", "ascend"])
def test_missing_chosen_device_names_node_root_and_devices_found(name: str) -> None:
    host = host_for(name, device_root="/tmp/fake-root")
    with pytest.raises(EnvironmentProblem) as err:
        plan_devices(get_backend(name), host, DeviceChoice(ids=("7",), source="--devices"))
    text = err.value.message
    assert "No container was started" in text and "/tmp/fake-root" in text
    assert "devices found: 0, 1" in text and "bench-cpu" in text


def test_host_without_any_device_of_the_backend_says_so() -> None:
    host = host_for("ascend", nodes={}, device_ids=())
    with pytest.raises(EnvironmentProblem) as err:
        plan_devices(get_backend("ascend"), host, ALL)
    assert "/dev/davinci_manager" in err.value.message and "/dev/davinci*" in err.value.message


def test_device_choice_must_be_numeric_for_node_backends() -> None:
    with pytest.raises(UsageError, match="not a device index"):
        plan_devices(get_backend("rocm"), host_for("rocm"), DeviceChoice(ids=("GPU-1",), source="--devices"))


def test_host_visibility_picks_the_devices_passed_in() -> None:
    options = ContainerOptions(repo_dir=ROOT, reports_dir=ROOT / "reports")
    rocm = device_choice(get_backend("rocm"), options, {"ROCR_VISIBLE_DEVICES": "5,6", "CUDA_VISIBLE_DEVICES": "0"})
    assert rocm.ids == ("5", "6") and "ROCR_VISIBLE_DEVICES" in rocm.source
    explicit = ContainerOptions(repo_dir=ROOT, reports_dir=ROOT / "reports", devices=("1",))
    assert device_choice(get_backend("rocm"), explicit, {"HIP_VISIBLE_DEVICES": "3"}).ids == ("1",)
    assert device_choice(get_backend("musa"), options, {"CUDA_VISIBLE_DEVICES": "3"}).ids is None


# -- the host probe (no device nodes needed: plain files stand in and must be refused) ------


def test_probe_finds_device_indices_and_refuses_plain_files(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    for name in ("davinci0", "davinci3", "davinci_manager", "devmm_svm", "hisi_hdc"):
        (tmp_path / "dev" / name).write_text("")
    (tmp_path / "usr/local/Ascend/driver").mkdir(parents=True)
    host = probe_host(get_backend("ascend"), str(tmp_path), ["runc"])
    assert host.device_ids == ("0", "3")
    assert "/usr/local/Ascend/driver" in host.paths and "/usr/local/dcmi" not in host.paths
    with pytest.raises(EnvironmentProblem, match="not a device node"):
        plan_devices(get_backend("ascend"), host, ALL)


def test_probe_reads_render_nodes_as_device_indices(tmp_path: Path) -> None:
    (tmp_path / "dev/dri").mkdir(parents=True)
    for name in ("renderD128", "renderD130", "card0"):
        (tmp_path / "dev/dri" / name).write_text("")
    host = probe_host(get_backend("rocm"), str(tmp_path), [])
    assert host.device_ids == ("0", "2") and set(host.nodes) == {"/dev/dri/renderD128", "/dev/dri/renderD130"}


# -- the harness command -------------------------------------------------------------------


def test_invocation_pins_backend_and_run_id() -> None:
    inv = plan_invocation(get_backend("musa"), ["--", "--ops", "softmax"], "RID", ALIASES)
    assert inv.args == ("python3", "-m", "harness", "run", "--backend", "musa", "--ops", "softmax",
                        "--run-id", "RID")
    assert inv.run_dir == "RID"


def test_invocation_accepts_an_alias_of_its_backend_and_refuses_another() -> None:
    inv = plan_invocation(get_backend("rocm"), ["--backend", "amd", "--ops", "add"], "RID", ALIASES)
    assert inv.args.count("--backend") == 1 and "amd" not in inv.args
    with pytest.raises(UsageError, match="conflicts with the container backend rocm"):
        plan_invocation(get_backend("rocm"), ["--backend=cuda"], "RID", ALIASES)


@pytest.mark.parametrize("args", [["--out", "/tmp/x"], ["--reports-dir", "../elsewhere"], ["--resume=out/r1"]])
def test_invocation_refuses_paths_outside_reports(args: list[str]) -> None:
    with pytest.raises(UsageError, match="only reports/"):
        plan_invocation(get_backend("cpu"), args, "RID", ALIASES)


def test_invocation_keeps_user_named_run_dirs() -> None:
    out = plan_invocation(get_backend("cpu"), ["--out", "reports/mine"], "RID", ALIASES)
    assert "--run-id" not in out.args and out.run_dir == "mine"
    sub = plan_invocation(get_backend("cpu"), ["--reports-dir", "reports/nightly"], "RID", ALIASES)
    assert sub.run_dir == "nightly/RID"


# -- the whole plan ----------------------------------------------------------------------------


def test_container_plan_mounts_repo_read_only_reports_writable_as_caller() -> None:
    backend = get_backend("rocm")
    devices = plan_devices(backend, host_for("rocm"), ALL)
    plan = plan_container(
        image="triton-op-harness-rocm:abc", image_digest="sha256:feed",
        invocation=plan_invocation(backend, ["--ops", "add"], "RID", ALIASES), devices=devices,
        uid=1234, gid=5678, repo_dir="/home/me/h", reports_dir="/home/me/h/reports",
        forwarded_env={"HARNESS_LEVEL": "core"}, backend="rocm",
    )
    assert plan.user == "1234:5678" and plan.working_dir == CONTAINER_REPO
    assert [(m.source, m.target, m.read_only) for m in plan.mounts] == [
        ("/home/me/h", "/repo", True), ("/home/me/h/reports", "/repo/reports", False),
    ]
    env = dict(plan.environment)
    assert env["HARNESS_IMAGE"] == "triton-op-harness-rocm:abc" and env["HARNESS_IMAGE_DIGEST"] == "sha256:feed"
    assert env["HARNESS_LEVEL"] == "core"
    args = plan.docker_args()
    assert "--device" in args and "/dev/kfd:/dev/kfd:rwm" in args and "--init" in args
    assert "docker run" in plan.render()


def test_prepared_run_takes_resolved_options_not_the_environment() -> None:
    """The runner gets its options from harness.options: pyproject, env and flags all reach the plan."""
    env = {"HARNESS_LEVEL": "core", "HARNESS_OUT": "/tmp/x", "HARNESS_BUILD_ARGS": "EXTRA=1"}
    config = {"container": {"base-images": {"cpu": "project/base:1"}}}
    prepared = prepare_run("cpu", ["--ops", "add"], {"user": "7:8"}, env, config)
    assert prepared.options.base_image("cpu") == "project/base:1"
    assert prepared.recipe.base_image == "project/base:1"
    assert prepared.options.forwarded_env == (("HARNESS_LEVEL", "core"),)
    plan = assemble(prepared, plan_devices(get_backend("cpu"), host_for("cpu"), ALL), "img", "sha256:d")
    environment = dict(plan.environment)
    assert environment["HARNESS_LEVEL"] == "core" and "HARNESS_OUT" not in environment
    assert "HARNESS_BUILD_ARGS" not in environment and plan.user == "7:8"
    flagged = prepare_run("cpu", [], {"base_images": ["flag/base:2"]}, env, config)
    assert flagged.recipe.base_image == "flag/base:2"


# -- image tags and resolution -------------------------------------------------------------------


def _tree(tmp_path: Path) -> Path:
    ctx = tmp_path / "containers" / "cpu"
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text('ARG BASE_IMAGE=python:3.11\nFROM ${BASE_IMAGE}\nARG EXTRA=""\nCOPY helper.sh /x\n')
    (ctx / "helper.sh").write_text("echo hi\n")
    (ctx / "wheels.txt").write_text("# staged\ntorch-*.whl\n")
    return tmp_path / "containers"


def _tag(containers: Path, **options: object) -> str:
    base: dict[str, object] = {"repo_dir": containers.parent, "reports_dir": containers.parent / "reports"}
    base.update(options)
    return content_tag(load_recipe(containers, "cpu", ContainerOptions(**base)))  # type: ignore[arg-type]


def test_tag_is_stable_for_an_unchanged_tree_and_changes_with_what_is_copied(tmp_path: Path) -> None:
    containers = _tree(tmp_path)
    first = _tag(containers)
    assert first == _tag(containers) and re.fullmatch(r"[0-9a-f]{16}", first)
    (containers / "cpu" / "helper.sh").write_text("echo changed\n")
    second = _tag(containers)
    assert second != first
    (containers / "cpu" / "helper.sh").chmod(0o755)
    assert _tag(containers) != second


def test_tag_follows_declared_build_args_and_base_image_only(tmp_path: Path) -> None:
    containers = _tree(tmp_path)
    plain = _tag(containers)
    assert _tag(containers, build_args=(("UNDECLARED", "1"),)) == plain
    assert _tag(containers, build_args=(("EXTRA", "1"),)) != plain
    assert _tag(containers, base_images=(("cpu", "local/base:1"),)) != plain


def test_tag_follows_the_local_wheels_staged(tmp_path: Path) -> None:
    containers = _tree(tmp_path)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "numpy-2.0-py3-none-any.whl").write_text("not staged: not listed in wheels.txt")
    plain = _tag(containers, wheel_dirs=(wheels,))
    assert plain == _tag(containers)
    (wheels / "torch-2.13.0+cpu-cp311-none-any.whl").write_text("x")
    with_torch = _tag(containers, wheel_dirs=(wheels,))
    assert with_torch != plain
    recipe = load_recipe(containers, "cpu", ContainerOptions(repo_dir=tmp_path, reports_dir=tmp_path, wheel_dirs=(wheels,)))
    assert [w.path for w in recipe.wheels] == ["wheels/torch-2.13.0+cpu-cp311-none-any.whl"]


def test_recipe_base_image_and_declared_args(tmp_path: Path) -> None:
    containers = _tree(tmp_path)
    recipe = load_recipe(containers, "cpu", ContainerOptions(repo_dir=tmp_path, reports_dir=tmp_path))
    assert recipe.base_image == "python:3.11"
    assert declared_args('ARG A\nARG C=1\nARG D=""\n') == {"A": None, "C": "1", "D": ""}
    with pytest.raises(UsageError, match="No Dockerfile"):
        load_recipe(containers, "musa", ContainerOptions(repo_dir=tmp_path, reports_dir=tmp_path))


def test_image_ref_with_and_without_registry() -> None:
    assert image_ref("triton-op-harness", "musa", "abc", None) == "triton-op-harness-musa:abc"
    assert image_ref("triton-op-harness", "musa", "abc", "reg.io/t") == "reg.io/t/triton-op-harness-musa:abc"


@pytest.mark.parametrize(
    "policy, registry, present, steps",
    [
        ("auto", None, True, ("use",)),
        ("auto", None, False, ("build",)),
        ("auto", "reg", False, ("pull", "build")),
        ("build", None, True, ("build",)),
        ("pull", "reg", True, ("pull",)),
        ("no-build", "reg", False, ("pull",)),
        ("no-build", None, False, ()),
        ("no-build", None, True, ("use",)),
    ],
)
def test_resolve_steps(policy: str, registry: str | None, present: bool, steps: tuple[str, ...]) -> None:
    assert resolve_steps(policy, registry, present) == steps


# -- the Dockerfiles themselves ------------------------------------------------------------------


def _harness_requirements() -> list[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0].lower() for d in deps]
    return [n for n in names if n not in ("torch", "triton")]


@pytest.mark.parametrize("name", [b.name for b in BACKENDS])
def test_dockerfile_contract(name: str, tmp_path: Path) -> None:
    text = (ROOT / "containers" / name / "Dockerfile").read_text()
    assert "# syntax=" not in text  # BuildKit would try to pull a frontend image
    assert re.search(r"^ARG BASE_IMAGE=\S+", text, re.MULTILINE), "base image must be a build ARG"
    assert re.search(r"^FROM \$\{BASE_IMAGE\}", text, re.MULTILINE)
    users = re.findall(r"^USER (\S+)", text, re.MULTILINE)
    assert users and users[-1] not in ("root", "0") and not users[-1].startswith(("root:", "0:")), \
        "images default to a non-root user"
    assert "--privileged" not in text
    recipe = load_recipe(ROOT / "containers", name, ContainerOptions(repo_dir=tmp_path, reports_dir=tmp_path))
    context = {f.path: f.source.read_text() for f in recipe.files}
    everything = "\n".join(context.values())
    assert "--extra-index-url" not in everything, "one index only: no name resolved from two"
    locks = {path: body for path, body in context.items() if path.endswith(".lock")}
    installed = "\n".join(locks.values())
    for requirement in _harness_requirements():
        assert re.search(rf"^{re.escape(requirement)}==\S+ .*\\\n\s+--hash=sha256:[0-9a-f]{{64}}", installed,
                         re.MULTILINE), f"{name} image lacks a hash-locked {requirement}"
    pip_installs = re.findall(r"pip install[^\n]*(?:\\\n[^\n]*)*", everything)
    for command in pip_installs:
        if "-r " in command:
            assert "--require-hashes" in command and "--no-deps" in command, command
    installs_triton = re.search(r"^triton==", installed, re.MULTILINE) is not None
    assert installs_triton == (name == "cpu"), "only the cpu image may install upstream triton"


def test_locks_are_up_to_date_with_their_inputs() -> None:
    """Every requirement of a .in file is pinned in its lock (`nox -s locks` regenerates them)."""
    pairs = [(ROOT / "requirements" / "host.in", ROOT / "requirements" / "host.lock"),
             (ROOT / "requirements" / "ci-tools.in", ROOT / "requirements" / "ci-tools.lock"),
             (ROOT / "containers" / "common" / "harness-deps.in", ROOT / "containers" / "common" / "harness-deps.lock"),
             (ROOT / "containers" / "common" / "numpy.in", ROOT / "containers" / "common" / "numpy.lock"),
             (ROOT / "containers" / "cpu" / "requirements.in", ROOT / "containers" / "cpu" / "requirements.lock")]
    for source, lock in pairs:
        pinned = {m.group(1).lower() for m in re.finditer(r"^([A-Za-z0-9_.-]+)==", lock.read_text(), re.MULTILINE)}
        for line in source.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                name = re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0].lower().replace("_", "-")
                assert name in pinned, f"{name} of {source.name} is not in {lock.name}: run `nox -s locks`"


@pytest.mark.parametrize("name", ["cuda", "rocm", "musa", "ascend"])
def test_vendor_images_share_the_guarded_install_step(name: str, tmp_path: Path) -> None:
    recipe = load_recipe(ROOT / "containers", name, ContainerOptions(repo_dir=tmp_path, reports_dir=tmp_path))
    shared = {f.path: f for f in recipe.files if f.path.startswith("common/")}
    assert {"common/install-harness-deps.sh", "common/harness-deps.lock", "common/numpy.lock"} <= set(shared)
    assert "COPY common/ /tmp/harness-common/" in recipe.dockerfile
    assert "sh /tmp/harness-common/install-harness-deps.sh" in recipe.dockerfile
    script = shared["common/install-harness-deps.sh"].source.read_text()
    assert 'exit 1' in script and "--no-deps" in script and "torch/triton kept" in script
    assert '--require-hashes -r "$here/harness-deps.lock"' in script


def test_a_change_to_a_shared_file_changes_every_image_tag(tmp_path: Path) -> None:
    containers = tmp_path / "containers"
    for backend in ("cuda", "rocm"):
        (containers / backend).mkdir(parents=True)
        (containers / backend / "Dockerfile").write_text("ARG BASE_IMAGE=x\nFROM ${BASE_IMAGE}\n")
    (containers / "common").mkdir()
    shared = containers / "common" / "step.sh"
    shared.write_text("echo one\n")
    options = ContainerOptions(repo_dir=tmp_path, reports_dir=tmp_path)
    before = {b: content_tag(load_recipe(containers, b, options)) for b in ("cuda", "rocm")}
    shared.write_text("echo two\n")
    after = {b: content_tag(load_recipe(containers, b, options)) for b in ("cuda", "rocm")}
    assert all(before[b] != after[b] for b in before)


def test_container_package_imports_without_torch() -> None:
    """The bench-<backend> venvs hold the docker SDK and no torch."""
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['triton'] = None; "
        "import harness.container.cli, harness.container.launch; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr


def test_engine_turns_a_plan_into_sdk_arguments() -> None:
    pytest.importorskip("docker")
    from harness.container.engine import Engine

    backend = get_backend("cuda")
    devices = plan_devices(backend, host_for("cuda"), DeviceChoice(ids=("1",), source="--devices"))
    plan = plan_container(image="img", image_digest="d", invocation=plan_invocation(backend, [], "r"),
                          devices=devices, uid=7, gid=8, repo_dir="/src", reports_dir="/src/reports",
                          forwarded_env={}, backend="cuda")
    kwargs = Engine(client=None, address="x")._create_kwargs(plan)
    request = kwargs["device_requests"][0]
    assert request["DeviceIDs"] == ["1"] and request["Capabilities"] == [["gpu"]]
    assert kwargs["user"] == "7:8" and kwargs["init"] is True
    assert "privileged" not in kwargs and "devices" not in kwargs
    assert kwargs["cap_drop"] == ["ALL"] and "cap_add" not in kwargs
    assert kwargs["security_opt"] == ["no-new-privileges:true"] and kwargs["read_only"] is True
    assert kwargs["network_mode"] == "none" and kwargs["ipc_mode"] == "private" and kwargs["shm_size"] == "2g"
    assert kwargs["pids_limit"] == 8192
    assert set(kwargs["tmpfs"]) == {"/tmp", "/home/harness"} and all("exec" in o.split(",") for o in kwargs["tmpfs"].values())
    assert [(m["Source"], m["Target"], m["ReadOnly"]) for m in kwargs["mounts"]] == [
        ("/src", "/repo", True), ("/src/reports", "/repo/reports", False),
    ]


def _fake_python(bin_dir: Path, replaces_torch: bool) -> None:
    """A python3 whose `-m pip` is recorded and whose torch version moves if ``replaces_torch``."""
    bin_dir.mkdir()
    script = bin_dir / "python3"
    script.write_text(
        "#!/bin/sh\n"
        f'log="{bin_dir}/calls"\n'
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "pip $*" >> "$log"; '
        + (f'touch "{bin_dir}/replaced"; ' if replaces_torch else "")
        + "exit 0; fi\n"
        f'if [ -f "{bin_dir}/replaced" ]; then echo "2.99 3.0 /x/triton"; else echo "2.10 3.6 /x/triton"; fi\n'
    )
    script.chmod(0o755)


@pytest.mark.parametrize(("replaces", "flaggems"), [(False, ""), (False, "5.0.2"), (True, "")])
def test_the_shared_install_step_fails_the_build_when_pip_replaced_torch(
        tmp_path: Path, replaces: bool, flaggems: str) -> None:
    bin_dir = tmp_path / "bin"
    _fake_python(bin_dir, replaces)
    done = subprocess.run(["sh", str(ROOT / "containers" / "common" / "install-harness-deps.sh")],
                          capture_output=True, text=True,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "FLAGGEMS_VERSION": flaggems})
    calls = (bin_dir / "calls").read_text()
    if replaces:
        assert done.returncode == 1 and "pip replaced the vendor's torch/Triton (2.10 3.6" in done.stderr
    else:
        assert done.returncode == 0 and "torch/triton kept: 2.10 3.6 /x/triton" in done.stdout, done.stderr
    assert ("flag-gems==5.0.2" in calls and "--no-deps" in calls) == (flaggems == "5.0.2")


@pytest.mark.parametrize(("has_module", "packages", "expect"), [
    (True, "", "kept"), (False, "pkg==1 other==2", "installed"), (False, "", "refused")])
def test_ensure_module_keeps_what_the_base_has_and_installs_or_refuses_the_rest(
        tmp_path: Path, has_module: bool, packages: str, expect: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-m" ]; then echo "$*" >> "{bin_dir}/pip"; exit 0; fi\n'
        f"exit {0 if has_module else 1}\n")
    (bin_dir / "python3").chmod(0o755)
    done = subprocess.run(["sh", str(ROOT / "containers" / "common" / "ensure-module.sh"), "torch_npu", packages,
                           "Pass --build-arg X"], capture_output=True, text=True,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    pip = (bin_dir / "pip").read_text() if (bin_dir / "pip").exists() else ""
    if expect == "kept":
        assert done.returncode == 0 and pip == ""
    elif expect == "installed":
        assert done.returncode == 0 and pip.split()[-2:] == ["pkg==1", "other==2"]
    else:
        assert done.returncode == 1 and "Pass --build-arg X" in done.stderr and pip == ""


# -- hardening (docs/containers.md, "Hardening") ---------------------------------------------------


def _plan(name: str, uid: int = 1000, hardening: Hardening | None = None, devices: DevicePlan | None = None):  # type: ignore[no-untyped-def]
    backend = get_backend(name)
    return plan_container(image="sha256:" + "a" * 64, image_ref="img:tag", image_digest="sha256:d",
                          invocation=plan_invocation(backend, [], "r"),
                          devices=devices or plan_devices(backend, host_for(name), ALL), uid=uid, gid=uid,
                          repo_dir="/src", reports_dir="/src/reports", forwarded_env={}, backend=name,
                          hardening=hardening)


@pytest.mark.parametrize("name", [b.name for b in BACKENDS])
def test_every_backend_is_confined_by_default(name: str) -> None:
    sec = _plan(name).security
    assert sec.cap_drop == ("ALL",) and sec.cap_add == ()
    assert sec.security_opt == ("no-new-privileges:true",)
    assert sec.read_only and sec.network == "none" and sec.pids_limit == 8192
    assert sec.ipc_mode == "private" and sec.shm_size == "2g"
    tmpfs = dict(sec.tmpfs)
    assert set(tmpfs) == {"/tmp", "/home/harness"}
    for options in tmpfs.values():  # Triton writes and loads .so files from its cache under these
        flags = options.split(",")
        assert "exec" in flags and "nosuid" in flags and "nodev" in flags and "noexec" not in flags
    args = _plan(name).docker_args()
    pairs = [args[i:i + 2] for i in range(len(args) - 1)]
    for flag in (["--cap-drop", "ALL"], ["--network", "none"], ["--ipc", "private"],
                 ["--security-opt", "no-new-privileges:true"], ["--pids-limit", "8192"], ["--shm-size", "2g"]):
        assert flag in pairs, flag
    assert "--read-only" in args and "seccomp=unconfined" not in " ".join(args)
    assert "--privileged" not in args and "host" not in args


def test_backend_data_asks_for_nothing_beyond_compute() -> None:
    """No backend documents a need for a capability, host IPC or an unconfined seccomp profile."""
    for backend in BACKENDS:
        pt = backend.passthrough
        assert pt.cap_add == () and pt.ipc_mode is None and not pt.security_opt, backend.name
        assert "/dev/dri" not in pt.shared_nodes + pt.all_device_nodes, backend.name


def test_the_image_that_runs_is_the_id_and_the_run_records_the_tag() -> None:
    plan = _plan("cpu")
    assert plan.image == "sha256:" + "a" * 64 and plan.docker_args()[-len(plan.command) - 1] == plan.image
    assert dict(plan.environment)["HARNESS_IMAGE"] == "img:tag"


def test_a_root_caller_runs_as_a_non_root_user_inside() -> None:
    assert _plan("cpu", uid=0).user == "65532:65532"
    assert _plan("cpu", uid=1000).user == "1000:1000"
    assert container_user(0, 0) == (65532, 65532) and container_user(5, 0) == (5, 0)


def test_each_relaxation_comes_only_on_request() -> None:
    asked = Hardening(network="bridge", seccomp="unconfined", cap_add=("sys_nice",), pids_limit=100, shm_size="8g")
    sec = _plan("rocm", hardening=asked).security
    assert sec.network == "bridge" and sec.cap_add == ("SYS_NICE",) and sec.pids_limit == 100
    assert sec.shm_size == "8g" and sec.security_opt == ("no-new-privileges:true", "seccomp=unconfined")
    assert sec.cap_drop == ("ALL",) and sec.read_only  # the rest stays


def test_a_backend_cannot_make_seccomp_unconfined_nor_drop_no_new_privileges() -> None:
    devices = DevicePlan(mode="none", security_opt=("seccomp=unconfined", "label=disable"),
                         ipc_mode="host", shm_size="1g", cap_add=("SYS_PTRACE",))
    sec = _plan("cpu", devices=devices).security
    assert sec.security_opt == ("no-new-privileges:true", "label=disable")
    # what a backend documents it needs does pass, visibly
    assert sec.ipc_mode == "host" and sec.shm_size == "1g" and sec.cap_add == ("SYS_PTRACE",)


@pytest.mark.parametrize("bad", [Hardening(network="host"), Hardening(seccomp="off"), Hardening(pids_limit=10)])
def test_bad_hardening_values_are_refused(bad: Hardening) -> None:
    with pytest.raises(UsageError):
        _plan("cpu", hardening=bad)


def test_hardening_options_come_through_the_options_layer() -> None:
    def resolve(cli: dict[str, object], env: dict[str, str], table: dict[str, object] | None = None) -> ContainerOptions:
        return resolve_container_options(cli, env, {"container": table or {}}, repo_dir=ROOT, backends=["rocm"])

    default = resolve({}, {})
    assert (default.network, default.seccomp, default.cap_add, default.pids_limit, default.shm_size) == (
        "none", "default", (), 8192, None)
    table = resolve({}, {}, {"network": "bridge", "cap-add": ["SYS_NICE"], "pids-limit": 512, "shm-size": "4g"})
    assert (table.network, table.cap_add, table.pids_limit, table.shm_size) == ("bridge", ("SYS_NICE",), 512, "4g")
    env = resolve({}, {"HARNESS_SECCOMP": "unconfined", "HARNESS_CAP_ADD": "cap_sys_nice SYS_PTRACE",
                       "HARNESS_CONTAINER_NETWORK": "none"}, {"network": "bridge"})
    assert env.seccomp == "unconfined" and env.cap_add == ("SYS_NICE", "SYS_PTRACE") and env.network == "none"
    flags = resolve({"network": "bridge", "cap_add": ["NET_RAW"], "pids_limit": "300"}, {"HARNESS_CAP_ADD": "X_Y"})
    assert flags.network == "bridge" and flags.cap_add == ("NET_RAW",) and flags.pids_limit == 300


@pytest.mark.parametrize(("cli", "env", "says"), [
    ({"network": "host"}, {}, "--network"),
    ({}, {"HARNESS_SECCOMP": "off"}, "HARNESS_SECCOMP"),
    ({"cap_add": ["ALL"]}, {}, "ALL is never added back"),
    ({}, {"HARNESS_PIDS_LIMIT": "10"}, "too small"),
    ({"shm_size": "lots"}, {}, "not a size"),
    ({"user": "0:0"}, {}, "never runs as root"),
])
def test_bad_hardening_options_are_refused_naming_their_source(cli: dict[str, object], env: dict[str, str],
                                                               says: str) -> None:
    with pytest.raises(UsageError) as err:
        resolve_container_options(cli, env, {}, repo_dir=ROOT, backends=["cpu"])
    assert says in err.value.message


# -- image trust: what runs is what this job built or pulled ------------------------------------------


class FakeStore:
    """An image store that records what was asked and can be told what it holds."""

    def __init__(self, images: dict[str, str] | None = None, registry: dict[str, str] | None = None) -> None:
        self.images = dict(images or {})  # ref -> id
        self.registry = dict(registry or {})  # ref -> digest
        self.calls: list[str] = []

    def has_image(self, ref: str) -> bool:
        return ref in self.images

    def image_digest(self, ref: str) -> str:
        return self.images[ref]

    def image_id(self, ref: str) -> str:
        return self.images[ref]

    def registry_digest(self, ref: str) -> str:
        from harness.errors import ContainerError

        self.calls.append(f"ask {ref}")
        if ref not in self.registry:
            raise ContainerError("no registry")
        return self.registry[ref]

    def pull(self, ref: str) -> str:
        from harness.errors import ContainerError

        self.calls.append(f"pull {ref}")
        if ref not in self.registry:
            raise ContainerError("no registry")
        self.images[ref] = "sha256:" + "b" * 64
        return self.images[ref]

    def build(self, ref, context, build_args, backend, log):  # type: ignore[no-untyped-def]
        self.calls.append(f"build {ref}")
        self.images[ref] = "sha256:" + "c" * 64  # the tag points here ...
        return "sha256:" + "d" * 64  # ... but the build reported this image


def _recipe(tmp_path: Path, base: str):  # type: ignore[no-untyped-def]
    containers = _tree(tmp_path)
    options = ContainerOptions(repo_dir=tmp_path, reports_dir=tmp_path, base_images=(("cpu", base),), policy="build")
    return load_recipe(containers, "cpu", options), options


def test_the_tag_covers_the_base_digest(tmp_path: Path) -> None:
    recipe, _ = _recipe(tmp_path, "local/base:1")
    a = content_tag(replace(recipe, base_digest="sha256:" + "1" * 64))
    b = content_tag(replace(recipe, base_digest="sha256:" + "2" * 64))
    assert a != b != content_tag(recipe)


def test_base_identity_prefers_the_pinned_digest_then_the_local_image_then_the_registry(tmp_path: Path) -> None:
    pinned = "reg.io/base:1@sha256:" + "e" * 64
    recipe, _ = _recipe(tmp_path, pinned)
    store = FakeStore()
    assert base_identity(store, recipe, lambda _: None) == "sha256:" + "e" * 64 and store.calls == []
    recipe, _ = _recipe(tmp_path / "b", "local/base:1")
    local = FakeStore(images={"local/base:1": "local/base@sha256:" + "f" * 64})
    assert base_identity(local, recipe, lambda _: None) == "sha256:" + "f" * 64
    remote = FakeStore(registry={"local/base:1": "sha256:" + "9" * 64})
    assert base_identity(remote, recipe, lambda _: None) == "sha256:" + "9" * 64
    assert remote.calls == ["ask local/base:1"]  # asked, not downloaded
    assert base_identity(FakeStore(), recipe, lambda _: None, fetch=False) is None


def test_a_built_image_runs_by_the_id_the_build_reported_not_by_its_tag(tmp_path: Path) -> None:
    recipe, options = _recipe(tmp_path, "local/base:1")
    store = FakeStore(images={"local/base:1": "sha256:" + "0" * 64})
    image = ensure_image(store, recipe, options, lambda _: None)
    assert image.action == "built" and image.image_id == "sha256:" + "d" * 64
    assert store.images[image.ref] != image.image_id  # the tag was moved meanwhile: not what runs
    assert image.ref.startswith("triton-op-harness-cpu:")


def test_a_base_that_cannot_be_found_anywhere_is_refused_with_what_to_do(tmp_path: Path) -> None:
    from harness.errors import ContainerError

    recipe, options = _recipe(tmp_path, "nowhere/base:1")
    with pytest.raises(ContainerError) as err:
        ensure_image(FakeStore(), recipe, options, lambda _: None)
    assert "nowhere/base:1" in err.value.message and "--base-image" in err.value.message


def test_engine_pulls_a_pinned_reference_by_its_digest() -> None:
    pytest.importorskip("docker")
    from harness.container.engine import Engine

    class Images:
        def __init__(self) -> None:
            self.asked: list[tuple[str, str | None]] = []

        def pull(self, repository: str, tag: str | None = None):  # type: ignore[no-untyped-def]
            self.asked.append((repository, tag))
            return type("Image", (), {"id": "sha256:" + "a" * 64})()

    client = type("Client", (), {"images": Images()})()
    engine = Engine(client=client, address="x")
    digest = "sha256:" + "5" * 64
    assert engine.pull(f"reg.io:5000/rocm/pytorch:7.2@{digest}") == "sha256:" + "a" * 64
    assert engine.pull("reg.io:5000/rocm/pytorch:7.2") == "sha256:" + "a" * 64
    assert engine.pull("python") == "sha256:" + "a" * 64
    assert client.images.asked == [("reg.io:5000/rocm/pytorch", digest), ("reg.io:5000/rocm/pytorch", "7.2"),
                                   ("python", "latest")]


# -- gate-run --container: refusals before anything is built ---------------------------------------


@pytest.mark.parametrize(("backend", "devices", "says"), [
    ("cuda", None, "exactly one device"), ("rocm", "0,1", "exactly one device"), (None, "0", "needs the backend")])
def test_gate_in_a_container_needs_a_backend_and_one_device(tmp_path: Path, backend: str | None,
                                                            devices: str | None, says: str) -> None:
    from harness.container.gate import container_side_runner

    def no_engine(env: object) -> object:
        raise AssertionError("refused too late: an engine was asked for")

    with pytest.raises(UsageError) as err:
        container_side_runner(backend, devices, tmp_path / "gate", {}, {}, connect=no_engine)  # type: ignore[arg-type]
    assert says in err.value.message and "--container BACKEND --devices ID" in err.value.message
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(UsageError, match="is not empty"):
        container_side_runner("cpu", None, tmp_path / "full", {}, {}, connect=no_engine)  # type: ignore[arg-type]


def test_a_gate_sides_replay_source_is_named_as_the_container_sees_it(tmp_path: Path) -> None:
    from harness.container.gate import in_reports

    out = tmp_path / "gate"
    assert in_reports(str(out / "repeats" / "base-1"), out) == "reports/repeats/base-1"
    assert in_reports("--replay-from", out) == "--replay-from"
    assert in_reports(str(tmp_path / "elsewhere"), out) == str(tmp_path / "elsewhere")
