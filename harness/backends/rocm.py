"""AMD ROCm (HIP). torch exposes it under the ``cuda`` namespace."""

from __future__ import annotations

from harness.backends.base import (
    Backend,
    Capabilities,
    CaptureErrorWording,
    DeviceListing,
    Passthrough,
    Peaks,
)

BACKEND = Backend(
    name="rocm",
    description="AMD GPUs through ROCm/HIP (torch.cuda on a ROCm build of torch)",
    aliases=("amd", "hip"),
    torch_namespace="cuda",
    torch_extension=None,
    device_type="cuda",
    # HIP_VISIBLE_DEVICES indexes the devices ROCR_VISIBLE_DEVICES leaves; pinning writes HIP's.
    visibility_keys=("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"),
    capabilities=Capabilities(accelerator=True, device_events=True, graph_capture=True, profiler=True),
    listing=DeviceListing(command=("rocm-smi", "--showid"), index_pattern=r"^GPU\[(\d+)\]"),
    detect_paths=("/dev/kfd",),
    capture_errors=CaptureErrorWording(
        fatal=(
            "an illegal memory access was encountered",
            "out of memory",
            "device-side assert triggered",
            "memory access fault",
            "illegal instruction",
        ),
        ignore=("AMD_SERIALIZE_KERNEL", "TORCH_USE_HIP_DSA"),
    ),
    # AMD's docker guide: /dev/kfd (shared compute interface) plus the chosen GPUs' renderD
    # nodes; groups video and render. The AMD Container Toolkit runtime ("amd") is used when the
    # engine has it.
    passthrough=Passthrough(
        runtime="amd",
        runtime_env=("AMD_VISIBLE_DEVICES",),
        # Each chosen GPU's render node only (AMD: "If a /dev/dri/renderD device is not exposed to a
        # container then it cannot use the GPU associated with it"), never the whole /dev/dri.
        per_device_nodes=("/dev/dri/renderD{render}",),
        shared_nodes=("/dev/kfd",),
        groups=("video", "render"),
        # AMD calls --security-opt seccomp=unconfined "optional" (NUMA memory-policy calls); the
        # engine's profile allows those calls given CAP_SYS_NICE: ask with --cap-add SYS_NICE, or
        # --seccomp unconfined, when a run needs them. Private IPC with a sized /dev/shm is AMD's
        # documented alternative to --ipc=host ("--ipc=host OR --shm-size").
    ),
    graph_class="CUDAGraph",
    state_query=None,
    driver_query=DeviceListing(command=("rocm-smi", "--showdriverversion"), index_pattern=r"[Dd]river version:\s*(\S+)"),
    gems_vendor="amd",  # FlagGems src/flag_gems/runtime/backend/_amd (v5.0.2); docs/flaggems.md
    peaks=Peaks(device="MI300X", bandwidth_gbps=5300.0, bf16_tflops=1307.0),
)
