"""What every timer shares: the device interface taken from the backend, budgets, results."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "Budget",
    "CaptureFatal",
    "CaptureRefused",
    "DeviceApi",
    "RESOLUTION_MS",
    "Samples",
    "Timer",
    "adaptive_samples",
    "batch_size",
    "begin_row",
    "device_api",
    "rel_spread",
    "reps_for",
    "resolved_medians",
    "side_notes",
]

# No device timer here resolves a call below 0.1 us: a median under it (the graph timer's, with the
# empty graph's cost subtracted, can be negative) means the call launched no device work or less
# than can be told from none (seen on the H200: FlagGems' conj_physical of a real bf16 tensor, whose
# graph medians were -0.00002 to 0.000003 ms on both sides, gave a speedup of -1.06).
RESOLUTION_MS = 1e-4


def resolved_medians(base_ms: float, cand_ms: float) -> tuple[float, float, tuple[str, ...]]:
    """The row's baseline and candidate medians for its speedup, GB/s and TFLOP/s, and a note for
    each side whose median is below RESOLUTION_MS; when there is one, both medians come back as 0
    and the row gets none of those numbers (a ratio of noise around zero is no number)."""
    notes = tuple(f"{side} below the timer's resolution (median {ms:.2g} ms < {RESOLUTION_MS:g} ms): it launched "
                  "no device work or too little to time; no speedup, GB/s or TFLOP/s"
                  for side, ms in (("candidate", cand_ms), ("baseline", base_ms)) if not ms >= RESOLUTION_MS)
    return (0.0, 0.0, notes) if notes else (base_ms, cand_ms, ())


@dataclass(frozen=True)
class Budget:
    """How long to warm up and to measure (ms), the bounds on repetitions, and when to stop.

    Sampling stops once the relative spread (IQR / median) is under
    ``target_spread`` or ``cap_ms`` of measuring has been spent; rows that never
    settle are marked noisy.
    """

    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    # At least 10 samples a side: with 5 against 5, a rank test cannot reach p < 0.012, so the
    # gate could never flag a slow kernel however large its change.
    min_reps: int = 10
    max_reps: int = 1000
    target_spread: float = 0.01
    cap_ms: float = 1000.0


@dataclass(frozen=True)
class Samples:
    """Raw per-call samples (ms) and how they were taken."""

    values: tuple[float, ...]
    timer: str
    noisy: bool = False
    note: str = ""  # what the row should say about how they were taken ("" : nothing)


def side_notes(candidate: Samples, baseline: Samples) -> list[str]:
    """What a row says of its two sides' samples: which did not settle, and each timer's note."""
    sides = (("candidate", candidate), ("baseline", baseline))
    return ([f"{side} noisy (IQR/median did not settle)" for side, s in sides if s.noisy]
            + [f"{side}: {s.note}" for side, s in sides if s.note])


class CaptureRefused(Exception):
    """A graph capture failed in a recoverable way: time this row with the direct timer."""

    def __init__(self, phase: str, reason: str, detail: str) -> None:
        super().__init__(f"{phase}: {reason}: {detail}")
        self.phase, self.reason, self.detail = phase, reason, detail


class CaptureFatal(Exception):
    """The kernel broke on the device during capture: the case fails, no latency is reported."""


def reps_for(budget_ms: float, estimate_ms: float, lo: int, hi: int) -> int:
    """Repetitions that fill ``budget_ms`` given one call's estimated time, clamped to [lo, hi]."""
    if estimate_ms <= 0:
        return hi
    return max(lo, min(hi, int(budget_ms / estimate_ms)))


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    s = sorted(values)

    def q(p: float) -> float:
        pos = p * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return q(0.25), q(0.5), q(0.75)


def rel_spread(values: list[float]) -> float:
    if len(values) < 2:
        return float("inf")
    q1, med, q3 = _quartiles(values)
    return (q3 - q1) / med if med > 0 else float("inf")


def batch_size(estimate_ms: float, budget: Budget) -> int:
    """Samples per batch of :func:`adaptive_samples`: enough to fill ``budget.rep_ms``."""
    return reps_for(budget.rep_ms, estimate_ms, budget.min_reps, budget.max_reps)


