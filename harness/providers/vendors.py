"""FlagGems' vendor names and the environment that selects one (pure: no flag_gems import).

FlagGems decides its vendor once, at ``import flag_gems``: from ``GEMS_VENDOR`` if that
names a vendor it knows, otherwise by probing (``hasattr(torch, "musa")`` and friends, then
one thread per vendor running that vendor's CLI: nvidia-smi, rocm-smi, mthreads-gmi... with
no timeout). The harness therefore sets ``GEMS_VENDOR`` in every op's process from the
backend's ``gems_vendor`` before anything imports flag_gems, unless the user already chose a
vendor through one of the variables FlagGems reads.

Facts below were read in FlagGems' source at tag v5.0.2 (the PyPI wheel 5.0.2 is the same
code); see docs/flaggems.md for the table with file paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.backends.base import Backend

__all__ = [
    "FLAGGEMS_VENDORS",
    "GEMS_VENDOR_KEY",
    "USER_VENDOR_KEYS",
    "VENDOR_FACTS",
    "VendorFact",
    "gems_vendor_env",
    "unknown_vendor_message",
]

GEMS_VENDOR_KEY = "GEMS_VENDOR"
# 5.0.x reads only GEMS_VENDOR; 5.3.x (runtime/backend/device_finder.py) also reads the other
# three. A value the user put in any of them wins: the harness then sets nothing.
USER_VENDOR_KEYS: tuple[str, ...] = ("GEMS_VENDOR", "FLAGGEMS_VENDOR", "GEMS_BACKEND", "FLAGGEMS_BACKEND")

# The lower-cased members of FlagGems' ``vendors`` enum (src/flag_gems/runtime/common.py, v5.0.2).
# In 5.0.x a GEMS_VENDOR outside this list is ignored silently and the CLI probe runs instead.
FLAGGEMS_VENDORS: tuple[str, ...] = (
    "nvidia", "cambricon", "metax", "iluvatar", "mthreads", "kunlunxin", "hygon",
    "amd", "aipu", "ascend", "tsingmicro", "sunrise", "enflame",
)


@dataclass(frozen=True)
class VendorFact:
    """How FlagGems names and finds the vendor behind one harness backend."""

    backend: str  # harness backend name
    vendor: str | None  # FlagGems vendor_name, or None where FlagGems has no vendor for it
    device: str  # FlagGems' device_name (the torch device type its kernels use)
    query_cmd: str  # the CLI FlagGems runs when it has to probe
    source: str  # where FlagGems defines it (v5.0.2)
    note: str = ""


VENDOR_FACTS: tuple[VendorFact, ...] = (
    VendorFact("cuda", "nvidia", "cuda", "nvidia-smi", "src/flag_gems/runtime/backend/_nvidia/__init__.py",
               "arch-specific ops for hopper/ampere (runtime/backend/_nvidia/hopper, ampere)"),
    VendorFact("musa", "mthreads", "musa", "mthreads-gmi", "src/flag_gems/runtime/backend/_mthreads/__init__.py",
               "no fp64; FlagGems' suite times with triton.musa_testing.do_bench"),
    VendorFact("rocm", "amd", "cuda", "rocm-smi", "src/flag_gems/runtime/backend/_amd/__init__.py",
               "supported; CUSTOMIZED_UNUSED_OPS = add, cos, cumsum (not registered on amd); no `amd` pip extra"),
    VendorFact("ascend", "ascend", "npu", "npu-smi info", "src/flag_gems/runtime/backend/_ascend/__init__.py",
               "dispatch key PrivateUse1; no fp64"),
    VendorFact("cpu", None, "-", "-", "-", "FlagGems has no CPU vendor: its kernels need a GPU"),
)


def gems_vendor_env(backend: Backend, env: Mapping[str, str]) -> dict[str, str]:
    """What to add to an op process's environment so FlagGems never probes vendor CLIs.

    ``env`` is the environment the child would otherwise get. Empty when the backend has no
    FlagGems vendor or the user already chose one (in any variable FlagGems reads).
    """
    if backend.gems_vendor is None:
        return {}
    if any(env.get(key, "").strip() for key in USER_VENDOR_KEYS):
        return {}
    return {GEMS_VENDOR_KEY: backend.gems_vendor}


def unknown_vendor_message(value: str) -> str | None:
    """Why a GEMS_VENDOR value would be ignored by FlagGems 5.0.x, or None if it is a known name."""
    if value.strip().lower() in FLAGGEMS_VENDORS:
        return None
    return (
        f"GEMS_VENDOR={value!r} is not a FlagGems vendor ({', '.join(FLAGGEMS_VENDORS)}); "
        "FlagGems 5.0.x ignores it and probes every vendor's CLI instead"
    )
