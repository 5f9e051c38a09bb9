"""The graph timer: capture an unrolled sequence of calls in a device graph, time its replays.

Replaying a graph removes the host's launch gaps that dominate event timing
of microsecond kernels. With a cold cache each call is preceded by an L2 flush
inside the graph; a second graph of flushes alone is timed too and its median
is subtracted. Capture failures are classified by the backend's own wording:
recoverable -> CaptureRefused (the row falls back to the direct timer),
fatal -> CaptureFatal, poisoned -> ContextPoisoned (the op's process stops).

Small kernels. A replayed graph still pays a fixed cost per kernel node (about 0.2-0.5 us on an
H200: benchmarks/results/timing_fidelity-h200.json), which the flush graph cannot subtract (it
has half the nodes); below a few microseconds that reads 1.15-1.3x the profiler's kernel time.
So a row whose first measurement reads under ``small_kernel_ms`` is timed by ``small_timer`` (the
profiler timer: kernel time by definition), candidate and baseline alike (``begin_row`` starts a
row; the first measured side decides: the candidate for the harness's own cases, torch's call in
FlagGems' suite, whose benchmarks time torch first). It decides on the first batch of graph
samples, and a side of a row already known to be small is not sampled as a graph at all: a small
row's graph reading would be thrown away, and it rarely settles (its flush dominates it), so it
used to cost the whole time cap. ``small_kernel_ms = 0`` switches this off
(benchmarks/small_kernels.py measures both ways).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backends.base import Backend, CaptureFailure, capture_denied, classify_capture_error
from harness.child.timing.base import (
    Budget,
    CaptureFatal,
    CaptureRefused,
    DeviceApi,
    Samples,
    Timer,
    adaptive_samples,
    batch_size,
    reps_for,
)
from harness.child.timing.direct import estimate_ms
from harness.child.timing.flush import Flusher
from harness.errors import ContextPoisoned

__all__ = ["SMALL_KERNEL_MS", "GraphTimer", "unroll_for"]

# Rows whose candidate the graph reads faster than this are timed by the small-kernel timer.
SMALL_KERNEL_MS = 0.005


def unroll_for(estimate_ms: float, target_ms: float = 2.0, most: int = 100) -> int:
    """Calls per captured graph: enough that one replay lasts about ``target_ms``."""
    if estimate_ms <= 0:
        return most
    return max(1, min(most, int(target_ms / estimate_ms)))


# A line of the runtime's own footer, on every CUDA error torch raises, besides the backend's
# CaptureErrorWording.ignore (which the classification strips too).
_FOOTER_LINES = ("might be asynchronously reported",)


# What DeviceApi.after_failed_capture says it put right, as a row's fallback detail says it.
_MENDED = {"stream": "the stream before it made current again",
           "pool": "its memory pool ended and released"}


def _links(exc: BaseException, most: int = 4) -> list[BaseException]:
    """The error and its causes, outermost first."""
    links: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(links) < most:
        links.append(seen)
        seen = seen.__cause__ or seen.__context__
    return links


def _chain(exc: BaseException, ignore: Sequence[str], limit: int) -> str:
    """An error and its causes on one line, outermost first (``outer <- cause``), each without the
    runtime's footer lines: a failed capture's outermost error is torch's generic one, the first
    error of the capture lies below it."""
    def bare(link: BaseException) -> str:
        lines = [line.strip() for line in str(link).splitlines()
                 if line.strip() and not any(piece in line for piece in (*ignore, *_FOOTER_LINES))]
        return f"{type(link).__name__}: {' '.join(lines)}"

    return " <- ".join(bare(link) for link in _links(exc))[:limit]


def _error_text(exc: BaseException) -> str:
    """The whole chain's text, for classifying the failure by the backend's wording."""
    return "\n".join(f"{type(link).__name__}: {link}" for link in _links(exc))


@dataclass
class GraphTimer:
    api: DeviceApi
    backend: Backend
    op_id: str
    flush: Flusher | None = None
    budget: Budget = field(default_factory=Budget)
    name: str = "graph"
    small_timer: Timer | None = None  # times rows of small kernels (the profiler timer); None: off
    small_kernel_ms: float = SMALL_KERNEL_MS  # 0: off
    max_unroll: int = 100  # calls per captured graph at most (benchmarks/small_kernels.py tries more)
    # Draws a random number on the device outside any capture; raises when that no longer works.
    rng_probe: Callable[[], None] | None = None
    # Takes a copy of the device generator's state and returns what puts that copy back in its
    # place; called before each capture, and what it returns after one that failed (None: no such
    # generator here). docs/timing.md, "Capture failures".
    rng_keep: Callable[[], Callable[[], None]] | None = None
    # Why this process does not capture at all (the parent's reason, ChildSpec.extra["capture_off"]:
    # an earlier attempt's capture poisoned the device context), else "".
    denied: str = ""
    # A file that exists while a capture is under way (RunFiles.capture_mark): a process that dies
    # inside a capture (a library aborting on a call it may not make while capturing) leaves it,
    # and the parent's retry captures no graph. None: no such file.
    mark: Path | None = None
    captured: bool = False  # whether this process has begun a capture (whatever came of it)
    restored: int = 0  # failed captures after which the generator's copy was put back
    pools_ended: int = 0  # failed captures whose allocator pool was ended and released by hand
    _put_back: bool = field(default=False, repr=False)  # the failure _fail classifies put the copy back
    _mended: list[str] = field(default_factory=list, repr=False)  # what after_failed_capture put right
    _row_small: bool | None = field(default=None, repr=False)
    _small_failed: str = field(default="", repr=False)  # why the small-kernel timer failed in this row

    def begin_row(self) -> None:
        """A new row starts: its first measurement decides its timer (module docstring)."""
        self._row_small = None
        self._small_failed = ""

    def _decide(self, first: list[float]) -> bool:
        """Whether this row is one of small kernels, decided once per row by its first
        measurement's first batch of graph samples (the profiler timer then times both sides)."""
        if self.small_timer is None or self.small_kernel_ms <= 0:
            return False
        if self._row_small is None:
            self._row_small = statistics.median(first) < self.small_kernel_ms
        return self._row_small

    def _small_samples(self, fn: Callable[[], Any]) -> Samples | None:
        """The small-kernel timer's samples; None where it cannot time here (no profiler): the
        row keeps the graph's readings from then on."""
        assert self.small_timer is not None
        try:
            return self.small_timer.measure(fn)
        except (ContextPoisoned, CaptureFatal):
            raise
        except Exception as exc:  # no profiler here after all: the graph's reading for the whole row
            self._row_small = False
            first = str(exc).splitlines()[0][:160] if str(exc) else ""
            self._small_failed = (f"small kernels, but the {getattr(self.small_timer, 'name', 'small-kernel')} timer "
                                  f"failed ({type(exc).__name__}: {first}): the graph's reading")
            return None

    def _fail(self, exc: BaseException, phase: str) -> Exception:
        put_back, self._put_back = self._put_back, False
        mended, self._mended = self._mended, []
        if isinstance(exc, (ContextPoisoned, CaptureRefused, CaptureFatal)):
            return exc
        text = _error_text(exc)
        kind = classify_capture_error(self.backend, text)
        ignore = self.backend.capture_errors.ignore
        if kind is CaptureFailure.POISONED:
            return ContextPoisoned(f"graph {phase}: {_chain(exc, ignore, 600)}")
        if kind is CaptureFailure.FATAL:
            return CaptureFatal(f"graph {phase}: {_chain(exc, ignore, 600)}")
        # Recoverable: make sure the device is usable again before the direct timer runs.
        with contextlib.suppress(Exception):
            self.api.synchronize()
        broken = self._rng_broken()
        if broken:
            # Seen on the H200 (torch 2.11): a capture that fails mid-way leaves the device's
            # default generator registered as capturing, and every later random draw of the
            # process raises "Offset increment outside graph capture encountered unexpectedly"
            # (FlagGems' next input, here). _capture puts a copy of the generator's state back
            # after a failed capture, which cured that on the H200 (benchmarks/capture_rng.py);
            # where it did not (or there is no copy), the process cannot go on: it ends, and a
            # retry continues after the rows already written.
            return ContextPoisoned(f"graph {phase} failed ({_chain(exc, ignore, 500)}) and left the device's random "
                                   f"number generator unusable outside capture ({broken})")
        return CaptureRefused(phase, "capture-failed", _chain(exc, ignore, 400) + (
            "; the device generator's state copied before the capture was put back" if put_back else "") + (
            f"; after the capture: {', '.join(_MENDED[m] for m in mended)}" if mended else ""))

    def _rng_broken(self) -> str:
        """Why the device's random numbers no longer work after a failed capture, or ""."""
        if self.rng_probe is None:
            return ""
        try:
            self.rng_probe()
        except Exception as exc:  # noqa: BLE001 - any failure of a plain draw says the same
            return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        return ""

    @contextlib.contextmanager
    def _scratch_rng(self) -> Iterator[None]:
        """Capture under a forked RNG state so an aborted capture leaves the global one intact."""
        ns = self.api.namespace
        if not getattr(ns, "default_generators", None):
            yield
            return
        import torch

        with torch.random.fork_rng(devices=[ns.current_device()], device_type=self.backend.device_type):
            yield

    def _capture(self, body: Callable[[], None]) -> Any:
        self.captured = True
        restore = self.rng_keep() if self.rng_keep is not None else None
        if self.mark is not None:
            with contextlib.suppress(OSError):
                self.mark.write_text(f"{os.getpid()}\n")
        try:
            return self._capture_graph(body)
        except BaseException:
            # A capture that failed left the generator's state registered as capturing on the
            # H200 (benchmarks/capture_rng.py; as we read torch's CUDAGraph.cpp, the failure
            # raises before the capture's epilogue releases it); the copy taken before it is a
            # state no capture knows, at the same seed and offset.
            if restore is not None:
                with contextlib.suppress(Exception):
                    restore()
                    self.restored += 1
                    self._put_back = True
            raise
        finally:
            if self.mark is not None:
                with contextlib.suppress(OSError):
                    self.mark.unlink(missing_ok=True)

    def _capture_graph(self, body: Callable[[], None]) -> Any:
        ns = self.api.namespace
        graph = self.api.new_graph()
        with self._scratch_rng():
            if hasattr(ns, "graph"):
                before = ns.current_stream() if hasattr(ns, "current_stream") else None
                pool = self.api.graph_pool()
                try:
                    with ns.graph(graph, **({} if pool is None else {"pool": pool})):
                        body()
                except BaseException:
                    # The stream and the allocator's pool a failed capture leaves behind
                    # (DeviceApi.after_failed_capture; docs/timing.md, "Capture failures").
                    mended = self.api.after_failed_capture(before, pool)
                    if "pool" in mended:
                        self.pools_ended += 1
                    self._mended = mended
                    raise
            else:  # a namespace without the context manager: drive the capture by hand
                stream = ns.Stream()
                stream.wait_stream(ns.current_stream())
                with ns.stream(stream):
                    graph.capture_begin()
                    try:
                        body()
                    finally:
                        graph.capture_end()
                ns.current_stream().wait_stream(stream)
        return graph

    def measure(self, fn: Callable[[], Any]) -> Samples:
        if self.denied:
            raise CaptureRefused("capture", "denied", self.denied)
        if capture_denied(self.backend, self.op_id):
            raise CaptureRefused("capture", "denied", f"{self.op_id!r} is on the {self.backend.name} capture deny list")
        api, flush = self.api, self.flush
        try:
            api.synchronize()
        except Exception as exc:
            raise self._fail(exc, "sync") from exc
        if self._row_small and self.small_timer is not None:
            # The row's first measurement found small kernels: this side goes straight to the
            # small-kernel timer, without sampling a graph whose reading would be thrown away.
            small = self._small_samples(fn)
            if small is not None:
                return small
            # The profiler timed the row's other side and failed on this one: the graph's reading
            # would make a row of two timers, so the row falls back to the direct timer, both sides.
            raise CaptureRefused("small-kernel", "profiler-failed",
                                 "the small-kernel timer timed this row's other side but failed on this one")
        try:
            fn()  # discarded: absorbs autotuning and JIT compilation
            est = estimate_ms(api, fn, None)
            for _ in range(reps_for(self.budget.warmup_ms, est, 1, self.budget.max_reps)):
                fn()
            if flush is not None:
                flush()
            api.synchronize()
        except Exception as exc:
            raise self._fail(exc, "warmup") from exc
        n = unroll_for(est, most=self.max_unroll)

        def calls() -> None:
            for _ in range(n):
                if flush is not None:
                    flush()
                fn()

        def flushes() -> None:
            assert flush is not None
            for _ in range(n):
                flush()

        try:
            g_calls = self._capture(calls)
            g_flush = self._capture(flushes) if flush is not None else None
            g_calls.replay()
            if g_flush is not None:
                g_flush.replay()
            api.synchronize()
        except Exception as exc:
            raise self._fail(exc, "capture") from exc

        flush_ms: list[float] = []

        def take(k: int) -> list[float]:
            marks = [api.event() for _ in range(3 * k)]
            for i in range(k):
                marks[3 * i].record()
                g_calls.replay()
                marks[3 * i + 1].record()
                if g_flush is not None:
                    g_flush.replay()
                marks[3 * i + 2].record()
            api.synchronize()
            totals = [marks[3 * i].elapsed_time(marks[3 * i + 1]) for i in range(k)]
            if g_flush is not None:
                flush_ms.extend(marks[3 * i + 1].elapsed_time(marks[3 * i + 2]) for i in range(k))
            base = statistics.median(flush_ms) if flush_ms else 0.0
            return [(t - base) / n for t in totals]

        graph_ms = est * n * (2 if flush is not None else 1)
        budget = Budget(
            warmup_ms=self.budget.warmup_ms,
            rep_ms=self.budget.rep_ms,
            min_reps=self.budget.min_reps,
            max_reps=max(self.budget.min_reps, min(200, self.budget.max_reps)),
            target_spread=self.budget.target_spread,
            cap_ms=self.budget.cap_ms,
        )
        began = time.perf_counter()
        try:
            first = take(batch_size(graph_ms, budget))
        except Exception as exc:  # a replay can hit the same device errors as the capture
            raise self._fail(exc, "replay") from exc
        if self._decide(first):  # small kernels: one batch decided it, the profiler times them
            small = self._small_samples(fn)
            if small is not None:
                return small
        try:
            values, noisy = adaptive_samples(take, graph_ms, budget, first=first, started=began)
        except Exception as exc:  # a replay can hit the same device errors as the capture
            raise self._fail(exc, "replay") from exc
        if statistics.median(values) <= 0:
            noisy = True
        return Samples(tuple(values), self.name, noisy, self._small_failed)