def adaptive_samples(
    take: Callable[[int], list[float]], estimate_ms: float, budget: Budget,
    first: list[float] | None = None, started: float | None = None,
) -> tuple[list[float], bool]:
    """Take batches of samples until the spread settles or the time cap is spent.

    ``first``: a batch already taken (by ``take(batch_size(...))``), continued from here;
    ``started``: the ``time.perf_counter()`` at which that batch began (the cap counts it).
    Returns the samples and whether the row is noisy (never settled).
    """
    n = batch_size(estimate_ms, budget)
    started = time.perf_counter() if started is None else started
    values = list(first) if first is not None else take(n)
    while rel_spread(values) > budget.target_spread:
        spent_ms = (time.perf_counter() - started) * 1e3
        if spent_ms >= budget.cap_ms or len(values) >= 4 * budget.max_reps:
            return values, True
        values += take(n)
    return values, False


@dataclass(frozen=True)
class DeviceApi:
    """The active device's streams, events, graphs and synchronize, from the backend's torch
    namespace. Nothing names ``torch.cuda`` directly, so the same timing code serves MUSA
    (torch.musa, MUSAGraph) and Ascend (torch.npu, NPUGraph)."""

    namespace: Any
    graph_class: str | None = None

    def synchronize(self) -> None:
        self.namespace.synchronize()

    def event(self) -> Any:
        return self.namespace.Event(enable_timing=True)

    def new_graph(self) -> Any:
        if not self.graph_class or not hasattr(self.namespace, self.graph_class):
            raise CaptureRefused("capture", "no-graph-api", f"torch namespace has no {self.graph_class}")
        return getattr(self.namespace, self.graph_class)()

    def graph_pool(self) -> Any | None:
        """A memory pool id of its own for one capture (``graph_pool_handle``), so that a capture
        that fails can be ended by hand (``after_failed_capture``); None where the namespace has
        no such handle (the capture then uses the pool its graph makes itself)."""
        handle = getattr(self.namespace, "graph_pool_handle", None)
        if handle is None:
            return None
        try:
            return handle()
        except Exception:  # noqa: BLE001 - a build without graphs: capture as before
            return None

    def _pool_calls(self) -> tuple[Callable[[Any, Any], None], Callable[[Any, Any], None]] | None:
        """The caching allocator's "end allocating to this pool" and "release this pool" calls
        for the namespace's device type (torch._C._cuda_endAllocateToPool and _cuda_releasePool
        for torch.cuda, CUDA and ROCm alike); None where torch has no such pair."""
        import torch

        kind = str(getattr(self.namespace, "__name__", "")).rpartition(".")[2]
        end = getattr(torch._C, f"_{kind}_endAllocateToPool", None)
        release = getattr(torch._C, f"_{kind}_releasePool", None)
        return (end, release) if callable(end) and callable(release) else None

    def after_failed_capture(self, stream_before: Any, pool: Any | None) -> list[str]:
        """Puts right what a capture that raised leaves behind, and says what it put right
        (docs/timing.md, "Capture failures": the pool ended). ``torch.cuda.graph`` leaves its side
        stream current when ``capture_end`` raises: the stream from before the capture is made
        current again ("stream"). A capture that fails at the end of the capture never ends its
        pool's allocations, so the caching allocator believes a capture is still under way and
        holds back, for the rest of the process, every freed block a second stream used: the
        pool's allocations are ended and the pool released ("pool"). Where the capture had ended
        them itself, ending them again raises and nothing is released (the graph releases its
        pool as after any capture)."""
        done: list[str] = []
        ns = self.namespace
        set_stream = getattr(ns, "set_stream", None)
        if stream_before is not None and set_stream is not None:
            try:
                if ns.current_stream() != stream_before:
                    set_stream(stream_before)
                    done.append("stream")
            except Exception:  # noqa: BLE001 - the caller's fallback synchronizes and goes on
                pass
        calls = self._pool_calls() if pool is not None else None
        if calls is not None:
            end, release = calls
            try:
                device = ns.current_device()
                end(device, pool)
            except Exception:  # noqa: BLE001 - not under way: the capture ended it
                return done
            try:
                release(device, pool)
                done.append("pool")
            except Exception:  # noqa: BLE001
                pass
        return done


def device_api(torch_namespace: str, torch_extension: str | None, graph_class: str | None = None) -> DeviceApi:
    import torch

    if torch_extension:
        importlib.import_module(torch_extension)
    return DeviceApi(namespace=getattr(torch, torch_namespace), graph_class=graph_class)


def begin_row(timer: object | None) -> None:
    """A new row starts: timers that choose per row (graph: small kernels) forget the last one."""
    begin = getattr(timer, "begin_row", None)
    if begin is not None:
        begin()


class Timer(Protocol):
    name: str

    def measure(self, fn: Callable[[], Any]) -> Samples:
        """Raw samples (ms) of ``fn``; ``fn`` has already been called once for correctness."""
        ...
