"""Device clocks, temperature and power: read where the backend has a query CLI, and a check
for clock drops during a run (thermal or power throttling makes later ops look slower).

:func:`device_reader` gives the op process a reader of its one device, called at the start and
end of each case's timing: NVML through the ``pynvml`` module where the backend names it and
the module imports (about a millisecond), else the backend's query CLI (nvidia-smi: tens of
milliseconds), else nothing (the cpu backend)."""

from __future__ import annotations

import importlib
import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.backends.base import Backend

__all__ = [
    "CLOCK_DROP_FRACTION",
    "append_state",
    "clock_drop",
    "device_reader",
    "parse_state",
    "read_state",
    "summarize_states",
]

State = dict[str, float | None]

CLOCK_DROP_FRACTION = 0.10  # an SM clock more than 10% under the run's highest is flagged
_FIELDS = ("index", "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w")


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None  # "[N/A]" and the like


def parse_state(output: str) -> dict[str, dict[str, float | None]]:
    """Per device index: clocks, temperature and power from the CSV lines of the query CLI."""
    states: dict[str, dict[str, float | None]] = {}
    for line in output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(_FIELDS) or not parts[0].isdigit():
            continue
        states[parts[0]] = {name: _number(value) for name, value in zip(_FIELDS[1:], parts[1:], strict=True)}
    return states


def read_state(backend: Backend) -> dict[str, dict[str, float | None]]:
    if backend.state_query is None:
        return {}
    try:
        done = subprocess.run(list(backend.state_query), capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_state(done.stdout) if done.returncode == 0 else {}


def _nvml_reader(module: object, device: str) -> Callable[[], State] | None:
    nvml: Any = module
    try:
        nvml.nvmlInit()
        handle = nvml.nvmlDeviceGetHandleByIndex(int(device))
    except Exception:  # no driver library, another index scheme: the CLI may still answer
        return None

    def value(read: Callable[[], float], scale: float = 1.0) -> float | None:
        try:
            return float(read()) * scale
        except Exception:
            return None

    def read() -> State:
        return {
            "sm_clock_mhz": value(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            "mem_clock_mhz": value(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
            "temperature_c": value(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
            "power_w": value(lambda: nvml.nvmlDeviceGetPowerUsage(handle), 1e-3),  # milliwatts
        }

    return read


def device_reader(
    backend: Backend,
    device: str,
    import_module: Callable[[str], object] = importlib.import_module,
    query: Callable[[Backend], dict[str, State]] = read_state,
) -> Callable[[], State] | None:
    """A reader of one device's clocks, temperature and power (None where nothing can be read).

    ``device`` is the index the parent pinned (the query CLI's and NVML's numbering)."""
    if backend.state_nvml:
        try:
            module = import_module("pynvml")
        except ImportError:
            module = None
        if module is not None:
            reader = _nvml_reader(module, device)
            if reader is not None:
                return reader
    if backend.state_query is None:
        return None

    def read() -> State:
        return dict(query(backend).get(device) or {})

    return read


def clock_drop(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The largest SM-clock drop across samples taken under load (at the end of each op), if it
    exceeds CLOCK_DROP_FRACTION of the highest clock seen; None when the clocks held."""
    clocks = [float(s["sm_clock_mhz"]) for s in samples if s.get("sm_clock_mhz")]
    if len(clocks) < 2:
        return None
    top = max(clocks)
    low = min(clocks[clocks.index(top):])  # a drop after the peak
    if top > 0 and (top - low) / top > CLOCK_DROP_FRACTION:
        return {"max_sm_clock_mhz": top, "min_sm_clock_mhz_after": low, "drop_fraction": round((top - low) / top, 3)}
    return None


def append_state(run_dir: Path, backend: Backend, label: str, devices: Sequence[str]) -> None:
    """Append one line per device to RUN_DIR/device_state.jsonl (no-op without a state query)."""
    states = read_state(backend)
    lines = [{"op": label, "device": d, **states[d]} for d in devices if d in states]
    if lines:
        with open(run_dir / "device_state.jsonl", "a", encoding="utf-8") as fh:
            for line in lines:
                fh.write(json.dumps(line, sort_keys=True) + "\n")


def summarize_states(run_dir: Path) -> dict[str, Any]:
    """What run.json says of the device state: every reading, and a clock drop per device."""
    path = run_dir / "device_state.jsonl"
    if not path.exists():
        return {}
    readings = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            readings.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn line from a crash
    drops = {}
    for device in sorted({str(r.get("device")) for r in readings}):
        under_load = [r for r in readings if str(r.get("device")) == device and not str(r.get("op", "")).startswith("<")]
        drop = clock_drop(under_load)
        if drop:
            drops[device] = drop
    return {"readings": readings, "clock_drop": drops or None}
