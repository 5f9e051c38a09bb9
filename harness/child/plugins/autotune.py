"""Autotune record/replay in the op's process: the part that touches Triton.

Finds the ``triton.runtime.autotuner.Autotuner`` objects reachable from the op (the globals
of the candidate's module and of the op's own candidate's module, plus an optional
``harness_autotuners()`` there), seeds their caches from ``--replay-from`` before the first
case, and gives the suite the ``harness_autotune`` fixture that marks each row and writes
``autotune/<op>.json``. Formats: harness/autotune.py; the logic on
autotuner objects: harness/autotune_tuners.py.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.autotune.store import OpAutotune, TunedConfig, op_autotune_path, read_op_autotune
from harness.autotune.sweep import SweepFiles, sweep_failed
from harness.autotune.tuners import AutotuneRecorder, find_autotuners, name_tuners
from harness.child.plugins.session import HarnessSession
from harness.contract import ChildSpec

__all__ = ["autotuners_in", "build_recorder", "harness_autotune", "library_modules", "module_names", "record_path",
           "recorder_for", "replay_for"]


def _is_autotuner(obj: Any) -> bool:
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # no Triton in this process: nothing to record
        return False
    return isinstance(obj, Autotuner)


def _make_config(entry: TunedConfig) -> Any:
    """A triton.Config for a recorded entry, passing only the options this Triton's Config takes."""
    import triton

    accepted = inspect.signature(triton.Config).parameters
    options = {name: getattr(entry, name) for name in ("num_warps", "num_stages", "num_ctas", "maxnreg")
               if getattr(entry, name) is not None and name in accepted}
    return triton.Config(dict(entry.kwargs), **options)


def module_names(callables: Sequence[Any]) -> list[str]:
    """Modules of the callables and of what they wrap (``__wrapped__``, ``func``, ``fn``)."""
    names: list[str] = []
    for obj in callables:
        for _ in range(5):
            if isinstance(obj, functools.partial):
                obj = obj.func
                continue
            name = getattr(obj, "__module__", None)
            if isinstance(name, str) and name not in names:
                names.append(name)
            fields = vars(obj) if hasattr(obj, "__dict__") else {}
            obj = fields.get("__wrapped__") or fields.get("fn")
            if obj is None:
                break
    return names


def library_modules(package: str) -> list[str]:
    """Every loaded module of a library: ``flag_gems`` and its submodules (a FlagGems op reaches
    kernels of other modules, mm's split-k and stream-k paths, each under its own LibTuner), and
    the modules it imported under names of their own from files inside its folders. FlagGems loads
    its vendor and architecture backends so, with runtime/backend/_<vendor>/ put on sys.path:
    ``_nvidia.ops``, ``hopper.ops.mm`` (on an H200 the mm it dispatches to lives there, seen
    2026-12-01 with FlagGems 5.3.4: a suite mm swept 0 keys while its autotuners tuned). The
    mm_cluster plugin finds the Hopper mm's cluster path among them."""
    root = sys.modules.get(package)
    folders = tuple(os.path.join(str(p), "") for p in (getattr(root, "__path__", None) or ()))
    names = []
    for name, module in list(sys.modules.items()):
        if name == package or name.startswith(package + "."):
            names.append(name)
            continue
        path = vars(module).get("__file__") if hasattr(module, "__dict__") else None  # no lazy __getattr__
        if folders and isinstance(path, str) and path.startswith(folders):
            names.append(name)
    return sorted(names)


def autotuners_in(names: Sequence[str]) -> list[Any]:
    """The autotuners (Triton's, FlagGems' LibTuner) in the named modules that are loaded."""
    return find_autotuners([sys.modules[n] for n in names if n in sys.modules], _is_autotuner)


def recorder_for(op: str, path: Path, replay: OpAutotune | None, names: Sequence[str]) -> AutotuneRecorder:
    """A recorder over the autotuners (Triton's, FlagGems' LibTuner) in the named modules,
    seeded from ``replay``. The suite mode calls this in FlagGems' pytest process after
    collection (flag_gems imported) with ``library_modules("flag_gems")``
    (harness.child.plugins.suite)."""
    tuners = name_tuners(autotuners_in(names))
    return AutotuneRecorder(op=op, path=path, tuners=tuners, replay=replay, make_config=_make_config)


def replay_for(spec: ChildSpec) -> OpAutotune | None:
    """What the op's process replays: a sweep's merged configs (``spec.replay.file``), a run's
    (``spec.replay.run_dir``), or None (tune live). The parent checked every file of a ``replay_from``
    source; an op the source did not run has none, and each of its autotuned cases is then
    tuned live and marked replay-miss. A sweep that failed left no merged configs and says so in
    its summary: the op then tunes live, serially, in its own process."""
    replay_file = spec.replay.file  # a sweep's merged configs (harness.autotune.sweep)
    if replay_file:
        path = Path(replay_file)
        if not path.is_file() and sweep_failed(SweepFiles(Path(spec.run_dir), spec.op)):
            return None
        return read_op_autotune(path) if path.is_file() else OpAutotune(
            op=spec.op, notes=(f"{path} is missing: every autotuned case was tuned live",))
    source = spec.replay.run_dir
    if source:
        path = op_autotune_path(Path(source), spec.op)
        return read_op_autotune(path) if path.is_file() else OpAutotune(op=spec.op)
    return None


def record_path(spec: ChildSpec) -> Path:
    """Where the op's process records its configs: a sweep process into its own file."""
    return Path(spec.sweep.configs_out) if spec.sweep else op_autotune_path(Path(spec.run_dir), spec.op)


def build_recorder(session: HarnessSession) -> AutotuneRecorder:
    spec = session.spec
    names = module_names([session.candidate, session.op.candidate])
    if spec.provider == "flaggems":
        names += [n for n in library_modules("flag_gems") if n not in names]
    return recorder_for(spec.op, record_path(spec), replay_for(spec), names)


@pytest.fixture(scope="session")
def harness_autotune(harness_session: HarnessSession) -> Iterator[AutotuneRecorder]:
    """Set up before the first case (replayed configs are in place before any kernel runs)."""
    recorder = build_recorder(harness_session)
    yield recorder
    recorder.save()
