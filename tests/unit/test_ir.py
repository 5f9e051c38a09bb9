"""IR capture: Triton's compilation listener on ahead-of-time compiles (no GPU needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.ir.capture import IrCapture, nvidia_tools
from harness.ir.meta import (
    KernelIR,
    amdgcn_resources,
    constexpr_values,
    cuobjdump_resources,
    target_label,
)

AMDGCN_NOTES = """
    .sgpr_count:     19
    .sgpr_spill_count: 0
    .vgpr_count:     9
    .vgpr_spill_count: 3
; ScratchSize: 16
; LDSByteSize: 4096 bytes/workgroup (compile time only)
"""


def test_amdgcn_notes_give_registers_and_spills() -> None:
    assert amdgcn_resources(AMDGCN_NOTES) == {"regs": 9, "sgprs": 19, "spills": 3, "sgpr_spills": 0,
                                              "scratch": 16, "lds": 4096}
    assert amdgcn_resources("no notes here") == {}


def test_cuobjdump_local_bytes_count_as_spills_in_words() -> None:
    text = " Function k:\n  REG:40 STACK:16 SHARED:0 LOCAL:24 CONSTANT[0]:392 TEXTURE:0\n"
    assert cuobjdump_resources(text) == {"regs": 40, "spills": 6}
    assert cuobjdump_resources("") == {}


def test_constexprs_are_named_by_argument() -> None:
    assert constexpr_values({(2,): 128, (3,): True, (0, 1): "x"}, ["a", "b", "BLOCK", "EVEN"]) == {
        "BLOCK": 128, "EVEN": True, "a[1]": "x"}
    assert target_label({"backend": "hip", "arch": "gfx942"}) == "hip:gfx942"


def test_summary_keeps_what_a_record_needs() -> None:
    k = KernelIR.from_metadata({"name": "k", "hash": "ab" * 20, "target": {"backend": "cuda", "arch": 90},
                                "num_warps": 4, "num_stages": 3, "num_ctas": 1, "shared": 0},
                               {"BLOCK": 64}, {"x": "*fp16"}, compile_ms=12.5)
    s = k.with_resources({"regs": 32, "spills": 0}).summary()
    assert s == {"name": "k", "hash": ("ab" * 20)[:16], "target": "cuda:90", "num_warps": 4, "num_stages": 3,
                 "num_ctas": 1, "shared": 0, "regs": 32, "spills": 0, "constexprs": {"BLOCK": 64},
                 "compile_ms": 12.5, "cache_hit": False}


@pytest.fixture()
def triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from triton import knobs

    monkeypatch.setattr(knobs.cache, "dir", str(tmp_path / "cache"))
    return tmp_path


def _compile(target: object) -> object:
    import triton
    from triton.compiler import ASTSource

    from tests.data.aot_kernels import scale

    src = ASTSource(fn=scale, signature={"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32", "BLOCK": "constexpr"},
                    constexprs={(3,): 256}, attrs={})
    return triton.compile(src, target=target, options={"num_warps": 4})


@pytest.mark.parametrize(("backend", "arch", "warp", "assembly"),
                         [("hip", "gfx942", 64, "amdgcn"), ("cuda", 80, 32, "ptx")])
def test_the_listener_keeps_each_compilation_with_its_case(triton_cache: Path, backend: str, arch: object,
                                                           warp: int, assembly: str) -> None:
    from triton.backends.compiler import GPUTarget

    capture = IrCapture(tools=nvidia_tools(), sass=False)
    capture.install()
    try:
        capture.begin_case()
        _compile(GPUTarget(backend, arch, warp))
        _compile(GPUTarget(backend, arch, warp))  # again: from the Triton cache
        summary = capture.end_case(triton_cache / "ir" / "case", "ir/case")
    finally:
        capture.uninstall()
    assert summary is not None and summary["dir"] == "ir/case"
    first, again = summary["kernels"]
    assert (first["name"], first["target"], first["num_warps"]) == ("scale", f"{backend}:{arch}", 4)
    assert first["constexprs"] == {"BLOCK": 256}
    assert first["cache_hit"] is False and again["cache_hit"] is True
    assert first["compile_ms"] > again["compile_ms"] >= 0
    if backend == "hip" or nvidia_tools().get("cuobjdump"):
        assert first["regs"] > 0 and first["spills"] == 0
    kept = triton_cache / "ir" / "case" / f"scale-{first['hash'][:10]}"
    assert (kept / f"scale.{assembly}").is_file() and (kept / "scale.ttgir").is_file()
    meta = json.loads((kept / "meta.json").read_text())
    assert meta["signature"] == {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32"}
    assert capture.end_case(triton_cache / "ir" / "next") is None  # nothing compiled since


def test_a_case_that_launches_a_kernel_compiled_earlier_keeps_its_ir(triton_cache: Path) -> None:
    """The kernel is compiled for real (cuda:80, no device here); its load and launches are Triton's
    own hook chains called as the launcher calls them, since nothing launches on this machine."""
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import LazyDict

    capture = IrCapture(sass=False)
    capture.install()
    try:
        capture.begin_case()
        kernel: Any = _compile(GPUTarget("cuda", 80, 32))
        first = capture.end_case(triton_cache / "ir" / "first", "ir/first")
        knobs.runtime.kernel_load_end_hook(None, 0xBEEF, "scale", kernel.metadata_group, kernel.hash)

        def launch() -> None:
            knobs.runtime.launch_enter_hook(LazyDict({"name": "scale", "function": 0xBEEF, "stream": 0}))

        capture.begin_case()
        launch()  # not watched (a timed call): not noted
        assert capture.end_case(triton_cache / "ir" / "timed") is None
        capture.begin_case()
        with capture.watching():
            launch()
            launch()
        second = capture.end_case(triton_cache / "ir" / "second", "ir/second")
        capture.begin_case()
        with capture.watching():
            knobs.runtime.launch_enter_hook(LazyDict({"name": "other", "function": 0xF00D, "stream": 0}))
        assert capture.end_case(triton_cache / "ir" / "unknown") is None  # a kernel this process never compiled
    finally:
        capture.uninstall()
    assert first is not None and "reused" not in first["kernels"][0]
    assert second is not None and second["compile_ms"] == 0  # compiled (and counted) by the first case
    (again,) = second["kernels"]
    assert again["reused"] is True and again["hash"] == first["kernels"][0]["hash"]
    assert (triton_cache / "ir" / "second" / f"scale-{again['hash'][:10]}" / "scale.ttgir").is_file()
    assert capture.launch_enter not in knobs.runtime.launch_enter_hook.calls  # taken out after each block
    assert capture.loaded not in knobs.runtime.kernel_load_end_hook.calls  # and at uninstall


def test_a_hook_slot_of_an_older_triton_is_chained_and_given_back() -> None:
    from types import SimpleNamespace

    from harness.ir.capture import _hook_in

    seen: list[str] = []
    slots = SimpleNamespace(launch_enter_hook=lambda metadata: seen.append("theirs"))
    theirs = slots.launch_enter_hook
    remove = _hook_in(slots, "launch_enter_hook", lambda metadata: seen.append("ours"))
    slots.launch_enter_hook({})
    remove()
    slots.launch_enter_hook({})
    assert seen == ["ours", "theirs", "theirs"] and slots.launch_enter_hook is theirs
