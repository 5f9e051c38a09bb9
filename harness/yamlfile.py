"""YAML read the harness's way, by every reader of a YAML file (shapes files, --dismiss, --spread,
FlagGems' core_shapes.yaml and ops files, the skip-guard rules).

- Safe: plain data only (PyYAML's SafeLoader), anchors and merge keys (``<<``) resolved.
- A key given twice in one mapping is an error, not "the last one wins"; a key a merge brings in
  and the mapping sets again is an override, as YAML means it.
- Every problem is one line, a :class:`harness.errors.ConfigError` that names the file, the line
  and the column: ``SOURCE: not valid YAML at line 3, column 7: found ... ``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError, UsageError

__all__ = ["load_yaml", "read_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader refuses it below
                    continue
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} is given twice (first at line {first}); give it once",
                        key_node.start_mark)
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)  # type: ignore[arg-type,no-any-return]


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def load_yaml(text: str, source: str, hint: str = "") -> Any:
    """The data of YAML ``text`` from ``source`` (a file name, or the option and file: it starts
    the message); a problem is a one-line ConfigError ending in ``hint`` (what the file should hold)."""
    tail = f" {hint}" if hint else ""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except RecursionError:
        raise ConfigError(f"{source}: not valid YAML: nested too deeply.{tail}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = _one_line(exc.problem or exc.context or "unreadable")
        raise ConfigError(f"{source}: not valid YAML{where}: {what}.{tail}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise ConfigError(f"{source}: not valid YAML at line {line}, column {column}: character #x{code:04x}: "
                          f"{_one_line(exc.reason)}.{tail}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_one_line(exc)}.{tail}") from None


def read_yaml(path: Path, source: str, hint: str = "") -> Any:
    """:func:`load_yaml` of the UTF-8 file at ``path``; a file that cannot be read is a UsageError
    and one that is not UTF-8 a ConfigError, each one line naming ``source``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{source}: cannot read it ({exc.strerror or exc}). Check the path.") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not valid YAML: not UTF-8 text (byte {exc.start + 1}).{' ' + hint if hint else ''}"
                          ) from None
    return load_yaml(text, source, hint)
