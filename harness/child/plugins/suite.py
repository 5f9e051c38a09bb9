"""pytest plugin loaded into FlagGems' own benchmark run (``harness run --suite``).

It pins the device and records the run identity like the harness's device plugin, and it
replaces FlagGems' timer with the harness's for the length of the session.

Why a patch: FlagGems' ``Benchmark.get_latency`` (benchmark/performance_utils.py) calls
``triton.testing.do_bench`` (``triton.musa_testing.do_bench`` on MUSA) and offers no hook
to time otherwise. It looks the function up on the module at every call, so replacing the
module attribute is the one narrow way in. The replacement lives only here, is installed in
pytest_configure and the originals are put back in pytest_unconfigure. Triton's autotuners
took their reference to do_bench when FlagGems' kernels were defined, before this runs, so
FlagGems' autotuning keeps Triton's own timer.

Also written: every timed call (value returned plus raw samples) to the spec's timings
sidecar, and failed benchmark items to the failures sidecar, for the parent to read.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.backends import get_backend
from harness.child.plugins.identity import probe_accelerator, probe_cpu, write_identity
from harness.child.timing.base import Budget, Timer, device_api
from harness.child.timing.cpu import CpuTimer
from harness.child.timing.direct import DirectTimer
from harness.child.timing.flush import Flusher
from harness.contract import ChildSpec
from harness.suite.timings import TimingEntry, bench_result

SPEC_OPTION = "--harness-suite-spec"
_SWAP_KEY = pytest.StashKey["DoBenchSwap"]()


def _append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()


@dataclass
class DoBenchSwap:
    """The harness's do_bench, installed on Triton's testing module(s) and taken out again."""

    timer: Timer
    sidecar: Path
    originals: list[tuple[Any, Any]] = field(default_factory=list)
    calls: int = 0

    def do_bench(
        self,
        fn: Callable[[], Any],
        warmup: Any = None,
        rep: Any = None,
        grad_to_none: Any = None,
        quantiles: Any = None,
        return_mode: str = "mean",
        **_ignored: Any,
    ) -> float | list[float]:
        # warmup/rep are FlagGems' budgets for Triton's timer; the harness timer uses its own.
        samples = self.timer.measure(fn)
        result = bench_result(samples.values, quantiles, return_mode)
        self.calls += 1
        _append(self.sidecar, TimingEntry(self.calls, result, samples.values, samples.timer, samples.noisy).to_json())
        return result

    def install(self) -> None:
        import triton.testing

        modules = [triton.testing]
        musa = getattr(sys.modules.get("triton"), "musa_testing", None)
        if musa is not None and hasattr(musa, "do_bench"):
            modules.append(musa)
        for module in modules:
            self.originals.append((module, module.do_bench))
            module.do_bench = self.do_bench

    def restore(self) -> None:
        while self.originals:
            module, original = self.originals.pop()
            module.do_bench = original


def _flag_gems_facts() -> dict[str, Any]:
    module = sys.modules.get("flag_gems")
    if module is None:
        return {}
    return {"flag_gems": {"version": str(getattr(module, "__version__", "unknown")),
                          "vendor": str(getattr(module, "vendor_name", "unknown")),
                          "device": str(getattr(module, "device", "unknown"))}}


def _timer(spec: ChildSpec, api: Any, l2_bytes: int | None) -> Timer:
    if spec.timer == "cpu" or api is None:
        timer = CpuTimer(budget=Budget(warmup_ms=spec.warmup_ms, rep_ms=min(spec.rep_ms, 50.0), min_reps=3,
                                       max_reps=50, target_spread=0.05, cap_ms=200.0))
        if api is not None:
            timer.synchronize = api.synchronize
        return timer
    flush = Flusher(f"{get_backend(spec.backend).device_type}:0", l2_bytes) if spec.cache == "cold" else None
    return DirectTimer(api=api, flush=flush, budget=Budget(warmup_ms=spec.warmup_ms, rep_ms=spec.rep_ms))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(SPEC_OPTION, help="child spec JSON written by `harness run --suite`")


@dataclass
class FailureSink:
    """Registered as a plugin while the suite runs: failed benchmark items, for the parent."""

    path: Path

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        lines = (report.longreprtext or str(report.longrepr)).splitlines()
        errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]  # pytest's "E   <error>" lines
        last = next((ln for ln in reversed(errors) if ln), None) or next(
            (ln.strip() for ln in reversed(lines) if ln.strip()), "failed")
        _append(self.path, json.dumps({"nodeid": report.nodeid, "when": report.when, "message": last[-500:]}))


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption(SPEC_OPTION)
    if not path:
        return  # loaded without a spec: stay out of the way
    spec = ChildSpec.load(Path(path))
    backend = get_backend(spec.backend)
    api = None
    if backend.torch_namespace is not None:
        api = device_api(backend.torch_namespace, backend.torch_extension)
        api.namespace.set_device(0)
        identity = probe_accelerator(backend, api.namespace)
    else:  # only the harness's own tests drive a (fake) suite on the cpu backend
        identity = probe_cpu()
    identity.update(_flag_gems_facts())
    write_identity(spec.run_dir, spec.device, identity)
    swap = DoBenchSwap(timer=_timer(spec, api, identity.get("l2_bytes")), sidecar=Path(spec.extra["timings"]))
    swap.install()
    config.stash[_SWAP_KEY] = swap
    config.pluginmanager.register(FailureSink(Path(spec.extra["failures"])), "harness-suite-failures")


def pytest_unconfigure(config: pytest.Config) -> None:
    swap = config.stash.get(_SWAP_KEY, None)
    if swap is not None:
        swap.restore()
