"""The docker engine, through the docker SDK: connect, inspect, pull, build, run (I/O only).

Everything this module does was decided by the pure planners; here a plan
becomes SDK calls. A container the harness creates is always removed again,
whether the run passes, fails, is refused by the engine or is interrupted.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Mapping
from typing import IO, Any, TextIO

from harness.container.plan import LABEL, ContainerPlan
from harness.errors import ContainerError

__all__ = ["Engine", "engine_address"]

DEFAULT_SOCKET = "unix:///var/run/docker.sock"
STOP_GRACE_S = 60  # an interrupted harness finalises its reports before this runs out

# What to do when the engine refuses a container, by how the devices were passed.
_REFUSAL_HINTS = {
    "gpu-requests": "GPU requests need the NVIDIA Container Toolkit registered with the engine "
    "(`nvidia-ctk runtime configure --runtime=docker`, then restart the engine).",
    "runtime": "The vendor container runtime is registered but failed; see `docker info` and the "
    "runtime's log.",
    "device-nodes": "Check that the device nodes are character devices the engine may pass through "
    "(`ls -l` them) and that no security policy forbids it.",
    "none": "See the engine's log.",
}


def engine_address(env: Mapping[str, str]) -> str:
    return env.get("DOCKER_HOST") or DEFAULT_SOCKET


def _no_engine(env: Mapping[str, str], cause: str) -> ContainerError:
    where = engine_address(env)
    return ContainerError(
        f"No docker engine answered at {where} ({cause}). The bench-<backend> sessions run the "
        "harness inside a container and need a running engine: start it (`sudo systemctl start "
        "docker`, or `sudo dockerd &`; on the CI machine `.ci/docker-up.sh` installs and starts "
        "one), point DOCKER_HOST at an engine you can reach, or make sure your user may use the "
        "socket (the docker group). To run without containers, use the torch and Triton "
        "installed on this machine: `nox -s bench -- ARGS`."
    )


class Engine:
    """A connected docker engine."""

    def __init__(self, client: Any, address: str) -> None:
        self.client = client
        self.address = address

    @classmethod
    def connect(cls, env: Mapping[str, str]) -> Engine:
        try:
            import docker
        except ImportError:
            raise ContainerError(
                "The docker Python package is missing, and the container commands drive the engine "
                "through it. Install it (`pip install docker`, or `pip install -e .[docker]`), or use "
                "the nox sessions (`nox -s bench-cpu`), which install it themselves."
            ) from None
        try:
            client = docker.DockerClient.from_env(environment=dict(env))
            client.ping()
        except docker.errors.DockerException as exc:
            raise _no_engine(env, _short(exc)) from None
        return cls(client, engine_address(env))

    # -- images ---------------------------------------------------------------------------

    def runtimes(self) -> frozenset[str]:
        return frozenset((self.client.info().get("Runtimes") or {}).keys())

    def has_image(self, ref: str) -> bool:
        import docker

        try:
            self.client.images.get(ref)
        except docker.errors.ImageNotFound:
            return False
        return True

    def image_digest(self, ref: str) -> str:
        """The registry digest when the image came from one, else the local image id."""
        image = self.client.images.get(ref)
        repo_digests = image.attrs.get("RepoDigests") or []
        return repo_digests[0] if repo_digests else image.id

    def image_id(self, ref: str) -> str:
        """The local image id (sha256 of its config) that ``ref`` names now."""
        return str(self.client.images.get(ref).id)

    def registry_digest(self, ref: str) -> str:
        """The registry's digest for ``ref``, asked without downloading the image."""
        import docker

        try:
            return str(self.client.images.get_registry_data(ref).id)
        except docker.errors.DockerException as exc:
            raise ContainerError(f"asking the registry for {ref} failed: {_short(exc)}") from None

    def pull(self, ref: str) -> str:
        """Pull ``ref`` (by tag, or by digest: ``name@sha256:...``); the id of what was pulled."""
        import docker

        if "@" in ref:  # name[:tag]@sha256:...: the digest decides; the API takes it as the tag
            name, _, digest = ref.partition("@")
            last = name.rsplit("/", 1)
            repository = name if ":" not in last[-1] else name.rsplit(":", 1)[0]
            tag: str | None = digest
        elif ":" in ref.rsplit("/", 1)[-1]:
            repository, _, tag = ref.rpartition(":")
        else:
            repository, tag = ref, "latest"
        try:
            image = self.client.images.pull(repository, tag=tag)
        except docker.errors.DockerException as exc:
            raise ContainerError(f"pulling {ref} failed: {_short(exc)}") from None
        return str(image.id)

    def build(self, ref: str, context: IO[bytes], build_args: Mapping[str, str], backend: str,
              log: Callable[[str], None]) -> str:
        """Build ``context`` (a tar) with the engine's classic builder, streaming its output to ``log``;
        the id of the image this build made, as the build reported it (not looked up by tag).

        The docker SDK speaks only the classic builder (BuildKit needs a session
        the SDK does not implement), so the Dockerfiles use nothing BuildKit-only.
        """
        import docker

        tail: list[str] = []
        built: str | None = None
        try:
            stream = self.client.api.build(
                fileobj=context, custom_context=True, tag=ref, buildargs=dict(build_args),
                rm=True, forcerm=True, pull=False, decode=True,
                labels={LABEL: "1", "org.triton-op-harness.backend": backend},
            )
            for chunk in stream:
                if isinstance(chunk.get("aux"), dict) and chunk["aux"].get("ID"):
                    built = str(chunk["aux"]["ID"])
                if "stream" in chunk:
                    for line in chunk["stream"].splitlines():
                        if line.strip():
                            tail = (tail + [line])[-15:]
                            log(f"  | {line}")
                elif "error" in chunk:
                    raise ContainerError(
                        f"Building the {backend} image ({ref}) from "
                        f"containers/{backend}/Dockerfile failed: {chunk['error'].strip()}\n"
                        "Last build output:\n" + "\n".join(tail) + "\n"
                        "Fix the Dockerfile or the build arguments (--build-arg, --base-image) "
                        "and run again; `nox -s images -- "
                        f"{backend}` builds it alone."
                    )
        except docker.errors.DockerException as exc:
            raise ContainerError(f"The engine refused to build {ref}: {_short(exc)}") from None
        if built is None:
            raise ContainerError(f"Building {ref}: the engine did not report the id of the image it built, "
                                 "so it cannot be told from an image tagged meanwhile. Build again.")
        return built

    # -- containers ----------------------------------------------------------------------------

    def _create_kwargs(self, plan: ContainerPlan) -> dict[str, Any]:
        from docker.types import DeviceRequest, Mount

        dev, sec = plan.devices, plan.security
        kwargs: dict[str, Any] = {
            "image": plan.image,
            "command": list(plan.command),
            "user": plan.user,
            "working_dir": plan.working_dir,
            "environment": dict(plan.environment),
            "labels": dict(plan.labels),
            "init": plan.init,
            "mounts": [
                Mount(target=m.target, source=m.source, type="bind", read_only=m.read_only)
                for m in plan.mounts + dev.mounts
            ],
            "devices": [d.spec() for d in dev.devices] or None,
            "group_add": [str(g) for g in dev.group_add] or None,
            "runtime": dev.runtime,
            # the confinement (plan.SecurityPlan): every key always set, so nothing is left to the
            # engine's defaults
            "cap_drop": list(sec.cap_drop),
            "cap_add": list(sec.cap_add) or None,
            "security_opt": list(sec.security_opt),
            "read_only": sec.read_only,
            "tmpfs": dict(sec.tmpfs),
            "network_mode": sec.network,
            "pids_limit": sec.pids_limit,
            "ipc_mode": sec.ipc_mode,
            "shm_size": sec.shm_size,
        }
        if dev.gpu_request is not None:
            ids = list(dev.gpu_request.device_ids)
            kwargs["device_requests"] = [
                DeviceRequest(device_ids=ids, capabilities=[["gpu"]]) if ids
                else DeviceRequest(count=-1, capabilities=[["gpu"]])
            ]
        return {k: v for k, v in kwargs.items() if v is not None}

    def run(self, plan: ContainerPlan, out: TextIO, backend: str) -> int:
        """Start the planned container, stream its output live, return its exit code; always remove it."""
        import docker

        container = None
        try:
            try:
                container = self.client.containers.create(**self._create_kwargs(plan))
                container.start()
            except docker.errors.DockerException as exc:
                raise ContainerError(
                    f"The docker engine refused to start the {backend} container "
                    f"({_short(exc)}). No container was left behind. "
                    + _REFUSAL_HINTS.get(plan.devices.mode, "")
                ) from None
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            try:
                for chunk in container.logs(stream=True, follow=True):
                    out.write(decoder.decode(chunk))
                    out.flush()
                out.write(decoder.decode(b"", final=True))
                return int(container.wait().get("StatusCode", 1))
            except KeyboardInterrupt:
                # Let the harness inside finish its reports (it marks the run interrupted and
                # says how to resume), then show what it printed meanwhile.
                interrupted_at = time.time()
                try:
                    container.kill(signal="SIGINT")
                    container.wait(timeout=STOP_GRACE_S)
                    out.write(container.logs(since=interrupted_at).decode("utf-8", "replace"))
                    out.flush()
                except Exception:  # noqa: BLE001 - best effort; the container is removed below
                    pass
                return 130
        finally:
            if container is not None:
                try:
                    container.remove(force=True)
                except docker.errors.NotFound:
                    pass

    def managed_containers(self) -> list[str]:
        """Ids of containers (running or not) that the harness started and that still exist."""
        return [c.id for c in self.client.containers.list(all=True, filters={"label": LABEL})]


def _short(exc: BaseException) -> str:
    explanation = getattr(exc, "explanation", None)
    text = str(explanation or exc).strip()
    return text if len(text) <= 400 else text[:400] + "..."
