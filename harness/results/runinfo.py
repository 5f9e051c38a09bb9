"""run.json: a run's identity, options, plan and outcome, versioned; and the one fingerprint.

:class:`RunInfo` is the file: a frozen dataclass with typed fields, written by the parent of
`harness run` (harness.run.execute) with :meth:`RunInfo.dump` and read back with
:meth:`RunInfo.load`, which refuses a file this harness cannot read (not JSON, not a run, a
newer schema, a required field missing or of another type) with a message naming the file and
what to do. Facts a source or a command adds beyond the typed fields (a suite's ``suite``,
merge's ``merged_from``) are kept as they are in ``sections``. Readers that still work on the
mapping (compare, gate, history, merge, the pages) use :func:`read_run_info`, the same check.

Which runs are alike (may be compared, share a history) is decided here once:
:data:`ALIKE_FIELDS` are the run.json facts that must agree, :func:`alike_values` reads them
and :func:`fingerprint` hashes them. Which software a run measured with is decided here too:
:data:`ENVIRONMENT_FIELDS` (torch, Triton, driver, flag_gems, harness), read by
:func:`environment_values`; compare, gate and history refuse runs that differ there.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.results.store import write_json

__all__ = [
    "ALIKE_FIELDS",
    "ENVIRONMENT_FIELDS",
    "NO_GIT",
    "RUN_SCHEMA_VERSION",
    "RUN_STATUSES",
    "RunInfo",
    "alike_values",
    "environment_differences",
    "environment_values",
    "fingerprint",
    "harness_commits",
    "library_commit",
    "read_run_info",
]

NO_GIT = "no git"  # harness_commits' word for a session that knew no commit

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


def harness_commits(info: Mapping[str, Any]) -> list[str]:
    """The harness commits a run's ops were measured by: a resumed run's earlier sessions'
    (``earlier_commits``, in the order they were first seen), then ``git_commit``, each with
    ``+dirty`` where the tracked files differed from it (a different version of the code), and
    ``no git`` for a session that knew none."""
    commit = info.get("git_commit")
    now = f"{commit}{'+dirty' if info.get('git_dirty') else ''}" if commit else NO_GIT
    earlier = [str(c) for c in info.get("earlier_commits") or () if str(c) != now]
    return [*earlier, now]


def library_commit(info: Mapping[str, Any]) -> str:
    """The library commit a run measured, as run.json records it: the commit in its suite tree's
    ref (``suite.ref``: benchmarks/fetch_flaggems.sh writes "TAG (DESCRIBE, COMMIT)", a checkout
    gives ``git describe``'s "TAG-N-gHASH", setuptools-scm's version "X.Y.devN+gHASH"), else the
    commit the installed flag_gems was built from (``identity.flag_gems.commit``, a provider run:
    harness.providers.flaggems.installed_from; not where its checkout was edited, ``dirty``); ""
    when the run names none (a run of built-in ops alone, a tree known only by its version or tag,
    a library installed from an index)."""
    ref = _lookup(info, ("suite", "ref"))
    if not isinstance(ref, str):
        installed = _lookup(info, ("identity", "flag_gems", "commit"))
        edited = _lookup(info, ("identity", "flag_gems", "dirty")) is True  # not the code that commit holds
        return installed if isinstance(installed, str) and re.fullmatch(r"[0-9a-f]{7,64}", installed) and not edited \
            else ""
    full = re.findall(r"\b[0-9a-f]{40}\b", ref)
    if full:
        return full[-1]
    short = re.search(r"[-+]g([0-9a-f]{7,40})\b", ref)
    return short.group(1) if short else ""


def fingerprint(info: Mapping[str, Any]) -> str:
    """A short hash of the fields that make runs alike; equal fingerprints may be compared."""
    key = {name: _lookup(info, path) for path, name in ALIKE_FIELDS.values()}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _read(path: Path) -> dict[str, Any]:
    """The run.json at ``path``, checked: a readable JSON object of a schema this harness knows."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        raise UsageError(f"{path.parent}: no run.json there, so it is not a run directory. Give the "
                         "directory of a `harness run` (reports/<run-id>).") from None
    except OSError as exc:
        if path.parent.is_file():  # a file given where a run directory goes (often its run.json)
            raise UsageError(f"{path.parent} is a file, not a run directory: give the directory of a `harness run`"
                             + (f" ({path.parent.parent})" if path.parent.name == "run.json" else "") + ".") from None
        raise UsageError(f"{path}: cannot read it ({exc.strerror}).") from None
    try:
        info = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); the file is damaged (a truncated copy?). "
                         "Restore it, or run again.") from None
    if not isinstance(info, dict) or "run_id" not in info:
        raise UsageError(f"{path} is not a run.json written by `harness run` (no run_id).")
    _check(info, path)
    return info


