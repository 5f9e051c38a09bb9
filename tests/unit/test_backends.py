from __future__ import annotations

import pytest

from harness.backends import (
    BACKENDS,
    CaptureFailure,
    all_visibility_keys,
    capture_denied,
    classify_capture_error,
    detect_backend,
    enumerate_devices,
    get_backend,
    isolated_env,
    resolve_backend,
)
from harness.errors import UsageError


@pytest.mark.parametrize(
    "alias, name",
    [
        ("nvidia", "cuda"), ("nv", "cuda"), ("CUDA", "cuda"),
        ("amd", "rocm"), ("hip", "rocm"),
        ("npu", "ascend"), ("huawei", "ascend"),
        ("musa", "musa"), ("cpu", "cpu"),
    ],
)
def test_aliases_resolve(alias: str, name: str) -> None:
    assert get_backend(alias).name == name


def test_unknown_backend_fails_closed_listing_names() -> None:
    with pytest.raises(UsageError) as err:
        get_backend("tpu")
    text = str(err.value)
    assert "'tpu'" in text
    for b in BACKENDS:
        assert b.name in text
    assert "nvidia" in text and "huawei" in text


def test_visibility_keys_per_backend() -> None:
    assert get_backend("cuda").visibility_keys == ("CUDA_VISIBLE_DEVICES",)
    assert get_backend("musa").visibility_keys == ("MUSA_VISIBLE_DEVICES",)
    assert set(get_backend("rocm").visibility_keys) == {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}
    assert set(get_backend("ascend").visibility_keys) == {"ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES"}
    assert get_backend("musa").torch_namespace == "musa"
    assert get_backend("rocm").torch_namespace == "cuda"
    assert get_backend("ascend").torch_namespace == "npu"


@pytest.mark.parametrize("target", ["musa", "rocm", "ascend"])
def test_parent_cuda_visibility_never_reaches_other_vendor_child(target: str) -> None:
    parent = {"CUDA_VISIBLE_DEVICES": "3", "HIP_VISIBLE_DEVICES": "1", "PATH": "/bin"}
    env = isolated_env(get_backend(target), parent, "2")
    assert "CUDA_VISIBLE_DEVICES" not in env
    assert env["PATH"] == "/bin"
    backend = get_backend(target)
    assert env[backend.visibility_keys[0]] == "2"
    others = set(all_visibility_keys()) - {backend.visibility_keys[0]}
    assert not others & set(env)


def test_cpu_child_gets_no_visibility_at_all() -> None:
    env = isolated_env(get_backend("cpu"), {"CUDA_VISIBLE_DEVICES": "0", "MUSA_VISIBLE_DEVICES": "1"}, "cpu")
    assert not set(all_visibility_keys()) & set(env)


def test_inherited_visibility_is_respected() -> None:
    cuda = get_backend("cuda")
    env = {"CUDA_VISIBLE_DEVICES": "5,6"}
    assert enumerate_devices(cuda, None, env, run_listing=lambda c: "GPU 0: X\nGPU 1: Y\n") == ("5", "6")
    # explicit indices select within the inherited set
    assert enumerate_devices(cuda, ["1"], env) == ("6",)
    with pytest.raises(UsageError, match="not an index"):
        enumerate_devices(cuda, ["2"], env)


def test_enumeration_order_listing_then_torch() -> None:
    cuda = get_backend("cuda")
    listing = "GPU 0: NVIDIA H200 (UUID: a)\nGPU 1: NVIDIA H200 (UUID: b)\n"
    assert enumerate_devices(cuda, None, {}, run_listing=lambda c: listing) == ("0", "1")
    assert enumerate_devices(cuda, None, {}, run_listing=lambda c: None, torch_count=lambda: 3) == ("0", "1", "2")
    assert enumerate_devices(cuda, ["1", "0"], {}, run_listing=lambda c: listing) == ("1", "0")
    assert enumerate_devices(cuda, ["4", "7"], {}, run_listing=lambda c: None) == ("4", "7")  # nothing to check against


def test_explicit_devices_are_checked_not_ignored() -> None:
    """--devices names devices the machine has: on an accelerator without a visibility variable,
    against the listing CLI; on the cpu backend, only 'cpu' (issue 17: 7, 'foo bar' were ignored)."""
    cuda = get_backend("cuda")
    listing = "GPU 0: NVIDIA H200 (UUID: a)\nGPU 1: NVIDIA H200 (UUID: b)\n"
    with pytest.raises(UsageError, match=r"no cuda device 7 on this machine \(nvidia-smi lists 0, 1\)"):
        enumerate_devices(cuda, ["0", "7"], {}, run_listing=lambda c: listing)
    cpu = get_backend("cpu")
    assert enumerate_devices(cpu, ["cpu"], {}) == ("cpu",)
    for bad in (["7"], ["foo bar"], ["0", "cpu"]):
        with pytest.raises(UsageError, match="has one device, 'cpu'"):
            enumerate_devices(cpu, bad, {})


