"""Where candidate implementations come from.

``builtin``: the op's own Triton kernel (OpSpec.candidate). Other providers
(for example flaggems) map an op to another library's implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.errors import UsageError
from harness.ops.base import OpSpec

__all__ = ["PROVIDERS", "candidate_for", "check_provider"]

PROVIDERS: tuple[str, ...] = ("builtin",)


def check_provider(name: str) -> str:
    if name not in PROVIDERS:
        raise UsageError(f"Unknown provider {name!r}. Known providers: {', '.join(PROVIDERS)}.")
    return name


def candidate_for(provider: str, op: OpSpec) -> Callable[..., Any]:
    check_provider(provider)
    return op.candidate
