"""A compiled kernel's metadata, summarised: pure functions over what Triton gives.

Triton hands a compilation listener (``triton.knobs.compilation.listener``, Triton 3.4 and
later) the kernel's metadata (``num_warps``, ``num_stages``, ``num_ctas``, ``shared``, the
target...), the files of each IR stage and the time of each stage. Registers and spills are
not in that metadata: on a device they come from the loaded binary (``CompiledKernel.n_regs``,
``n_spills``, the latter the local memory in 4-byte words); without one, from the assembly
(AMD: the ``.vgpr_count`` / ``.vgpr_spill_count`` notes of the amdgcn) or from
``cuobjdump --dump-resource-usage`` of the cubin (NVIDIA: REG, and LOCAL / 4 as Triton counts spills).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "ASSEMBLY",
    "TEXT_STAGES",
    "KernelIR",
    "amdgcn_resources",
    "constexpr_values",
    "cuobjdump_resources",
    "target_label",
]

# IR stages kept as text, in compilation order; the assembly of each backend after them.
TEXT_STAGES = ("source", "ttir", "ttgir", "llir")
ASSEMBLY = {"cuda": ("ptx", "sass"), "hip": ("amdgcn",)}
BINARIES = {"cuda": "cubin", "hip": "hsaco"}


def target_label(target: Any) -> str:
    """``cuda:90``, ``hip:gfx942`` from a GPUTarget, its dict form, or a label already."""
    if isinstance(target, str):
        return target
    if isinstance(target, Mapping):
        return f"{target.get('backend')}:{target.get('arch')}"
    return f"{getattr(target, 'backend', '?')}:{getattr(target, 'arch', '?')}"


def constexpr_values(constexprs: Mapping[Any, Any], arg_names: Sequence[str]) -> dict[str, Any]:
    """Triton's constexprs (keyed by argument path tuples such as ``(12,)``) by argument name,
    each value as JSON can hold it."""
    out: dict[str, Any] = {}
    for path, value in constexprs.items():
        index = path[0] if isinstance(path, tuple) and path else path
        name = arg_names[index] if isinstance(index, int) and 0 <= index < len(arg_names) else str(path)
        if isinstance(path, tuple) and len(path) > 1:
            name += "".join(f"[{p}]" for p in path[1:])
        out[name] = value if isinstance(value, bool | int | float | str) or value is None else str(value)
    return out


_AMD_NOTES = {
    "regs": r"^\s*\.vgpr_count:\s*(\d+)",
    "sgprs": r"^\s*\.sgpr_count:\s*(\d+)",
    "spills": r"^\s*\.vgpr_spill_count:\s*(\d+)",
    "sgpr_spills": r"^\s*\.sgpr_spill_count:\s*(\d+)",
    "scratch": r"^; ScratchSize:\s*(\d+)",
    "lds": r"^; LDSByteSize:\s*(\d+)",
}


def amdgcn_resources(text: str) -> dict[str, int]:
    """Registers and spills from amdgcn assembly (its metadata notes); the first kernel's."""
    found: dict[str, int] = {}
    for key, pattern in _AMD_NOTES.items():
        match = re.search(pattern, text, flags=re.MULTILINE)
        if match:
            found[key] = int(match.group(1))
    return found


def cuobjdump_resources(text: str) -> dict[str, int]:
    """Registers and spills from ``cuobjdump --dump-resource-usage``: REG, and LOCAL bytes / 4
    as spills (how Triton's own ``n_spills`` counts them on a device)."""
    match = re.search(r"REG:(\d+).*?LOCAL:(\d+)", text)
    if not match:
        return {}
    return {"regs": int(match.group(1)), "spills": int(match.group(2)) // 4}


@dataclass(frozen=True)
class KernelIR:
    """One compiled kernel, summarised for a record and for the compile gate."""

    name: str
    hash: str
    target: str  # "cuda:90", "hip:gfx942"
    num_warps: int | None = None
    num_stages: int | None = None
    num_ctas: int | None = None
    shared: int | None = None  # bytes of shared memory (LDS on AMD)
    regs: int | None = None
    spills: int | None = None
    constexprs: Mapping[str, Any] = field(default_factory=dict)
    signature: Mapping[str, str] = field(default_factory=dict)
    compile_ms: float | None = None
    cache_hit: bool = False
    files: tuple[str, ...] = ()  # names of the files kept beside it
    reused: bool = False  # launched by the case, compiled by an earlier one of the process

    @classmethod
    def from_metadata(
        cls,
        metadata: Mapping[str, Any],
        constexprs: Mapping[str, Any] | None = None,
        signature: Mapping[str, str] | None = None,
        compile_ms: float | None = None,
        cache_hit: bool = False,
    ) -> KernelIR:
        def number(key: str) -> int | None:
            value = metadata.get(key)
            return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

        return cls(
            name=str(metadata.get("name", "?")), hash=str(metadata.get("hash", ""))[:16],
            target=target_label(metadata.get("target", "?")),
            num_warps=number("num_warps"), num_stages=number("num_stages"), num_ctas=number("num_ctas"),
            shared=number("shared"), constexprs=dict(constexprs or {}), signature=dict(signature or {}),
            compile_ms=compile_ms, cache_hit=cache_hit,
        )

    def with_resources(self, resources: Mapping[str, int]) -> KernelIR:
        from dataclasses import replace

        return replace(self, regs=resources.get("regs", self.regs), spills=resources.get("spills", self.spills))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["files"] = list(self.files)
        if not self.reused:
            del data["reused"]
        return {k: v for k, v in data.items() if v not in (None, {}, [])}

    def summary(self) -> dict[str, Any]:
        """What a record keeps of it (no signature, no file list)."""
        keep = ("name", "hash", "target", "num_warps", "num_stages", "num_ctas", "shared", "regs", "spills",
                "constexprs", "compile_ms", "cache_hit", "reused")
        data = self.to_json()
        return {k: data[k] for k in keep if k in data}