def test_listing_parsers_per_vendor() -> None:
    rocm = "GPU[0]\t\t: Device ID: 0x74a1\nGPU[0]\t\t: Device Rev: 0x00\nGPU[1]\t\t: Device ID: 0x74a1\n"
    assert enumerate_devices(get_backend("rocm"), None, {}, run_listing=lambda c: rocm) == ("0", "1")
    musa = "GPU 0 : MTT S4000 (UUID : x)\nGPU 1 : MTT S4000 (UUID : y)\n"
    assert enumerate_devices(get_backend("musa"), None, {}, run_listing=lambda c: musa) == ("0", "1")
    npu = "Total Count                    : 2\n\nNPU ID                         : 0\nChip Count : 1\n\nNPU ID : 1\n"
    assert enumerate_devices(get_backend("ascend"), None, {}, run_listing=lambda c: npu) == ("0", "1")


def test_auto_detection_prefers_present_accelerator_then_cpu() -> None:
    assert detect_backend(exists=lambda p: p == "/dev/kfd", which=lambda c: None).name == "rocm"
    assert detect_backend(exists=lambda p: p.startswith("/dev/nvidia"), which=lambda c: None).name == "cuda"
    assert detect_backend(exists=lambda p: p.startswith("/dev/mtgpu"), which=lambda c: None).name == "musa"
    assert detect_backend(exists=lambda p: p == "/dev/davinci_manager", which=lambda c: None).name == "ascend"
    assert detect_backend(exists=lambda p: False, which=lambda c: "/usr/bin/npu-smi" if c == "npu-smi" else None).name == "ascend"
    assert detect_backend(exists=lambda p: False, which=lambda c: None).name == "cpu"
    assert resolve_backend("auto", exists=lambda p: False, which=lambda c: None).name == "cpu"


DSA_FOOTER = (
    "CUDA error: operation not permitted when stream is capturing\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


@pytest.mark.parametrize(
    "backend, text, expected",
    [
        ("cuda", DSA_FOOTER, CaptureFailure.RECOVERABLE),
        ("cuda", "CUDA error: an illegal memory access was encountered\n" + DSA_FOOTER.split("\n", 1)[1], CaptureFailure.FATAL),
        ("cuda", "CUDA error: device-side assert triggered", CaptureFailure.FATAL),
        ("cuda", "CUDA out of memory. Tried to allocate 2.00 GiB", CaptureFailure.FATAL),
        ("cuda", "CUDA error: misaligned address", CaptureFailure.FATAL),
        ("cuda", "CUDA error: an illegal instruction was encountered", CaptureFailure.FATAL),
        ("cuda", "CUDA error: uncorrectable ECC error encountered", CaptureFailure.FATAL),
        ("musa", "MUSA error: unknown error", CaptureFailure.POISONED),
        ("musa", "MUSA error: operation not permitted when stream is capturing", CaptureFailure.RECOVERABLE),
        ("rocm", "HIP error: an illegal memory access was encountered", CaptureFailure.FATAL),
        ("cpu", "anything", CaptureFailure.RECOVERABLE),
    ],
)
def test_capture_error_classification(backend: str, text: str, expected: CaptureFailure) -> None:
    assert classify_capture_error(get_backend(backend), text) is expected


def test_dsa_footer_alone_is_not_read_as_an_assert() -> None:
    footer_only = "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
    assert classify_capture_error(get_backend("cuda"), footer_only) is CaptureFailure.RECOVERABLE


def test_capture_deny_list_is_keyed_by_exact_op_id() -> None:
    musa = get_backend("musa")
    assert capture_denied(musa, "unique2")
    assert not capture_denied(musa, "unique")
    assert not capture_denied(musa, "Unique2")
    assert not capture_denied(get_backend("cuda"), "unique2")
    # CUDA's list was emptied when the graph timer began putting the generator's state back after a
    # failed capture: ops once denied are captured (and fall back row by row) like any other
    for op in ("unique_dim_dim1", "one_hot", "linalg_lu_factor", "amp_foreach_non_finite_check_and_unscale_"):
        assert not capture_denied(get_backend("cuda"), op)


def test_a_random_number_generator_left_capturing_is_read_from_the_backends_wording() -> None:
    from harness.backends.base import rng_left_capturing

    text = "Failed: Offset increment outside graph capture encountered unexpectedly."
    assert rng_left_capturing(get_backend("cuda"), text)
    assert not rng_left_capturing(get_backend("cuda"), "Failed: shapes do not match")
    assert not rng_left_capturing(get_backend("cpu"), text)  # no wording: never read so
