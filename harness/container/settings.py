"""Options of the container layer: command line > environment (HARNESS_*) > defaults.

The environment arrives as a Mapping and is read nowhere else in
harness.container. These options are the host side of a container run (which
image, which devices); the options of `harness run` itself stay in
harness.options and are read inside the container.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from harness.errors import UsageError

__all__ = [
    "IMAGE_POLICIES",
    "ContainerSettings",
    "forwarded_run_env",
    "parse_user",
    "resolve_settings",
]

IMAGE_POLICIES = ("auto", "pull", "build", "no-build")
IMAGE_NAME = "triton-op-harness"

# RunOptions fields that must not cross into the container: paths and devices mean
# other things there, and the image fields are set by the container layer itself.
_NOT_FORWARDED = frozenset({"backend", "devices", "reports_dir", "out", "run_id", "image", "image_digest"})


@dataclass(frozen=True)
class ContainerSettings:
    repo_dir: Path
    reports_dir: Path
    registry: str | None = None
    policy: str = "auto"
    base_images: tuple[tuple[str, str], ...] = ()  # (backend, image) from --base-image / env
    build_args: tuple[tuple[str, str], ...] = ()
    wheel_dirs: tuple[Path, ...] = ()
    devices: tuple[str, ...] | None = None  # host device ids given with --devices
    device_root: str = "/"
    user: tuple[int, int] | None = None  # None: the caller's uid:gid
    image_name: str = IMAGE_NAME

    def base_image(self, backend: str) -> str | None:
        return dict(self.base_images).get(backend)


def _split_pairs(items: Sequence[str], what: str, example: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what} {item!r} is not KEY=VALUE. Example: {example}.")
        pairs.append((key.strip(), value))
    return tuple(pairs)


def parse_user(value: str) -> tuple[int, int]:
    uid, sep, gid = value.partition(":")
    if not (uid.isdigit() and sep and gid.isdigit()):
        raise UsageError(f"--user {value!r} must be numeric UID:GID, for example 1000:1000.")
    return int(uid), int(gid)


def _local_dirs(find_links: str) -> tuple[Path, ...]:
    """Local directories among pip's find-links (URLs to other hosts are left to pip)."""
    dirs: list[Path] = []
    for item in find_links.split():
        path = urlparse(item).path if item.startswith("file:") else item
        if "://" not in path and Path(path).is_dir():
            dirs.append(Path(path))
    return tuple(dirs)


def _base_images(cli: Sequence[str], env: Mapping[str, str], backends: Sequence[str]) -> tuple[tuple[str, str], ...]:
    chosen: dict[str, str] = {}
    for name in backends:
        value = env.get(f"HARNESS_BASE_IMAGE_{name.upper()}", "").strip()
        if value:
            chosen[name] = value
    for item in cli:
        backend, sep, image = item.partition("=")
        if sep and backend in backends:
            chosen[backend] = image
        elif not sep and len(backends) == 1:
            chosen[backends[0]] = item
        else:
            raise UsageError(
                f"--base-image {item!r}: say which backend it is for, as BACKEND=IMAGE "
                f"(backends here: {', '.join(backends)})."
            )
    return tuple(sorted(chosen.items()))


def resolve_settings(
    cli: Mapping[str, Any], env: Mapping[str, str], repo_dir: Path, backends: Sequence[str]
) -> ContainerSettings:
    """Merge the layers for the ``backends`` being run or built.

    Environment: HARNESS_REGISTRY, HARNESS_IMAGE_POLICY, HARNESS_BASE_IMAGE_<BACKEND>,
    HARNESS_BUILD_ARGS (space-separated KEY=VALUE), HARNESS_WHEELS (directories,
    os.pathsep-separated; default: the local directories in PIP_FIND_LINKS).
    """
    registry = cli.get("registry") or env.get("HARNESS_REGISTRY", "").strip() or None
    policy = (cli.get("policy") or env.get("HARNESS_IMAGE_POLICY", "") or "auto").strip().lower()
    if policy not in IMAGE_POLICIES:
        raise UsageError(
            f"Unknown image policy {policy!r} (HARNESS_IMAGE_POLICY or --pull/--build/--no-build). "
            f"Choices: {', '.join(IMAGE_POLICIES)}."
        )
    if policy == "pull" and not registry:
        raise UsageError(
            "--pull needs a registry to pull from: give --registry HOST/PATH or set HARNESS_REGISTRY, "
            "or drop --pull to build the image locally."
        )
    build_args = _split_pairs(
        env.get("HARNESS_BUILD_ARGS", "").split() + list(cli.get("build_args") or ()),
        "build argument", "--build-arg TRITON_PACKAGE=triton-ascend==3.2.0",
    )
    if cli.get("wheels"):
        wheel_dirs = tuple(Path(p) for p in cli["wheels"])
    elif env.get("HARNESS_WHEELS"):
        wheel_dirs = tuple(Path(p) for p in env["HARNESS_WHEELS"].split(os.pathsep) if p)
    else:
        wheel_dirs = _local_dirs(env.get("PIP_FIND_LINKS", ""))
    for path in wheel_dirs:
        if not path.is_dir():
            raise UsageError(f"Wheel directory {path} (--wheels / HARNESS_WHEELS) does not exist.")
    devices = None
    if cli.get("devices"):
        devices = tuple(d.strip() for item in cli["devices"] for d in str(item).split(",") if d.strip())
    reports = Path(cli["reports"]) if cli.get("reports") else repo_dir / "reports"
    return ContainerSettings(
        repo_dir=repo_dir.resolve(),
        reports_dir=reports.resolve(),
        registry=registry.rstrip("/") if registry else None,
        policy=policy,
        base_images=_base_images(cli.get("base_images") or (), env, backends),
        build_args=build_args,
        wheel_dirs=wheel_dirs,
        devices=devices,
        device_root=str(cli.get("device_root") or "/"),
        user=parse_user(cli["user"]) if cli.get("user") else None,
    )


def forwarded_run_env(env: Mapping[str, str]) -> dict[str, str]:
    """The HARNESS_* run options of the host that mean the same inside the container.

    `HARNESS_LEVEL=core nox -s bench-cpu` then behaves like the host run. Paths,
    devices and the backend are not forwarded (see ``_NOT_FORWARDED``).
    """
    from harness.options import ENV_PREFIX, RunOptions

    names = [f.name for f in fields(RunOptions) if f.name not in _NOT_FORWARDED]
    return {
        ENV_PREFIX + n.upper(): env[ENV_PREFIX + n.upper()]
        for n in names
        if env.get(ENV_PREFIX + n.upper(), "") != ""
    }
