"""Planning a container run: which devices, mounts, user, environment and command (pure).

Nothing here touches docker or the file system. What the host has (device
nodes, driver files, engine runtimes, groups) arrives as a :class:`HostView`,
gathered by :mod:`harness.container.host`; the result is a frozen
:class:`ContainerPlan` that :mod:`harness.container.engine` turns into one
docker SDK call. Every refusal (a missing node, a device that is not there,
an output path the container cannot write) happens here, before any
container exists.
"""

from __future__ import annotations

import argparse
import fnmatch
import posixpath
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from harness.backends.base import Backend, Passthrough
from harness.errors import EnvironmentProblem, UsageError

__all__ = [
    "CONTAINER_REPO",
    "ContainerPlan",
    "DeviceChoice",
    "DeviceMap",
    "DevicePlan",
    "GpuRequest",
    "HarnessInvocation",
    "Hardening",
    "HostView",
    "Mount",
    "NodeInfo",
    "SecurityPlan",
    "container_user",
    "device_templates_index",
    "plan_container",
    "plan_devices",
    "plan_invocation",
    "plan_security",
]

CONTAINER_REPO = "/repo"  # where the checkout is mounted, read-only; reports/ inside it is writable
CONTAINER_HOME = "/home/harness"  # world-writable in every image: any uid can run them
LABEL = "org.triton-op-harness.managed"  # on every container the harness starts, for clean-up checks
NONROOT = 65532  # uid and gid inside the container when the caller is root (never root inside)
DEFAULT_PIDS_LIMIT = 8192  # processes and threads: a torch process has one thread per core
DEFAULT_SHM_SIZE = "2g"  # /dev/shm of the container's own IPC namespace (docker's default is 64 MB)
TMPFS_SIZE = "4g"  # each writable tmpfs (/tmp, the home); memory is used only as files are written
NETWORK_MODES = ("none", "bridge")
SECCOMP_MODES = ("default", "unconfined")

@dataclass(frozen=True)
class NodeInfo:
    """A device node (or a directory of them) as found on the host."""

    kind: str  # "char", "block", "dir" or "other"
    gids: tuple[int, ...] = ()  # owning group of the node, or of every node in the directory


@dataclass(frozen=True)
class HostView:
    """What the planner needs to know about the host, keyed by the vendor's own paths.

    ``device_root`` prefixes every host path of the vendor stack (device nodes
    and driver files), so tests can point the planner at fake nodes in a
    temporary directory. ``nodes`` and ``paths`` hold only what exists.
    """

    device_root: str = "/"
    nodes: Mapping[str, NodeInfo] = field(default_factory=dict)
    device_ids: tuple[str, ...] = ()  # device indices found from the per-device node templates
    paths: frozenset[str] = frozenset()  # driver files and directories present (mount sources)
    runtimes: frozenset[str] = frozenset()  # container runtimes the engine offers
    groups: Mapping[str, int] = field(default_factory=dict)  # host group name -> gid
    # vendor node path -> the device it belongs to (its sysfs parent, e.g. a PCI address), for
    # nodes the kernel links to a device; lets the planner pass only a chosen device's DRI nodes
    node_devices: Mapping[str, str] = field(default_factory=dict)

    def host_path(self, vendor_path: str) -> str:
        return posixpath.join(self.device_root, vendor_path.lstrip("/"))


@dataclass(frozen=True)
class DeviceMap:
    host: str
    container: str
    permissions: str = "rwm"

    def spec(self) -> str:
        return f"{self.host}:{self.container}:{self.permissions}"


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class GpuRequest:
    """Docker's GPU device request (`--gpus`); ``device_ids`` empty means every GPU."""

    device_ids: tuple[str, ...] = ()

    def flag(self) -> str:
        return "all" if not self.device_ids else f'"device={",".join(self.device_ids)}"'


@dataclass(frozen=True)
class DeviceChoice:
    """Which host devices go into the container, and where the choice came from."""

    ids: tuple[str, ...] | None  # None: every device
    source: str = "default (every device)"


