"""FlagGems' ``Benchmark.get_latency``, taken over: the harness times, checks and records each row.

Every FlagGems benchmark (both layouts, custom ``run()`` methods included) measures through
``Benchmark.get_latency(self, op, *args, **kwargs)``: first torch's op (the baseline), then
FlagGems' (``self.gems_op``, or torch's op inside ``flag_gems.use_gems()``) on the same argument
objects. :class:`LatencySeam` answers those calls in the op process:

- baseline call: copy the arguments before anything runs (in-place ops mutate them), compute
  torch's output from a copy, time the call with the harness's timer;
- candidate call: compute FlagGems' output from the untouched copy, compare it with torch's
  (tolerance by dtype; a mismatch fails the row), time the call, and append one Measurement to
  records.jsonl;
- the harness's own tensor work never runs inside FlagGems' ``use_gems()``: there every aten op
  it registers (``abs``, ``isnan``, boolean-mask indexing, ``sum``...) runs FlagGems' kernels,
  with FlagGems' bugs (its mask indexing cannot launch past 4,194,240 selected elements on CUDA:
  "Triton Error [CUDA]: invalid argument"). A candidate called inside ``use_gems()`` is timed
  there (a mismatch is timed too), and its comparison waits for the next call outside it (the
  next input's torch call, or the item's end), when the row is written; a candidate called
  outside it (an explicit ``gems_op``) is compared at once, and a mismatch is not timed;
- backward benchmarks (``is_backward``): the timed call is ``autograd.grad`` of the op's output,
  as FlagGems' own; the comparison covers the output and the gradients for one ``dout``. Such a
  call is timed direct, never graph-captured (``AUTOGRAD_NOT_CAPTURED`` says why).

Graph capture failures split three ways as for the harness's own cases: recoverable -> the row
is timed by the direct timer (both sides), with the reason; fatal -> an error row; poisoned
-> an error row, then the process ends under ``POISONED_EXIT``. Other exceptions become error
rows and FlagGems' loop goes on to its next input. The latency returned to FlagGems is the
median the harness measured, so FlagGems' own printout stays meaningful; at least the timers'
resolution (``RESOLUTION_MS``), since FlagGems divides by it: a call that launches no device work
(FlagGems' range benchmark runs torch.range on the CPU) reads 0 or less, and the harness's own
row already says it is below the resolution.

Hook points: the timers come from ``harness.child.plugins.timing.timers_for``;
:meth:`LatencySeam.measure` is the one place a call is timed (and ``SuiteTimers.wall``, when
set, times it again as a user makes it: the ``wall`` plugin's columns); :class:`RowWriter` is
the one place a row is written, and its :class:`RowHook` list is told when a row's calls begin
and adds fields to its record (autotune record/replay: the row's ``autotune`` marker; IR
capture: its ``ir`` summary; harness.child.plugins.suite installs them).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

from harness.backends.base import Peaks
from harness.child.input_shapes import entry_for, input_plan, planned_inputs
from harness.child.measure import roofline
from harness.child.outputs import (
    clone_tree,
    compare_outputs,
    describe_args,
    dtype_name,
    first_tensor_shape,
)
from harness.child.plugins.records import write_record
from harness.child.timing.base import (
    RESOLUTION_MS,
    CaptureFatal,
    CaptureRefused,
    Samples,
    Timer,
    begin_row,
    resolved_medians,
    side_notes,
)
from harness.contract import POISONED_EXIT
from harness.errors import ContextPoisoned
from harness.results.causes import NO_TORCH_OUTPUT
from harness.results.schema import Correctness, Fallback, Measurement, Timing, case_id

__all__ = ["LatencySeam", "RowContext", "RowHook", "RowWriter", "SuiteTimers"]

NO_SHAPE: tuple[int, ...] = ()
NO_DTYPE = "any"  # rows of a benchmark function that failed or was skipped before any input
_POISONED_COUNT = ("poisoned", ())  # RowWriter.counts' key of the poisoned rows (no dtype is named so)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class SuiteTimers:
    primary: Timer
    fallback: Timer | None  # the direct timer behind a graph timer
    denied: str = ""  # why graph capture is not tried for this op (its capture deny list entry), else ""
    wall: Timer | None = None  # the wall timer (a call with its host dispatch), beside the device time

    def begin_row(self) -> None:
        """A new row: the graph timer decides afresh whether its kernels are small."""
        begin_row(self.primary)
        begin_row(self.fallback)


@dataclass(frozen=True)
class RowContext:
    """What every row of this op process shares."""

    run_id: str
    op: str
    provider: str
    backend: str
    device: str
    device_name: str
    cache: str
    seed: int
    records: Path
    skip_cases: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()  # said on every row (a --shapes-file entry that was not applied)
    unchecked: str = ""  # why outputs are not compared for this op (random ops), else ""
    peaks: Peaks | None = None


class RowHook(Protocol):
    """Something that watches each row's calls and adds to its record (autotune, IR)."""

    def begin(self) -> None:
        """A row's calls are about to run."""

    def fields(self, case: str) -> Mapping[str, Any]:
        """Fields of the record of row ``case``, from what happened since :meth:`begin`."""
        ...

    def written(self) -> None:
        """The row's record is on disk."""


