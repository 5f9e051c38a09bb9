"""Run identity probes (run in the child, never at import) and the sidecar they write."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from harness.backends.base import Backend
from harness.providers import provider_identity
from harness.results.store import write_json

__all__ = ["package_versions", "probe_accelerator", "probe_cpu", "write_identity"]


def package_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in ("torch", "triton", "numpy"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def _driver(backend: Backend) -> str:
    query = backend.driver_query
    if query is None:
        return "n/a"
    try:
        out = subprocess.run(list(query.command), capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    match = re.search(query.index_pattern, out, flags=re.MULTILINE)
    return match.group(1) if match else "unknown"


def probe_accelerator(backend: Backend, namespace: Any) -> dict[str, Any]:
    props = namespace.get_device_properties(0)
    # ROCm builds name the ISA (gfx942); CUDA builds may carry the attribute with the marketing
    # name in it, so only a gfx name is taken from it.
    arch = getattr(props, "gcnArchName", None)
    if not (isinstance(arch, str) and arch.startswith("gfx")):
        arch = f"sm_{props.major}{props.minor}" if hasattr(props, "major") else None
    return {
        "device_name": getattr(props, "name", "unknown"),
        "device_arch": arch or "unknown",
        "driver": _driver(backend),
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "memory_bytes": getattr(props, "total_memory", None),
        "multiprocessors": getattr(props, "multi_processor_count", None),
        **package_versions(),
        **provider_identity(),  # flag_gems version and vendor when this process loaded it
    }


def probe_cpu() -> dict[str, Any]:
    return {
        "device_name": platform.processor() or platform.machine(),
        "device_arch": platform.machine(),
        "driver": "n/a",
        "l2_bytes": None,
        **package_versions(),
        **provider_identity(),  # flag_gems version and vendor when this process loaded it
    }


def write_identity(run_dir: str, device: str, identity: dict[str, Any]) -> None:
    write_json(Path(run_dir) / "identity" / f"{device}.json", identity)
