"""Which image a backend runs in: a content-hash tag, then reuse, pull or build.

The tag is a hash of what decides the image's contents: every file of
containers/<backend>/ and containers/common/ (the Dockerfile, what it copies, and
the hash-locked lists of Python packages it installs), the local wheels staged
into the build context, the build arguments the Dockerfile declares, and the
digest of the base image (:func:`base_identity`). An unchanged tree on an
unchanged base therefore finds its image again (locally or in a registry) and any
change builds a new one. The harness code itself is not in the image (it is
mounted at run time), so editing it never rebuilds.

What is run is the image ID the engine reported for the build or the pull
(:class:`ResolvedImage`), never the tag looked up again: with the policies
``build`` and ``pull`` (what CI uses) a job runs only an image it made or pulled
itself, and an image tagged meanwhile by someone else with the docker socket
cannot take its place.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import re
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Protocol

from harness.errors import ContainerError, UsageError
from harness.options import ContainerOptions

__all__ = [
    "ContextFile",
    "ImageRecipe",
    "ImageStore",
    "ResolvedImage",
    "base_identity",
    "pinned_digest",
    "content_tag",
    "declared_args",
    "ensure_image",
    "image_ref",
    "load_recipe",
    "resolve_steps",
    "write_context",
]

WHEELS_DIR = "wheels"  # where staged wheels appear in the build context
COMMON_DIR = "common"  # containers/common/: files every image's build context gets, under common/
WHEELS_LIST = "wheels.txt"  # in containers/<backend>/: glob patterns of wheels to stage
TAG_LENGTH = 16


@dataclass(frozen=True)
class ContextFile:
    path: str  # inside the build context
    source: Path
    digest: str  # sha256 of the content; for a staged wheel, of its name and size
    mode: int = 0o644


@dataclass(frozen=True)
class ImageRecipe:
    backend: str
    dockerfile: str
    files: tuple[ContextFile, ...]
    wheels: tuple[ContextFile, ...]
    build_args: tuple[tuple[str, str], ...]  # only those the Dockerfile declares
    base_digest: str | None = None  # sha256 of the base image, once known (base_identity)

    @property
    def base_image(self) -> str | None:
        """The image FROM builds on: the BASE_IMAGE argument given, else the Dockerfile's default."""
        given = dict(self.build_args).get("BASE_IMAGE")
        return given or declared_args(self.dockerfile).get("BASE_IMAGE")


@dataclass(frozen=True)
class ResolvedImage:
    ref: str
    digest: str  # repo digest when pulled from a registry, else the local image id
    action: str  # "present", "pulled" or "built"
    image_id: str = ""  # what the engine built or pulled (sha256:...): the container runs this


# -- pure --------------------------------------------------------------------------------


