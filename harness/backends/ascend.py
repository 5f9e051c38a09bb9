"""Huawei Ascend NPUs (torch_npu registers ``torch.npu``)."""

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
    name="ascend",
    description="Huawei Ascend NPUs through CANN (torch_npu, torch.npu)",
    aliases=("npu", "huawei"),
    torch_namespace="npu",
    torch_extension="torch_npu",
    device_type="npu",
    # ASCEND_RT_VISIBLE_DEVICES is read by the CANN runtime in the process;
    # ASCEND_VISIBLE_DEVICES is the container runtime's.
    visibility_keys=("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES"),
    # profiler=False: the torch profiler path (CUPTI-style kernel events) is unverified here.
    capabilities=Capabilities(accelerator=True, device_events=True, graph_capture=True, profiler=False),
    listing=DeviceListing(command=("npu-smi", "info", "-l"), index_pattern=r"NPU ID\s*:\s*(\d+)"),
    detect_paths=("/dev/davinci_manager",),
    capture_errors=CaptureErrorWording(
        fatal=("out of memory", "aicore exception", "aivec error"),
    ),
    # The Ascend Docker Runtime ("ascend", ASCEND_VISIBLE_DEVICES, which takes a list and
    # has no "all") when the engine has it; otherwise the nodes and read-only driver
    # mounts of Huawei's manual container instructions.
    passthrough=Passthrough(
        runtime="ascend",
        runtime_env=("ASCEND_VISIBLE_DEVICES",),
        runtime_all=None,
        per_device_nodes=("/dev/davinci{index}",),
        shared_nodes=("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"),
        groups=("HwHiAiUser",),
        mounts=(("/usr/local/Ascend/driver", "/usr/local/Ascend/driver"),),
        optional_mounts=(
            ("/usr/local/dcmi", "/usr/local/dcmi"),
            ("/usr/local/bin/npu-smi", "/usr/local/bin/npu-smi"),
            ("/etc/ascend_install.info", "/etc/ascend_install.info"),
        ),
        # Private IPC with a sized /dev/shm (Huawei's MindIE quick start uses --shm-size=1g).
    ),
    graph_class="NPUGraph",
    state_query=None,
    driver_query=DeviceListing(command=("npu-smi", "info"), index_pattern=r"Version:\s*(\S+)"),
    gems_vendor="ascend",
    peaks=Peaks(device="Ascend 910B2", bandwidth_gbps=1600.0, bf16_tflops=354.0),
)
