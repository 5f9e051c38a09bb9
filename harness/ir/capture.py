"""Listening to Triton's compilations in a process, and keeping what they produced.

:class:`IrCapture` installs itself as ``triton.knobs.compilation.listener`` (chained with a
listener already there), which Triton calls after every ``triton.compile``: on a JIT launch,
on an autotuner's benchmark of each config, and on an ahead-of-time compile for a target
without hardware, with ``cache_hit`` True when the binary came from the Triton cache. The
kernels compiled while a case runs belong to that case: :meth:`end_case` writes their files
under the case's folder and returns the compact summary the record keeps.

Seen with Triton 3.7.1 (this CPU machine) and 3.6 (the H200 machine's wheel): both call the
listener with ``src``, ``metadata``, ``metadata_group``, ``times`` and ``cache_hit``.

A kernel is compiled once per process, so a later case that launches it again compiles nothing.
To give that case the kernel's IR too, the capture watches launches where asked
(:meth:`IrCapture.watching`): Triton's ``knobs.runtime.launch_enter_hook`` is called at each launch
with the kernel's name and its loaded function handle, and ``knobs.runtime.kernel_load_end_hook``
(at each load) says which compiled kernel (hash) a handle is. A kernel launched in a case and
compiled earlier in the process is kept for that case as well, marked ``reused`` (its compile
time counted once, in the case that compiled it). The launch hook costs a Python call per
launch, so callers watch untimed calls only.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.ir.meta import (
    ASSEMBLY,
    BINARIES,
    TEXT_STAGES,
    KernelIR,
    amdgcn_resources,
    constexpr_values,
    cuobjdump_resources,
)
from harness.results.store import write_json

__all__ = ["Compiled", "IrCapture", "nvidia_tools", "offline_resources"]


def nvidia_tools() -> dict[str, str | None]:
    """Paths of the cuobjdump and nvdisasm Triton ships (None where this Triton has none)."""
    tools: dict[str, str | None] = {}
    try:
        from triton import knobs

        for name in ("cuobjdump", "nvdisasm"):
            try:
                path = getattr(knobs.nvidia, name).path
            except Exception:  # noqa: BLE001 - a Triton without the NVIDIA backend or the tool
                path = None
            tools[name] = path if path and Path(path).is_file() else None
    except ImportError:
        pass
    return tools


@dataclass(frozen=True)
class Compiled:
    """One compilation the listener saw."""

    kernel: KernelIR
    fn: Any  # the JITFunction (to find the loaded binary's registers), or None
    full_hash: str
    group: Mapping[str, str]  # file name -> path in the Triton cache
    stages_us: tuple[tuple[str, int], ...] = ()


def _ext(name: str) -> str:
    return name.rsplit(".", 1)[-1] if "." in name else name


def _stage_files(group: Mapping[str, str]) -> dict[str, Path]:
    return {_ext(name): Path(path) for name, path in group.items() if not name.endswith(".json")}


def offline_resources(backend: str, files: Mapping[str, Path], cuobjdump: str | None = None) -> dict[str, int]:
    """Registers and spills from the compiled files, without a device."""
    try:
        if backend == "hip" and "amdgcn" in files:
            return amdgcn_resources(files["amdgcn"].read_text())
        if backend == "cuda" and "cubin" in files and cuobjdump:
            done = subprocess.run([cuobjdump, "--dump-resource-usage", str(files["cubin"])],
                                  capture_output=True, text=True, timeout=60, check=False)
            return cuobjdump_resources(done.stdout)
    except (OSError, subprocess.SubprocessError):
        return {}
    return {}


def _loaded_resources(fn: Any, full_hash: str) -> dict[str, int]:
    """Registers and spills of the binary the device loaded (Triton's CompiledKernel), if it was."""
    caches = getattr(fn, "device_caches", None)
    if not isinstance(caches, Mapping):
        return {}
    for entry in list(caches.values()):
        kernels = entry[0] if isinstance(entry, tuple) and entry else {}
        for kernel in list(getattr(kernels, "values", lambda: [])()):
            if getattr(kernel, "hash", None) == full_hash and getattr(kernel, "module", None) is not None:
                regs, spills = getattr(kernel, "n_regs", None), getattr(kernel, "n_spills", None)
                if isinstance(regs, int) and isinstance(spills, int):
                    return {"regs": regs, "spills": spills}
    return {}


class IrCapture:
    """Compilations of one process, grouped by case."""

    def __init__(self, keep_files: bool = True, sass: bool = True,
                 tools: Mapping[str, str | None] | None = None) -> None:
        self.keep_files = keep_files
        self.sass = sass
        self.tools = dict(tools or {})  # "cuobjdump", "nvdisasm": paths, where known
        self.pending: list[Compiled] = []
        self.previous: Callable[..., Any] | None = None
        self.installed = False
        self.spent_s = 0.0  # time this capture itself took (listener and writing files), since end_case
        self.known: dict[str, Compiled] = {}  # every compilation of this process, by full hash
        self.handles: dict[Any, str] = {}  # loaded function handle -> full hash (kernel_load_end_hook)
        self.launched: dict[Any, str] = {}  # handles launched in this case while watching -> kernel name
        self._removers: list[Callable[[], None]] = []
        self._launch_removers: list[Callable[[], None]] = []

    # -- the listener --------------------------------------------------------------------

    def __call__(self, *, src: Any, metadata: Mapping[str, Any], metadata_group: Mapping[str, str], times: Any,
                 cache_hit: bool, **more: Any) -> None:
        began = time.perf_counter()
        try:
            self.record(src, metadata, metadata_group, times, cache_hit)
        finally:
            self.spent_s += time.perf_counter() - began
            if self.previous is not None:
                self.previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times,
                              cache_hit=cache_hit, **more)

    def record(self, src: Any, metadata: Mapping[str, Any], group: Mapping[str, str], times: Any,
               cache_hit: bool) -> Compiled:
        fn = getattr(src, "fn", None)
        arg_names = list(getattr(fn, "arg_names", ()) or ())
        # Triton 3.7 keeps them as ASTSource.constants, keyed by argument path; older ones as constexprs.
        known = getattr(src, "constants", None) or getattr(src, "constexprs", None) or {}
        constexprs = constexpr_values(dict(known), arg_names)
        signature = {str(k): str(v) for k, v in dict(getattr(src, "signature", {}) or {}).items()
                     if str(v) != "constexpr"}
        total = getattr(times, "total", None)
        stages = tuple((str(n), int(us)) for n, us in getattr(times, "lowering_stages", ()) or ())
        kernel = KernelIR.from_metadata(metadata, constexprs, signature,
                                        compile_ms=total / 1e3 if isinstance(total, int | float) else None,
                                        cache_hit=cache_hit)
        compiled = Compiled(kernel, fn, str(metadata.get("hash", "")), dict(group), stages)
        self.pending.append(compiled)
        self.known[compiled.full_hash] = compiled
        return compiled

    # -- loads and launches ------------------------------------------------------------------

    def loaded(self, module: Any, function: Any, name: str, metadata_group: Any, hash: str, *more: Any) -> None:
        """Triton's kernel_load_end_hook: ``function`` is the handle of compiled kernel ``hash``."""
        self.handles[function] = str(hash)

    def launch_enter(self, metadata: Any, *more: Any) -> None:
        """Triton's launch_enter_hook: the launch's metadata (a LazyDict: name, function, stream)."""
        data = getattr(metadata, "data", metadata)
        if isinstance(data, Mapping) and data.get("function") is not None:
            self.launched.setdefault(data["function"], str(data.get("name", "")))

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Launches inside the block are noted for the current case (not where no capture is installed)."""
        if not self.installed or self._launch_removers:
            yield
            return
        try:
            from triton import knobs

            self._launch_removers.append(_hook_in(knobs.runtime, "launch_enter_hook", self.launch_enter))
        except (ImportError, AttributeError):
            yield
            return
        try:
            yield
        finally:
            while self._launch_removers:
                self._launch_removers.pop()()

    def _reused(self, compiled: list[Compiled]) -> list[Compiled]:
        """Kernels launched in this case and compiled earlier in the process (known by their handle)."""
        fresh = {c.full_hash for c in compiled}
        found: list[Compiled] = []
        for handle in self.launched:
            full_hash = self.handles.get(handle) or _hash_of_handle(self.known.values(), handle)
            earlier = self.known.get(full_hash or "")
            if earlier is not None and earlier.full_hash not in fresh:
                fresh.add(earlier.full_hash)
                found.append(earlier)
        return found

    def install(self) -> None:
        from triton import knobs

        if self.installed:
            return
        self.previous = knobs.compilation.listener
        knobs.compilation.listener = self
        self.installed = True
        with contextlib.suppress(AttributeError):  # a Triton without load hooks: launches found by cache
            self._removers.append(_hook_in(knobs.runtime, "kernel_load_end_hook", self.loaded))

    @classmethod
    def started(cls, sass: bool) -> IrCapture | None:
        """A capture listening in this process (with the NVIDIA tools where found), or None with a
        warning where this Triton has no compilation listener (before 3.4): cases then run without."""
        capture = cls(tools=nvidia_tools(), sass=sass)
        try:
            capture.install()
        except (ImportError, AttributeError) as exc:
            import warnings

            warnings.warn(f"IR capture is off in this process: this Triton has no compilation listener ({exc})",
                          stacklevel=2)
            return None
        return capture

    def uninstall(self) -> None:
        from triton import knobs

        if self.installed and knobs.compilation.listener is self:
            knobs.compilation.listener = self.previous
        while self._removers:
            self._removers.pop()()
        self.installed = False

    # -- cases -----------------------------------------------------------------------------

    def begin_case(self) -> None:
        """Compilations from now on belong to the next case (earlier ones, made between cases,
        such as at import, go to it too); launches are noted afresh."""
        self.launched = {}

    def end_case(self, folder: Path | None, rel: str = "") -> dict[str, Any] | None:
        """Write the case's kernels under ``folder`` (when keeping files) and return the record's
        ``ir`` summary: those compiled since the last case, and those it launched that were compiled
        earlier (``reused``); None when there are none."""
        compiled, self.pending = self.pending, []
        reused = self._reused(compiled)
        self.launched = {}
        if not compiled and not reused:
            self.spent_s = 0.0
            return None
        began = time.perf_counter()
        kernels = [self._finish(c, folder) for c in compiled]
        total = sum(k.compile_ms or 0.0 for k in kernels)  # a reused kernel's compile was counted where it ran
        kernels += [self._finish(c, folder, reused=True) for c in reused]
        spent, self.spent_s = self.spent_s + time.perf_counter() - began, 0.0
        # capture_ms: what keeping the IR cost this case (the overhead of --ir on), beside compile_ms
        summary: dict[str, Any] = {"compile_ms": round(total, 3), "capture_ms": round(spent * 1e3, 3),
                                   "kernels": [k.summary() for k in kernels]}
        if folder is not None and self.keep_files:
            summary["dir"] = rel or str(folder)
        return summary

    def _finish(self, compiled: Compiled, folder: Path | None, reused: bool = False) -> KernelIR:
        kernel = replace(compiled.kernel, reused=reused)
        backend = kernel.target.split(":", 1)[0]
        files = _stage_files(compiled.group)
        resources = _loaded_resources(compiled.fn, compiled.full_hash) or offline_resources(
            backend, files, self.tools.get("cuobjdump"))
        kernel = kernel.with_resources(resources)
        if folder is None or not self.keep_files:
            return kernel
        where = folder / f"{kernel.name[:80]}-{kernel.hash[:10]}"
        where.mkdir(parents=True, exist_ok=True)
        kept: list[str] = []
        for stage in (*TEXT_STAGES, *ASSEMBLY.get(backend, ())):
            path = files.get(stage)
            if path is not None and path.is_file():
                shutil.copyfile(path, where / f"{kernel.name[:80]}.{stage}")
                kept.append(f"{kernel.name[:80]}.{stage}")
        binary = files.get(BINARIES.get(backend, ""))
        if self.sass and backend == "cuda" and binary is not None and binary.is_file() and self.tools.get("nvdisasm"):
            text = _sass(binary)
            if text:
                (where / f"{kernel.name[:80]}.sass").write_text(text)
                kept.append(f"{kernel.name[:80]}.sass")
        kernel = replace(kernel, files=tuple(kept))
        write_json(where / "meta.json", {**kernel.to_json(), "stages_us": dict(compiled.stages_us)})
        return kernel


def _hook_in(owner: Any, name: str, hook: Callable[..., Any]) -> Callable[[], None]:
    """Add ``hook`` to Triton's hook ``owner.name`` and return what takes it out again: a HookChain
    (Triton 3.7: ``add``/``remove``) or a plain slot (earlier ones: chained with a hook already set)."""
    current = getattr(owner, name)
    if hasattr(current, "add") and hasattr(current, "remove"):
        current.add(hook)
        return lambda: current.remove(hook)
    previous = current

    def chained(*args: Any, **kwargs: Any) -> None:
        hook(*args, **kwargs)
        if previous is not None:
            previous(*args, **kwargs)

    setattr(owner, name, chained)

    def remove() -> None:
        if getattr(owner, name) is chained:
            setattr(owner, name, previous)

    return remove


def _hash_of_handle(known: Any, handle: Any) -> str | None:
    """The full hash of the loaded kernel whose function handle is ``handle``, from the JIT caches
    of the kernels compiled in this process (where no load hook said it)."""
    for compiled in list(known):
        caches = getattr(compiled.fn, "device_caches", None)
        if not isinstance(caches, Mapping):
            continue
        for entry in list(caches.values()):
            kernels = entry[0] if isinstance(entry, tuple) and entry else {}
            for kernel in list(getattr(kernels, "values", lambda: [])()):
                if getattr(kernel, "function", None) == handle and getattr(kernel, "hash", None):
                    return str(kernel.hash)
    return None


def _sass(cubin: Path) -> str | None:
    """SASS of a cubin, through Triton's own disassembler helper (nvdisasm); None if it fails."""
    try:
        from triton.tools.disasm import get_sass

        text: str = get_sass(cubin.read_bytes())
        return text
    except Exception:  # noqa: BLE001 - SASS is a convenience: its absence is not an error
        return None