def declared_args(dockerfile: str) -> dict[str, str | None]:
    """ARG names a Dockerfile declares, with their defaults (None when it has none)."""
    found: dict[str, str | None] = {}
    for match in re.finditer(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", dockerfile, re.MULTILINE):
        default = match.group(2)
        if default is not None and len(default) >= 2 and default[0] == default[-1] == '"':
            default = default[1:-1]
        found.setdefault(match.group(1), default)
    return found


def content_tag(recipe: ImageRecipe) -> str:
    """A tag that changes exactly when what the image is built from changes."""
    h = hashlib.sha256()
    h.update(f"backend={recipe.backend}\n".encode())
    for item in sorted(recipe.files + recipe.wheels, key=lambda f: f.path):
        h.update(f"file {item.path} {item.mode:o} {item.digest}\n".encode())
    for key, value in sorted(recipe.build_args):
        h.update(f"arg {key}={value}\n".encode())
    if recipe.base_digest:
        h.update(f"base {recipe.base_digest}\n".encode())
    return h.hexdigest()[:TAG_LENGTH]


def pinned_digest(ref: str) -> str | None:
    """The digest an image reference pins (``name[:tag]@sha256:HEX``), else None."""
    match = re.search(r"@(sha256:[0-9a-f]{64})$", ref)
    return match.group(1) if match else None


def _digest_only(value: str) -> str:
    """``repo@sha256:X`` -> ``sha256:X``; an image id stays as it is."""
    return value.rsplit("@", 1)[-1]


def image_ref(name: str, backend: str, tag: str, registry: str | None) -> str:
    repo = f"{name}-{backend}"
    return f"{registry}/{repo}:{tag}" if registry else f"{repo}:{tag}"


def resolve_steps(policy: str, registry: str | None, present: bool) -> tuple[str, ...]:
    """What to try, in order, to get the image: "use", "pull", "build".

    auto: reuse a local image, else pull when a registry is set (falling back to a
    build), else build. pull: from the registry, nothing else. build: always
    build. no-build: reuse or pull, never build.
    """
    if policy == "build":
        return ("build",)
    if policy == "pull":
        return ("pull",)
    if present:
        return ("use",)
    if policy == "no-build":
        return ("pull",) if registry else ()
    return ("pull", "build") if registry else ("build",)


# -- reading the tree ------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stage_wheels(context_dir: Path, wheel_dirs: Sequence[Path]) -> tuple[ContextFile, ...]:
    listing = context_dir / WHEELS_LIST
    if not listing.is_file():
        return ()
    patterns = [
        line.strip() for line in listing.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    staged: dict[str, ContextFile] = {}
    for directory in wheel_dirs:
        for wheel in sorted(directory.glob("*.whl")):
            if wheel.name in staged or not any(fnmatch.fnmatch(wheel.name, p) for p in patterns):
                continue
            # Name and size, not content: a wheel's name carries its version and build
            # tag, and hashing a 200 MB torch wheel on every run would cost a second.
            digest = hashlib.sha256(f"{wheel.name}:{wheel.stat().st_size}".encode()).hexdigest()
            staged[wheel.name] = ContextFile(path=f"{WHEELS_DIR}/{wheel.name}", source=wheel, digest=digest)
    return tuple(staged.values())


def _context_file(source: Path, path: str) -> ContextFile:
    return ContextFile(path=path, source=source, digest=_sha256(source),
                       mode=0o755 if source.stat().st_mode & 0o111 else 0o644)


def load_recipe(containers_dir: Path, backend: str, options: ContainerOptions) -> ImageRecipe:
    """What ``backend``'s image is built from: containers/<backend>/ plus containers/common/
    (as common/, shared by the images), staged wheels and the build arguments it declares."""
    context_dir = containers_dir / backend
    dockerfile_path = context_dir / "Dockerfile"
    if not dockerfile_path.is_file():
        raise UsageError(
            f"No Dockerfile for backend {backend!r} at {dockerfile_path}. The images live in "
            f"containers/<backend>/ of the harness checkout ({containers_dir})."
        )
    own = tuple(
        _context_file(p, p.relative_to(context_dir).as_posix())
        for p in sorted(context_dir.rglob("*"))
        if p.is_file() and p.relative_to(context_dir).parts[0] not in (WHEELS_DIR, COMMON_DIR)
    )
    common_dir = containers_dir / COMMON_DIR
    shared = tuple(
        _context_file(p, f"{COMMON_DIR}/{p.relative_to(common_dir).as_posix()}")
        for p in (sorted(common_dir.rglob("*")) if common_dir.is_dir() else ())
        if p.is_file()
    )
    files = own + shared
    dockerfile = dockerfile_path.read_text()
    declared = declared_args(dockerfile)
    args = dict(options.build_args)
    if options.base_image(backend):
        args["BASE_IMAGE"] = options.base_image(backend) or ""
    return ImageRecipe(
        backend=backend,
        dockerfile=dockerfile,
        files=files,
        wheels=_stage_wheels(context_dir, options.wheel_dirs),
        build_args=tuple(sorted((k, v) for k, v in args.items() if k in declared)),
    )


def write_context(recipe: ImageRecipe, fileobj: IO[bytes]) -> None:
    """The build context as a tar: the backend's folder plus staged wheels (always a wheels/ dir)."""
    with tarfile.open(fileobj=fileobj, mode="w") as tar:
        for item in recipe.files + recipe.wheels:
            info = tar.gettarinfo(str(item.source), arcname=item.path)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = item.mode
            with item.source.open("rb") as handle:
                tar.addfile(info, handle)
        directory = tarfile.TarInfo(WHEELS_DIR)
        directory.type = tarfile.DIRTYPE
        directory.mode = 0o755
        tar.addfile(directory)
        # COPY of an empty directory still needs something to copy.
        keep = tarfile.TarInfo(f"{WHEELS_DIR}/.keep")
        tar.addfile(keep, io.BytesIO(b""))
    fileobj.seek(0)


# -- resolving against an engine ---------------------------------------------------------


def _base_missing(recipe: ImageRecipe, cause: str) -> ContainerError:
    return ContainerError(
        f"Cannot build the {recipe.backend} image: its base image {recipe.base_image} is not in the "
        f"local image store and could not be pulled ({cause}). Pull or `docker load` it where a "
        f"registry is reachable, or name a local base image with --base-image, "
        f"HARNESS_BASE_IMAGE_{recipe.backend.upper()} or base-images in [tool.harness.container] (CI makes harness-base/debian:bookworm-py "
        "with .ci/docker-up.sh; it serves the cpu image)."
    )


class ImageStore(Protocol):
    """Where images are kept and made (harness.container.engine.Engine is one).

    ``pull`` and ``build`` return the ID of the image they produced (sha256:...), as the engine
    reported it for that pull or build.
    """

    def has_image(self, ref: str) -> bool: ...

    def image_digest(self, ref: str) -> str: ...

    def image_id(self, ref: str) -> str: ...

    def registry_digest(self, ref: str) -> str: ...

    def pull(self, ref: str) -> str: ...

    def build(self, ref: str, context: IO[bytes], build_args: Mapping[str, str], backend: str,
              log: Callable[[str], None]) -> str: ...


def _build(store: ImageStore, recipe: ImageRecipe, ref: str, log: Callable[[str], None]) -> str:
    with tempfile.TemporaryFile() as context:
        write_context(recipe, context)
        return store.build(ref, context, dict(recipe.build_args), recipe.backend, log)


def base_identity(store: ImageStore, recipe: ImageRecipe, log: Callable[[str], None],
                  fetch: bool = True) -> str | None:
    """The digest of ``recipe``'s base image, which the content tag includes.

    In order: the digest the reference pins (``BASE@sha256:...``: the engine checks the
    content against it); the registry digest of the local image (its id when it was made
    locally); the registry's digest for the tag, asked without downloading; with ``fetch``,
    the digest after pulling it. A base pinned by digest needs neither a registry nor the image.
    None when the recipe has no base image, or (``fetch`` False) when it cannot be known.
    """
    base = recipe.base_image
    if not base:
        return None
    pinned = pinned_digest(base)
    if pinned:
        return pinned
    if store.has_image(base):
        return _digest_only(store.image_digest(base))
    try:
        return _digest_only(store.registry_digest(base))
    except ContainerError:
        if not fetch:
            return None
    log(f"base image {base}: not present, pulling")
    try:
        store.pull(base)
    except ContainerError as exc:
        raise _base_missing(recipe, exc.message) from None
    return _digest_only(store.image_digest(base))


def ensure_image(
    engine: ImageStore,
    recipe: ImageRecipe,
    options: ContainerOptions,
    log: Callable[[str], None],
) -> ResolvedImage:
    """Reuse, pull or build the image for ``recipe``, as the policy says.

    The content tag covers the base image's digest, so the base is resolved first
    (:func:`base_identity`). The result names the image ID the engine reported for this
    pull or build (for a reused image: the ID the tag points to now).
    """
    recipe = replace(recipe, base_digest=base_identity(engine, recipe, log))
    ref = image_ref(options.image_name, recipe.backend, content_tag(recipe), options.registry)
    present = engine.has_image(ref)
    steps = resolve_steps(options.policy, options.registry, present)
    if not steps:
        raise ContainerError(
            f"Image {ref} is not present locally and --no-build forbids building it (no registry "
            "is set to pull from). Build it with `nox -s images -- "
            f"{recipe.backend}`, set a registry (--registry, HARNESS_REGISTRY or [tool.harness.container] "
            "registry), or drop --no-build."
        )
    failures: list[str] = []
    for step in steps:
        if step == "use":
            log(f"image {ref}: present (content tag of containers/{recipe.backend}/; trusted by tag: "
                "CI uses --build or --pull instead)")
            return ResolvedImage(ref=ref, digest=engine.image_digest(ref), action="present",
                                 image_id=engine.image_id(ref))
        if step == "pull":
            log(f"image {ref}: pulling")
            try:
                image_id = engine.pull(ref)
            except ContainerError as exc:
                failures.append(f"pull failed: {exc.message}")
                log(f"image {ref}: pull failed ({exc.message})")
                continue
            return ResolvedImage(ref=ref, digest=engine.image_digest(ref), action="pulled", image_id=image_id)
        if recipe.base_image and not pinned_digest(recipe.base_image):
            log(f"base image {recipe.base_image} is not pinned by digest; the tag covers the digest "
                f"found for it here ({recipe.base_digest}). Pin it (BASE@sha256:...) for runs to be "
                "comparable across machines (docs/containers.md, \"Pinned inputs\")")
        log(f"image {ref}: building from containers/{recipe.backend}/ on {recipe.base_image}"
            + (f" ({recipe.base_digest})" if recipe.base_digest else "")
            + (f" with {len(recipe.wheels)} local wheel(s)" if recipe.wheels else ""))
        image_id = _build(engine, recipe, ref, log)
        return ResolvedImage(ref=ref, digest=image_id, action="built", image_id=image_id)
    raise ContainerError(f"Could not get image {ref}: {'; '.join(failures)}.")
