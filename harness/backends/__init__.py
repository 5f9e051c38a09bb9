"""All known backends, name resolution, detection, visibility isolation, device enumeration.

Everything here is pure or takes its I/O as arguments (``exists``, ``which``,
``run_listing``), so it is tested without hardware. Nothing probes at import.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence

from harness.backends import ascend, cpu, cuda, musa, rocm
from harness.backends.base import (
    Backend,
    Capabilities,
    CaptureFailure,
    capture_denied,
    classify_capture_error,
    parse_listing,
    read_visibility,
)
from harness.errors import EnvironmentProblem, UsageError

__all__ = [
    "BACKENDS",
    "Backend",
    "Capabilities",
    "CaptureFailure",
    "all_visibility_keys",
    "capture_denied",
    "classify_capture_error",
    "detect_backend",
    "enumerate_devices",
    "get_backend",
    "isolated_env",
    "known_names",
    "require_devices",
]

BACKENDS: tuple[Backend, ...] = (
    cuda.BACKEND,
    musa.BACKEND,
    rocm.BACKEND,
    ascend.BACKEND,
    cpu.BACKEND,
)
# Order of detection when --backend auto: accelerators first, the CPU last.
_DETECT_ORDER = ("cuda", "rocm", "musa", "ascend")


def known_names() -> str:
    parts = [f"{b.name} ({', '.join(b.aliases)})" if b.aliases else b.name for b in BACKENDS]
    return ", ".join(parts) + ", auto"


def get_backend(name: str) -> Backend:
    """Resolve a backend name or alias; unknown names fail closed with the known list."""
    wanted = name.strip().lower()
    for backend in BACKENDS:
        if wanted == backend.name or wanted in backend.aliases:
            return backend
    raise UsageError(
        f"Unknown backend {name!r}. Known backends (aliases in brackets): {known_names()}. "
        "Pick one of these with --backend, or 'auto' to detect the accelerator present."
    )


def _glob_exists(pattern: str) -> bool:
    return bool(glob.glob(pattern))


def detect_backend(
    exists: Callable[[str], bool] = _glob_exists,
    which: Callable[[str], str | None] = shutil.which,
) -> Backend:
    """The accelerator backend whose device nodes or listing CLI are present, else cpu."""
    by_name = {b.name: b for b in BACKENDS}
    for name in _DETECT_ORDER:
        backend = by_name[name]
        if any(exists(p) for p in backend.detect_paths):
            return backend
    for name in _DETECT_ORDER:
        backend = by_name[name]
        if backend.listing is not None and which(backend.listing.command[0]):
            return backend
    return by_name["cpu"]


def require_devices(backend: Backend, exists: Callable[[str], bool] = _glob_exists) -> None:
    """Refuse an accelerator backend on a machine without its devices (before any op process
    starts): none of the backend's device nodes is present."""
    if not backend.capabilities.accelerator or not backend.detect_paths:
        return
    if any(exists(p) for p in backend.detect_paths):
        return
    raise EnvironmentProblem(
        f"Backend {backend.name!r} needs its devices, and this machine has none: no "
        f"{' or '.join(backend.detect_paths)}. Run on a machine (or in a container) that has "
        f"{backend.description.split(' (')[0]}, choose --backend auto to run on what is here, or see "
        "`harness doctor`."
    )


def resolve_backend(name: str, **detect_kwargs: object) -> Backend:
    if name.strip().lower() == "auto":
        return detect_backend(**detect_kwargs)  # type: ignore[arg-type]
    return get_backend(name)


def all_visibility_keys() -> tuple[str, ...]:
    keys: list[str] = []
    for backend in BACKENDS:
        keys.extend(k for k in backend.visibility_keys if k not in keys)
    # HIP also honours CUDA_VISIBLE_DEVICES, so it is cleared for every child anyway.
    return tuple(keys)


def isolated_env(
    backend: Backend, parent_env: Mapping[str, str], device: str | None
) -> dict[str, str]:
    """The environment of a child pinned to ``device``.

    Every vendor's visibility variable is cleared first, so a parent's
    CUDA_VISIBLE_DEVICES never reaches a MUSA, ROCm or Ascend child; then the
    active backend's primary key is set to the device (a physical id, already
    taken from inherited visibility by :func:`enumerate_devices`).
    """
    env = {k: v for k, v in parent_env.items() if k not in all_visibility_keys()}
    key = backend.visibility_key()
    if key is not None and device is not None:
        env[key] = device
    return env


def _run_listing(command: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _listed(backend: Backend, run_listing: Callable[[Sequence[str]], str | None]) -> tuple[str, ...]:
    """The device indices the backend's listing CLI reports; () when it has none or says nothing."""
    if backend.listing is None:
        return ()
    output = run_listing(backend.listing.command)
    return parse_listing(backend.listing, output) if output else ()


def _explicit_devices(backend: Backend, explicit: Sequence[str], inherited: tuple[str, ...] | None,
                      run_listing: Callable[[Sequence[str]], str | None]) -> tuple[str, ...]:
    """``--devices`` on an accelerator: indices into an inherited visibility, else ids the
    backend's listing CLI must know (where it lists any)."""
    if inherited is None:
        listed = _listed(backend, run_listing)
        absent = [d for d in explicit if listed and d.isdigit() and d not in listed]
        if absent:
            raise UsageError(
                f"--devices {' '.join(explicit)}: no {backend.name} device {', '.join(absent)} on this machine "
                f"({backend.listing.command[0] if backend.listing else 'the listing'} lists "
                f"{', '.join(listed)}). Choose among those, or leave --devices out to use them all."
            )
        return tuple(explicit)
    picked = []
    for item in explicit:
        if not item.isdigit() or int(item) >= len(inherited):
            raise UsageError(
                f"--devices {','.join(explicit)}: {item!r} is not an index into the "
                f"{len(inherited)} device(s) already made visible by "
                f"{backend.visibility_key()}={','.join(inherited)}. Use indices 0.."
                f"{len(inherited) - 1}, or unset the variable."
            )
        picked.append(inherited[int(item)])
    return tuple(picked)


def enumerate_devices(
    backend: Backend,
    explicit: Sequence[str] | None,
    env: Mapping[str, str],
    run_listing: Callable[[Sequence[str]], str | None] = _run_listing,
    torch_count: Callable[[], int] | None = None,
) -> tuple[str, ...]:
    """Physical device ids to use: explicit list > inherited visibility > listing CLI > torch count.

    An explicit list is taken as indices into the inherited visibility when
    there is one (``--devices 0,1`` under CUDA_VISIBLE_DEVICES=5,6 means 5 and 6); without one,
    it is checked against the devices the backend's listing CLI reports, where it reports any.
    The cpu backend has one device, ``cpu``: other ids are refused, never ignored.
    """
    if not backend.capabilities.accelerator:
        if explicit and any(d != "cpu" for d in explicit):
            raise UsageError(
                f"--devices {' '.join(explicit)}: the {backend.name} backend has one device, 'cpu' (the "
                "process's CPU cores). Drop --devices, or give --devices cpu."
            )
        return ("cpu",)
    inherited = read_visibility(backend, env)
    if explicit:
        return _explicit_devices(backend, explicit, inherited, run_listing)
    if inherited is not None:
        return inherited
    found = _listed(backend, run_listing)
    if found:
        return found
    if torch_count is not None:
        count = torch_count()
        if count > 0:
            return tuple(str(i) for i in range(count))
    return ("0",)
