"""The whole container job for one backend: check, plan, get the image, run, summarise.

Order matters for the user: everything that can be refused without starting a
container (backend name, arguments, engine, device nodes, image) is settled
before one is created, so a refusal never leaves a container or a half-written
report behind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from harness.backends import BACKENDS, get_backend
from harness.backends.base import Backend, read_visibility
from harness.container.engine import Engine
from harness.container.host import probe_host
from harness.container.image import (
    ImageRecipe,
    base_identity,
    content_tag,
    ensure_image,
    image_ref,
    load_recipe,
    pinned_digest,
)
from harness.container.plan import (
    ContainerPlan,
    DeviceChoice,
    DevicePlan,
    Hardening,
    HarnessInvocation,
    plan_container,
    plan_devices,
    plan_invocation,
)
from harness.errors import ContainerError, HarnessError, UsageError
from harness.options import ContainerOptions, resolve_container_options

__all__ = [
    "PreparedRun",
    "assemble",
    "build_images",
    "checkout_dir",
    "describe_plan",
    "device_choice",
    "device_plan",
    "hardening",
    "lent_run_dir",
    "prepare_run",
    "run_in_container",
]

Connect = Callable[[Mapping[str, str]], Engine]


def checkout_dir() -> Path:
    """The harness checkout: the images and the code mounted into containers come from it."""
    root = Path(__file__).resolve().parent.parent.parent
    if not (root / "containers").is_dir():
        raise UsageError(
            f"No containers/ directory next to the harness package ({root}). The container "
            "commands run from a checkout of the harness repository (pip install -e .), because "
            "the checkout is what gets mounted into the container."
        )
    return root


def _aliases() -> dict[str, str]:
    return {alias: b.name for b in BACKENDS for alias in (b.name, *b.aliases)}


def device_choice(backend: Backend, options: ContainerOptions, env: Mapping[str, str]) -> DeviceChoice:
    """--devices, else the devices the host's visibility variable already picked, else all."""
    if options.devices is not None:
        return DeviceChoice(ids=options.devices, source="--devices")
    inherited = read_visibility(backend, env)
    if inherited is not None:
        key = next(k for k in backend.visibility_keys if env.get(k, "").strip())
        return DeviceChoice(ids=inherited, source=f"{key} on the host")
    return DeviceChoice(ids=None)


@dataclass(frozen=True)
class PreparedRun:
    backend: Backend
    options: ContainerOptions
    invocation: HarnessInvocation
    recipe: ImageRecipe
    choice: DeviceChoice


def prepare_run(
    backend_name: str,
    harness_args: Sequence[str],
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
) -> PreparedRun:
    """Everything that needs neither the engine nor the devices, validated.

    ``cli`` holds the flags given, ``config`` the [tool.harness] table; the options
    are resolved by harness.options, which alone reads HARNESS_* from ``env``.
    """
    from harness.run.plan import make_run_id

    backend = get_backend(backend_name)  # fails closed with the known names
    root = checkout_dir()
    options = resolve_container_options(cli, env, config, repo_dir=root, backends=[backend.name])
    invocation = plan_invocation(backend, harness_args, make_run_id(backend.name), _aliases())
    recipe = load_recipe(root / "containers", backend.name, options)
    return PreparedRun(backend, options, invocation, recipe, device_choice(backend, options, env))


def _say(err: TextIO) -> Callable[[str], None]:
    def log(message: str) -> None:
        print(f"harness container: {message}", file=err, flush=True)

    return log


def device_plan(prepared: PreparedRun, runtimes: frozenset[str]) -> DevicePlan:
    host = probe_host(prepared.backend, prepared.options.device_root, runtimes)
    return plan_devices(prepared.backend, host, prepared.choice)


def hardening(options: ContainerOptions) -> Hardening:
    """What the caller asked to relax (resolved by harness.options); by default nothing."""
    return Hardening(network=options.network, seccomp=options.seccomp, cap_add=options.cap_add,
                     pids_limit=options.pids_limit, shm_size=options.shm_size)


def assemble(prepared: PreparedRun, devices: DevicePlan, image: str, digest: str,
             image_id: str | None = None) -> ContainerPlan:
    """The container plan; ``image_id`` (what the engine built or pulled) is what runs, ``image``
    (the tag) is what the run records."""
    options = prepared.options
    uid, gid = options.user or (os.getuid(), os.getgid())
    return plan_container(
        image=image_id or image, image_ref=image, image_digest=digest, invocation=prepared.invocation,
        devices=devices, uid=uid, gid=gid, repo_dir=str(options.code_dir or options.repo_dir),
        reports_dir=str(options.reports_dir), forwarded_env=dict(options.forwarded_env),
        backend=prepared.backend.name, hardening=hardening(options),
    )


