"""Data for the HTML report tests: small synthetic runs, and a cuda run rebuilt from the
committed H200 results (benchmarks/results/h200-core-2026-11-29: run.json + summary.csv, 90 cases);
at corpus scale, the committed FlagGems corpus run, a generated run and generated histories;
and the pages built from them that the browser tests and benchmarks/page_speed.py open
(``build_pages``, ``build_thousand_op_site``).

Everything here is deterministic: the same call gives the same records, so pages built from
them can be compared byte for byte.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.backends.base import Peaks, roofline
from harness.results.render import Unreached
from harness.results.schema import Correctness, Fallback, Measurement, Timing, case_id

ROOT = Path(__file__).resolve().parents[1]
H200_DIR = ROOT / "benchmarks" / "results" / "h200-core-2026-11-29"
H200_PEAKS = Peaks(device="H200 SXM", bandwidth_gbps=4800.0, bf16_tflops=989.0)
MUSA_PEAKS = Peaks(device="MTT S4000", bandwidth_gbps=768.0, bf16_tflops=100.0)

HOSTILE = "</script><script>alert(1)</script>"
CONTROL = "bad\x00byte\x1b[31mred\x1b[0m\x07bell\x7f\u2028sep\ud800lone"


def _samples(median: float, n: int = 9) -> tuple[float, ...]:
    # A symmetric spread of about +-2% around the median, so Summary.of gives the median back.
    return tuple(median * (1 + 0.005 * (k - n // 2)) for k in range(n))


def _num(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def _elements(shape: Sequence[int]) -> int:
    return math.prod(shape)


def record(
    op: str = "softmax",
    dtype: str = "bfloat16",
    shape: Sequence[int] = (4096, 1024),
    *,
    status: str = "pass",
    provider: str = "builtin",
    backend: str = "cuda",
    device_name: str = "NVIDIA H200",
    run_id: str = "run-a",
    base_ms: float = 0.02,
    cand_ms: float = 0.01,
    itemsize: int = 2,
    flops_per_element: float = 5.0,
    peaks: Peaks | None = H200_PEAKS,
    message: str = "",
    notes: Sequence[str] = (),
    fallback: Fallback | None = None,
    timer: str = "graph",
) -> Measurement:
    """One record as measure_case would write it (throughput and roofline extras included)."""
    shape = tuple(int(d) for d in shape)
    common: dict[str, Any] = dict(
        run_id=run_id, op=op, provider=provider, dtype=dtype, shape=shape, backend=backend,
        device="0", device_name=device_name, timer=timer, cache="cold", seed=0,
        started_at="2026-11-29T17:31:45+00:00", notes=tuple(notes), fallback=fallback,
    )
    if status != "pass":
        corr = Correctness(passed=status != "fail", max_abs=0.5 if status == "fail" else None,
                           max_rel=0.25 if status == "fail" else None, atol=1e-2, rtol=1e-2,
                           mismatched=3 if status == "fail" else 0, numel=_elements(shape))
        return Measurement(status=status, correctness=corr, message=message, duration_s=0.1, **common)
    if len(shape) == 3:  # mm: M x N x K reads A and B, writes C
        m, n, k = shape
        nbytes = (m * k + k * n + m * n) * itemsize
        flops = 2.0 * m * n * k
    else:
        nbytes = 3 * _elements(shape) * itemsize
        flops = flops_per_element * _elements(shape)
    sec = cand_ms * 1e-3
    gbps = nbytes / sec / 1e9
    tflops = flops / sec / 1e12
    return Measurement(
        status="pass",
        correctness=Correctness(passed=True, max_abs=1e-3, max_rel=1e-3, atol=1e-2, rtol=1e-2,
                                numel=_elements(shape)),
        baseline=Timing.of(_samples(base_ms)),
        candidate=Timing.of(_samples(cand_ms)),
        speedup=base_ms / cand_ms,
        gbps=gbps,
        tflops=tflops,
        extra={"bytes": nbytes, "flops": flops, "baseline_gbps": nbytes / (base_ms * 1e-3) / 1e9,
               **roofline(peaks, gbps, tflops, dtype)},
        message=message,
        duration_s=0.2,
        **common,
    )


def small_run(backend: str = "cuda", device_name: str = "NVIDIA H200", run_id: str = "run-a",
              peaks: Peaks | None = H200_PEAKS) -> tuple[dict[str, Any], list[Measurement], list[Unreached]]:
    """A run of three ops with every status: passes, a mismatch, an error, a skip, and an
    op (gelu) that crashed before its cases ran. Messages carry hostile text."""
    kw: dict[str, Any] = dict(backend=backend, device_name=device_name, run_id=run_id, peaks=peaks)
    records = [
        record("softmax", "bfloat16", (4096, 1024), base_ms=0.011, cand_ms=0.006, **kw),
        record("softmax", "float16", (4096, 1024), base_ms=0.011, cand_ms=0.0065, **kw),
        record("softmax", "float32", (4096, 1024), base_ms=0.025, cand_ms=0.02, itemsize=4, **kw),
        record("softmax", "bfloat16", (16384, 8192), base_ms=0.5, cand_ms=0.21, **kw),
        record("add", "bfloat16", (1024, 1024), base_ms=0.004, cand_ms=0.005, **kw),
        record("add", "bfloat16", (16384, 16384), base_ms=0.35, cand_ms=0.34, **kw),
        record("add", "float32", (1024, 1024), status="fail", itemsize=4,
               message=f"add[builtin-float32-1024x1024]: mismatch {HOSTILE}", **kw),
        record("mm", "bfloat16", (4096, 4096, 4096), base_ms=0.2, cand_ms=0.25, **kw),
        record("mm", "float32", (4096, 4096, 4096), status="error", itemsize=4,
               message="RuntimeError: out of resources\n" + CONTROL, **kw),
        record("mm", "float16", (64, 64, 64), status="skip", message="skipped: too small", **kw),
    ]
    unreached = [Unreached(op="gelu", case_id=case_id("gelu", "builtin", "bfloat16", (4096, 4096)),
                           status="error", message="op CRASH: killed by SIGSEGV " + HOSTILE)]
    info = {
        "run_id": run_id,
        "backend": backend,
        "status": "complete-with-failures",
        "level": "core",
        "timer": "graph",
        "git_commit": "0123456789abcdef0123456789abcdef01234567",
        "git_dirty": False,
        "harness_version": "0.1.0",
        "python": "3.12.3",
        "started_at": "2026-11-29T17:31:45+00:00",
        "finished_at": "2026-11-29T17:34:34+00:00",
        "identity": {"device_name": device_name, "device_arch": "sm_90", "driver": "580.159.04",
                     "torch": "2.11.0", "triton": "3.6.0"},
        "options": {"cache": "cold", "level": "core", "ops": ["softmax", "add", "mm", "gelu"],
                    "note": HOSTILE},
        "container": {"image": None, "digest": None},
    }
    return info, records, unreached


def h200_info() -> dict[str, Any]:
    info: dict[str, Any] = json.loads((H200_DIR / "run.json").read_text())
    return info


def h200_records(info: Mapping[str, Any] | None = None, peaks: Peaks | None = H200_PEAKS,
                 backend: str | None = None, device_name: str | None = None,
                 scale: float = 1.0, torch_scale: float = 1.0) -> list[Measurement]:
    """The 90 records of the committed H200 core run, rebuilt from summary.csv.

    Raw samples were not committed, so each side gets nine samples spread around its median;
    bytes and FLOP counts are recovered from the throughput columns. ``scale`` multiplies the
    candidate latency and ``torch_scale`` torch's (a stand-in for another device in
    cross-vendor tests)."""
    info = info or h200_info()
    out: list[Measurement] = []
    with open(H200_DIR / "summary.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            base_ms = _num(row["baseline_median_ms"])
            cand_ms = _num(row["candidate_median_ms"])
            assert base_ms is not None and cand_ms is not None
            cand_ms *= scale
            base_ms *= torch_scale
            sec = cand_ms * 1e-3
            gbps_row = _num(row["gbps"])
            tflops_row = _num(row["tflops"])
            nbytes = round(gbps_row * 1e9 * sec / scale) if gbps_row else None
            flops = round(tflops_row * 1e12 * sec / scale) if tflops_row else None
            gbps = nbytes / sec / 1e9 if nbytes else None
            tflops = flops / sec / 1e12 if flops else None
            shape = tuple(int(d) for d in row["shape"].split("x"))
            out.append(Measurement(
                run_id=str(info["run_id"]), op=row["op"], provider=row["provider"],
                dtype=row["dtype"], shape=shape, backend=backend or row["backend"],
                device=row["device"], device_name=device_name or row["device_name"],
                timer=row["timer"], cache=row["cache"], status=row["status"],
                correctness=Correctness(passed=True, max_abs=_num(row["max_abs_err"]),
                                        max_rel=_num(row["max_rel_err"]), atol=1e-2, rtol=1e-2),
                baseline=Timing.of(_samples(base_ms)),
                candidate=Timing.of(_samples(cand_ms)),
                speedup=base_ms / cand_ms,
                gbps=gbps,
                tflops=tflops,
                extra={"bytes": nbytes, "flops": flops,
                       "baseline_gbps": nbytes / (base_ms * 1e-3) / 1e9 if nbytes else None,
                       **roofline(peaks, gbps, tflops, row["dtype"])},
                notes=tuple(n for n in row["notes"].split("; ") if n),
                started_at=str(info.get("started_at", "")),
            ))
    return out


def musa_like(info: Mapping[str, Any], records: Sequence[Measurement]) -> tuple[dict[str, Any], list[Measurement]]:
    """A stand-in MUSA run for the cross-vendor view: the H200 cases 8x slower (torch 8.5x)
    against MTT S4000 peaks, with two cases missing and one failing (made up: no MUSA device
    has run these)."""
    scaled = h200_records(info, peaks=MUSA_PEAKS, backend="musa", device_name="MTT S4000",
                          scale=8.0, torch_scale=8.5)
    by_id = {r.case_id: r for r in scaled}
    dropped = {records[0].case_id, records[-1].case_id}
    failing = records[1].case_id
    out: list[Measurement] = []
    for r in records:
        if r.case_id in dropped:
            continue
        m = by_id[r.case_id]
        if r.case_id == failing:
            m = Measurement(run_id="musa-run", op=m.op, provider=m.provider, dtype=m.dtype,
                            shape=m.shape, backend="musa", device="0", device_name="MTT S4000",
                            timer="direct", status="fail", message="NaN in the output")
        out.append(m)
    new_info = {**info, "run_id": "musa-run", "backend": "musa",
                "identity": {**info.get("identity", {}), "device_name": "MTT S4000",
                             "device_arch": "MP_22", "driver": "3.1.0"}}
    return new_info, [_with_run_id(m, "musa-run") for m in out]


def _with_run_id(m: Measurement, run_id: str) -> Measurement:
    return replace(m, run_id=run_id)


def history_points(ops: Sequence[str] = ("softmax", "mm"), runs: int = 8,
                   backends: Sequence[tuple[str, str]] = (("cuda", "NVIDIA H200"), ("musa", "MTT S4000")),
                   ) -> list[dict[str, Any]]:
    """Nightly points shaped like harness/compare/history.py's export rows (one per case per run),
    with a step slowdown of softmax bf16 on cuda from run 5 on (regression) and one noisy night."""
    points: list[dict[str, Any]] = []
    for b_index, (backend, device) in enumerate(backends):
        for k in range(runs):
            commit = hashlib.sha1(f"night {k}".encode()).hexdigest()  # both backends test one commit a night
            for op in ops:
                for dtype in ("bfloat16", "float32"):
                    cid = case_id(op, "builtin", dtype, (4096, 1024))
                    base = (0.01 if op == "softmax" else 0.2) * (1 + b_index) * (2 if dtype == "float32" else 1)
                    wobble = 1 + 0.01 * ((k * 7 + b_index) % 3 - 1)
                    step = 1.4 if (backend == "cuda" and op == "softmax" and dtype == "bfloat16" and k >= 5) else 1.0
                    noisy = 1.08 if (backend == "musa" and op == "mm" and dtype == "float32" and k == runs - 1) else 1.0
                    median = base * wobble * step * noisy
                    points.append({
                        "case_id": cid, "op": op, "fingerprint": f"fp-{backend}",
                        "backend": backend, "device_name": device,
                        "run_id": f"nightly-{k:02d}-{backend}",
                        "started_at": f"2026-11-{10 + k:02d}T02:00:00+00:00",
                        "git_commit": commit, "status": "pass",
                        "median_ms": median, "p10_ms": median * 0.98, "p90_ms": median * 1.03,
                        "n": 50, "torch_median_ms": base * 1.5,
                    })
    return points


def _resampled(r: Measurement, rng: Any, factor: float, torch_factor: float, run_id: str,
               n: int = 30) -> Measurement:
    assert r.candidate is not None and r.baseline is not None
    cand = Timing.of((r.candidate.summary.median * factor * rng.lognormal(0.0, 0.02, n)).tolist())
    base = Timing.of((r.baseline.summary.median * torch_factor * rng.lognormal(0.0, 0.02, n)).tolist())
    return replace(r, run_id=run_id, candidate=cand, baseline=base,
                   speedup=base.summary.median / cand.summary.median)


def comparison(hostile: bool = True) -> Any:
    """A Comparison of the H200 core run against a made-up head: softmax bf16 20% slower
    (regressions), the first add case 15% faster, one case failing in head (with a hostile
    message), one only in base (missing in head: failing too), and torch itself 2% slower
    everywhere (drift, below the threshold)."""
    import numpy as np

    from harness.compare.compare import Comparison, RunData, compare_records
    from harness.compare.stats import Criteria

    rng = np.random.default_rng(7)
    info = h200_info()
    records = h200_records(info)
    base = [_resampled(r, rng, 1.0, 1.0, "base-run") for r in records]
    head: list[Measurement] = []
    first_add = next(r.case_id for r in records if r.op == "add")
    failing = next(r.case_id for r in records if r.op == "gelu")
    gone = records[-1].case_id
    for r in records:
        if r.case_id == gone:
            continue
        if r.case_id == failing:
            head.append(Measurement(
                run_id="head-run", op=r.op, provider=r.provider, dtype=r.dtype, shape=r.shape,
                backend=r.backend, device=r.device, device_name=r.device_name, timer=r.timer,
                status="fail", message=("NaN in the output " + HOSTILE) if hostile else "NaN in the output"))
            continue
        factor = 1.2 if (r.op == "softmax" and r.dtype == "bfloat16") else (0.85 if r.case_id == first_add else 1.0)
        head.append(_resampled(r, rng, factor, 1.02, "head-run"))
    criteria = Criteria()
    rows = compare_records(base, head, criteria)
    base_info = {**info, "run_id": "base-run", "git_commit": "a" * 40}
    head_info = {**info, "run_id": "head-run", "git_commit": "b" * 40, "git_dirty": True}
    return Comparison(
        base=RunData(path=Path("reports/base-run"), info=base_info, records=tuple(base)),
        head=RunData(path=Path("reports/head-run"), info=head_info, records=tuple(head)),
        criteria=criteria, mismatches=(), rows=tuple(rows))


# ---------------------------------------------------------------------------------------------
# Corpus scale: the committed FlagGems corpus run on the H200, and a generated run of 5,000+ cases


CORPUS_DIR = ROOT / "benchmarks" / "results" / "flaggems-corpus-h200-2026-12-03c"


def corpus_run() -> tuple[dict[str, Any], list[Measurement]]:
    """The 206-op FlagGems corpus run on the H200 (benchmarks/results/flaggems-corpus-h200-2026-12-03c),
    rebuilt from its summary.csv (1,428 cases) and ops_status.csv: the folder keeps no
    records.jsonl (its runs-call*.tgz hold only the two ops re-run that session). Each timed
    side gets nine samples around its committed median, negative medians included."""
    ops = list(csv.DictReader(open(CORPUS_DIR / "ops_status.csv", newline="")))
    info: dict[str, Any] = {
        "run_id": "flaggems-corpus-h200-2026-12-03c", "backend": "cuda", "status": "complete-with-failures",
        "level": "corpus", "timer": "graph", "harness_version": "0.1.0",
        "git_commit": "07e8216000000000000000000000000000000000", "git_dirty": False,
        "started_at": "2026-12-03T18:00:00+00:00",
        "identity": {"device_name": "NVIDIA H200", "device_arch": "sm_90", "driver": "580.159.04",
                     "torch": "2.11.0", "triton": "3.6.0"},
        "options": {"cache": "cold", "suite": "flaggems"},
        "ops": [{"op": o["op"], "status": o["status"], "attempts": int(o["attempts"]),
                 "elapsed_s": float(o["elapsed_s"]), "rows": int(o["rows"]), "notes": o["notes"]} for o in ops],
    }
    records: list[Measurement] = []
    with open(CORPUS_DIR / "summary.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            base_ms, cand_ms = _num(row["baseline_median_ms"]), _num(row["candidate_median_ms"])
            passed = row["status"] == "pass"
            notes = tuple(n for n in row["notes"].split("; ") if n)
            if row["fallback"]:
                notes = (f"fallback {row['fallback']}", *notes)
            records.append(Measurement(
                run_id=info["run_id"], op=row["op"], provider=row["provider"], dtype=row["dtype"],
                shape=tuple(int(d) for d in row["shape"].split("x")) if row["shape"] else (),
                backend=row["backend"], device=row["device"], device_name=row["device_name"],
                timer=row["timer"], cache=row["cache"], status=row["status"],
                correctness=Correctness(passed=row["status"] != "fail", max_abs=_num(row["max_abs_err"]),
                                        max_rel=_num(row["max_rel_err"]), atol=1e-2, rtol=1e-2),
                baseline=Timing.of(_samples(base_ms)) if passed and base_ms is not None else None,
                candidate=Timing.of(_samples(cand_ms)) if passed and cand_ms is not None else None,
                speedup=_num(row["speedup"]) if passed else None,
                gbps=_num(row["gbps"]) if passed else None, tflops=_num(row["tflops"]) if passed else None,
                message=row["message"], notes=notes, started_at=info["started_at"],
            ))
    return info, records


def generated_run(n_ops: int = 920, cases_per_op: int = 6, seed: int = 3,
                  device_name: str = "NVIDIA H200") -> tuple[dict[str, Any], list[Measurement], list[Unreached]]:
    """A made-up run at corpus scale: ``n_ops`` ops of ``cases_per_op`` cases (5,520 by
    default) with every status, some ops slower than torch, a few impossible values, two TIMEOUT ops and one CRASH op whose cases were
    never reached. Deterministic for a given seed."""
    import random

    rng = random.Random(seed)
    records: list[Measurement] = []
    unreached: list[Unreached] = []
    op_rows: list[dict[str, Any]] = []
    dtypes = ("bfloat16", "float16", "float32")
    for k in range(n_ops):
        op = f"gen_op_{k:04d}_" + ("reduce" if k % 3 == 0 else "pointwise")
        speed = math.exp(rng.gauss(0.1, 0.5))
        crash, timeout = k == 17, k in (5, 400)
        failing = 0
        for c in range(cases_per_op):
            dtype = dtypes[c % 3]
            shape = (2 ** (6 + c), 1024)
            if crash:
                unreached.append(Unreached(op=op, case_id=case_id(op, "gen", dtype, shape), status="error",
                                           message="op CRASH: killed by SIGSEGV", provider="gen", dtype=dtype,
                                           shape=shape_text(shape)))
                continue
            roll = rng.random()
            base_ms = 0.01 * 2 ** c * (1 + rng.random())
            kw: dict[str, Any] = dict(provider="gen", device_name=device_name, run_id="generated-run")
            if roll < 0.06:
                failing += 1
                records.append(record(op, dtype, shape, status="fail", message=(
                    f"{op}: mismatch, max abs error {rng.random():.3f}\nassert_close failed at index {c}"), **kw))
            elif roll < 0.08:
                failing += 1
                records.append(record(op, dtype, shape, status="error", message=(
                    "RuntimeError: CUDA error: an illegal memory access was encountered"), **kw))
            elif roll < 0.1:
                records.append(record(op, dtype, shape, status="skip", message="skipped: dtype not supported", **kw))
            else:
                cand_ms = base_ms / (speed * math.exp(rng.gauss(0, 0.15)))
                r = record(op, dtype, shape, base_ms=base_ms, cand_ms=cand_ms, **kw)
                if k % 97 == 0 and c == 0:  # an impossible value now and then, as the corpus has
                    assert r.candidate is not None
                    r = replace(r, gbps=(r.gbps or 0) * 200)
                records.append(r)
        status = "CRASH" if crash else ("TIMEOUT" if timeout else ("FAIL" if failing else "PASS"))
        op_rows.append({"op": op, "status": status, "attempts": 1, "elapsed_s": 12.5, "rows": cases_per_op,
                        "notes": "no exit within --op-timeout 600s" if timeout else (
                            "killed by SIGSEGV" if crash else "")})
    info = {
        "run_id": "generated-run", "backend": "cuda", "status": "complete-with-failures", "level": "core",
        "timer": "graph", "harness_version": "0.1.0", "git_commit": "f" * 40, "git_dirty": False,
        "started_at": "2026-12-03T02:00:00+00:00",
        "identity": {"device_name": device_name, "device_arch": "sm_90", "driver": "580.159.04",
                     "torch": "2.11.0", "triton": "3.6.0"},
        "options": {"cache": "cold"}, "ops": op_rows,
    }
    return info, records, unreached


def shape_text(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape)


FIVE_BACKENDS = (("cuda", "NVIDIA H200"), ("cuda", "NVIDIA A100-SXM4-80GB"), ("musa", "MTT S4000"),
                 ("rocm", "AMD Instinct MI300X"), ("ascend", "Ascend910B2"))


def nightly_history(n_ops: int = 40, nights: int = 30, cases_per_op: int = 2,
                    backends: Sequence[tuple[str, str]] = FIVE_BACKENDS[:2]) -> list[dict[str, Any]]:
    """Points of ``nights`` nightly runs, one a day at 02:00 UTC, shaped like the history
    export plus ``environment`` and ``library_commit``: every op's cases on every backend, with
    a step slowdown of every seventh op's first case on the first backend from night 20 on
    (a regression with a library commit range), a night 12 on which every eleventh op fails,
    and torch 2.11 -> 2.12 on night 15 (a software-change marker, the same series)."""
    points: list[dict[str, Any]] = []
    for b, (backend, device) in enumerate(backends):
        for night in range(nights):
            day = f"2026-11-{1 + night:02d}" if night < 30 else f"2026-12-{night - 29:02d}"
            commit = hashlib.sha1(f"harness {night}".encode()).hexdigest()
            library = hashlib.sha1(f"library {night}".encode()).hexdigest()
            env = {"torch": "2.11.0" if night < 15 else "2.12.0", "triton": "3.6.0"}
            for k in range(n_ops):
                op = f"op_{k:04d}"
                for c in range(cases_per_op):
                    cid = case_id(op, "builtin", "bfloat16", (1024 * (c + 1), 1024))
                    base = 0.01 * (1 + k % 13) * (c + 1) * (1 + b)
                    wobble = 1 + 0.01 * ((night * 7 + k + c) % 3 - 1)
                    step = 1.35 if (b == 0 and c == 0 and k % 7 == 0 and night >= 20) else 1.0
                    failed = night == 12 and k % 11 == 0
                    median = base * wobble * step
                    points.append({
                        "case_id": cid, "op": op, "fingerprint": f"fp-{backend}-{b}-{env['torch']}",
                        "backend": backend, "device_name": device, "run_id": f"nightly-{night:02d}-{b}",
                        "started_at": f"{day}T02:{10 * b:02d}:00+00:00", "git_commit": commit,
                        "library_commit": library, "environment": env,
                        "status": "fail" if failed else "pass",
                        "median_ms": None if failed else median, "p10_ms": None if failed else median * 0.98,
                        "p90_ms": None if failed else median * 1.03, "n": 50, "torch_median_ms": base * 1.4,
                    })
    return points


# ---------------------------------------------------------------------------------------------
# The pages themselves, as the browser tests and benchmarks/page_speed.py open them


def write_site(site: Mapping[str, str], folder: Path) -> Path:
    """Write a history site ({relative path: text}) into ``folder``; its landing page."""
    for rel, text in site.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder / "index.html"


def build_pages(out: Path) -> dict[str, Path]:
    """Every kind of page, written into ``out``: name -> file. Besides the small pages, at
    corpus scale: the committed 206-op FlagGems corpus run on the H200 (``run-corpus``), the
    generated run of 5,520 cases over 920 ops (``run-generated``) and a history of 30 nights
    of 40 ops on two devices (``history-index``, ``history-regressions``, ``history-op``)."""
    from harness.compare.page import render_compare_html
    from harness.results.html import render_across_html, render_history_site, render_run_html

    info = h200_info()
    records = h200_records(info)
    musa_info, musa_records = musa_like(info, records)
    small_info, small_records, small_unreached = small_run()
    corpus_info, corpus_records = corpus_run()
    gen_info, gen_records, gen_unreached = generated_run()
    out.mkdir(parents=True, exist_ok=True)
    texts = {
        "run-h200": render_run_html(info, records, [], H200_PEAKS),
        "run-failures": render_run_html(small_info, small_records, small_unreached, H200_PEAKS),
        "run-corpus": render_run_html(corpus_info, corpus_records, [], H200_PEAKS),
        "run-generated": render_run_html(gen_info, gen_records, gen_unreached, H200_PEAKS),
        "compare": render_compare_html(comparison(), title="Performance comparison (gate)"),
        "across": render_across_html([(info, records), (musa_info, musa_records)]),
    }
    files = {}
    for name, text in texts.items():
        path = out / f"{name}.html"
        path.write_text(text, encoding="utf-8")
        files[name] = path
    site = render_history_site(history_points(), commit_url="https://example.org/commit/{commit}")
    files["small-site-index"] = write_site(site, out / "site")
    files["small-site-op"] = out / "site" / "ops" / "softmax.html"
    site30 = render_history_site(nightly_history(n_ops=40, nights=30),
                                 commit_url="https://example.org/commit/{commit}")
    files["history-index"] = write_site(site30, out / "site30")
    files["history-regressions"] = out / "site30" / "regressions.html"
    files["history-op"] = out / "site30" / "ops" / "op_0007.html"
    return files


def build_thousand_op_site(out: Path) -> Path:
    """A generated history of 1,000 ops on 5 backends over 30 nights (150,000 points), the
    whole site written into ``out``; its landing page."""
    from harness.results.html import render_history_site

    site = render_history_site(nightly_history(n_ops=1000, nights=30, cases_per_op=1, backends=FIVE_BACKENDS))
    return write_site(site, out)