@dataclass(frozen=True)
class DevicePlan:
    """How the chosen devices reach the container."""

    mode: str  # "none", "runtime", "gpu-requests" or "device-nodes"
    devices: tuple[DeviceMap, ...] = ()
    gpu_request: GpuRequest | None = None
    runtime: str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    group_add: tuple[int, ...] = ()
    security_opt: tuple[str, ...] = ()
    ipc_mode: str | None = None
    shm_size: str | None = None
    cap_add: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hardening:
    """What the caller asked to relax; the defaults relax nothing (harness.options resolves it)."""

    network: str = "none"  # "none" or "bridge"
    seccomp: str = "default"  # "default" (the engine's profile) or "unconfined"
    cap_add: tuple[str, ...] = ()  # capabilities to add back, e.g. SYS_NICE for ROCm's NUMA calls
    pids_limit: int = DEFAULT_PIDS_LIMIT
    shm_size: str | None = None  # None: the backend's, else DEFAULT_SHM_SIZE


@dataclass(frozen=True)
class SecurityPlan:
    """How the container is confined (docs/containers.md, "Hardening").

    Every capability is dropped and only ``cap_add`` comes back; no process may gain privileges
    (setuid binaries do not elevate); the root file system is read-only and only the ``tmpfs``
    mounts (and reports/) are writable, with exec allowed where Triton builds and loads .so
    files; no network unless asked; at most ``pids_limit`` processes and threads; an IPC
    namespace of its own with a /dev/shm of ``shm_size``; the engine's seccomp profile unless
    "seccomp=unconfined" was asked for.
    """

    cap_drop: tuple[str, ...] = ("ALL",)
    cap_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ("no-new-privileges:true",)
    read_only: bool = True
    tmpfs: tuple[tuple[str, str], ...] = ()
    network: str = "none"
    pids_limit: int = DEFAULT_PIDS_LIMIT
    ipc_mode: str = "private"
    shm_size: str | None = DEFAULT_SHM_SIZE


@dataclass(frozen=True)
class HarnessInvocation:
    """The `harness run` arguments for inside the container, and where its reports land."""

    args: tuple[str, ...]
    run_dir: str | None  # relative to the reports mount; None when it cannot be known beforehand


@dataclass(frozen=True)
class ContainerPlan:
    image: str
    command: tuple[str, ...]
    user: str
    working_dir: str
    environment: tuple[tuple[str, str], ...]
    mounts: tuple[Mount, ...]
    devices: DevicePlan
    labels: tuple[tuple[str, str], ...]
    security: SecurityPlan = field(default_factory=SecurityPlan)
    init: bool = True  # docker-init as PID 1 forwards SIGINT/SIGTERM to the harness

    def docker_args(self) -> list[str]:
        """The equivalent `docker run` command line, for people reading a plan."""
        args = ["docker", "run", "--rm"]
        if self.init:
            args.append("--init")
        args += ["--user", self.user, "--workdir", self.working_dir]
        for mount in self.mounts + self.devices.mounts:
            suffix = ",readonly" if mount.read_only else ""
            args += ["--mount", f"type=bind,source={mount.source},target={mount.target}{suffix}"]
        for device in self.devices.devices:
            args += ["--device", device.spec()]
        if self.devices.gpu_request is not None:
            args += ["--gpus", self.devices.gpu_request.flag()]
        if self.devices.runtime:
            args += ["--runtime", self.devices.runtime]
        for gid in self.devices.group_add:
            args += ["--group-add", str(gid)]
        sec = self.security
        for cap in sec.cap_drop:
            args += ["--cap-drop", cap]
        for cap in sec.cap_add:
            args += ["--cap-add", cap]
        for opt in sec.security_opt:
            args += ["--security-opt", opt]
        if sec.read_only:
            args.append("--read-only")
        for path, options in sec.tmpfs:
            args += ["--tmpfs", f"{path}:{options}"]
        args += ["--network", sec.network, "--pids-limit", str(sec.pids_limit), "--ipc", sec.ipc_mode]
        if sec.shm_size:
            args += ["--shm-size", sec.shm_size]
        for key, value in self.environment:
            args += ["--env", f"{key}={value}"]
        for key, value in self.labels:
            args += ["--label", f"{key}={value}"]
        args.append(self.image)
        args += list(self.command)
        return args

    def render(self) -> str:
        """``docker_args`` as a shell command, one option and its value per line."""
        args = self.docker_args()
        image_at = args.index(self.image)
        lines = [" ".join(shlex.quote(a) for a in args[:3])]
        i = 3
        while i < image_at:
            if args[i] in ("--init", "--read-only") or i + 1 >= image_at:
                lines.append(shlex.quote(args[i]))
                i += 1
            else:
                lines.append(f"{args[i]} {shlex.quote(args[i + 1])}")
                i += 2
        lines.append(" ".join(shlex.quote(a) for a in args[image_at:]))
        return " \\\n    ".join(lines)


