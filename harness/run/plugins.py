"""Which plugins an op's pytest process loads, and which timer it uses: pure functions of the
backend's capabilities and the options.

Plugins are of two kinds. The core ones (session, cases, seeding, interpreter or device,
timing, records) make a measurement and are always loaded. The optional ones are on or off
by default from the backend's capabilities and can be toggled per run (``--plugins -ir +wall``);
``--extra-plugin MODULE`` adds a user's pytest plugin. Compat plugins for a library's own
pytest (FlagGems' tests and benchmarks, ``--suite``) are planned here too, as
``PluginPlan.suite_modules``: the suite runner puts ``suite_pytest_args()`` on FlagGems' command.
A plugin for FlagGems' process whichever runs it (``mm_cluster``) targets both. A plugin that
``needs`` a capability is refused where the backend lacks it, rather than forced on.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass

from harness.backends.base import Backend
from harness.contract import child_plugin
from harness.errors import UsageError

__all__ = [
    "OPTIONAL_PLUGINS",
    "TIMER_CHOICES",
    "OptionalPlugin",
    "PluginPlan",
    "check_extra_plugins",
    "plan_plugins",
    "resolve_timer",
]

TIMER_CHOICES = ("auto", "graph", "direct", "profiler", "cpu")


@dataclass(frozen=True)
class OptionalPlugin:
    """A plugin a run may toggle. ``targets``: the processes it loads into, "cases" (the
    harness's op process) and/or "suite" (a library's own pytest, --suite). ``needs``: a
    :class:`~harness.backends.base.Capabilities` field without which ``+NAME`` is refused."""

    name: str
    module: str
    targets: tuple[str, ...]
    what: str
    needs: str = ""


OPTIONAL_PLUGINS: dict[str, OptionalPlugin] = {
    p.name: p
    for p in (
        OptionalPlugin("autotune", child_plugin("autotune"), ("cases",),
                       "records the configs Triton's and FlagGems' autotuners chose; seeds them on replay"),
        OptionalPlugin("ir", child_plugin("ir"), ("cases",),
                       "keeps each compiled kernel's IR and metadata under ir/<op>/<case>/ and its compile time"),
        OptionalPlugin("wall", child_plugin("wall"), ("cases",),
                       "also times each call as a user makes it (host dispatch and launch included)"),
        OptionalPlugin("device_inputs", child_plugin("device_inputs"), ("suite",),
                       "draws FlagGems' integer and bool benchmark inputs on the device instead of on the CPU"),
        OptionalPlugin("skipguards", child_plugin("skipguards"), ("suite",),
                       "drops FlagGems' torch.cuda.is_available() skip guards that are stale on this device"),
        # FlagGems' process is the harness's op process (--provider flaggems) or its own pytest (--suite).
        OptionalPlugin("mm_cluster", child_plugin("mm_cluster"), ("cases", "suite"),
                       "keeps FlagGems' mm and mm_out off their Hopper cluster path (cluster_remote_mm) where it "
                       "is live, and says in the op's log what it found", needs="hopper_cluster_mm"),
    )
}


@dataclass(frozen=True)
class PluginPlan:
    modules: tuple[str, ...]
    timer: str
    reasons: tuple[str, ...]
    # Plugins for a library's own pytest (FlagGems' --suite process), with reasons.
    suite_modules: tuple[str, ...] = ()
    suite_reasons: tuple[str, ...] = ()
    off: tuple[str, ...] = ()  # optional plugins not loaded, each with why

    def pytest_args(self) -> list[str]:
        args: list[str] = []
        for module in self.modules:
            args += ["-p", module]
        return args

    def suite_pytest_args(self) -> list[str]:
        """``-p`` arguments for FlagGems' own pytest (the suite runner adds them to its command)."""
        args: list[str] = []
        for module in self.suite_modules:
            args += ["-p", module]
        return args

    def has(self, name: str) -> bool:
        """Whether optional plugin ``name`` is planned (for the op process or the suite)."""
        plugin = OPTIONAL_PLUGINS[name]
        return plugin.module in self.modules or plugin.module in self.suite_modules


def resolve_timer(backend: Backend, requested: str) -> str:
    """auto = graph where the backend captures graphs, direct where it only has events, cpu elsewhere.

    ``HARNESS_TIMER=direct`` (read by the options layer) forces direct timing for a whole run.
    """
    if requested not in TIMER_CHOICES:
        raise UsageError(f"Unknown timer {requested!r}. Timers: {', '.join(TIMER_CHOICES)}.")
    caps = backend.capabilities
    if requested == "auto":
        if caps.graph_capture:
            return "graph"
        return "direct" if caps.device_events else "cpu"
    needs = {"direct": caps.device_events, "graph": caps.graph_capture, "profiler": caps.profiler, "cpu": True}
    if not needs[requested]:
        what = {"direct": "device events", "graph": "graph capture", "profiler": "a kernel profiler"}[requested]
        raise UsageError(
            f"--timer {requested} needs {what}, which backend {backend.name!r} does not have. "
            "Use --timer auto, or one of the timers the backend supports (`harness plugins --backend "
            f"{backend.name}` shows the plan)."
        )
    return requested


