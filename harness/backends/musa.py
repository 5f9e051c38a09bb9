"""Moore Threads MUSA (torch_musa registers ``torch.musa``)."""

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
    name="musa",
    description="Moore Threads GPUs through MUSA (torch_musa, torch.musa)",
    aliases=("mthreads", "moore"),
    torch_namespace="musa",
    torch_extension="torch_musa",
    device_type="musa",
    visibility_keys=("MUSA_VISIBLE_DEVICES",),
    # profiler=False: the torch profiler path (CUPTI-style kernel events) is unverified here.
    # stale_cuda_guards: torch_musa serves the device as torch.musa, so FlagGems' tests guarded by
    # torch.cuda.is_available() skip on MUSA although FlagGems runs those ops there.
    capabilities=Capabilities(accelerator=True, device_events=True, graph_capture=True, profiler=False,
                              stale_cuda_guards=True),
    listing=DeviceListing(command=("mthreads-gmi", "-L"), index_pattern=r"^GPU\s*(\d+)\s*:"),
    detect_paths=("/dev/mtgpu.[0-9]*",),
    capture_errors=CaptureErrorWording(
        fatal=(
            "an illegal memory access was encountered",
            "out of memory",
            "device-side assert triggered",
            "misaligned address",
        ),
        # Seen on MUSA: an "unknown error" raised while a stream captures leaves the
        # context unusable for the rest of the process.
        poisoned=("MUSA error: unknown error",),
    ),
    # unique2 poisons the context when captured on MUSA; keyed by the run-time op id.
    capture_deny=frozenset({"unique2"}),
    # The MT Container Toolkit runtime ("mthreads", MTHREADS_VISIBLE_DEVICES) when the
    # engine has it; otherwise /dev/mtgpu.N (with the dot) and that card's /dev/dri nodes
    # (toolkit-less instructions pass all of /dev/dri; the harness passes only the chosen card's).
    passthrough=Passthrough(
        runtime="mthreads",
        runtime_env=("MTHREADS_VISIBLE_DEVICES",),
        per_device_nodes=("/dev/mtgpu.{index}",),
        # The chosen card's DRI nodes, found through sysfs (same parent device as its mtgpu node);
        # no Moore Threads document maps mtgpu.N to them. Whether card*, renderD* or both are
        # needed is not documented either: both of the chosen card pass, no other card's.
        device_siblings=("/dev/dri/card*", "/dev/dri/renderD*"),
        groups=("video", "render"),
        optional_mounts=(("/usr/bin/mthreads-gmi", "/usr/bin/mthreads-gmi"),),
    ),
    graph_class="MUSAGraph",
    state_query=None,
    driver_query=DeviceListing(command=("mthreads-gmi", "-q"), index_pattern=r"Driver Version\s*:\s*(\S+)"),
    gems_vendor="mthreads",
    peaks=Peaks(device="MTT S4000", bandwidth_gbps=768.0, bf16_tflops=100.0),
)
