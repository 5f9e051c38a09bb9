"""Shared helpers for the benchmark scripts (accelerator side)."""

from __future__ import annotations

import json
import platform
import statistics
from pathlib import Path
from typing import Any

from harness.backends import get_backend
from harness.child.timing.base import Budget, DeviceApi, device_api
from harness.child.timing.direct import DirectTimer
from harness.child.timing.flush import Flusher
from harness.child.timing.graph import GraphTimer
from harness.child.timing.profiler import ProfilerTimer


def cuda_setup(backend_name: str = "cuda") -> tuple[Any, DeviceApi, dict[str, Any]]:
    import torch

    backend = get_backend(backend_name)
    if backend.torch_namespace is None:
        raise SystemExit(f"backend {backend_name!r} has no torch device namespace: these benchmarks time a device")
    api = device_api(backend.torch_namespace, backend.torch_extension, backend.graph_class)
    props = api.namespace.get_device_properties(0)
    info = {
        "device": props.name,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "torch": torch.__version__,
        "host": platform.node(),
    }
    return backend, api, info


def harness_timers(backend: Any, api: DeviceApi, device: str, l2: int | None, op_id: str,
                   budget: Budget | None = None) -> dict[str, Any]:
    budget = budget or Budget()
    flush = Flusher(device, l2)
    return {
        "graph": GraphTimer(api=api, backend=backend, op_id=op_id, flush=flush, budget=budget),
        "direct": DirectTimer(api=api, flush=flush, budget=budget),
        "profiler": ProfilerTimer(api=api, device=device, flush=flush, budget=budget),
    }


def median(values: list[float]) -> float:
    return statistics.median(values)


def write_json(path: str | Path, data: Any) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