# -- devices -------------------------------------------------------------------------


def _format(template: str, index: str) -> str:
    return template.format(index=index, render=128 + int(index))


def device_templates_index(template: str) -> tuple[str, re.Pattern[str]]:
    """A glob and a regex that find the device indices a per-device node template covers.

    ``/dev/davinci{index}`` -> ``/dev/davinci*`` and a regex whose group is the
    index; ``{render}`` nodes give the index as render minor - 128.
    """
    glob_pattern = template.replace("{index}", "*").replace("{render}", "*")
    regex = re.escape(template).replace(r"\{index\}", r"(?P<index>\d+)").replace(
        r"\{render\}", r"(?P<render>\d+)"
    )
    return glob_pattern, re.compile(f"^{regex}$")


def _missing_nodes_error(backend: Backend, host: HostView, missing: Sequence[str], why: str) -> EnvironmentProblem:
    where = "" if host.device_root in ("", "/") else f" under device root {host.device_root}"
    listed = ", ".join(missing)
    return EnvironmentProblem(
        f"Backend {backend.name}: device node(s) {listed} not found{where} ({why}). "
        f"No container was started. Check that the {backend.name} kernel driver is loaded "
        f"(`ls -l {missing[0]}`), choose devices that exist with --devices, or run the "
        "CPU pipeline instead with `nox -s bench-cpu`."
    )


def _check_numeric(backend: Backend, choice: DeviceChoice) -> None:
    for item in choice.ids or ():
        if not item.isdigit():
            raise UsageError(
                f"Device {item!r} (from {choice.source}) is not a device index. The {backend.name} "
                "container takes host device indices such as 0 or 0,1."
            )


def _groups(pt: Passthrough, host: HostView, node_paths: Sequence[str]) -> tuple[int, ...]:
    """Host gids the container user joins: the owners of the mapped nodes, then named groups.

    Numeric gids are used because the container's /etc/group need not know the
    host's names (a "render" group is missing from many images).
    """
    gids: list[int] = []
    for path in node_paths:
        info = host.nodes.get(path)
        for gid in info.gids if info else ():
            if gid != 0 and gid not in gids:
                gids.append(gid)
    for name in pt.groups:
        named = host.groups.get(name)
        if named is not None and named != 0 and named not in gids:
            gids.append(named)
    return tuple(gids)


def _wanted_nodes(backend: Backend, host: HostView, choice: DeviceChoice, whole: bool) -> list[str]:
    """Node paths for the choice: shared ones, then per-device ones (or the whole-set ones).

    Raises one error naming every missing node, shared ones first, so a host
    without the driver hears about the driver's node rather than a device's.
    """
    pt = backend.passthrough
    wanted = list(pt.shared_nodes)
    why = "needed whatever devices are chosen"
    if whole and choice.ids is None and pt.all_device_nodes:
        wanted += list(pt.all_device_nodes)
    elif pt.per_device_nodes:
        _check_numeric(backend, choice)
        ids = choice.ids if choice.ids is not None else host.device_ids
        if not ids:
            patterns = [device_templates_index(t)[0] for t in pt.per_device_nodes]
            missing = [p for p in pt.shared_nodes if p not in host.nodes] + patterns
            raise _missing_nodes_error(backend, host, missing, "no device of this backend is present")
        wanted += [_format(t, i) for i in ids for t in pt.per_device_nodes]
        found = ", ".join(host.device_ids) or "none"
        why = f"device(s) {','.join(ids)} from {choice.source}; devices found: {found}"
    missing = [p for p in wanted if p not in host.nodes]
    if missing:
        raise _missing_nodes_error(backend, host, missing, why)
    if whole and pt.device_siblings and pt.per_device_nodes:  # only where the harness maps nodes
        ids = choice.ids if choice.ids is not None else host.device_ids
        wanted += _sibling_nodes(backend, host, ids)
    for path in wanted:
        if host.nodes[path].kind not in ("char", "block", "dir"):
            raise EnvironmentProblem(
                f"Backend {backend.name}: {host.host_path(path)} exists but is not a device node "
                "(nor a directory of them). No container was started. Check the driver installation."
            )
    return list(dict.fromkeys(wanted))


