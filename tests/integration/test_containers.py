"""The container layer against a real docker engine: bench-cpu end to end, passthrough, refusals.

Opt in with `-m integration`; without an engine the tests skip and say how to
start one. Vendor base images cannot be had here (no registry), so passthrough is
checked with the cpu image standing in: it is started with each backend's planned
arguments against fake device nodes. (test_vendor_images.py builds the vendor
Dockerfiles themselves on stand-in bases.)
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends import BACKENDS, all_visibility_keys, get_backend
from harness.container.host import probe_host
from harness.container.plan import DeviceChoice, plan_container, plan_devices, plan_invocation
from harness.errors import ContainerError

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.docker]

FAKE_UID, FAKE_GID = 4321, 4321
NODE_GID = 4242  # owner group of the fake nodes: only a member may open them (mode 0660)

# Fake nodes reuse the numbers of harmless devices (null, zero, full) so the container
# may open them; each stands in for a vendor node at the same path under the fake root.
FAKE_NODES = {
    "/dev/kfd": (1, 3), "/dev/dri/renderD128": (1, 5), "/dev/dri/card0": (1, 7),
    "/dev/mtgpu.0": (1, 3), "/dev/davinci0": (1, 5), "/dev/davinci_manager": (1, 3),
    "/dev/devmm_svm": (1, 5), "/dev/hisi_hdc": (1, 7), "/dev/nvidiactl": (1, 3), "/dev/nvidia0": (1, 5),
}
FAKE_FILES = ("/usr/local/Ascend/driver/version.info", "/usr/local/dcmi/dcmi.h",
              "/usr/local/bin/npu-smi", "/etc/ascend_install.info", "/usr/bin/mthreads-gmi")
EXPECTED = {
    "rocm": {"/dev/kfd", "/dev/dri/renderD128"},  # the render node of each GPU, never the whole /dev/dri
    "musa": {"/dev/mtgpu.0", "/dev/dri/renderD128", "/dev/dri/card0"},
    "ascend": {"/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"},
}

# Runs inside the container: what of the vendor paths exists, what may be read, which env.
PROBE = r"""
import json, os, sys
paths = json.loads(sys.argv[1])
print(json.dumps({
    "present": [p for p in paths if os.path.exists(p)],
    "readable": [p for p in paths if os.path.exists(p) and not os.path.isdir(p) and os.access(p, os.R_OK)],
    "env": {k: v for k, v in os.environ.items()},
    "groups": os.getgroups(),
    "uid": os.getuid(),
}))
"""


@pytest.fixture()
def fake_root(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("making fake device nodes needs root (mknod)")
    root = tmp_path / "root"
    for path, (major, minor) in FAKE_NODES.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.mknod(target, 0o660 | stat.S_IFCHR, os.makedev(major, minor))
        os.chown(target, 0, NODE_GID)
        # sysfs links each node to its device (one fake PCI GPU): how MUSA's DRI nodes are matched
        link = root / "sys" / "dev" / "char" / f"{major}:{minor}" / "device"
        if not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(root / "sys/devices/pci0000:00/0000:01:00.0")
    (root / "sys/devices/pci0000:00/0000:01:00.0").mkdir(parents=True, exist_ok=True)
    for path in FAKE_FILES:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("fake\n")
    return root


def _harness(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.container", *args], cwd=ROOT, capture_output=True, text=True,
        env={**env, "PYTHONPATH": str(ROOT)}, timeout=600,
    )


# -- end to end ---------------------------------------------------------------------------


def test_nox_bench_cpu_writes_host_reports_like_a_host_run(  # type: ignore[no-untyped-def]
    cpu_image, container_env: dict[str, str], tmp_path: Path, no_leftovers
) -> None:  # type: ignore[no-untyped-def]
    run_id = f"it-{secrets.token_hex(4)}"
    run_dir = ROOT / "reports" / run_id
    try:
        done = subprocess.run(
            [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "bench-cpu", "--",
             "--ops", "softmax", "--run-id", run_id],
            cwd=ROOT, capture_output=True, text=True, env=container_env, timeout=900,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        # nox merges the session's stderr into its stdout
        assert f"reports on the host: {run_dir}/report.md" in done.stdout + done.stderr

        host_dir = tmp_path / "host-run"
        host = subprocess.run(
            [sys.executable, "-m", "harness", "run", "--backend", "cpu", "--ops", "softmax",
             "--out", str(host_dir)],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
        )
        assert host.returncode == 0, host.stderr[-3000:]

        def files(d: Path) -> set[str]:
            return {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()}

        def kinds(d: Path) -> set[str]:  # spec/log file names carry per-run details; compare their folders
            return {p.split("/")[0] if "/" in p else p for p in files(d)}

        assert kinds(run_dir) == kinds(host_dir)
        for name in ("run.json", "records.jsonl", "summary.csv", "junit.xml", "report.md"):
            assert (run_dir / name).is_file()
        for path in run_dir.rglob("*"):
            assert path.stat().st_uid == os.getuid(), f"{path} is not owned by the caller"

        def cases(d: Path) -> list[tuple[str, str]]:  # (case_id, status)
            lines = (d / "records.jsonl").read_text().splitlines()
            return sorted((json.loads(line)["case_id"], json.loads(line)["status"]) for line in lines)

        assert cases(run_dir) == cases(host_dir)
        assert (run_dir / "summary.csv").read_text().splitlines()[0] == (host_dir / "summary.csv").read_text().splitlines()[0]
        info = json.loads((run_dir / "run.json").read_text())
        assert info["container"] == {"image": cpu_image.ref, "digest": cpu_image.digest}
        assert json.loads((host_dir / "run.json").read_text())["container"]["image"] is None
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_reports_are_owned_by_the_requested_user(  # type: ignore[no-untyped-def]
    cpu_image, container_env: dict[str, str], tmp_path: Path, no_leftovers
) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    reports.chmod(0o777)
    done = _harness(container_env, "run", "--backend", "cpu", "--user", f"{FAKE_UID}:{FAKE_GID}", "--reports", str(reports),
                    "--", "--ops", "add", "--dtypes", "fp32", "--out", "reports/owned")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    written = list((reports / "owned").rglob("*"))
    assert written and all(p.stat().st_uid == FAKE_UID and p.stat().st_gid == FAKE_GID for p in written)


# -- passthrough -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["rocm", "musa", "ascend"])
def test_passthrough_shows_own_nodes_and_nothing_of_other_backends(  # type: ignore[no-untyped-def]
    name: str, docker_engine, cpu_image, fake_root: Path, no_leftovers
) -> None:
    backend = get_backend(name)
    host = probe_host(backend, str(fake_root), docker_engine.runtimes())
    devices = plan_devices(backend, host, DeviceChoice(ids=None))
    assert devices.mode == "device-nodes"
    plan = plan_container(
        image=cpu_image.ref, image_digest=cpu_image.digest, invocation=plan_invocation(backend, [], "r"),
        devices=devices, uid=FAKE_UID, gid=FAKE_GID, repo_dir=str(ROOT), reports_dir=str(ROOT / "reports"),
        forwarded_env={}, backend=name,
    )
    every_path = sorted(FAKE_NODES) + list(FAKE_FILES)
    probe = dataclasses.replace(plan, command=("python3", "-c", PROBE, json.dumps(every_path)))
    out = io.StringIO()
    assert docker_engine.run(probe, out, name) == 0, out.getvalue()
    seen = json.loads(out.getvalue().strip().splitlines()[-1])

    present = {p for p in seen["present"] if p.startswith("/dev/")}
    assert present == EXPECTED[name]
    # The non-root user opens the nodes through the node's group, which the plan added.
    assert set(seen["readable"]) >= EXPECTED[name] and NODE_GID in seen["groups"]
    assert seen["uid"] == FAKE_UID
    leaked = {k for k in seen["env"] if k in all_visibility_keys()} | {
        k for b in BACKENDS for k in b.passthrough.runtime_env if k in seen["env"]
    }
    assert not leaked
    driver_files = {p for p in seen["present"] if not p.startswith("/dev/")}
    if name == "ascend":
        assert driver_files == {"/usr/local/Ascend/driver/version.info", "/usr/local/dcmi/dcmi.h",
                                "/usr/local/bin/npu-smi", "/etc/ascend_install.info"}
    elif name == "musa":
        assert driver_files == {"/usr/bin/mthreads-gmi"}
    else:
        assert driver_files == set()


def test_chosen_render_node_limits_rocm_to_one_gpu(docker_engine, cpu_image, fake_root: Path, no_leftovers) -> None:  # type: ignore[no-untyped-def]
    (fake_root / "dev/dri/renderD129").parent.mkdir(exist_ok=True)
    os.mknod(fake_root / "dev/dri/renderD129", 0o660 | stat.S_IFCHR, os.makedev(1, 3))
    backend = get_backend("rocm")
    host = probe_host(backend, str(fake_root), docker_engine.runtimes())
    devices = plan_devices(backend, host, DeviceChoice(ids=("1",), source="--devices"))
    plan = plan_container(
        image=cpu_image.ref, image_digest=cpu_image.digest, invocation=plan_invocation(backend, [], "r"),
        devices=devices, uid=FAKE_UID, gid=FAKE_GID, repo_dir=str(ROOT), reports_dir=str(ROOT / "reports"),
        forwarded_env={}, backend="rocm",
    )
    paths = ["/dev/kfd", "/dev/dri/renderD128", "/dev/dri/renderD129", "/dev/dri/card0"]
    out = io.StringIO()
    assert docker_engine.run(dataclasses.replace(plan, command=("python3", "-c", PROBE, json.dumps(paths))), out, "rocm") == 0
    assert json.loads(out.getvalue().strip().splitlines()[-1])["present"] == ["/dev/kfd", "/dev/dri/renderD129"]


# -- refusals: a clear error and no container ---------------------------------------------------


def test_missing_device_node_is_refused_before_any_container(  # type: ignore[no-untyped-def]
    docker_engine, container_env: dict[str, str], fake_root: Path, no_leftovers
) -> None:
    (fake_root / "dev/kfd").unlink()
    done = _harness(container_env, "run", "--backend", "rocm", "--device-root", str(fake_root), "--", "--ops", "add")
    assert done.returncode == 3
    assert "/dev/kfd not found" in done.stderr and "No container was started" in done.stderr
    assert str(fake_root) in done.stderr


def test_missing_engine_gives_one_paragraph_with_what_to_do(  # type: ignore[no-untyped-def]
    docker_engine, container_env: dict[str, str], no_leftovers
) -> None:
    env = {**container_env, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    done = _harness(env, "run", "--backend", "cpu", "--", "--ops", "add")
    assert done.returncode == 3
    message = done.stderr.strip()
    assert "No docker engine answered at unix:///nonexistent/docker.sock" in message
    assert "nox -s bench -- ARGS" in message and ".ci/docker-up.sh" in message
    assert len(message.splitlines()) == 1


def test_unknown_backend_fails_closed(docker_engine, container_env: dict[str, str], no_leftovers) -> None:  # type: ignore[no-untyped-def]
    done = _harness(container_env, "run", "--backend", "tpu", "--", "--ops", "add")
    assert done.returncode == 2
    assert "Unknown backend 'tpu'" in done.stderr and "cuda (nvidia, nv)" in done.stderr


def test_engine_refusal_removes_the_container(docker_engine, cpu_image, fake_root: Path, no_leftovers) -> None:  # type: ignore[no-untyped-def]
    """GPU requests on an engine without the NVIDIA toolkit: refused at start, nothing left."""
    if "nvidia" in docker_engine.runtimes():
        pytest.skip("this engine has the NVIDIA runtime; the refusal cannot be provoked")
    backend = get_backend("cuda")
    devices = plan_devices(backend, probe_host(backend, str(fake_root), docker_engine.runtimes()), DeviceChoice(ids=None))
    plan = plan_container(
        image=cpu_image.ref, image_digest=cpu_image.digest, invocation=plan_invocation(backend, [], "r"),
        devices=devices, uid=FAKE_UID, gid=FAKE_GID, repo_dir=str(ROOT), reports_dir=str(ROOT / "reports"),
        forwarded_env={}, backend="cuda",
    )
    with pytest.raises(ContainerError) as err:
        docker_engine.run(plan, io.StringIO(), "cuda")
    assert "refused to start the cuda container" in err.value.message
    assert "NVIDIA Container Toolkit" in err.value.message
