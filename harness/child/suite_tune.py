"""FlagGems' ``get_latency`` in a sweep process of a suite op: its share of FlagGems' calls runs once,
so the autotuners (Triton's, FlagGems' LibTuner) tune their keys; nothing is timed or checked and
no record is written (harness/run/sweep.py; the measurement that follows replays what was tuned).

A suite op's cases are not known before its process runs (FlagGems' benchmark makes its inputs),
so a sweep process's share cannot be a list of case ids. It is the op process's own numbering: every
FlagGems call of the op (the second call of a pair, or a FlagGems call alone), numbered 0, 1, 2...
in the order FlagGems' loops make them; sweep process ``index`` of ``count`` runs the calls whose number
``i`` has ``i % count == index``, and lets the others (and every torch call) return at once.
FlagGems' inputs are seeded per benchmark function and its loops are deterministic, so every sweep process
numbers the same calls alike (a call a sweep process skips may leave the random state elsewhere; values
change, shapes and dtypes, which make the autotune keys, do not).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.child.latency_seam import (
    LatencySeam,
    RowContext,
    RowHook,
    RowWriter,
    SuiteTimers,
    _Pending,
)
from harness.results.schema import Measurement

__all__ = ["TuneSeam"]

SKIPPED_MS = 1.0  # what FlagGems gets back from a call this process did not run or time


class _NoRows(RowWriter):
    """Case ids as the measurement numbers them; nothing is written."""

    def write(self, provider: str, dtype: str, shape: tuple[int, ...], status: str, timer: str,
              direction: str = "forward", notes: Any = (), **fields: Any) -> Measurement:
        ctx = self.ctx
        return Measurement(run_id=ctx.run_id, op=ctx.op, provider=provider, dtype=dtype, shape=tuple(shape),
                           backend=ctx.backend, device=ctx.device, timer=timer, status=status)


class TuneSeam(LatencySeam):
    """The sweep process's answer to ``get_latency`` (and ``set_dtypes``, as the measurement's)."""

    def __init__(self, ctx: RowContext, timers: SuiteTimers, dtypes: tuple[str, ...], index: int, count: int,
                 recorder: RowHook | None, under_gems: Callable[[], bool] = lambda: False,
                 synchronize: Callable[[], None] = lambda: None, level: str = "") -> None:
        super().__init__(_NoRows(ctx), timers, dtypes, under_gems=under_gems, level=level)
        self.index, self.count = index, max(count, 1)
        self.recorder = recorder  # the autotune hook: begin() before each call of the share, written() after
        self.synchronize = synchronize
        self.calls = 0  # FlagGems calls seen, this sweep process's or not
        self.outcomes: dict[str, str] = {}  # row case id (or pytest node) -> "ok" | "skip: ..." | "error: ..."

    def mine(self, number: int) -> bool:
        return number % self.count == self.index

    # -- the calls ------------------------------------------------------------------------------

    def _baseline(self, bench: Any, op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  ids: tuple[int, ...]) -> float:
        self.pending = self._start(bench, args, kwargs, ids)  # torch's call: nothing of FlagGems' to tune
        return SKIPPED_MS

    def _candidate(self, pending: _Pending, bench: Any, op: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any], ids: tuple[int, ...]) -> float:
        return self._tune(pending, bench, op, args, kwargs)

    def _alone(self, bench: Any, op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
        return self._tune(self._start(bench, args, kwargs, ()), bench, op, args, kwargs)

    def _tune(self, pending: _Pending, bench: Any, op: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> float:
        number = self.calls
        self.calls += 1
        if not self.mine(number):
            return SKIPPED_MS
        if self.recorder is not None:
            self.recorder.begin()
        try:
            self._timed_fn(bench, op, args, kwargs)()  # a backward benchmark: its forward, then the gradients
            self.synchronize()
            outcome = "ok"
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - the sweep process's result says which call failed and why
            outcome = f"error: FlagGems' call raised {type(exc).__name__}: {str(exc)[:500]}"
        finally:
            if self.recorder is not None:
                self.recorder.written()  # the configs on disk before the next call
        if outcome != "ok" or pending.key not in self.outcomes:  # an error of a row is kept
            self.outcomes[pending.key] = outcome
        return SKIPPED_MS

    # -- what the measurement would have written ----------------------------------------------

    def flush_pending(self, message: str) -> None:
        self.pending = None

    def complete_deferred(self) -> None:
        self.deferred = None

    def item_outcome(self, status: str, message: str) -> None:
        """A benchmark function that failed or skipped outside the calls: an error fails the sweep process
        (the measurement would error on it too), a skip is noted."""
        if status == "skip" and self.item_rows:
            return
        self.outcomes[self.item or "collection"] = f"{status}: {message}"
