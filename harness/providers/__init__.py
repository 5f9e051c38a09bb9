"""Where candidate implementations come from.

``builtin``: the op's own Triton kernel (OpSpec.candidate). ``flaggems``: FlagGems'
implementation of the same operator (harness.providers.flaggems; the op map is in
harness.providers.bindings). Each provider is a name and one function building the
candidate in the op's process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.backends.base import Backend
from harness.errors import UsageError
from harness.ops.base import OpSpec

__all__ = ["PROVIDERS", "candidate_for", "check_provider", "provider_identity"]

PROVIDERS: tuple[str, ...] = ("builtin", "flaggems")


def check_provider(name: str) -> str:
    if name not in PROVIDERS:
        raise UsageError(f"Unknown provider {name!r}. Known providers: {', '.join(PROVIDERS)}.")
    return name


def candidate_for(provider: str, op: OpSpec, backend: Backend | None = None) -> Callable[..., Any]:
    """The candidate of ``op`` from ``provider``. ``backend`` lets a provider refuse a backend it
    cannot run on (its cases then skip with the reason) without trying."""
    check_provider(provider)
    if provider == "flaggems":
        from harness.providers.flaggems import flaggems_candidate

        return flaggems_candidate(op, backend)
    return op.candidate


def provider_identity() -> dict[str, Any]:
    """Facts about the candidate libraries this process loaded, for run.json's identity."""
    from harness.providers.flaggems import identity_facts

    return identity_facts()