@dataclass
class RowWriter:
    """Case ids (a second input of the same dtype and shape gets ``provider.v2``) and records."""

    ctx: RowContext
    counts: dict[tuple[str, tuple[int, ...]], int] = field(default_factory=dict)
    written: int = 0
    hooks: list[RowHook] = field(default_factory=list)

    def begin(self) -> None:
        for hook in self.hooks:
            hook.begin()

    def key(self, dtype: str, shape: tuple[int, ...]) -> tuple[str, str]:
        """(provider, case id) of the next row of this dtype and shape."""
        n = self.counts.get((dtype, shape), 0) + 1
        self.counts[(dtype, shape)] = n
        provider = self.ctx.provider if n == 1 else f"{self.ctx.provider}.v{n}"
        return provider, case_id(self.ctx.op, provider, dtype, shape)

    def recorded(self, key: str) -> bool:
        return key in self.ctx.skip_cases

    def write(self, provider: str, dtype: str, shape: tuple[int, ...], status: str, timer: str,
              direction: str = "forward", notes: Sequence[str] = (), **fields: Any) -> Measurement:
        ctx = self.ctx
        for hook in self.hooks:
            fields.update(hook.fields(case_id(ctx.op, provider, dtype, tuple(shape))))
        record = Measurement(
            run_id=ctx.run_id, op=ctx.op, provider=provider, dtype=dtype, shape=tuple(shape),
            backend=ctx.backend, device=ctx.device, device_name=ctx.device_name, timer=timer,
            status=status, cache=ctx.cache, seed=ctx.seed, direction=direction,
            notes=tuple(dict.fromkeys([*notes, *ctx.notes])), **fields,
        )
        write_record(ctx.records, record)
        self.written += 1
        for hook in self.hooks:
            hook.written()
        return record

    def poisoned(self, message: str, timer: str, facts: Mapping[str, Any], direction: str = "forward") -> None:
        """The row of a benchmark function that failed because the process is poisoned. Its case id
        is numbered apart from the other rows (``<provider>.poisoned``, then ``.poisoned2``...): the
        retry, which captures nothing, writes no such row, and must not shift the numbers of the
        rows it does write (a later function's skip or error row would take this one's id and be
        dropped as recorded)."""
        n = self.counts.get(_POISONED_COUNT, 0) + 1
        self.counts[_POISONED_COUNT] = n
        provider = f"{self.ctx.provider}.poisoned{'' if n == 1 else n}"
        self._no_input(provider, case_id(self.ctx.op, provider, NO_DTYPE, NO_SHAPE), NO_DTYPE, "error", message,
                       timer, facts, direction, ("poisoned",))

    def other(self, status: str, message: str, timer: str, facts: Mapping[str, Any], dtype: str = NO_DTYPE,
              direction: str = "forward", notes: Sequence[str] = ()) -> None:
        """A row that timed nothing (a skipped dtype, a benchmark that failed before any input)."""
        provider, key = self.key(dtype, NO_SHAPE)
        self._no_input(provider, key, dtype, status, message, timer, facts, direction, notes)

    def _no_input(self, provider: str, key: str, dtype: str, status: str, message: str, timer: str,
                  facts: Mapping[str, Any], direction: str, notes: Sequence[str]) -> None:
        if not self.recorded(key):
            self.begin()
            self.write(provider, dtype, NO_SHAPE, status, timer, direction=direction, notes=notes, message=message,
                       started_at=_now(), extra={"suite": dict(facts)})