def _owner(path: Path, uid: int, gid: int) -> None:
    """``chown -R`` (no links followed): the run directory changes hands for the run and back."""
    os.chown(path, uid, gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


@contextmanager
def lent_run_dir(plan: ContainerPlan, run_dir: Path | None, owner: tuple[int, int]) -> Iterator[None]:
    """When the caller is root, the container runs as a non-root user who cannot write into a
    root-owned reports/: the run directory is made and handed to that user for the run, and
    handed back to ``owner`` (the caller, or --user) after it, so the reports are theirs as always."""
    uid, gid = (int(x) for x in plan.user.split(":"))
    if run_dir is None or os.geteuid() != 0 or (uid, gid) == owner:
        yield
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    _owner(run_dir, uid, gid)
    try:
        yield
    finally:
        _owner(run_dir, *owner)


def run_in_container(
    backend_name: str,
    harness_args: Sequence[str],
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    connect: Connect = Engine.connect,
) -> int:
    """`nox -s bench-<backend> -- ARGS`: run `harness run ARGS` in the backend's image."""
    log = _say(err)
    prepared = prepare_run(backend_name, harness_args, cli, env, config)
    engine = connect(env)
    # Devices are checked before the image is fetched: a missing node is reported at once,
    # not after a long build.
    devices = device_plan(prepared, engine.runtimes())
    image = ensure_image(engine, prepared.recipe, prepared.options, log)
    prepared.options.reports_dir.mkdir(parents=True, exist_ok=True)
    plan = assemble(prepared, devices, image.ref, image.digest, image.image_id)
    log(f"running {prepared.backend.name} in {image.ref} (image {image.image_id[:19]}, {image.action}), "
        f"devices: {plan.devices.mode}, user {plan.user}, network {plan.security.network}")
    for note in plan.devices.notes:
        log(note)
    where = prepared.invocation.run_dir
    run_dir = prepared.options.reports_dir / where if where is not None else None
    with lent_run_dir(plan, run_dir, prepared.options.user or (os.getuid(), os.getgid())):
        code = engine.run(plan, out, prepared.backend.name)
    if run_dir is not None and (run_dir / "run.json").is_file():
        log(f"exit {code}; reports on the host: {run_dir}/report.md (image {image.ref}, {image.digest})")
        if code == 130:
            log(f"resume in the container with `nox -s bench-{prepared.backend.name} -- --resume reports/{where}`")
    else:
        log(f"exit {code}; no report was written"
            + (f" (looked in {run_dir})" if run_dir is not None else ""))
    return code


def describe_plan(
    backend_name: str, harness_args: Sequence[str], cli: Mapping[str, Any], env: Mapping[str, str],
    config: Mapping[str, Any] | None = None, out: TextIO = sys.stdout, connect: Connect = Engine.connect,
) -> int:
    """Print the planned image and `docker run` command without starting anything."""
    prepared = prepare_run(backend_name, harness_args, cli, env, config)
    options = prepared.options
    try:
        engine = connect(env)
    except ContainerError as exc:
        print(f"# no engine reachable ({exc.message.split('.')[0]}); planning without vendor runtimes",
              file=out)
        engine = None
    recipe = prepared.recipe
    if engine is not None:  # the tag covers the base's digest: known when pinned, local or in a registry
        recipe = replace(recipe, base_digest=base_identity(engine, recipe, lambda _: None, fetch=False))
    elif recipe.base_image:
        recipe = replace(recipe, base_digest=pinned_digest(recipe.base_image))
    ref = image_ref(options.image_name, prepared.backend.name, content_tag(recipe), options.registry)
    devices = device_plan(prepared, engine.runtimes() if engine is not None else frozenset())
    plan = assemble(prepared, devices, ref, "(known after pull or build)")
    print(f"# backend {prepared.backend.name}: devices via {devices.mode} ({prepared.choice.source})", file=out)
    print(f"# image {ref} from containers/{prepared.backend.name}/"
          f" (base {recipe.base_image}, digest {recipe.base_digest or 'unknown: the tag will differ'}, "
          f"{len(recipe.wheels)} local wheel(s)); the run starts the image id the build or pull reports",
          file=out)
    for note in devices.notes:
        print(f"# {note}", file=out)
    print(plan.render(), file=out)
    return 0


def build_images(
    backends: Sequence[str], cli: Mapping[str, Any], env: Mapping[str, str],
    config: Mapping[str, Any] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
    connect: Connect = Engine.connect,
) -> int:
    """`nox -s images [-- BACKEND...]`: get every named image (all when none), report each."""
    log = _say(err)
    names = [get_backend(b).name for b in backends] or [b.name for b in BACKENDS]
    root = checkout_dir()
    options = resolve_container_options(cli, env, config, repo_dir=root, backends=names)
    engine = connect(env)
    results: list[tuple[str, str, str]] = []
    for name in names:
        try:
            image = ensure_image(engine, load_recipe(root / "containers", name, options), options, log)
            results.append((name, image.ref, image.action))
        except HarnessError as exc:
            log(f"{name}: {exc.message}")
            results.append((name, "-", "FAILED (reason above)"))
    print(f"{'backend':8} {'image':48} result", file=out)
    for name, ref, result in results:
        print(f"{name:8} {ref:48} {result}", file=out)
    return 3 if any(r.startswith("FAILED") for _, _, r in results) else 0
