"""What every timer shares: the device interface taken from the backend, and the budget."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Budget", "DeviceApi", "Timer", "device_api", "reps_for"]


@dataclass(frozen=True)
class Budget:
    """How long to warm up and to measure, in milliseconds, and the bounds on repetitions."""

    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    min_reps: int = 5
    max_reps: int = 1000


def reps_for(budget_ms: float, estimate_ms: float, lo: int, hi: int) -> int:
    """Repetitions that fill ``budget_ms`` given one call's estimated time, clamped to [lo, hi]."""
    if estimate_ms <= 0:
        return hi
    return max(lo, min(hi, int(budget_ms / estimate_ms)))


@dataclass(frozen=True)
class DeviceApi:
    """The active device's stream/event/synchronize, taken from the backend's torch namespace.

    Nothing names ``torch.cuda`` directly, so the same timing code serves MUSA
    (torch.musa) and Ascend (torch.npu).
    """

    namespace: Any

    def synchronize(self) -> None:
        self.namespace.synchronize()

    def event(self) -> Any:
        return self.namespace.Event(enable_timing=True)


def device_api(torch_namespace: str, torch_extension: str | None) -> DeviceApi:
    import torch

    if torch_extension:
        importlib.import_module(torch_extension)
    return DeviceApi(namespace=getattr(torch, torch_namespace))


class Timer(Protocol):
    name: str

    def measure(self, fn: Callable[[], Any]) -> list[float]:
        """Raw samples (ms) of ``fn``; ``fn`` has already been called once for correctness."""
        ...