# Why a backward benchmark's rows are not graph-captured. Its timed call is autograd.grad of an
# output whose forward ran before, outside the capture; autograd runs each backward kernel on the
# stream its forward op used, not on the capture's stream, so the capture is broken. On the H200
# all four such FlagGems benchmarks run so far (ctc_loss_backward, embedding_backward,
# gather_backward, avg_pool2d_backward) poisoned the context at their first capture, while backward
# ops called directly (index_select_backward, slice_backward...) were captured. Not yet run on a
# GPU with this rule; capturing them would need the forward run on the capture's stream.
AUTOGRAD_NOT_CAPTURED = ("autograd.grad is not captured: its kernels run on the forward's stream, "
                         "outside the capture")


def _autograd(bench: Any) -> bool:
    """A backward benchmark (FlagGems' ``is_backward``): its timed call is ``autograd.grad``."""
    return bool(getattr(bench, "is_backward", False))


def _handed(ms: float) -> float:
    """What FlagGems gets back: the median, never under the timers' resolution (FlagGems divides
    by it; a call that launched no device work reads 0, or less on the graph timer)."""
    return ms if ms >= RESOLUTION_MS else RESOLUTION_MS


def _median(samples: Samples | None) -> float:
    """What FlagGems gets back from get_latency (ms): the median the harness measured."""
    return float(statistics.median(samples.values)) if samples is not None and samples.values else 1.0


def _identity(value: Any) -> tuple[int, ...]:
    return tuple(id(v) for v in value)


@dataclass
class _Pending:
    """A baseline call waiting for its candidate."""

    bench: Any
    arg_ids: tuple[int, ...]
    dtype: str
    shape: tuple[int, ...]
    provider: str
    key: str
    facts: dict[str, Any]
    direction: str
    notes: list[str]
    started: float
    started_at: str
    skip: bool = False
    snapshot: Any = None  # (args, kwargs) copied before anything ran
    reference: Any = None  # torch's outputs (and mutated inputs, gradients)
    dout: Any = None
    error: str = ""
    baseline: Samples | None = None
    baseline_wall: Samples | None = None
    baseline_fn: Callable[[], Any] | None = None
    fallback: Fallback | None = None
    no_reference: bool = False  # torch's side returned None: the row is timed, not compared


@dataclass
class _Timed:
    """A row whose both sides ran: what its record needs, and what is left to do outside
    FlagGems' ``use_gems()`` before it is written."""

    pending: _Pending
    bench: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    samples: Samples
    correctness: Correctness | None
    outputs: Any = None  # FlagGems' outputs, still to be compared with torch's
    retime: bool = False  # torch's side is to be timed again by the direct timer
    wall: Samples | None = None


