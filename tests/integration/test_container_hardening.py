"""The container's confinement, seen from inside the cpu image on a real engine.

Each property is probed by a process in the container planned exactly as `harness container run`
plans it (plan_container's defaults). Where a probe could pass for the wrong reason, a control
run with that one setting relaxed shows the probe does see the difference.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.backends import get_backend
from harness.container.plan import (
    ContainerPlan,
    DeviceChoice,
    Hardening,
    HostView,
    plan_container,
    plan_devices,
    plan_invocation,
)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.docker]

# Runs inside the container; prints one JSON line of facts.
PROBE = r"""
import ctypes, errno, glob, json, os, shutil, socket, subprocess, sys, time
sub = sys.argv[1]
facts = {"uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid()}
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
        facts[key] = value.strip()
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
facts["setuid0"] = attempt(lambda: os.setuid(0))
# a setuid-root binary (su, waiting for a password): whose rights does it run with?
su = subprocess.Popen(["/usr/bin/su", "-c", "true", "root"], stdin=subprocess.PIPE,
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
facts["su_uids"] = [l.split()[1:] for l in open(f"/proc/{su.pid}/status") if l.startswith("Uid:")][0]
su.kill(); su.wait()
facts["interfaces"] = sorted(os.listdir("/sys/class/net"))
# The interfaces the routing tables lead to: with none but lo, no address beyond the container's
# own can be reached, whichever it is (so nothing off the machine needs to be tried).
with open("/proc/net/route") as fh:
    facts["routes"] = sorted({line.split()[0] for line in fh.read().splitlines()[1:] if line.strip()})
try:
    with open("/proc/net/ipv6_route") as fh:
        facts["routes6"] = sorted({line.split()[-1] for line in fh if line.strip()} - {"lo"})
except FileNotFoundError:  # IPv6 off in this namespace
    facts["routes6"] = []
def connect():
    # the host's loopback-only listener (argv[2]): inside a network namespace of its own the
    # container's 127.0.0.1 is its own lo, where nothing listens
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=3).close()
facts["host_loopback"] = attempt(connect)
def write(path):
    with open(path, "w") as fh:
        fh.write("x")
targets = {"root": "/probe", "usr": "/usr/probe", "etc": "/etc/probe", "repo": "/repo/probe",
           "reports": f"/repo/reports/{sub}/probe", "tmp": "/tmp/probe", "home": "/home/harness/probe",
           "shm": "/dev/shm/probe"}
facts["write"] = {name: attempt(lambda p=path: write(p)) for name, path in targets.items()}
libm = (glob.glob("/usr/lib/*/libm.so.6") + glob.glob("/lib/*/libm.so.6"))[0]
def load(where):
    shutil.copy(libm, where)
    ctypes.CDLL(where)
facts["dlopen"] = {"tmp": attempt(lambda: load("/tmp/probe.so")),
                   "home": attempt(lambda: load("/home/harness/probe.so"))}
def run_copy():
    shutil.copy("/usr/bin/true", "/tmp/true")
    os.chmod("/tmp/true", 0o755)
    subprocess.run(["/tmp/true"], check=True)
facts["exec_tmp"] = attempt(run_copy)
st = os.statvfs("/dev/shm")
facts["shm_bytes"] = st.f_blocks * st.f_frsize
facts["ipc_ns"] = os.readlink("/proc/self/ns/ipc")
print(json.dumps(facts))
"""

# Forks until the kernel refuses; prints how many children it got and the error.
FORKS = r"""
import errno, json, os, signal, time
children, error = [], None
for _ in range(500):
    try:
        pid = os.fork()
    except OSError as exc:
        error = errno.errorcode.get(exc.errno)
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
print(json.dumps({"children": len(children), "error": error}))
"""


def _plan(image: Any, reports: Path, uid: int, command: tuple[str, ...],
          hardening: Hardening | None = None) -> ContainerPlan:
    backend = get_backend("cpu")
    plan = plan_container(
        image=image.image_id, image_ref=image.ref, image_digest=image.digest,
        invocation=plan_invocation(backend, [], "r"),
        devices=plan_devices(backend, HostView(), DeviceChoice(ids=None)),
        uid=uid, gid=uid, repo_dir=str(ROOT), reports_dir=str(reports), forwarded_env={}, backend="cpu",
        hardening=hardening,
    )
    return dataclasses.replace(plan, command=command)


def _run(engine: Any, plan: ContainerPlan) -> dict[str, Any]:
    out = io.StringIO()
    code = engine.run(plan, out, "cpu")
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue().strip().splitlines()[-1])


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reports")
    path.chmod(0o755)
    (path / "mine").mkdir()
    os.chmod(path / "mine", 0o777)  # writable by whoever runs inside; the rest of reports/ is not
    return path


@pytest.fixture(scope="module")
def host_listener() -> Iterator[int]:
    """A TCP listener on the host's loopback only; its port."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield int(server.getsockname()[1])


def _probe(listener: int) -> tuple[str, ...]:
    return ("python3", "-c", PROBE, "mine", str(listener))


@pytest.fixture(scope="module")
def facts(docker_engine, cpu_image, reports: Path, host_listener: int) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """What the probe sees in a container planned with every default, started by root."""
    return _run(docker_engine, _plan(cpu_image, reports, os.getuid(), _probe(host_listener)))


def test_runs_as_a_non_root_user_even_when_the_caller_is_root(facts: dict[str, Any]) -> None:
    expected = 65532 if os.getuid() == 0 else os.getuid()
    assert facts["uid"] == facts["euid"] == expected and facts["uid"] != 0


def test_has_no_capability_and_cannot_gain_any(facts: dict[str, Any]) -> None:
    assert int(facts["CapEff"], 16) == int(facts["CapPrm"], 16) == int(facts["CapBnd"], 16) == 0
    assert facts["NoNewPrivs"] == "1"
    assert facts["setuid0"] == "EPERM"


def test_a_setuid_root_binary_does_not_elevate(docker_engine, cpu_image, reports: Path,  # type: ignore[no-untyped-def]
                                               host_listener: int, facts: dict[str, Any]) -> None:
    assert facts["su_uids"] == [str(facts["uid"])] * 4  # real, effective, saved, fs: all the user's
    # Control: the same probe without no-new-privileges sees su run as root, so the probe works.
    plan = _plan(cpu_image, reports, os.getuid(), _probe(host_listener))
    plan = dataclasses.replace(plan, security=dataclasses.replace(plan.security, security_opt=()))
    assert _run(docker_engine, plan)["su_uids"][1] == "0"


def test_cannot_reach_the_network(docker_engine, cpu_image, reports: Path,  # type: ignore[no-untyped-def]
                                  host_listener: int, facts: dict[str, Any]) -> None:
    """No interface but lo and no route beyond it: nothing outside the container can be reached.
    Every connection tried here, the controls' too, stays on this machine's loopback."""
    assert facts["interfaces"] == ["lo"]
    assert facts["routes"] == [] and facts["routes6"] == []
    assert facts["host_loopback"] == "ECONNREFUSED"  # the host's own loopback is out of reach too
    # Control: asked for, the bridge network gives an interface besides lo and a route through it.
    bridged = _run(docker_engine, _plan(cpu_image, reports, os.getuid(), _probe(host_listener),
                                        Hardening(network="bridge")))
    assert len(bridged["interfaces"]) > 1 and [i for i in bridged["routes"] if i != "lo"]
    # Control: in the host's network namespace the same probe reaches the listener, so the
    # refusal above is the container's namespace and not a probe that cannot connect.
    plan = _plan(cpu_image, reports, os.getuid(), _probe(host_listener))
    hosted = dataclasses.replace(plan, security=dataclasses.replace(plan.security, network="host"))
    assert _run(docker_engine, hosted)["host_loopback"] == "ok"


def test_can_write_only_into_reports_and_its_scratch_space(facts: dict[str, Any], reports: Path) -> None:
    denied = {name for name, result in facts["write"].items() if result != "ok"}
    assert denied == {"root", "usr", "etc", "repo"}
    assert {facts["write"][n] for n in denied} == {"EROFS"}
    assert (reports / "mine" / "probe").read_text() == "x"  # the host sees what reports/ got
    assert not (ROOT / "probe").exists()


def test_scratch_space_allows_loading_and_running_what_is_written(facts: dict[str, Any]) -> None:
    """Triton writes .so files into its cache (under the home or /tmp) and loads them."""
    assert facts["dlopen"] == {"tmp": "ok", "home": "ok"} and facts["exec_tmp"] == "ok"


def test_private_ipc_with_a_sized_shared_memory(facts: dict[str, Any]) -> None:
    assert facts["shm_bytes"] == 2 * 1024**3
    assert facts["ipc_ns"] != os.readlink("/proc/self/ns/ipc")


def test_seccomp_filter_on_by_default_and_off_only_on_request(docker_engine, cpu_image, reports: Path,  # type: ignore[no-untyped-def]
                                                              host_listener: int, facts: dict[str, Any]) -> None:
    assert facts["Seccomp"] == "2"  # filter mode: the engine's default profile
    unconfined = _run(docker_engine, _plan(cpu_image, reports, os.getuid(), _probe(host_listener),
                                           Hardening(seccomp="unconfined")))
    assert unconfined["Seccomp"] == "0"


def test_a_fork_bomb_stops_at_the_pids_limit(docker_engine, cpu_image, reports: Path) -> None:  # type: ignore[no-untyped-def]
    seen = _run(docker_engine, _plan(cpu_image, reports, os.getuid(), ("python3", "-c", FORKS),
                                     Hardening(pids_limit=64)))
    assert seen["error"] == "EAGAIN" and 40 < seen["children"] < 64


def test_a_run_started_by_root_leaves_reports_owned_by_root(container_env: dict[str, str], tmp_path: Path,  # type: ignore[no-untyped-def]
                                                            no_leftovers) -> None:
    """The run directory is lent to the container's user for the run and handed back after."""
    if os.geteuid() != 0:
        pytest.skip("the caller is not root here")
    reports = tmp_path / "reports"
    reports.mkdir()  # root-owned, 0755: the container's user could not create a run in it unaided
    run_id = f"root-{secrets.token_hex(3)}"
    done = subprocess.run(
        [sys.executable, "-m", "harness.container", "run", "--backend", "cpu", "--reports", str(reports), "--",
         "--ops", "add", "--dtypes", "fp32", "--run-id", run_id],
        cwd=ROOT, capture_output=True, text=True, env={**container_env, "PYTHONPATH": str(ROOT)}, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "user 65532:65532" in done.stderr and "network none" in done.stderr
    written = list((reports / run_id).rglob("*"))
    assert (reports / run_id / "run.json").is_file()
    assert all(p.stat().st_uid == 0 and p.stat().st_gid == 0 for p in written)
    shutil.rmtree(reports, ignore_errors=True)
