"""The frozen description of an accelerator backend, and pure functions over it.

Backends are data: code above this package reads capabilities and wording from
a :class:`Backend`, never branches on a vendor's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "Backend",
    "Capabilities",
    "CaptureErrorWording",
    "CaptureFailure",
    "DeviceListing",
    "Passthrough",
    "Peaks",
    "classify_capture_error",
    "capture_denied",
    "roofline",
]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; plugin and timer planning read only this."""

    accelerator: bool
    device_events: bool
    graph_capture: bool
    profiler: bool
    triton_interpreter: bool = False
    # torch.cuda is not this device's API, yet kernels that FlagGems' tests guard with
    # ``torch.cuda.is_available()`` run here: those guards skip tests that would pass
    # (the compat plugin harness.child.plugins.skipguards drops them; docs/plugins.md).
    stale_cuda_guards: bool = False
    # The device may run FlagGems' Hopper cluster mm (runtime/backend/_nvidia/hopper: cluster_remote_mm,
    # a 2-CTA thread-block cluster kernel, where FlagTree's TLE is installed): --plugins +mm_cluster,
    # which keeps mm off that path, may be turned on (harness.child.plugins.mm_cluster; docs/plugins.md).
    hopper_cluster_mm: bool = False
    # A pre-started op process whose imports opened the device (FlagGems 5.3.4's do) may open and
    # close one empty profiler session while held, so the profiler's start (5.2 s on the H200
    # machine) is off the device's clock, and the profiler still records kernels after graph
    # captures (benchmarks/profiler_cost.py --warm-up; docs/timing.md, "The profiler's start").
    profiler_warm_up: bool = False


class CaptureFailure(StrEnum):
    """How a failed graph capture is handled (docs/architecture.md, "Contracts")."""

    RECOVERABLE = "recoverable"  # fall back to direct timing, mark the row
    FATAL = "fatal"  # the kernel broke on the device: the case fails, no latency
    POISONED = "poisoned"  # the context is dead: stop this op's process


@dataclass(frozen=True)
class CaptureErrorWording:
    """Substrings of a backend's own error text that decide the class of a capture failure.

    ``ignore`` lists boilerplate the runtime appends to *every* error (for CUDA,
    the "TORCH_USE_CUDA_DSA" footer mentions "device-side assertions" even for
    harmless errors); it is cut away before matching.
    """

    fatal: tuple[str, ...] = ()
    poisoned: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    # An error raised outside any capture, later, that says a failed capture left the device's
    # random number generator registered as capturing: every later draw of the process fails.
    rng_left_capturing: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceListing:
    """A vendor CLI that lists devices, and a regex whose group 1 is a device index."""

    command: tuple[str, ...]
    index_pattern: str


@dataclass(frozen=True)
class Passthrough:
    """What a container needs to see this backend's devices (planned by harness.container.plan).

    There are two ways in. When the engine has the vendor's container ``runtime``
    (or, with ``gpu_requests``, docker's GPU device requests), the engine maps
    the devices itself and ``runtime_env`` tells it which: the chosen ids joined
    by commas, or ``runtime_all`` when every device is wanted (``None`` where the
    runtime has no "all" and the ids are listed). Otherwise the harness maps
    device nodes: ``per_device_nodes`` are templates formatted with ``index``
    (the device id) and ``render`` (128 + index, the DRM render minor), used for
    the chosen devices; ``all_device_nodes`` replace them when every device is
    wanted (a whole directory such as /dev/dri); ``shared_nodes`` are needed
    whatever is chosen. ``host_nodes`` must exist on the host in either way but
    are never mapped by the harness. ``device_siblings`` are glob patterns of
    nodes that belong to a chosen device when the kernel links them to the same
    device as its per-device node (a GPU's /dev/dri nodes). ``mounts`` (required)
    and ``optional_mounts`` are read-only bind mounts of vendor driver files, used
    only when device nodes are mapped (a vendor runtime brings its own).

    Containers are confined by default (harness.container.plan.plan_security): no
    capability, no new privileges, read-only root, no network, private IPC.
    ``cap_add``, ``security_opt``, ``ipc_mode`` and ``shm_size`` hold only what the
    vendor documents its compute stack needs, with the reason beside it; none of
    the backends needs any today (docs/containers.md, "Hardening").
    """

    gpu_requests: bool = False
    runtime: str | None = None
    runtime_env: tuple[str, ...] = ()
    runtime_all: str | None = "all"
    per_device_nodes: tuple[str, ...] = ()
    all_device_nodes: tuple[str, ...] = ()
    shared_nodes: tuple[str, ...] = ()
    host_nodes: tuple[str, ...] = ()
    device_siblings: tuple[str, ...] = ()
    static_env: tuple[tuple[str, str], ...] = ()
    groups: tuple[str, ...] = ()  # host group names added to the container user when they exist
    mounts: tuple[tuple[str, str], ...] = ()  # (host path, container path), read-only
    optional_mounts: tuple[tuple[str, str], ...] = ()
    security_opt: tuple[str, ...] = ()  # never seccomp=unconfined: that is the caller's choice alone
    ipc_mode: str | None = None  # None: a private IPC namespace
    shm_size: str | None = None  # None: the harness's default size
    cap_add: tuple[str, ...] = ()

    @property
    def maps_devices(self) -> bool:
        """Whether this backend needs anything passed through at all (the cpu backend does not)."""
        return bool(self.gpu_requests or self.runtime or self.per_device_nodes or self.shared_nodes)