class LatencySeam:
    """The replacement of ``Benchmark.get_latency`` and ``Benchmark.set_dtypes`` for one op process."""

    def __init__(self, writer: RowWriter, timers: SuiteTimers, dtypes: Sequence[str],
                 under_gems: Callable[[], bool] = lambda: False, level: str = "",
                 input_shapes: Mapping[str, Sequence[Sequence[int]]] | None = None) -> None:
        self.writer = writer
        # --shapes-file entries for benchmarks that build their inputs from shapes of their own
        # (harness.child.input_shapes); the note of each benchmark's rows by id(bench)
        self.input_shapes: Mapping[str, Sequence[Sequence[int]]] = dict(input_shapes or {})
        self.shape_notes: dict[int, str] = {}
        self.timers = timers
        self.dtypes = tuple(dtypes)  # requested; () = every dtype each benchmark declares
        self.under_gems = under_gems
        self.level = level
        self.pending: _Pending | None = None
        self.item = ""  # the pytest node running now
        self.item_rows = 0
        self.current_dtype: Any = None
        self.rescued: dict[int, str] = {}  # id(bench) -> the dtype-rescue note of its rows
        # function node id -> the dtypes among its kept nodes' parameters (a function parametrized
        # by dtype: an asked dtype another of its nodes runs gets no skip row from this one)
        self.sibling_dtypes: dict[str, set[str]] = {}
        self.deferred: _Timed | None = None  # a row to complete outside use_gems() (compare, time torch again)
        # The IR capture's launch watch (IrCapture.watching), around FlagGems' untimed calls: a row keeps
        # the kernels it launched that an earlier row compiled. None: not watched.
        self.watch_launches: Callable[[], AbstractContextManager[None]] | None = None

    def _watched(self) -> AbstractContextManager[None]:
        return self.watch_launches() if self.watch_launches is not None else contextlib.nullcontext()

    # -- items ---------------------------------------------------------------------------------

    def begin_item(self, nodeid: str) -> None:
        self.item, self.item_rows, self.current_dtype = nodeid, 0, None

    def end_item(self) -> None:
        self.complete_deferred()
        self.flush_pending("FlagGems' benchmark timed only torch for this input (no FlagGems call followed)")

    def _facts(self, bench: Any = None, **more: Any) -> dict[str, Any]:
        facts: dict[str, Any] = {"nodeid": self.item, "level": self.level}
        if bench is not None:
            facts.update(op_name=str(getattr(bench, "op_name", "")), bench_class=type(bench).__name__,
                         inplace=bool(getattr(bench, "is_inplace", False)),
                         autograd=_autograd(bench))
        facts.update(more)
        return facts

    def _direction(self, bench: Any) -> str:
        names = (self.item, str(getattr(bench, "op_name", "")))
        return "backward" if _autograd(bench) or any("backward" in n for n in names) else "forward"

    def item_outcome(self, status: str, message: str) -> None:
        """A failed or skipped benchmark function: its row (FlagGems' reason), unless it already
        wrote rows for this reason (a failure after some inputs still gets one)."""
        if status == "skip" and self.item_rows:
            return
        self.writer.other(status, message, self.timers.primary.name, self._facts(),
                          direction="backward" if "backward" in self.item else "forward")
        self.item_rows += 1

    def item_poisoned(self, message: str) -> NoReturn:
        """A benchmark function failed because an earlier failed capture of this process left the
        device's generator registered as capturing (FlagGems' next input could not be drawn; the
        graph timer's probe right after the capture had passed). Its row says so, marked poisoned,
        and the process ends as for a poisoned context: the op is a CRASH, and its retry captures
        nothing and continues after the rows already written."""
        self.writer.poisoned(f"poisoned: {message} (an earlier graph capture of this op process left the "
                             "device's random number generator unusable)", self.timers.primary.name, self._facts(),
                             direction="backward" if "backward" in self.item else "forward")
        os._exit(POISONED_EXIT)

    def captured(self) -> bool:
        """Whether this process's timer has begun a graph capture (one that failed counts)."""
        return bool(getattr(self.timers.primary, "captured", False))

    # -- dtypes --------------------------------------------------------------------------------

    def set_dtypes(self, bench: Any, original: Callable[[Any, Any], None], user_dtypes: Any) -> None:
        """Narrow the benchmark to the requested dtypes it declares; a requested dtype it lacks
        gets a skip row (unless another node of its function runs it); when it declares none of
        them, it runs its own (dtype rescue)."""
        original(bench, user_dtypes)
        self._track_inputs(bench)
        if not self.dtypes:
            return
        declared = [d for d in getattr(bench, "dtypes", []) or [] if d is not None]
        by_name = {dtype_name(d): d for d in declared}
        chosen = [by_name[name] for name in self.dtypes if name in by_name]
        own = ", ".join(by_name) or "none"
        op_name = str(getattr(bench, "op_name", ""))
        if not chosen:
            bench.to_bench_dtypes = list(declared)
            self.rescued[id(bench)] = (f"dtype rescue: FlagGems' {op_name} benchmark declares none of "
                                       f"{', '.join(self.dtypes)}; ran its own dtypes ({own})")
            return
        bench.to_bench_dtypes = chosen
        siblings = self.sibling_dtypes.get(self.item.split("[", 1)[0], set())
        for name in self.dtypes:
            if name not in by_name and name not in siblings:
                self.writer.other("skip", f"FlagGems' {op_name} benchmark does not declare {name} (it declares {own}); "
                                  f"FlagGems refuses it: \"Given dtype(s) can't be supported by this op\"",
                                  self.timers.primary.name, self._facts(bench), dtype=name,
                                  direction=self._direction(bench))
                self.item_rows += 1

    def _track_inputs(self, bench: Any) -> None:
        """Know the dtype of each input: FlagGems' loop does not pass it to get_latency."""
        original = bench.get_input_iter
        if getattr(original, "_harness_tracked", False):
            return
        seam = self

        def tracked(dtype: Any) -> Iterator[Any]:
            for item in seam._inputs(bench, original, dtype):
                seam.current_dtype = dtype
                yield item

        tracked._harness_tracked = True  # type: ignore[attr-defined]
        bench.get_input_iter = tracked

    def _inputs(self, bench: Any, original: Callable[[Any], Iterator[Any]], dtype: Any) -> Iterator[Any]:
        """The benchmark's inputs, from the --shapes-file entry that matches it where it builds them
        (called when FlagGems starts iterating: after its set_shapes)."""
        entry = entry_for(bench, self.input_shapes)
        if entry is None:
            return original(dtype)
        plan = input_plan(bench, entry[0], entry[1], original)
        if plan.note:
            self.shape_notes[id(bench)] = plan.note
        return planned_inputs(bench, plan, original, dtype)

    # -- get_latency ---------------------------------------------------------------------------

    def get_latency(self, bench: Any, op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
        pending = self.pending
        ids = _identity(args) + _identity(kwargs.values())
        gems_op = getattr(bench, "gems_op", None)
        explicit = gems_op is not None and op is gems_op
        if pending is not None and pending.bench is bench and (
                ids == pending.arg_ids or op is not getattr(bench, "torch_op", None) or self.under_gems()):
            self.pending = None
            return _handed(self._candidate(pending, bench, op, args, kwargs, ids))
        if pending is not None:
            self.flush_pending("FlagGems' benchmark timed only torch for this input (no FlagGems call followed)")
        if explicit or self.under_gems():
            return _handed(self._alone(bench, op, args, kwargs))
        self.complete_deferred()  # outside use_gems(): the previous row's comparison and torch re-timing
        return _handed(self._baseline(bench, op, args, kwargs, ids))

    def _dtype(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        if self.current_dtype is not None:
            return dtype_name(self.current_dtype)
        import torch

        first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        return dtype_name(first.dtype) if first is not None else NO_DTYPE

    def _start(self, bench: Any, args: tuple[Any, ...], kwargs: dict[str, Any], ids: tuple[int, ...]) -> _Pending:
        dtype = self._dtype(args, kwargs)
        shape = first_tensor_shape(args, kwargs)
        provider, key = self.writer.key(dtype, shape)
        notes = [n for n in (self.rescued.get(id(bench)), self.shape_notes.get(id(bench))) if n]
        self.item_rows += 1
        if not self.writer.recorded(key):
            self.writer.begin()
            self.timers.begin_row()
        return _Pending(bench=bench, arg_ids=ids, dtype=dtype, shape=shape, provider=provider, key=key,
                        facts=self._facts(bench, shape_detail=describe_args(args, kwargs)),
                        direction=self._direction(bench), notes=notes, started=time.perf_counter(),
                        started_at=_now(), skip=self.writer.recorded(key))

    def _baseline(self, bench: Any, op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  ids: tuple[int, ...]) -> float:
        pending = self._start(bench, args, kwargs, ids)
        self.pending = pending
        if pending.skip:  # recorded by an earlier attempt (resume, retry)
            return 1.0
        try:
            pending.snapshot = clone_tree((args, kwargs))
            if not self.writer.ctx.unchecked:
                snap_args, snap_kwargs = clone_tree(pending.snapshot)
                pending.reference, pending.dout = self._outputs(bench, op, snap_args, snap_kwargs, None)
            fn = self._timed_fn(bench, op, args, kwargs)
            pending.baseline_fn = fn
            pending.baseline, pending.fallback = self.measure(fn, _autograd(bench))
            pending.baseline_wall = self.measure_wall(fn)
        except ContextPoisoned as poisoned:
            self._poisoned(pending, poisoned)
        except CaptureFatal as fatal:
            pending.error = f"torch's call: fatal device error during graph capture: {fatal}"
        except Exception as exc:  # noqa: BLE001 - the row says what torch's call raised
            pending.error = f"torch's call raised {type(exc).__name__}: {str(exc)[:500]}"
        return _median(pending.baseline)

    def _timed_fn(self, bench: Any, op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[], Any]:
        """What FlagGems' get_latency times: the call, or for a backward benchmark autograd.grad
        of its output (the forward built once, here, inside use_gems for FlagGems' side)."""
        if not _autograd(bench):
            return lambda: op(*args, **kwargs)
        import torch

        out = op(*args, **kwargs)
        dout = torch.randn_like(out)
        xs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        return lambda: torch.autograd.grad((out,), xs, grad_outputs=(dout,), retain_graph=True)

    def _outputs(self, bench: Any, op: Callable[..., Any], args: Any, kwargs: Any, dout: Any) -> tuple[Any, Any]:
        """(what to compare, the dout used): the output, the inputs an in-place or ``out=`` call
        wrote, and for a backward benchmark the gradients for ``dout`` (made from the first
        call's output when None)."""
        import torch

        out = op(*args, **kwargs)
        compared: list[Any] = [out]
        if getattr(bench, "is_inplace", False) or "out" in kwargs:
            compared.append([a for a in args if isinstance(a, torch.Tensor)])
        if _autograd(bench):
            xs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
            if dout is None:
                gen = torch.Generator(device=out.device).manual_seed(self.writer.ctx.seed)
                dout = torch.randn(out.shape, dtype=out.dtype, device=out.device, generator=gen)
            compared.append(list(torch.autograd.grad((out,), xs, grad_outputs=(dout,))))
        return compared, dout

    def measure(self, fn: Callable[[], Any], autograd: bool = False) -> tuple[Samples, Fallback | None]:
        """Time ``fn`` with the primary timer; a refused graph capture (or a denied one) times it
        with the direct timer and says why. ``autograd`` (a backward benchmark's
        ``autograd.grad``) is never captured: see AUTOGRAD_NOT_CAPTURED."""
        timers = self.timers
        if timers.denied and timers.fallback is not None:
            return timers.fallback.measure(fn), Fallback("capture", "denied", timers.denied)
        if autograd and timers.fallback is not None:
            return timers.fallback.measure(fn), Fallback("capture", "autograd", AUTOGRAD_NOT_CAPTURED)
        try:
            return timers.primary.measure(fn), None
        except CaptureRefused as refused:
            if timers.fallback is None:
                raise
            return timers.fallback.measure(fn), Fallback(refused.phase, refused.reason, refused.detail)

    def measure_wall(self, fn: Callable[[], Any]) -> Samples | None:
        """The call as a user makes it (host dispatch and launch included), when the wall timer is on."""
        return self.timers.wall.measure(fn) if self.timers.wall is not None else None

    def _candidate(self, pending: _Pending, bench: Any, op: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any], ids: tuple[int, ...]) -> float:
        base_ms = _median(pending.baseline)
        if pending.skip:
            return base_ms
        try:
            return self._finish(pending, bench, op, args, kwargs, ids, base_ms)
        except ContextPoisoned as poisoned:
            self._poisoned(pending, poisoned)

    def _poisoned(self, pending: _Pending, poisoned: ContextPoisoned) -> NoReturn:
        """The device context is dead: the row says so and the op's process ends now (FlagGems'
        loop would catch the exception and carry on with a dead context); the run goes on."""
        self._row(pending, "error", message=f"poisoned: {poisoned}", extra_notes=("poisoned",))
        os._exit(POISONED_EXIT)

    def _finish(self, pending: _Pending, bench: Any, op: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any], ids: tuple[int, ...], base_ms: float) -> float:
        if pending.error:
            self._row(pending, "error", message=pending.error)
            return base_ms
        correctness: Correctness | None = None
        unchecked = self.writer.ctx.unchecked
        if not unchecked and ids != pending.arg_ids:
            unchecked = "torch and FlagGems were given different inputs by the benchmark; outputs not compared"
        if not unchecked and _returned_none(pending.reference):
            # The benchmark's torch side gives nothing to compare with: a defect of the benchmark,
            # not a wrong output. The row is timed and written as a skip that says so.
            pending.no_reference = True
            unchecked = NO_TORCH_OUTPUT
        if unchecked:
            pending.notes.append(unchecked)
        later = self.under_gems()  # torch's ops here run FlagGems' kernels: compare after use_gems()
        got: Any = None
        try:
            if not unchecked:
                snap_args, snap_kwargs = pending.snapshot
                with self._watched():
                    got, _ = self._outputs(bench, op, snap_args, snap_kwargs, pending.dout)
                pending.snapshot = None
                if not later:
                    correctness = self._compare(pending, got)
                    got = None
                    if correctness is None:
                        return base_ms
            fn = self._timed_fn(bench, op, args, kwargs)
            if unchecked and self.watch_launches is not None:
                with self._watched():  # no untimed call was made: one, to see what it launches
                    fn()
            fallback: Fallback | None = pending.fallback
            if fallback is not None and self.timers.fallback is not None:
                samples = self.timers.fallback.measure(fn)  # torch's side fell back: so does this one
            else:
                samples, fallback = self.measure(fn, _autograd(bench))
            wall = self.measure_wall(fn)
        except CaptureFatal as fatal:
            self._row(pending, "error", correctness=correctness, message=f"fatal device error, no latency: {fatal}",
                      extra_notes=("fatal",))
            return base_ms
        except (ContextPoisoned, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - FlagGems' call raised: the row says so, the loop goes on
            self._row(pending, "error", correctness=correctness,
                      message=f"FlagGems' call raised {type(exc).__name__}: {str(exc)[:500]}")
            return base_ms
        # One timer per row: a candidate that fell back has torch's side timed again by the direct
        # timer. That, and a comparison, wait until the next call outside FlagGems' use_gems()
        # (torch's calls here would run FlagGems' kernels): the row is completed there.
        retime = fallback is not None and pending.fallback is None
        if retime:
            pending.fallback = fallback
        done = _Timed(pending, bench, args, kwargs, samples, correctness, outputs=got, retime=retime, wall=wall)
        if retime or got is not None:
            self.deferred = done
        else:
            self._passed(done)
        return _median(samples)

    def _compare(self, pending: _Pending, got: Any) -> Correctness | None:
        """Compare FlagGems' outputs with torch's (outside use_gems()); None when they differ or
        the comparison raised: the row is written (failed, or an error)."""
        try:
            comparison = compare_outputs(got, pending.reference, pending.dtype)
        except (ContextPoisoned, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - the row says what the comparison raised
            self._row(pending, "error", message=f"comparing FlagGems' outputs with torch's raised "
                                                f"{type(exc).__name__}: {str(exc)[:500]}")
            return None
        finally:
            pending.reference = None
        pending.notes.extend(comparison.notes)
        if not comparison.correctness.passed:
            self._row(pending, "fail", correctness=comparison.correctness,
                      message=_mismatch(pending.key, comparison.correctness))
            return None
        return comparison.correctness

    def complete_deferred(self) -> None:
        """Complete the row left by a candidate inside use_gems(), now outside it: compare its
        outputs, time torch's side again with the direct timer where the candidate fell back,
        and write it."""
        done, self.deferred = self.deferred, None
        if done is None:
            return
        pending = done.pending
        if done.outputs is not None:
            got, done.outputs = done.outputs, None
            try:
                done.correctness = self._compare(pending, got)
            except ContextPoisoned as poisoned:
                self._poisoned(pending, poisoned)
            if done.correctness is None:
                return  # written failed (a mismatch) or as an error
        if done.retime:
            assert self.timers.fallback is not None and pending.baseline_fn is not None
            try:
                pending.baseline = self.timers.fallback.measure(pending.baseline_fn)
            except ContextPoisoned as poisoned:
                self._poisoned(pending, poisoned)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # noqa: BLE001
                self._row(pending, "error", message=f"torch's call raised {type(exc).__name__} when timed again by "
                                                    f"the direct timer: {str(exc)[:500]}")
                return
        self._passed(done)

    def _passed(self, done: _Timed) -> None:
        pending, bench, args, kwargs, samples, correctness = (done.pending, done.bench, done.args, done.kwargs,
                                                              done.samples, done.correctness)
        assert pending.baseline is not None
        base, cand = Timing.of(pending.baseline.values), Timing.of(samples.values)
        base_ms, cand_ms, floor = resolved_medians(base.summary.median, cand.summary.median)
        gbps, base_gbps = _gbps(bench, args, cand_ms), _gbps(bench, args, base_ms)
        flops = _flops(bench, args, kwargs)
        tflops = flops / (cand_ms * 1e-3) / 1e12 if flops and cand_ms > 0 else None
        notes = side_notes(samples, pending.baseline) + list(floor)
        extra: dict[str, Any] = {"suite": pending.facts}
        if flops:
            extra["flops"] = flops
        if base_gbps is not None:
            extra["baseline_gbps"] = base_gbps
        extra.update(roofline(self.writer.ctx.peaks, gbps, tflops, pending.dtype))
        walls: dict[str, Timing] = {}
        if done.wall is not None and pending.baseline_wall is not None:
            walls = {"candidate_wall": Timing.of(done.wall.values), "baseline_wall": Timing.of(pending.baseline_wall.values)}
        if pending.no_reference:
            self._row(pending, "skip", timer=samples.timer, baseline=base, candidate=cand, gbps=gbps, tflops=tflops,
                      message=NO_TORCH_OUTPUT, extra_notes=tuple(notes), extra=extra, **walls)
            return
        self._row(pending, "pass", timer=samples.timer, correctness=correctness, baseline=base, candidate=cand,
                  speedup=base_ms / cand_ms if cand_ms > 0 else None, gbps=gbps, tflops=tflops,
                  extra_notes=tuple(notes), extra=extra, **walls)

    def _row(self, pending: _Pending, status: str, timer: str | None = None, extra_notes: Sequence[str] = (),
             extra: dict[str, Any] | None = None, **fields: Any) -> None:
        self.writer.write(pending.provider, pending.dtype, pending.shape, status,
                          timer or (pending.baseline.timer if pending.baseline else self.timers.primary.name),
                          direction=pending.direction, notes=[*pending.notes, *extra_notes],
                          fallback=pending.fallback, started_at=pending.started_at,
                          duration_s=time.perf_counter() - pending.started,
                          extra=extra if extra is not None else {"suite": pending.facts}, **fields)

    def _alone(self, bench: Any, op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
        """A FlagGems call with no torch call before it: timed, not compared (no reference)."""
        pending = self._start(bench, args, kwargs, ())
        if pending.skip:
            return 1.0
        try:
            samples, pending.fallback = self.measure(self._timed_fn(bench, op, args, kwargs), _autograd(bench))
        except ContextPoisoned as poisoned:
            self._poisoned(pending, poisoned)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001
            self._row(pending, "error", message=f"FlagGems' call raised {type(exc).__name__}: {str(exc)[:500]}")
            return 1.0
        self._row(pending, "skip", timer=samples.timer,
                  message="FlagGems' benchmark timed only FlagGems for this input (no torch call before it): "
                          f"{_median(samples):.6g} ms, nothing to compare with",
                  candidate=Timing.of(samples.values))
        return _median(samples)

    def flush_pending(self, message: str) -> None:
        pending, self.pending = self.pending, None
        if pending is None or pending.skip:
            return
        if pending.error:
            self._row(pending, "error", message=pending.error)
            return
        self._row(pending, "skip", message=message,
                  baseline=Timing.of(pending.baseline.values) if pending.baseline else None)


def _returned_none(reference: Any) -> bool:
    """Whether torch's side of a row returned None and wrote no input (``_outputs`` gives
    ``[None]``): there is nothing to compare FlagGems' output with."""
    return isinstance(reference, list) and len(reference) == 1 and reference[0] is None


def _mismatch(key: str, c: Correctness) -> str:
    if c.shape_mismatch:
        what = f"output shape differs: {c.shape_mismatch}"
    elif c.nan:
        what = "NaN in FlagGems' output where torch's is finite"
    elif c.nonfinite:
        what = f"{c.nonfinite} non-finite value(s) where torch's output is finite"
    else:
        what = f"{c.mismatched} of {c.numel} elements outside atol={c.atol:g} rtol={c.rtol:g}"
    errors = (f"; max abs err {c.max_abs:.3g}, max rel err {c.max_rel:.3g}"
              if c.max_abs is not None and c.max_rel is not None else "")
    return f"{key}: FlagGems' output does not match torch's ({what}){errors}"


def _overrides(bench: Any, name: str) -> bool:
    """Whether a class below FlagGems' Benchmark defines ``name`` (it states bytes or FLOPs)."""
    for cls in type(bench).__mro__:
        if name in vars(cls):
            return cls.__name__ != "Benchmark"
    return False


def _gbps(bench: Any, args: Sequence[Any], latency_ms: float) -> float | None:
    """GB/s by the benchmark's own get_gbps, where it states its bytes (a class overrides it,
    or it measures gbps itself)."""
    metrics = getattr(bench, "to_bench_metrics", None) or []
    if latency_ms <= 0 or not (_overrides(bench, "get_gbps") or "gbps" in metrics):
        return None
    try:
        value = bench.get_gbps(list(args), latency=latency_ms)
    except Exception:  # noqa: BLE001 - the base class raises NotImplementedError: no byte count
        return None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _flops(bench: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> float | None:
    """FLOPs by the benchmark's get_tflops (it returns a count), where it states them."""
    metrics = getattr(bench, "to_bench_metrics", None) or []
    if not (_overrides(bench, "get_tflops") or "tflops" in metrics):
        return None
    try:
        value = bench.get_tflops(bench.torch_op, *args, **kwargs)
    except Exception:  # noqa: BLE001
        return None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None