def _defaults(backend: Backend, timer: str, ir: str) -> dict[str, tuple[bool, str]]:
    """Each optional plugin: on by default here, and why (or why not)."""
    caps = backend.capabilities
    compiles = not caps.triton_interpreter
    keeps = ir in ("on", "full")
    return {
        "autotune": (True, "autotune: records the configs the autotuners chose; seeds them with --replay-from "
                           "or a sweep"),
        "ir": (compiles and keeps,
               f"ir: keeps each compiled kernel's IR{', SASS' if ir == 'full' else ''}, metadata and compile time "
               "(ir/<op>/<case>/)" if compiles and keeps else ("ir: off (--ir off)" if compiles else
                                "ir: off: the Triton interpreter compiles nothing (`harness compile` gives the "
                                "IR for GPU targets)")),
        "wall": (timer != "cpu",
                 "wall: a second time per call, host dispatch and launch included (docs/timing.md)"
                 if timer != "cpu" else "wall: off: the cpu timer already times the call as a user makes it"),
        "device_inputs": (caps.accelerator,
                          "device_inputs (FlagGems' pytest): its integer and bool inputs drawn on the device, not "
                          "on the CPU and copied (docs/plugins.md)" if caps.accelerator else
                          "device_inputs: off: no accelerator; FlagGems draws on the CPU already"),
        "skipguards": (caps.stale_cuda_guards,
                       "skipguards (FlagGems' pytest): drops its torch.cuda.is_available() skip guards, stale "
                       "here (capability stale_cuda_guards)" if caps.stale_cuda_guards else
                       "skipguards: off: FlagGems' CUDA skip guards are right on this backend"),
        "mm_cluster": (False,
                       "mm_cluster: off by default: FlagGems' mm takes its Hopper cluster path wherever that is live "
                       "(--plugins +mm_cluster keeps it off; docs/plugins.md)" if caps.hopper_cluster_mm else
                       "mm_cluster: off: FlagGems' Hopper cluster mm does not run on this backend (capability "
                       "hopper_cluster_mm); +mm_cluster is refused"),
    }


def _toggled(toggles: Sequence[str]) -> dict[str, bool]:
    """Validated toggles: name -> wanted state (the last one of a name wins)."""
    states: dict[str, bool] = {}
    for toggle in toggles:
        sign, name = toggle[:1], toggle[1:]
        if sign not in ("+", "-") or not name:
            raise UsageError(f"plugin toggle {toggle!r} is not +NAME or -NAME (for example --plugins -ir +wall).")
        if name not in OPTIONAL_PLUGINS:
            raise UsageError(
                f"--plugins {toggle}: unknown plugin {name!r}. Optional plugins: "
                f"{', '.join(OPTIONAL_PLUGINS)} (the core plugins cannot be turned off); a plugin of "
                "your own goes in with --extra-plugin MODULE."
            )
        states[name] = sign == "+"
    return states


def check_extra_plugins(modules: Sequence[str]) -> tuple[str, ...]:
    """Refuse an --extra-plugin module Python cannot find, before any op process starts (its
    parent package is imported to look; the module itself is not)."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError) as exc:
            found = None
            cause = f" ({type(exc).__name__}: {exc})"
        else:
            cause = ""
        if found is None:
            raise UsageError(
                f"--extra-plugin {module}: Python cannot find this module{cause}. Give a module name "
                "importable from the current directory or PYTHONPATH (the op processes inherit both)."
            )
    return tuple(modules)


def plan_plugins(
    backend: Backend,
    requested_timer: str = "auto",
    toggles: Sequence[str] = (),
    extra: Sequence[str] = (),
    ir: str = "on",
) -> PluginPlan:
    caps = backend.capabilities
    timer = resolve_timer(backend, requested_timer)
    states = _toggled(toggles)
    modules = [child_plugin("session"), child_plugin("cases"), child_plugin("seeding")]
    reasons = [
        "session: loads the child spec and the op",
        "cases: one pytest item per (op, provider, dtype, shape)",
        "seeding: a deterministic seed per case",
    ]
    if caps.triton_interpreter:
        modules.append(child_plugin("interpreter"))
        reasons.append("interpreter: no accelerator; Triton kernels run in the Triton interpreter")
    if caps.accelerator:
        modules.append(child_plugin("device"))
        reasons.append(f"device: pins torch to the {backend.torch_namespace} device, probes identity and clocks")
    defaults = _defaults(backend, timer, ir)
    suite_modules: list[str] = []
    suite_reasons: list[str] = []
    off: list[str] = []

    def optional(name: str) -> None:
        plugin = OPTIONAL_PLUGINS[name]
        on, why = defaults[name]
        if name in states and states[name] != on:
            on = states[name]
            why = f"{name}: {'on' if on else 'off'} (--plugins {'+' if on else '-'}{name}): {plugin.what}"
        if on and plugin.needs and not getattr(caps, plugin.needs):
            raise UsageError(
                f"--plugins +{name}: backend {backend.name!r} lacks the capability {plugin.needs}, which {name} "
                f"needs. Drop +{name} (`harness plugins --backend {backend.name}` lists what loads, and why)."
            )
        if not on:
            off.append(why if why.startswith(f"{name}: off") else f"{name}: off: {why}")
            return
        if "suite" in plugin.targets:
            suite_modules.append(plugin.module)
            suite_reasons.append(why)
        if "cases" in plugin.targets:
            modules.append(plugin.module)
            reasons.append(why)

    optional("autotune")
    optional("ir")
    fallback = " (falls back to direct per row when a capture is refused)" if timer == "graph" else ""
    modules.append(child_plugin("timing"))
    reasons.append(f"timing: timer={timer}{fallback}")
    optional("wall")
    modules.append(child_plugin("progress"))
    reasons.append("progress: which case the op is on, for the live display and the CI heartbeat")
    modules.append(child_plugin("records"))
    reasons.append("records: one Measurement per case, appended to records.jsonl as it completes")
    for module in extra:
        modules.append(module)
        reasons.append(f"{module}: --extra-plugin")
    optional("device_inputs")
    optional("skipguards")
    optional("mm_cluster")
    return PluginPlan(modules=tuple(modules), timer=timer, reasons=tuple(reasons),
                      suite_modules=tuple(suite_modules), suite_reasons=tuple(suite_reasons), off=tuple(off))
