"""What the installed flag_gems registers, for ``harness list ops --provider flaggems``.

flag_gems is imported in a child process (``python -m harness.providers.inventory``) with
GEMS_VENDOR set from the detected backend and a timeout: the import probes the device and,
without GEMS_VENDOR, runs vendor CLIs that have no timeout of their own. The parent renders
the answer next to the op map (pure :func:`render_listing`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.ops.base import OpSpec
from harness.providers.vendors import gems_vendor_env

if TYPE_CHECKING:
    from harness.providers.flaggems import GemsBinding

__all__ = ["Inventory", "list_flaggems_ops", "query_inventory", "render_listing"]

QUERY_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Inventory:
    """flag_gems' registrations as one process saw them, or why it could not be imported."""

    version: str = ""
    vendor: str = ""
    device: str = ""
    registrations: Mapping[str, str] | None = None  # aten key -> function name
    unavailable: str = ""

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(sorted(set((self.registrations or {}).values())))

    def to_json(self) -> str:
        return json.dumps({"version": self.version, "vendor": self.vendor, "device": self.device,
                           "registrations": dict(self.registrations or {}), "unavailable": self.unavailable})

    @classmethod
    def from_json(cls, text: str) -> Inventory:
        data = json.loads(text)
        return cls(version=data["version"], vendor=data["vendor"], device=data["device"],
                   registrations=data["registrations"] or None, unavailable=data["unavailable"])


def current_inventory() -> Inventory:
    """This process's view (imports flag_gems)."""
    from harness.providers.flaggems import Unavailable, load_runtime

    rt = load_runtime()
    if isinstance(rt, Unavailable):
        return Inventory(unavailable=rt.reason)
    return Inventory(
        version=rt.version, vendor=rt.vendor, device=rt.device,
        registrations={key: getattr(fn, "__name__", str(fn)) for key, fn in rt.registrations.items()},
    )


def query_inventory(env: Mapping[str, str], timeout_s: float = QUERY_TIMEOUT_S) -> Inventory:
    """Ask a child process (environment ``env``) what flag_gems registers."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "harness.providers.inventory"],
            env=dict(env), capture_output=True, text=True, timeout=timeout_s, check=False,
        )
    except subprocess.TimeoutExpired:
        return Inventory(unavailable=f"import flag_gems did not finish within {timeout_s:g}s (FlagGems "
                                     "probes vendor CLIs without a timeout when GEMS_VENDOR is unset)")
    last = done.stdout.strip().splitlines()[-1:] or [""]
    try:
        return Inventory.from_json(last[0])
    except (json.JSONDecodeError, KeyError, TypeError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Inventory(unavailable=f"the flag_gems query process failed (exit {done.returncode}): {tail}")


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _binding_status(binding: GemsBinding, inventory: Inventory, covered: set[str]) -> str:
    """A harness op's FlagGems status in the listing; the FlagGems function it covers joins ``covered``."""
    if inventory.unavailable:
        return "unknown"
    if binding.aten is None:
        covered.add(binding.function or "")
        return "direct call"
    fn = (inventory.registrations or {}).get(binding.aten)
    if fn:
        covered.add(fn)
    return f"registered ({fn})" if fn else "NOT registered: cases skip"


def render_listing(catalog: Mapping[str, OpSpec], inventory: Inventory, width: int = 100) -> str:
    """The harness ops that run through FlagGems, then what FlagGems registers without a case."""
    from harness.providers.flaggems import binding_for

    lines: list[str] = []
    if inventory.unavailable:
        lines.append(f"flag_gems: unavailable here: {inventory.unavailable}")
    else:
        regs = inventory.registrations or {}
        lines.append(f"flag_gems {inventory.version}, vendor {inventory.vendor} (device {inventory.device}): "
                     f"{len(inventory.functions)} functions registered for {len(regs)} aten keys")
    rows: list[list[str]] = [["op", "source", "flag_gems target", "call", "status"]]
    covered: set[str] = set()
    for op in catalog.values():
        binding = binding_for(op)
        if binding is None:
            continue
        status = _binding_status(binding, inventory, covered)
        rows.append([op.id, op.source[:24], binding.target, binding.how, status])
    lines.append("")
    lines.append("harness cases (--provider flaggems):")
    lines.extend("  " + line for line in _columns(rows))
    if not inventory.unavailable:
        rest = [f for f in inventory.functions if f not in covered]
        lines.append("")
        lines.append(f"registered by flag_gems without a harness case ({len(rest)}; declare any of them "
                     "in a FlagGems ops YAML, docs/flaggems.md):")
        current = " "
        for name in rest:
            if len(current) + len(name) + 2 > width:
                lines.append(current.rstrip())
                current = " "
            current += f" {name},"
        if current.strip():
            lines.append(current.rstrip(","))
    return "\n".join(lines) + "\n"


def list_flaggems_ops(catalog: Mapping[str, OpSpec], env: Mapping[str, str], out: TextIO) -> int:
    """``harness list ops --provider flaggems``: 0 when flag_gems answered, 3 when it could not."""
    from harness.backends import detect_backend

    backend = detect_backend()
    if backend.capabilities.accelerator:
        child_env = {**env, **gems_vendor_env(backend, env)}
        src = str(Path(__file__).resolve().parents[2])
        child_env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        inventory = query_inventory(child_env)
    else:
        inventory = Inventory(unavailable=f"no accelerator detected (backend {backend.name}); FlagGems "
                                          "runs on GPUs only")
    out.write(render_listing(catalog, inventory))
    return 3 if inventory.unavailable else 0


def main() -> int:
    inventory = current_inventory()
    print(inventory.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
