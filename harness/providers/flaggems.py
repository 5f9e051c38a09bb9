"""Provider ``flaggems``: the candidate is FlagGems' implementation of the op, the baseline torch.

Runs in the op's process. ``import flag_gems`` happens once, on the first candidate built
(never at harness import); the parent has already put GEMS_VENDOR in this process's
environment (harness.providers.vendors), so FlagGems does not probe vendor CLIs.

Why not ``with flag_gems.use_gems(): baseline(*args)`` as the candidate: entering use_gems
registers several hundred aten kernels (milliseconds of host time) and leaving it removes
them, which inside every timed call would be measured as the op's latency; and registering
once for the whole process would send the torch baseline to FlagGems as well. Instead the
candidate calls the very function use_gems() would register for the op's aten key. To find
it, flag_gems.enable() is asked to register into a library that only records what it is
given (``enable(lib=...)`` is FlagGems' public parameter for the target library), so the
vendor's overrides, its unused-op list and each entry's condition are applied by FlagGems'
own code. The one thing skipped is the dispatcher's hop to that Python function, a few
microseconds of host time that graph timing does not see.

Whatever keeps a case from running (flag_gems missing, no GPU, an op this FlagGems does not
register) becomes a SKIP of that case with the reason; the run goes on.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import json
import re
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.base import Backend
from harness.ops.base import OpSpec
from harness.providers.bindings import BUILTIN_BINDINGS, GemsBinding, GemsCall

__all__ = [
    "installed_from",
    "GemsRuntime",
    "Unavailable",
    "binding_for",
    "flaggems_candidate",
    "identity_facts",
    "load_runtime",
    "recorded_registrations",
    "runtime",
]

INSTALL_HINT = (
    "install it next to the vendor's torch and Triton without letting pip replace them: "
    "pip install --no-deps flag-gems==5.0.2 sqlalchemy==2.0.48 greenlet (docs/flaggems.md)"
)


@dataclass(frozen=True)
class Unavailable:
    """A candidate that cannot run here: calling it skips the case with ``reason``."""

    reason: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import pytest

        pytest.skip(self.reason)


@dataclass(frozen=True)
class GemsRuntime:
    """The imported flag_gems and what it registers on this vendor."""

    version: str
    vendor: str
    device: str
    registrations: Mapping[str, Callable[..., Any]]  # aten key -> function, as use_gems() registers
    module: Any

    @property
    def functions(self) -> tuple[str, ...]:
        """Registered function names: what flag_gems.all_registered_ops() lists."""
        return tuple(sorted({getattr(fn, "__name__", str(fn)) for fn in self.registrations.values()}))

    def describe(self) -> str:
        return f"flag_gems {self.version} (vendor {self.vendor})"

    def lookup(self, binding: GemsBinding) -> Callable[..., Any] | Unavailable:
        if binding.aten is not None:
            fn = self.registrations.get(binding.aten)
            if fn is None:
                return Unavailable(
                    f"{self.describe()} does not register aten::{binding.aten} (op {binding.op!r}); "
                    "on some vendors FlagGems leaves ops to torch (its CUSTOMIZED_UNUSED_OPS). "
                    "`harness list ops --provider flaggems` shows what it registers"
                )
            return fn
        assert binding.function is not None
        target: Any = self.module
        for part in binding.function.split("."):
            target = getattr(target, part, None)
            if target is None:
                return Unavailable(f"{self.describe()} has no function flag_gems.{binding.function} "
                                   f"(op {binding.op!r})")
        return target


class _RecordingLibrary:
    """Stands in for torch.library.Library("aten", "IMPL"): FlagGems' registrar calls
    ``impl(key, fn, dispatch_key)`` on it; this keeps the pairs and registers nothing."""

    def __init__(self) -> None:
        self.impls: dict[str, Callable[..., Any]] = {}

    def impl(self, name: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.impls[str(name)] = fn

    def _destroy(self) -> None:
        return None


def recorded_registrations(module: Any) -> dict[str, Callable[..., Any]]:
    """aten key -> function, exactly what ``module.use_gems()`` would register.

    use_gems() without arguments calls enable(unused=[]): every entry whose condition holds,
    minus the vendor's unused ops. Works with FlagGems 4.2 and 5.x (same enable signature).
    """
    lib = _RecordingLibrary()
    module.enable(lib=lib, unused=[])
    return dict(lib.impls)


def _version(module: Any) -> str:
    version = getattr(module, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version("flag_gems")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def load_runtime(import_module: Callable[[str], Any] = importlib.import_module) -> GemsRuntime | Unavailable:
    """Import flag_gems and read what it registers; every failure becomes a reason to skip."""
    try:
        module = import_module("flag_gems")
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing in ("flag_gems", ""):
            return Unavailable(f"flag_gems is not installed in this environment; {INSTALL_HINT}")
        return Unavailable(
            f"flag_gems is installed but cannot import {missing!r} ({exc}); install what it needs "
            f"without upgrading torch or Triton: pip install --no-deps {missing}"
        )
    except Exception as exc:  # FlagGems probes the device at import and raises anything
        text = str(exc).strip().splitlines()[0].rstrip(" .!") if str(exc).strip() else ""
        return Unavailable(
            f"import flag_gems failed: {type(exc).__name__}: {text}. FlagGems needs a GPU of a "
            "vendor it supports, visible to torch, and GEMS_VENDOR naming it (the harness sets it "
            "from the backend)"
        )
    version = _version(module)
    try:
        registrations = recorded_registrations(module)
    except Exception as exc:  # a FlagGems release whose enable() we do not know
        return Unavailable(
            f"flag_gems {version}: reading its registrations through enable(lib=...) failed "
            f"({type(exc).__name__}: {exc}); this FlagGems version is not supported by the provider"
        )
    return GemsRuntime(
        version=version,
        vendor=str(getattr(module, "vendor_name", "unknown")),
        device=str(getattr(module, "device", "unknown")),
        registrations=registrations,
        module=module,
    )


@functools.lru_cache(maxsize=1)
def runtime() -> GemsRuntime | Unavailable:
    """flag_gems for this process, imported on first use."""
    return load_runtime()


def installed_from(distribution: str = "flag_gems") -> dict[str, Any]:
    """The commit the installed package was built from, where pip recorded where it came from
    (PEP 610's ``direct_url.json``): ``{"commit": SHA}`` for an install from a VCS URL (its
    ``vcs_info.commit_id``); ``{"commit": SHA, "dirty": bool}`` for an editable install of a git
    checkout's root (the code imported is that folder's now, so git's answer for it now); {} for
    an install from an index, a wheel file or a directory copied at install time (what it held
    then is not known), a folder inside another repository, or a record missing or unreadable."""
    try:
        text = importlib.metadata.distribution(distribution).read_text("direct_url.json")
        found = json.loads(text) if text else None
    except (importlib.metadata.PackageNotFoundError, json.JSONDecodeError, OSError, UnicodeDecodeError):
        return {}
    if not isinstance(found, dict):
        return {}
    vcs = found.get("vcs_info")
    if isinstance(vcs, dict):
        commit = str(vcs.get("commit_id") or "")
        return {"commit": commit} if re.fullmatch(r"[0-9a-f]{7,64}", commit) else {}
    url = urllib.parse.urlparse(str(found.get("url") or ""))
    info = found.get("dir_info")
    if url.scheme != "file" or not isinstance(info, dict) or info.get("editable") is not True:
        return {}
    folder = Path(urllib.request.url2pathname(url.path))
    if not (folder / ".git").exists():  # git would answer for a repository around it
        return {}
    from harness.run.provenance import commit_state

    state = commit_state(folder)
    return {"commit": state.commit, "dirty": bool(state.dirty)} if state.commit else {}


def identity_facts() -> dict[str, Any]:
    """What run.json's identity records about flag_gems: only if this process tried to load it
    (``commit``, and ``dirty``, where the install says which commit it was built from:
    :func:`installed_from`)."""
    if runtime.cache_info().currsize == 0:
        return {}
    rt = runtime()
    if isinstance(rt, Unavailable):
        return {"flag_gems": {"unavailable": rt.reason}}
    return {"flag_gems": {"version": rt.version, "vendor": rt.vendor, "device": rt.device,
                          "registered_functions": len(rt.functions), **installed_from()}}


def binding_for(op: OpSpec) -> GemsBinding | None:
    """How ``op`` runs through FlagGems: its declaration, else the built-in op map."""
    if isinstance(op.candidate, GemsCall):
        return op.candidate.binding()
    if op.source == "builtin":
        return BUILTIN_BINDINGS.get(op.id)
    return None


@dataclass(frozen=True)
class _Bound:
    binding: GemsBinding
    fn: Callable[..., Any]

    def __call__(self, *args: Any) -> Any:
        return self.binding.call(self.fn, args)


def flaggems_candidate(
    op: OpSpec,
    backend: Backend | None = None,
    load: Callable[[], GemsRuntime | Unavailable] = runtime,
) -> Callable[..., Any]:
    """The FlagGems candidate for ``op``, or an :class:`Unavailable` that skips its cases."""
    if backend is not None and not backend.capabilities.accelerator:
        return Unavailable(
            f"FlagGems runs its kernels on a GPU; backend {backend.name!r} has none, so "
            "--provider flaggems cases are skipped here. Use --backend cuda, musa, rocm or ascend"
        )
    binding = binding_for(op)
    if binding is None:
        return Unavailable(
            f"op {op.id!r} (from {op.source}) has no FlagGems binding; declare it in a FlagGems "
            "ops YAML (docs/flaggems.md) to benchmark FlagGems' version of it"
        )
    rt = load()
    if isinstance(rt, Unavailable):
        return rt
    fn = rt.lookup(binding)
    if isinstance(fn, Unavailable):
        return fn
    return _Bound(binding, fn)
