"""NVIDIA CUDA."""

from __future__ import annotations

from harness.backends.base import (
    Backend,
    Capabilities,
    CaptureErrorWording,
    DeviceListing,
    Passthrough,
    Peaks,
)

# Error texts of the CUDA runtime that mean the kernel broke on the device.
# torch appends "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
# to every CUDA error; that footer is ignored so it never reads as an assert.
CUDA_FATAL = (
    "an illegal memory access was encountered",
    "out of memory",
    "device-side assert triggered",
    "an illegal instruction was encountered",
    "misaligned address",
    "uncorrectable ecc error encountered",
)
CUDA_FOOTERS = ("TORCH_USE_CUDA_DSA", "CUDA_LAUNCH_BLOCKING")
# torch's words when a draw meets a generator that a failed capture left registered as capturing
# (seen on the H200, torch 2.11: FlagGems' next input after a row whose capture failed)
CUDA_RNG_LEFT_CAPTURING = ("Offset increment outside graph capture encountered unexpectedly",)

BACKEND = Backend(
    name="cuda",
    description="NVIDIA GPUs through CUDA (torch.cuda)",
    aliases=("nvidia", "nv"),
    torch_namespace="cuda",
    torch_extension=None,
    device_type="cuda",
    visibility_keys=("CUDA_VISIBLE_DEVICES",),
    # hopper_cluster_mm: FlagGems dispatches mm on Hopper (sm_90) to runtime/backend/_nvidia/hopper, whose
    # cluster path runs under FlagTree's TLE (the mm_cluster plugin may keep mm off it).
    # profiler_warm_up: an empty CUPTI session in a held process whose imports opened the device pays
    # the profiler's start ahead, and CUPTI still records after it; measured on the H200 (docs/timing.md).
    capabilities=Capabilities(accelerator=True, device_events=True, graph_capture=True, profiler=True,
                              hopper_cluster_mm=True, profiler_warm_up=True),
    listing=DeviceListing(command=("nvidia-smi", "-L"), index_pattern=r"^GPU (\d+):"),
    detect_paths=("/dev/nvidiactl", "/dev/nvidia[0-9]*"),
    capture_errors=CaptureErrorWording(fatal=CUDA_FATAL, ignore=CUDA_FOOTERS,
                                       rng_left_capturing=CUDA_RNG_LEFT_CAPTURING),
    # Docker's GPU device requests (--gpus) through the NVIDIA Container Toolkit; the
    # toolkit maps /dev/nvidia* and the driver libraries itself. "compute" is needed for
    # CUDA, "utility" for nvidia-smi (identity probe).
    passthrough=Passthrough(
        gpu_requests=True,
        runtime_env=("NVIDIA_VISIBLE_DEVICES",),
        host_nodes=("/dev/nvidiactl",),
        static_env=(("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),),
        # No host IPC: one op process per device shares no CUDA memory with another process
        # (host IPC is for CUDA IPC / NCCL between containers). No capability is documented.
    ),
    # None. A failed capture can leave torch's generator capturing, which poisoned FlagGems ops
    # that were denied here for it; the graph timer puts the generator's pre-capture state back
    # after a failed capture (harness.child.timing.graph), so no op needs denying for that
    # (docs/timing.md, "Capture failures"; the formerly denied ops run without the list:
    # benchmarks/results/flaggems-corpus-h200-2026-12-03/README.md). Backward benchmarks through
    # autograd are never captured at all (harness.child.latency_seam.AUTOGRAD_NOT_CAPTURED).
    capture_deny=frozenset(),
    graph_class="CUDAGraph",
    state_nvml=True,
    state_query=("nvidia-smi", "--query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw", "--format=csv,noheader,nounits"),
    driver_query=DeviceListing(command=("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"), index_pattern=r"^\s*(\S+)"),
    gems_vendor="nvidia",
    peaks=Peaks(device="H200 SXM", bandwidth_gbps=4800.0, bf16_tflops=989.0),
    hardware_verified="H200 (host run, no docker engine there)",
)
