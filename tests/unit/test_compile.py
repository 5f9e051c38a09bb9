"""`harness compile`: targets, tracing a built-in op on meta tensors, the gate's rules."""

from __future__ import annotations

import pytest

from harness.compile.gate import Thresholds, judge, render_findings
from harness.compile.targets import Target, parse_targets
from harness.errors import UsageError


def test_targets_parse_with_their_warp_size() -> None:
    assert parse_targets("cuda:80, hip:gfx942,rocm:gfx1100,cuda:80") == (
        Target("cuda", 80, 32), Target("hip", "gfx942", 64), Target("hip", "gfx1100", 32))
    assert Target("cuda", 90, 32).shared_limit == 227 * 1024
    for bad in ("cuda:sm90", "musa:mp31", "hip:942", ""):
        with pytest.raises(UsageError):
            parse_targets(bad)


def test_mm_traces_to_one_launch_per_autotune_config_with_its_heuristics() -> None:
    from harness.compile.kernels import bind, expand, trace_case
    from harness.ops.registry import load_op

    mm = load_op("mm", ())
    (launch,) = trace_case(mm, (4096, 4096, 4096), "float16")
    variants = expand(launch)
    assert len(variants) == len(launch.obj.configs) == 9
    first = variants[0]
    assert first.kernel == "_mm_kernel" and first.config.startswith("config 1 of 9: BLOCK_M=128, BLOCK_N=256")
    assert (first.kwargs["EVEN_M"], first.kwargs["EVEN_N"], first.kwargs["EVEN_K"]) == (True, True, True)
    assert first.kwargs["num_warps"] == 8 and first.kwargs["num_stages"] == 3
    odd = expand(trace_case(mm, (33, 17, 24), "float16")[0])[0]
    assert odd.kwargs["EVEN_M"] is False  # the shape's specialisation, for the same config
    bound = bind(first, Target("hip", "gfx942", 64))
    assert bound.signature["a_ptr"] == "*fp16" and "BLOCK_M=128" in bound.label and "w8 s3" in bound.label
    assert bind(first, Target("hip", "gfx942", 64)).vid == bound.vid != bind(odd, Target("hip", "gfx942", 64)).vid


def _variant(vid: str, ok: bool = True, **ir: int) -> dict[str, object]:
    return {"op": "mm", "variant": vid, "target": "cuda:90", "label": f"k[{vid}]", "ok": ok,
            "error": "" if ok else "CompilationError: boom", "ir": ir, "fits": ir.get("shared", 0) <= 1000}


def test_the_gate_fails_on_a_kernel_that_stops_compiling_or_grows() -> None:
    base = {"variants": [_variant("a", regs=100, spills=0, shared=500), _variant("b", regs=100, spills=2, shared=0),
                         _variant("c"), _variant("d", regs=100), _variant("e", ok=False), _variant("gone")]}
    head = {"variants": [_variant("a", regs=112, spills=1, shared=2000), _variant("b", regs=103, spills=2, shared=0),
                         _variant("c", ok=False), _variant("d", regs=105), _variant("e"), _variant("new")]}
    findings = judge(base, head, Thresholds(pct=10, regs_abs=4, shared_abs=1024))
    bad = {(f.label, f.kind) for f in findings if f.regression}
    assert bad == {("k[a]", "registers"), ("k[a]", "spills"), ("k[a]", "shared"), ("k[a]", "no-longer-fits"),
                   ("k[c]", "stops-compiling")}  # b: +3 regs, d: +5% are under the thresholds
    info = {(f.label, f.kind) for f in findings if not f.regression}
    assert info == {("k[e]", "fixed"), ("k[new]", "new"), ("k[gone]", "gone")}
    text = render_findings(findings, "base", "head", Thresholds())
    assert text.startswith("# Compile gate: FAIL") and "| REGRESSION | stops-compiling | mm | cuda:90 | k[c]" in text
    assert judge(base, base) == []
    assert render_findings([], "b", "h", Thresholds()).startswith("# Compile gate: pass")