def _sibling_nodes(backend: Backend, host: HostView, ids: Sequence[str]) -> list[str]:
    """The nodes (``device_siblings``, such as /dev/dri/renderD*) that belong to each chosen device:
    those the kernel links to the same device (sysfs parent) as the device's own node.

    Only the chosen devices' nodes pass: never a whole /dev/dri, which would hand over every
    GPU of the host, other vendors' included. Where the link cannot be read the container is
    refused rather than given more than was chosen.
    """
    pt = backend.passthrough
    patterns = ", ".join(pt.device_siblings)
    chosen: list[str] = []
    for index in ids:
        node = _format(pt.per_device_nodes[0], index)
        parent = host.node_devices.get(node)
        mine = sorted(
            p for p in host.nodes
            if parent is not None and host.node_devices.get(p) == parent
            and any(fnmatch.fnmatchcase(p, pattern) for pattern in pt.device_siblings)
        )
        if not mine:
            why = ("the kernel links no device to it" if parent is None
                   else f"none of them belongs to its device {parent}")
            raise EnvironmentProblem(
                f"Backend {backend.name}: cannot tell which of {patterns} belong to "
                f"{host.host_path(node)} ({why}; read through {host.host_path('/sys/dev/char')}). "
                f"No container was started, rather than pass every GPU's nodes. Register the "
                f"vendor's container runtime ({pt.runtime or 'see docs/containers.md'}) with the engine, "
                "which maps the devices itself, or report the host's `ls -l /sys/dev/char` output."
            )
        chosen += mine
    return chosen


def _driver_mounts(backend: Backend, host: HostView) -> tuple[tuple[Mount, ...], tuple[str, ...]]:
    pt = backend.passthrough
    absent = [src for src, _ in pt.mounts if src not in host.paths]
    if absent:
        runtime = f" ({pt.runtime})" if pt.runtime else ""
        raise EnvironmentProblem(
            f"Backend {backend.name}: driver path(s) {', '.join(host.host_path(p) for p in absent)} "
            "not found. They are mounted read-only into the container when the engine has no "
            f"vendor container runtime{runtime}. No container was started. Install the driver, or "
            "install the vendor's container runtime and register it with the docker engine."
        )
    mounts: list[Mount] = []
    notes: list[str] = []
    for src, dst in pt.mounts + pt.optional_mounts:
        if src in host.paths:
            mounts.append(Mount(source=host.host_path(src), target=dst, read_only=True))
        else:
            notes.append(f"optional {host.host_path(src)} not found on the host; not mounted")
    return tuple(mounts), tuple(notes)


def plan_devices(backend: Backend, host: HostView, choice: DeviceChoice) -> DevicePlan:
    """How ``choice`` of ``backend``'s devices reaches a container on ``host``.

    A vendor runtime the engine offers is preferred (it also maps the driver's
    libraries); then docker GPU requests; then device nodes mapped one by one,
    with the driver files mounted read-only. Nothing of another backend is
    ever added, and no visibility variable of the host is forwarded: the
    container sees only what this plan names.
    """
    pt = backend.passthrough
    base = DevicePlan(
        mode="none", environment=tuple(pt.static_env), security_opt=pt.security_opt,
        ipc_mode=pt.ipc_mode, shm_size=pt.shm_size, cap_add=pt.cap_add,
    )
    if not pt.maps_devices:
        if choice.ids:
            raise UsageError(
                f"Backend {backend.name} has no devices to pass into a container; drop the device "
                f"choice ({choice.source})."
            )
        return base
    missing_host = [p for p in pt.host_nodes if p not in host.nodes]
    if missing_host:
        raise _missing_nodes_error(backend, host, missing_host, "the driver's control node")

    if pt.runtime and pt.runtime in host.runtimes:
        # The runtime maps the nodes; they are still checked so a missing device is
        # reported before a container exists.
        nodes = _wanted_nodes(backend, host, choice, whole=False)
        if choice.ids is not None:
            value = ",".join(choice.ids)
        else:
            value = pt.runtime_all if pt.runtime_all is not None else ",".join(host.device_ids)
        env = base.environment + tuple((key, value) for key in pt.runtime_env)
        return replace(base, mode="runtime", runtime=pt.runtime, environment=env,
                       group_add=_groups(pt, host, nodes))

    if pt.gpu_requests:
        # The NVIDIA toolkit maps nodes and libraries; ids may be indices or GPU UUIDs.
        return replace(base, mode="gpu-requests", gpu_request=GpuRequest(tuple(choice.ids or ())))

    nodes = _wanted_nodes(backend, host, choice, whole=True)
    mounts, notes = _driver_mounts(backend, host)
    devices = tuple(DeviceMap(host=host.host_path(p), container=p) for p in nodes)
    return replace(base, mode="device-nodes", devices=devices, mounts=mounts,
                   group_add=_groups(pt, host, nodes), notes=notes)


