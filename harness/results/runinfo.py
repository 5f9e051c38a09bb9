"""run.json: a run's identity, options, plan and outcome, versioned; and the one fingerprint.

Written by the parent of `harness run` (harness.run.execute); read by resume, `harness report`,
compare, gate, history and merge. Every reader goes through :func:`read_run_info`, which
refuses a file this harness cannot read (not JSON, not a run, a newer schema, a required field
missing or of another type) with a message naming the file and what to do.

Which runs are alike (may be compared, share a history) is decided here once:
:data:`ALIKE_FIELDS` are the run.json facts that must agree, :func:`alike_values` reads them
and :func:`fingerprint` hashes them. Which software a run measured with is decided here too:
:data:`ENVIRONMENT_FIELDS` (torch, Triton, driver, flag_gems, harness), read by
:func:`environment_values`; compare, gate and history refuse runs that differ there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.errors import UsageError

__all__ = [
    "ALIKE_FIELDS",
    "ENVIRONMENT_FIELDS",
    "RUN_SCHEMA_VERSION",
    "RUN_STATUSES",
    "alike_values",
    "environment_differences",
    "environment_values",
    "fingerprint",
    "read_run_info",
]

# 1: the first version. Readers accept 1..RUN_SCHEMA_VERSION.
RUN_SCHEMA_VERSION = 1
# A run's status in run.json: running until it ends, then interrupted (resumable) or complete.
RUN_STATUSES = ("running", "interrupted", "complete", "complete-with-failures")
# Fields every run.json has and every reader relies on: refused when missing or of another type,
# so that no reader judges a run on a guessed status or backend.
_REQUIRED: dict[str, type] = {"run_id": str, "status": str, "backend": str}

# What must match for two runs to be compared: the label shown to users -> (where in run.json,
# the key hashed into the fingerprint).
ALIKE_FIELDS: dict[str, tuple[tuple[str, ...], str]] = {
    "backend": (("backend",), "backend"),
    "device model": (("identity", "device_name"), "device_name"),
    "device arch": (("identity", "device_arch"), "device_arch"),
    "timer": (("timer",), "timer"),
    "level": (("level",), "level"),
    "cache": (("options", "cache"), "cache"),
    "provider": (("options", "provider"), "provider"),
}


# The software a run measured with: the label shown to users -> where in run.json. Not part of the
# fingerprint (a history spans upgrades); compare, gate and history check it apart, so that a
# different torch is named as such rather than read as a regression.
ENVIRONMENT_FIELDS: dict[str, tuple[str, ...]] = {
    "torch": ("identity", "torch"),
    "triton": ("identity", "triton"),
    "driver": ("identity", "driver"),
    "flag_gems": ("identity", "flag_gems", "version"),
    "harness": ("harness_version",),
}


def _lookup(info: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = info
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def alike_values(info: Mapping[str, Any]) -> dict[str, str]:
    """label -> value ("" when the run does not say) of every field in :data:`ALIKE_FIELDS`."""
    out = {}
    for label, (path, _) in ALIKE_FIELDS.items():
        value = _lookup(info, path)
        out[label] = "" if value is None else str(value)
    return out


def environment_values(info: Mapping[str, Any]) -> dict[str, str]:
    """label -> version ("" when the run does not say) of every field in :data:`ENVIRONMENT_FIELDS`."""
    out = {}
    for label, path in ENVIRONMENT_FIELDS.items():
        value = _lookup(info, path)
        out[label] = "" if value is None or isinstance(value, Mapping) else str(value)
    return out


def environment_differences(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(label, base value, head value) for each piece of software the two runs name differently.
    A field only one run states (an older run.json, a library only one run loaded) counts too:
    "absent" stands for the missing side. A field neither states is alike."""
    b, h = environment_values(base), environment_values(head)
    return [(k, b[k] or "absent", h[k] or "absent") for k in ENVIRONMENT_FIELDS if b[k] != h[k]]


def fingerprint(info: Mapping[str, Any]) -> str:
    """A short hash of the fields that make runs alike; equal fingerprints may be compared."""
    key = {name: _lookup(info, path) for path, name in ALIKE_FIELDS.values()}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def read_run_info(path: Path) -> dict[str, Any]:
    """The run.json at ``path``, checked: a readable JSON object of a schema this harness knows."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        raise UsageError(f"{path.parent}: no run.json there, so it is not a run directory. Give the "
                         "directory of a `harness run` (reports/<run-id>).") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror}).") from None
    try:
        info = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); the file is damaged (a truncated copy?). "
                         "Restore it, or run again.") from None
    if not isinstance(info, dict) or "run_id" not in info:
        raise UsageError(f"{path} is not a run.json written by `harness run` (no run_id).")
    version = info.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UsageError(f"{path}: schema_version {version!r} is not a run.json version.")
    if version > RUN_SCHEMA_VERSION:
        raise UsageError(f"{path} was written by a newer harness (run.json schema {version}; this one reads "
                         f"up to {RUN_SCHEMA_VERSION}). Upgrade the harness to read it.")
    missing = [k for k in _REQUIRED if k not in info]
    if missing:
        raise UsageError(f"{path} lacks {', '.join(missing)}, which every run.json has: the file is damaged or "
                         "was not written by `harness run`. Restore it, or run again.")
    wrong = [f"{k} {info[k]!r}" for k, kind in _REQUIRED.items() if not isinstance(info[k], kind)]
    if info["status"] not in RUN_STATUSES and not wrong:
        wrong.append(f"status {info['status']!r} (one of {', '.join(RUN_STATUSES)})")
    if wrong:
        raise UsageError(f"{path}: {'; '.join(wrong)} is not what `harness run` writes: the file is damaged. "
                         "Restore it, or run again.")
    return info
