"""Compile targets: ``cuda:90``, ``hip:gfx942``, and what each device family allows per block."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import UsageError

__all__ = ["DEFAULT_TARGETS", "SHARED_LIMITS", "Target", "parse_targets"]

DEFAULT_TARGETS = "cuda:80,cuda:90,hip:gfx90a,hip:gfx942"

# Shared memory (LDS on AMD) one block may use, in bytes; a kernel over it is reported as not
# fitting (the autotuner skips such a config on the device). NVIDIA: the opt-in maximum per block
# of the CUDA C++ Programming Guide's compute capability table (8.0: 163 KB, 9.0: 227 KB);
# AMD CDNA2/CDNA3 (gfx90a, gfx942): 64 KiB of LDS per workgroup.
SHARED_LIMITS: dict[str, int] = {
    "cuda:80": 163 * 1024,
    "cuda:86": 99 * 1024,
    "cuda:89": 99 * 1024,
    "cuda:90": 227 * 1024,
    "hip:gfx90a": 64 * 1024,
    "hip:gfx942": 64 * 1024,
}


@dataclass(frozen=True)
class Target:
    backend: str  # Triton's backend name: "cuda" or "hip"
    arch: int | str  # 90 for cuda, "gfx942" for hip
    warp_size: int

    @property
    def label(self) -> str:
        return f"{self.backend}:{self.arch}"

    @property
    def shared_limit(self) -> int | None:
        return SHARED_LIMITS.get(self.label)


def parse_targets(text: str) -> tuple[Target, ...]:
    """``cuda:80,hip:gfx942`` -> targets; a bad one is a UsageError naming it."""
    targets: list[Target] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        backend, _, arch = item.partition(":")
        backend = backend.strip().lower()
        if backend == "cuda" and arch.isdigit():
            targets.append(Target("cuda", int(arch), 32))
        elif backend in ("hip", "rocm") and re.fullmatch(r"gfx[0-9a-f]+", arch):
            # wave64 on CDNA and GCN (gfx9xx), wave32 by default on RDNA (gfx10xx and later)
            targets.append(Target("hip", arch, 32 if re.fullmatch(r"gfx1[0-9a-f]{3}", arch) else 64))
        else:
            raise UsageError(
                f"--targets: {item!r} is not a target. Give BACKEND:ARCH, cuda with a compute "
                "capability (cuda:80, cuda:90) or hip with a gfx name (hip:gfx90a, hip:gfx942)."
            )
    if not targets:
        raise UsageError("--targets needs at least one target, for example cuda:90,hip:gfx942.")
    return tuple(dict.fromkeys(targets))
