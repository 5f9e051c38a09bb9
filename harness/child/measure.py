"""One case, measured: inputs, correctness against an upcast reference, then timing.

Runs in the op's process (called from the pytest suite). Correctness
comes first: a mismatch or a NaN fails the case and nothing is timed. The device's clocks
(and temperature and power, where the backend exposes them) are read just before the
candidate's timing and just after the baseline's, so a row timed while the clocks moved can be
told apart.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from harness.backends.base import Peaks, roofline
from harness.child.timing.base import (
    CaptureFatal,
    CaptureRefused,
    Samples,
    Timer,
    begin_row,
    resolved_medians,
    side_notes,
)
from harness.contract import Case
from harness.ops.base import OpSpec
from harness.results.schema import Correctness, Fallback, Measurement, Timing

__all__ = ["CaseContext", "OpContractError", "check_close", "measure_case"]


class OpContractError(TypeError):
    """An op broke the contract of docs/ops.md (make_inputs returned no tuple, the candidate or
    the baseline returned no tensor): the case errors with this message, which names the op."""


@dataclass(frozen=True)
class CaseContext:
    """What the child knows about where it runs; copied onto every record."""

    run_id: str
    backend: str
    device: str  # physical id as the parent sees it
    torch_device: str  # what torch calls it inside the child ("cuda:0", "cpu")
    device_name: str
    timer_name: str
    cache: str
    peaks: Peaks | None = None  # the backend's datasheet ceilings, for roofline percentages
    # Reads the device's clocks, temperature and power (harness.backends.state.device_reader);
    # None where the backend exposes nothing.
    read_state: Callable[[], Mapping[str, float | None]] | None = None
    # The IR capture's launch watch (IrCapture.watching), around the untimed candidate call: the
    # case's record keeps the kernels it launched that an earlier case compiled. None: not watched.
    watch_launches: Callable[[], AbstractContextManager[None]] | None = None


def _state(ctx: CaseContext) -> dict[str, float | None]:
    if ctx.read_state is None:
        return {}
    try:
        return dict(ctx.read_state())
    except Exception:  # a reading is a diagnostic: never the reason a case fails
        return {}


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _upcast(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.float64)
    return value


# Elements per slice of a comparison: its float64 temporaries (difference, relative error, the
# masks) are a few of this size, 128 MiB each, whatever the output's size. Whole, a 1G-element
# float64 output's comparison needs about 40 GiB more than the output: on the H200 that ran
# linalg_lu_factor_ex_out's 4096x512x512 float64 row out of memory
# (benchmarks/results/flaggems-corpus-h200-2026-12-03b/README.md).
COMPARE_CHUNK = 1 << 24


def check_close(candidate: Any, reference: Any, atol: float, rtol: float,
                chunk: int = COMPARE_CHUNK) -> Correctness:
    """Compare ``candidate`` with a float64 ``reference``.

    NaN or infinity where the reference is finite fails, and so does a shape mismatch. The
    error maxima are taken over finite differences only, so a record always serialises;
    ``nonfinite`` counts the rest. The comparison runs over ``chunk`` elements at a time, so
    its memory does not grow with the output; the verdict and the figures are the whole
    tensors' (maxima of the slices' maxima, sums of their counts).
    """
    import torch

    if (candidate.dtype == reference.dtype and candidate.shape == reference.shape
            and candidate.device == reference.device and torch.equal(candidate, reference)):
        # Identical (NaN never is): one pass, no float64 copies. Integer and bool outputs can only
        # pass this way.
        n = int(reference.numel())
        return Correctness(passed=True, max_abs=0.0 if n else None, max_rel=0.0 if n else None, atol=atol,
                           rtol=rtol, nan=False, mismatched=0, numel=n, nonfinite=0)
    if candidate.shape != reference.shape:
        n = int(reference.numel())
        return Correctness(passed=False, max_abs=None, max_rel=None, atol=atol, rtol=rtol,
                           mismatched=n, numel=n,
                           shape_mismatch=f"candidate {list(candidate.shape)} vs reference {list(reference.shape)}")
    # Flat views of contiguous tensors (a copy of a strided one, in its own dtype).
    cand, ref = candidate.detach().reshape(-1), reference.detach().reshape(-1)
    n = int(ref.numel())
    nan = False
    nonfinite = mismatched = 0
    max_abs: float | None = None
    max_rel: float | None = None
    step = max(1, chunk)
    for start in range(0, n, step):
        c = cand[start:start + step].to(torch.float64)
        r = ref[start:start + step].to(torch.float64)
        nan = nan or bool(torch.isnan(c).logical_and(~torch.isnan(r)).any().item())
        nonfinite += int((~torch.isfinite(c) & torch.isfinite(r)).sum().item())
        diff = (c - r).abs()
        finite = torch.isfinite(diff)
        if bool(finite.any()):  # none: no error to report here (every element NaN or infinite)
            # Maxima over the finite differences by where(), not diff[finite]: a boolean mask
            # would make nonzero() indices (8 bytes per element and dimension).
            part_abs = float(torch.where(finite, diff, 0.0).max().item())
            rel = diff / r.abs().clamp_min(1e-12)
            part_rel = float(torch.where(finite, rel, 0.0).max().item())
            del rel
            max_abs = part_abs if max_abs is None else max(max_abs, part_abs)
            max_rel = part_rel if max_rel is None else max(max_rel, part_rel)
        # Equal values match (equal infinities too: inf - inf is NaN); an infinite reference gives
        # no tolerance (rtol * inf would accept anything, -inf against inf included).
        bad = ~((c == r) | (torch.isfinite(r) & (diff <= atol + rtol * r.abs())))
        both_nan = torch.isnan(c) & torch.isnan(r)
        mismatched += int((bad & ~both_nan).sum().item())
        del c, r, diff, finite, bad, both_nan
    return Correctness(
        passed=(mismatched == 0 and not nan and nonfinite == 0),
        max_abs=max_abs,
        max_rel=max_rel,
        atol=atol,
        rtol=rtol,
        nan=nan,
        mismatched=mismatched,
        numel=n,
        nonfinite=nonfinite,
    )


def _tensor(value: Any, op: str, what: str) -> Any:
    import torch

    if not isinstance(value, torch.Tensor):
        raise OpContractError(f"op {op!r}: {what} returned {type(value).__name__}, not a tensor (docs/ops.md: "
                              "baseline and candidate return one tensor)")
    return value


def _mismatch(c: Correctness, atol: float, rtol: float, wrong_dtype: str) -> str:
    """What failed the check, in words; error maxima only where they mean something."""
    if c.shape_mismatch:
        return f"output shape differs: {c.shape_mismatch}"
    parts = [wrong_dtype] if wrong_dtype else []
    if c.nan or c.nonfinite:
        parts.append(f"NaN in the output ({c.nonfinite} of {c.numel} elements non-finite where the reference is "
                     "finite)" if c.nan else f"{c.nonfinite} of {c.numel} elements non-finite where the reference is finite")
        if c.max_abs is not None and c.max_rel is not None:
            parts.append(f"the finite elements: max abs err {c.max_abs:.3g}, max rel err {c.max_rel:.3g}")
    elif c.mismatched:
        errors = (f"; max abs err {c.max_abs:.3g}, max rel err {c.max_rel:.3g}"
                  if c.max_abs is not None and c.max_rel is not None else "")
        parts.append(f"{c.mismatched} of {c.numel} elements outside atol={atol:g} rtol={rtol:g}{errors}")
    return "; ".join(parts) or "mismatch"


def measure_case(
    ctx: CaseContext,
    op: OpSpec,
    candidate: Callable[..., Any],
    case: Case,
    timer: Timer,
    seed: int,
    fallback_timer: Timer | None = None,
    wall_timer: Timer | None = None,
) -> Measurement:
    import torch

    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    gen = torch.Generator(device=ctx.torch_device)
    gen.manual_seed(seed)
    dtype = _torch_dtype(case.dtype)
    made = op.make_inputs(case.shape, dtype, gen, ctx.torch_device)
    if not isinstance(made, tuple | list):
        raise OpContractError(f"op {op.id!r}: make_inputs returned {type(made).__name__}, not a tuple of "
                              "the positional arguments for baseline and candidate (docs/ops.md)")
    args = tuple(made)
    with ctx.watch_launches() if ctx.watch_launches is not None else contextlib.nullcontext():
        out = _tensor(candidate(*args), op.id, "the candidate")
    reference = _tensor(op.baseline(*[_upcast(a) for a in args]), op.id, "the baseline (on float64 inputs)")
    expected = _tensor(op.baseline(*args), op.id, "the baseline")
    tol = op.tolerance(case.dtype)
    correctness = check_close(out, reference, tol.atol, tol.rtol)
    wrong_dtype = "" if out.dtype == expected.dtype else (
        f"output dtype differs: candidate {str(out.dtype).removeprefix('torch.')}, baseline "
        f"{str(expected.dtype).removeprefix('torch.')}")
    if wrong_dtype:
        correctness = replace(correctness, passed=False)
    del expected
    common: dict[str, Any] = dict(
        run_id=ctx.run_id,
        op=case.op,
        provider=case.provider,
        dtype=case.dtype,
        shape=tuple(case.shape),
        backend=ctx.backend,
        device=ctx.device,
        device_name=ctx.device_name,
        timer=ctx.timer_name,
        cache=ctx.cache,
        seed=seed,
        started_at=started,
    )
    if not correctness.passed:
        message = f"{case.case_id}: candidate does not match the reference ({_mismatch(correctness, tol.atol, tol.rtol, wrong_dtype)})"
        return Measurement(status="fail", correctness=correctness, message=message,
                           notes=("dtype_mismatch",) if wrong_dtype else (),
                           duration_s=time.perf_counter() - t0, **common)
    del reference, out
    fallback: Fallback | None = None
    state_start = _state(ctx)
    try:
        # Candidate first: a refused capture switches the whole row, so both sides share a timer.
        begin_row(timer)
        cand_s = timer.measure(lambda: candidate(*args))
        base_s = timer.measure(lambda: op.baseline(*args))
    except CaptureRefused as refused:
        if fallback_timer is None:
            raise
        fallback = Fallback(phase=refused.phase, reason=refused.reason, detail=refused.detail)
        begin_row(fallback_timer)
        cand_s = fallback_timer.measure(lambda: candidate(*args))
        base_s = fallback_timer.measure(lambda: op.baseline(*args))
    except CaptureFatal as fatal:
        common["timer"] = timer.name
        return Measurement(status="error", correctness=correctness, notes=("fatal",),
                           message=f"{case.case_id}: fatal device error, no latency reported: {fatal}",
                           duration_s=time.perf_counter() - t0, **common)
    common["timer"] = cand_s.timer
    state_end = _state(ctx)  # before the wall timer: the clocks of the device timings
    if wall_timer is not None:  # warm, back to back, host included: beside the device time
        common["candidate_wall"] = Timing.of(wall_timer.measure(lambda: candidate(*args)).values)
        common["baseline_wall"] = Timing.of(wall_timer.measure(lambda: op.baseline(*args)).values)
    notes = tuple(side_notes(cand_s, base_s))
    baseline_samples: Samples = base_s
    candidate_samples: Samples = cand_s
    base = Timing.of(baseline_samples.values, settled=not baseline_samples.noisy)
    cand = Timing.of(candidate_samples.values, settled=not candidate_samples.noisy)
    base_ms, cand_ms, floor = resolved_medians(base.summary.median, cand.summary.median)
    notes = (*notes, *floor)
    cand_sec = cand_ms * 1e-3
    itemsize = torch.empty((), dtype=dtype).element_size()
    nbytes = op.bytes_moved(case.shape, itemsize)
    flops = op.flops(case.shape)
    return Measurement(
        status="pass",
        correctness=correctness,
        baseline=base,
        candidate=cand,
        speedup=base_ms / cand_ms if cand_ms > 0 else None,
        gbps=nbytes / cand_sec / 1e9 if cand_sec > 0 else None,
        tflops=flops / cand_sec / 1e12 if cand_sec > 0 and flops else None,
        extra={
            "bytes": nbytes,
            "flops": flops,
            "baseline_gbps": nbytes / (base_ms * 1e-3) / 1e9 if base_ms > 0 else None,
            **roofline(ctx.peaks, nbytes / cand_sec / 1e9 if cand_sec > 0 else None,
                       flops / cand_sec / 1e12 if cand_sec > 0 and flops else None, case.dtype),
        },
        duration_s=time.perf_counter() - t0,
        fallback=fallback,
        notes=notes,
        device_state=({"start": state_start, "end": state_end},) if state_start or state_end else (),
        **common,
    )