# -- the harness command ---------------------------------------------------------------


def _inside_reports(value: str) -> str | None:
    """``value`` as a path relative to reports/, or None when it points elsewhere."""
    if posixpath.isabs(value):
        return None
    norm = posixpath.normpath(value)
    if norm == "reports":
        return ""
    if norm.startswith("reports/"):
        return norm[len("reports/"):]
    return None


def _without_backend(args: Sequence[str]) -> list[str]:
    """``args`` without ``--backend VALUE`` (or ``--backend=VALUE``, or an abbreviation the parser
    took for it): the container passes its own."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name, eq, _ = arg.partition("=")
        if len(name) > 3 and "--backend".startswith(name):
            skip = not eq
            continue
        kept.append(arg)
    return kept


def plan_invocation(
    backend: Backend,
    args: Sequence[str],
    run_id: str,
    resolve: Mapping[str, str] | None = None,
    parse: Callable[[Sequence[str]], argparse.Namespace] | None = None,
) -> HarnessInvocation:
    """Check the user's `harness run` arguments for the container and pin the run id.

    The arguments are read by `harness run`'s own parser (``parse``; default
    :func:`harness.runargs.parse_run_args`), so abbreviations and ``--opt=value`` forms are seen
    as the run inside will see them, and a bad argument is refused before a container starts.
    ``--backend`` may be given only if it names this backend (aliases count, through
    ``resolve``: alias -> name). Output paths must stay inside reports/, the only writable
    place. Unless the user named the run (--run-id, --out, --resume), ``run_id`` is added so
    the host knows where the reports land.
    """
    if parse is None:
        from harness.runargs import parse_run_args

        parse = parse_run_args
    kept = list(args)
    if kept and kept[0] == "--":
        kept = kept[1:]
    ns = parse(kept)
    resolve = resolve or {}
    if ns.backend and resolve.get(ns.backend.strip().lower(), ns.backend.strip().lower()) != backend.name:
        raise UsageError(
            f"--backend {ns.backend} conflicts with the container backend {backend.name}: each "
            f"bench-<backend> session runs one backend. Drop --backend, or use the session "
            f"for {ns.backend} (`nox -s bench-{ns.backend}`)."
        )
    relative: dict[str, str] = {}
    for flag, given in (("--out", ns.out), ("--reports-dir", ns.reports_dir), ("--resume", ns.resume)):
        if given is None:
            continue
        rel = _inside_reports(given)
        if rel is None:
            raise UsageError(
                f"{flag} {given}: inside the container only reports/ (mounted from the host's "
                f"reports directory) is writable. Give a path under reports/, such as "
                f"{flag} reports/my-run, or run on the host with `nox -s bench -- ...`."
            )
        relative[flag] = rel
    kept = _without_backend(kept)
    run_name = ns.run_id
    if not (ns.run_id or ns.out or ns.resume):
        kept += ["--run-id", run_id]
        run_name = run_id
    run_dir = relative.get("--out", relative.get("--resume"))
    if run_dir is None and run_name:
        run_dir = posixpath.join(relative.get("--reports-dir", ""), run_name)
    return HarnessInvocation(args=("python3", "-m", "harness", "run", "--backend", backend.name, *kept),
                             run_dir=run_dir)


# -- the whole plan ---------------------------------------------------------------------


def container_user(uid: int, gid: int) -> tuple[int, int]:
    """Who runs inside: the caller, so the reports are theirs; never root (a root caller gets
    :data:`NONROOT`, and the launcher lends it the run directory for the run)."""
    if uid == 0:
        return NONROOT, NONROOT
    return uid, gid


def plan_security(devices: DevicePlan, hardening: Hardening) -> SecurityPlan:
    """The confinement: everything dropped, then only what the backend documents or the caller asked.

    A backend's own needs arrive through ``devices`` (capabilities, security options, an IPC
    mode, a /dev/shm size: none of the backends asks for any today; see docs/containers.md);
    the caller's through ``hardening``. seccomp=unconfined is never a backend default.
    """
    if hardening.network not in NETWORK_MODES:
        raise UsageError(f"Network {hardening.network!r} is not one of {', '.join(NETWORK_MODES)}.")
    if hardening.seccomp not in SECCOMP_MODES:
        raise UsageError(f"seccomp {hardening.seccomp!r} is not one of {', '.join(SECCOMP_MODES)}.")
    if hardening.pids_limit < 64:
        raise UsageError(f"pids limit {hardening.pids_limit} is too small to start the harness (64 at least).")
    opts = ["no-new-privileges:true"]
    opts += [o for o in devices.security_opt if not o.startswith("seccomp") and o not in opts]
    if hardening.seccomp == "unconfined":
        opts.append("seccomp=unconfined")
    writable = f"rw,exec,nosuid,nodev,size={TMPFS_SIZE},mode=1777"  # exec: Triton's cache builds .so files
    return SecurityPlan(
        cap_drop=("ALL",),
        cap_add=tuple(dict.fromkeys(c.upper() for c in devices.cap_add + hardening.cap_add)),
        security_opt=tuple(opts),
        read_only=True,
        tmpfs=(("/tmp", writable), (CONTAINER_HOME, writable)),
        network=hardening.network,
        pids_limit=hardening.pids_limit,
        ipc_mode=devices.ipc_mode or "private",
        shm_size=hardening.shm_size or devices.shm_size or DEFAULT_SHM_SIZE,
    )


def plan_container(
    *,
    image: str,
    image_digest: str,
    invocation: HarnessInvocation,
    devices: DevicePlan,
    uid: int,
    gid: int,
    repo_dir: str,
    reports_dir: str,
    forwarded_env: Mapping[str, str],
    backend: str,
    image_ref: str | None = None,
    hardening: Hardening | None = None,
) -> ContainerPlan:
    """Assemble the run: repo read-only, reports/ writable, the caller's uid:gid (never root),
    a clean environment, and the confinement of :func:`plan_security`.

    ``image`` is what the engine starts: the image ID the launcher got from the engine after
    building or pulling it, so a tag moved meanwhile cannot swap it; ``image_ref`` (default
    ``image``) is the name the run records. The environment holds only what the harness needs,
    the run options the user set through HARNESS_* on the host (``forwarded_env``), the
    backend's static variables and the runtime's visibility variable: nothing else of the host.
    """
    env: dict[str, str] = dict(forwarded_env)
    env.update(
        {
            "HOME": CONTAINER_HOME,
            "PYTHONDONTWRITEBYTECODE": "1",  # the checkout is read-only
            "PYTHONUNBUFFERED": "1",  # progress lines reach the host as they are printed
            "HARNESS_IMAGE": image_ref or image,
            "HARNESS_IMAGE_DIGEST": image_digest,
        }
    )
    env.update(dict(devices.environment))
    mounts = (
        Mount(source=repo_dir, target=CONTAINER_REPO, read_only=True),
        Mount(source=reports_dir, target=posixpath.join(CONTAINER_REPO, "reports"), read_only=False),
    )
    user, group = container_user(uid, gid)
    return ContainerPlan(
        image=image,
        command=invocation.args,
        user=f"{user}:{group}",
        working_dir=CONTAINER_REPO,
        environment=tuple(sorted(env.items())),
        mounts=mounts,
        devices=devices,
        labels=((LABEL, "1"), ("org.triton-op-harness.backend", backend)),
        security=plan_security(devices, hardening or Hardening()),
    )