def _check(info: Mapping[str, Any], path: Path | str) -> None:
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


def read_run_info(path: Path) -> dict[str, Any]:
    """The run.json at ``path`` as a mapping, checked as :meth:`RunInfo.load` checks it: a readable
    JSON object of a schema this harness knows, with its required fields."""
    return _read(path)


@dataclass(frozen=True)
class RunInfo:
    """run.json. Optional fields left None are not written (``ops``: the op rows exist once the run
    has ended; ``shard``: a part of a ``--shard K/N`` split only)."""

    run_id: str
    status: str
    backend: str
    schema_version: int = RUN_SCHEMA_VERSION
    backend_description: str = ""
    devices: tuple[str, ...] = ()
    level: str = ""
    timer: str = ""
    plugins: tuple[str, ...] = ()
    identity: Mapping[str, Any] = field(default_factory=dict)  # the first device's identity probe
    harness_version: str = ""
    git_commit: str | None = None
    git_dirty: bool | None = None
    # A resumed run: the harness commits (``+dirty`` where the tree differed) of its earlier
    # sessions that differ from git_commit, oldest first; its ops were measured by each of them.
    earlier_commits: tuple[str, ...] | None = None
    # the harness's own files by content (harness.run.provenance.code_digest): the code that ran,
    # where the commit label cannot say (a copied tree under a stale .git is "<HEAD>+dirty")
    harness_digest: str = ""
    python: str = ""
    container: Mapping[str, Any] = field(default_factory=dict)  # image and digest, when run in one
    caches: Mapping[str, str] | None = None  # the user's caches a --triton-cache user run compiled into
    options: Mapping[str, Any] = field(default_factory=dict)  # RunOptions.to_dict()
    plan: tuple[Mapping[str, Any], ...] = ()  # one entry per op (harness.run.outputs.stored_ops reads them)
    dismissed: Mapping[str, str] = field(default_factory=dict)  # op -> reason
    started_at: str = ""
    finished_at: str | None = None
    fingerprint: str = ""  # of ALIKE_FIELDS; computed by :meth:`with_fingerprint`
    shard: Mapping[str, Any] | None = None  # which part of which whole (--shard K/N)
    identity_per_device: Mapping[str, Any] | None = None
    device_state: Any = None  # harness.backends.state.summarize_states
    ops: tuple[Mapping[str, Any], ...] | None = None  # the op rows (OpOutcome.to_json), once ended
    records_problems: tuple[Mapping[str, Any], ...] | None = None  # records.jsonl lines that are not records
    report_html: str | None = None  # why report.html was not written
    sections: Mapping[str, Any] = field(default_factory=dict)  # every other top-level key, as read

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "sections":
                continue
            value = getattr(self, f.name)
            if value is None and f.name not in _ALWAYS:
                continue
            data[f.name] = _plain(value)
        data.update(self.sections)
        return data

    def with_fingerprint(self) -> RunInfo:
        return replace(self, fingerprint=fingerprint(self.to_dict()))

    def dump(self, path: Path) -> None:
        """Write run.json atomically."""
        write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: Path | str = "run.json") -> RunInfo:
        """A run.json mapping, checked (UsageError naming ``source``)."""
        _check(data, source)
        known = {f.name for f in fields(cls)} - {"sections"}
        values: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        # Lists become tuples; a field of another shape is kept as read, for the reader that needs
        # it to say what is damaged (resume: "the run's plan cannot be read").
        for name in ("devices", "plugins"):
            if isinstance(values.get(name), list):
                values[name] = tuple(str(x) for x in values[name])
        if isinstance(values.get("earlier_commits"), list):
            values["earlier_commits"] = tuple(str(x) for x in values["earlier_commits"])
        for name in ("plan", "ops", "records_problems"):
            if isinstance(values.get(name), list):
                values[name] = tuple(values[name])
        return cls(**values, sections={k: v for k, v in data.items() if k not in known})

    @classmethod
    def load(cls, path: Path) -> RunInfo:
        """The run.json at ``path``, checked."""
        return cls.from_dict(_read(path), path)


_ALWAYS = ("git_commit", "git_dirty", "finished_at")  # written as null when unknown


def _plain(value: Any) -> Any:
    """JSON's shapes: tuples as lists, mappings as dicts."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value
