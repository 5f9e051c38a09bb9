"""Text every output format can hold, whatever an op's messages carried.

An op's exception message may hold ANSI colour codes, NUL bytes or lone surrogates (a file name
that was not UTF-8, decoded with ``surrogateescape``). Nothing is dropped: a character a format
cannot hold is written as its escape (``\\x1b``, ``\\udcff``), visibly, and the row stays.

- :func:`encodable`: lone surrogates escaped, so the text encodes as UTF-8 (CSV, Markdown, JSON);
- :func:`xml_text`: also the characters XML 1.0 forbids (C0 controls but tab, LF and CR;
  U+FFFE, U+FFFF), for attribute values and element text;
- :func:`json_safe`: a JSON value with every string made :func:`encodable` and, on request,
  non-finite floats (not JSON) replaced by null.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["encodable", "json_safe", "xml_text"]

_SURROGATES = re.compile("[\ud800-\udfff]")
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def encodable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udcff``): always valid UTF-8."""
    return _SURROGATES.sub(_escape, text)


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold written as its escape (``\\x1b``)."""
    return _XML_FORBIDDEN.sub(_escape, text)


def json_safe(value: Any, *, finite: bool = False) -> Any:
    """``value`` (dicts, lists, tuples, strings, numbers) with every string :func:`encodable`;
    with ``finite``, NaN and infinities become None (JSON has no such numbers)."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, float):
        return None if finite and not math.isfinite(value) else value
    if isinstance(value, Mapping):
        return {json_safe(k) if isinstance(k, str) else k: json_safe(v, finite=finite) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v, finite=finite) for v in value]
    return value
