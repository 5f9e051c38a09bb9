"""Which ops a run covers: --ops and --ops-file (every op when neither is given), a dismiss
list of ops skipped with a recorded reason, and ``source:op`` references.

A reference is an op id (``softmax``) or an id qualified by where the op comes from
(``builtin:softmax``, ``my_ops:softmax`` for ``--ops-module my_ops.py``). Op ids are unique
in a catalogue, so the prefix is a check that the op comes from where a shared list expects
it to, which is what a list reused across repositories and op modules needs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ConfigError, UsageError
from harness.ops.base import OpInfo
from harness.yamlfile import load_yaml

__all__ = ["Selection", "read_dismiss_file", "read_ops_file", "resolve_refs", "select_run_ops", "source_label"]


@dataclass(frozen=True)
class Selection:
    ops: tuple[OpInfo, ...]  # in the order named, dismissed ones included
    dismissed: Mapping[str, str] = field(default_factory=dict)  # op id -> reason

    @property
    def to_run(self) -> tuple[OpInfo, ...]:
        return tuple(op for op in self.ops if op.id not in self.dismissed)


def source_label(op: OpInfo) -> str:
    """The prefix naming where an op comes from: 'builtin', or the --ops-module file's stem
    (a dotted module name as given)."""
    if op.source == "builtin":
        return "builtin"
    return Path(op.source).stem if op.source.endswith(".py") else op.source


@dataclass(frozen=True)
class _Ref:
    text: str
    origin: str  # "--ops", "ops.txt line 3": where the user wrote it


def resolve_refs(catalog: Mapping[str, OpInfo], refs: Sequence[_Ref] | Sequence[str]) -> list[OpInfo]:
    """The ops named, in order, without repeats; every problem named with where it was written."""
    found: dict[str, OpInfo] = {}
    unknown: list[_Ref] = []
    for item in refs:
        ref = item if isinstance(item, _Ref) else _Ref(item, "--ops")
        op = _resolve_one(catalog, ref)
        if op is None:
            unknown.append(ref)
        else:
            found.setdefault(op.id, op)
    if unknown:
        names = ", ".join(r.text if r.origin == "--ops" else f"{r.text} ({r.origin})" for r in unknown)
        spaced = [r.text for r in unknown if len(r.text.split()) > 1
                  and all(_resolve_one(catalog, _Ref(part, r.origin)) for part in r.text.split())]
        hint = (f" {spaced[0]!r} names ops separated by spaces: separate them with commas (HARNESS_OPS, "
                "[tool.harness] ops) or give them as separate words after --ops." if spaced else "")
        raise UsageError(
            f"Unknown op(s): {names}.{hint} Known ops: {', '.join(catalog)}. "
            "Check the spelling, or load your own ops with --ops-module."
        )
    return list(found.values())


def _resolve_one(catalog: Mapping[str, OpInfo], ref: _Ref) -> OpInfo | None:
    if ref.text in catalog:
        return catalog[ref.text]
    source, sep, op_id = ref.text.rpartition(":")
    if not sep or op_id not in catalog:
        return None
    op = catalog[op_id]
    if source not in (source_label(op), op.source):
        raise UsageError(
            f"{ref.origin}: {ref.text!r} asks for op {op_id!r} from {source!r}, but {op_id!r} comes "
            f"from {source_label(op)!r}. Write '{source_label(op)}:{op_id}' (or just '{op_id}'), or "
            f"load the module that defines it with --ops-module."
        )
    return op


def _read_text(path: str, flag: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read it ({exc.strerror}). Check the path.") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{flag} {path}: cannot read it: not UTF-8 text (byte {exc.start}). Give a text "
                         "file.") from None


def read_ops_file(path: str) -> list[_Ref]:
    """Op references from a text file: one or more per line, '#' starts a comment."""
    refs: list[_Ref] = []
    for number, line in enumerate(_read_text(path, "--ops-file").splitlines(), start=1):
        for word in re.split(r"[\s,]+", line.split("#", 1)[0].strip()):
            if word:
                refs.append(_Ref(word, f"{path} line {number}"))
    if not refs:
        raise UsageError(f"--ops-file {path}: names no op. Write one op id per line ('#' starts a comment).")
    return refs


def read_dismiss_file(path: str) -> dict[str, str]:
    """``op reference -> reason`` from a YAML mapping, for example ``mm: hangs on driver 535``."""
    data = load_yaml(_read_text(path, "--dismiss"), f"--dismiss {path}", "Write one 'op: reason' per line.")
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"--dismiss {path}: must map each op to the reason it is skipped, for example "
            f"'mm: hangs on driver 535'; got a {type(data).__name__}."
        )
    result: dict[str, str] = {}
    for key, reason in data.items():
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(
                f"--dismiss {path}: op {key!r} has no reason. Write '{key}: <why it is skipped>' so "
                "the report says why."
            )
        result[str(key)] = reason.strip()
    return result


def select_run_ops(
    catalog: Mapping[str, OpInfo],
    ops: Sequence[str] = (),
    ops_file: str | None = None,
    dismiss: str | None = None,
) -> Selection:
    """--ops then --ops-file, in order (every op of the catalogue when both are empty), with the
    ops of the dismiss file marked. A dismiss entry for an op not selected is ignored; one that
    names no known op is an error (a typo must not silently run an op meant to be skipped)."""
    refs: list[_Ref] = [_Ref(o, "--ops") for o in ops]
    if ops_file:
        refs += read_ops_file(ops_file)
    chosen = resolve_refs(catalog, refs) if refs else list(catalog.values())
    dismissed: dict[str, str] = {}
    if dismiss:
        entries = read_dismiss_file(dismiss)
        dismiss_refs = [_Ref(k, f"--dismiss {dismiss}") for k in entries]
        resolve_refs(catalog, dismiss_refs)  # every unknown entry named at once
        for ref, reason in zip(dismiss_refs, entries.values(), strict=True):
            op = _resolve_one(catalog, ref)
            if op is not None:
                dismissed[op.id] = reason
    selected = {op.id for op in chosen}
    return Selection(ops=tuple(chosen), dismissed={k: v for k, v in dismissed.items() if k in selected})