@dataclass(frozen=True)
class Peaks:
    """Datasheet ceilings of a representative device, for roofline percentages only."""

    device: str
    bandwidth_gbps: float
    bf16_tflops: float


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    aliases: tuple[str, ...]
    torch_namespace: str | None  # attribute of ``torch`` holding the device API ("cuda", "musa", "npu")
    torch_extension: str | None  # module to import first to register that namespace
    device_type: str  # torch device type string ("cuda", "musa", "npu", "cpu")
    visibility_keys: tuple[str, ...]  # the first is written when pinning a child
    capabilities: Capabilities
    listing: DeviceListing | None = None
    detect_paths: tuple[str, ...] = ()  # glob patterns whose presence suggests this backend
    capture_errors: CaptureErrorWording = field(default_factory=CaptureErrorWording)
    capture_deny: frozenset[str] = frozenset()  # op ids never captured (keyed by run-time op id)
    passthrough: Passthrough = field(default_factory=Passthrough)
    driver_query: DeviceListing | None = None  # CLI whose regex group 1 is the driver version
    graph_class: str | None = None  # attribute of the torch namespace that captures device graphs
    # CLI printing one CSV line per device: index, SM clock MHz, memory clock MHz, temperature C, power W
    state_query: tuple[str, ...] | None = None
    state_nvml: bool = False  # the same readings through NVML (the pynvml module), where it imports
    gems_vendor: str | None = None
    peaks: Peaks | None = None
    hardware_verified: str = "no"  # what has run on real hardware, said plainly
    # Whether this backend's timings measure the code (compare and gate judge them). False for a
    # backend whose timings only show the pipeline runs: compare and gate refuse to judge its
    # runs unless --allow-cpu, and report.md says so.
    timings_comparable: bool = True
    # Intra-op threads of the op process (OMP_NUM_THREADS and MKL_NUM_THREADS in its
    # environment); None leaves the libraries' defaults. One thread keeps wall-clock timings
    # from stalling on a busy host (benchmarks/cpu_threads.py).
    op_threads: int | None = None

    def visibility_key(self) -> str | None:
        return self.visibility_keys[0] if self.visibility_keys else None


def roofline(peaks: Peaks | None, gbps: float | None, tflops: float | None, dtype: str) -> dict[str, Any]:
    """Percentages of the backend's datasheet ceilings (a representative device, Peaks.device).

    The matrix ceiling is the dense bf16 rate, so it is given for 16-bit dtypes only."""
    if peaks is None:
        return {}
    out: dict[str, Any] = {"peak_device": peaks.device}
    if gbps is not None:
        out["pct_peak_bandwidth"] = round(100 * gbps / peaks.bandwidth_gbps, 2)
    if tflops is not None and dtype in ("float16", "bfloat16"):
        out["pct_peak_bf16_tflops"] = round(100 * tflops / peaks.bf16_tflops, 2)
    return out


def _strip(text: str, boilerplate: Sequence[str]) -> str:
    for piece in boilerplate:
        # The footer is a whole sentence; remove the line(s) carrying it.
        text = "\n".join(line for line in text.splitlines() if piece not in line)
    return text


def classify_capture_error(backend: Backend, error_text: str) -> CaptureFailure:
    """Classify a capture failure by the backend's own wording; unknown text is recoverable."""
    text = _strip(error_text, backend.capture_errors.ignore).lower()
    if any(w.lower() in text for w in backend.capture_errors.poisoned):
        return CaptureFailure.POISONED
    if any(w.lower() in text for w in backend.capture_errors.fatal):
        return CaptureFailure.FATAL
    return CaptureFailure.RECOVERABLE


def rng_left_capturing(backend: Backend, error_text: str) -> bool:
    """Whether an error says that a failed capture left the device's generator unusable."""
    text = error_text.lower()
    return any(w.lower() in text for w in backend.capture_errors.rng_left_capturing)


def capture_denied(backend: Backend, op_id: str) -> bool:
    """Whether graph capture is skipped for ``op_id`` (the exact id used at run time)."""
    return op_id in backend.capture_deny


def parse_listing(listing: DeviceListing, output: str) -> tuple[str, ...]:
    """Device indices found in a listing CLI's output, in order, without duplicates."""
    seen: list[str] = []
    for match in re.finditer(listing.index_pattern, output, flags=re.MULTILINE):
        if match.group(1) not in seen:
            seen.append(match.group(1))
    return tuple(seen)


def read_visibility(backend: Backend, env: Mapping[str, str]) -> tuple[str, ...] | None:
    """Devices the parent environment already restricted this backend to, if any."""
    for key in backend.visibility_keys:
        value = env.get(key)
        if value is not None and value.strip() != "":
            return tuple(v.strip() for v in value.split(",") if v.strip())
    return None
