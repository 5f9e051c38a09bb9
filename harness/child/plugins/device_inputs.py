"""Compat plugin for FlagGems' own pytest: draw integer and bool inputs on the device.

FlagGems' benchmark helper ``generate_tensor_input(shape, dtype, device)`` (``benchmark/base.py``
in v5.3+, ``benchmark/utils.py`` in v5.0.x) draws floating inputs on the device but integer and
bool ones on the CPU (``torch.randint(..., device="cpu").to(device)``). At the core level's
1,073,741,824-element shapes that is 10 to 34 s per tensor (measured with 2 threads on a 2-core
machine: int16 10 s, int32 34 s, bool 5 s per 1G elements), twice per row for a binary op, while
the kernel it feeds runs for milliseconds: on the H200 such rows held over a third of the op time
of the 2026-12-02 corpus runs.

This plugin replaces the helper, for the length of the session, by one that draws the same
values' distribution on ``device`` itself: ``torch.randint(iinfo.min, iinfo.max, shape)`` for
FlagGems' ``INT_DTYPES``, ``torch.randint(0, 2, shape)`` for its ``BOOL_DTYPES``, and FlagGems'
own code for every other dtype. The draw uses the device's generator, which the harness seeds
per case as it seeds the CPU's; the values differ from FlagGems' CPU draw, their distribution
does not. A draw the device refuses falls back to FlagGems' code for that call (said once).
Modules that imported the helper by name (``from .base import generate_tensor_input``) get the
replacement too. ``--plugins -device_inputs`` runs FlagGems' code as written.

Which helpers are replaced: functions named ``generate_tensor_input`` defined in a module loaded
from the tree (pytest's rootdir) whose source draws on the CPU and whose module has FlagGems'
``consts`` (a tree that already draws on the device is left alone). What it did is one line of
the op's log (``harness device_inputs: ...``) at the end of collection and one at the session's
end (how many tensors were drawn on the device). Planned by harness.run.plugins; docs/plugins.md.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.child.plugins.oplog import say

__all__ = ["HELPER", "PREFIX", "DeviceInputs", "device_draw", "helpers_in"]

HELPER = "generate_tensor_input"
PREFIX = "harness device_inputs:"
_KEY = pytest.StashKey["DeviceInputs"]()


def _draws_on_cpu(function: Callable[..., Any]) -> bool:
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return False
    return 'device="cpu"' in source or "device='cpu'" in source


def helpers_in(modules: dict[str, ModuleType], root: Path) -> list[tuple[str, Callable[..., Any]]]:
    """(module name, function) of each ``generate_tensor_input`` defined in a module loaded from
    under ``root`` that draws on the CPU and has FlagGems' ``consts`` beside it."""
    found = []
    for name, module in modules.items():
        fields = vars(module) if hasattr(module, "__dict__") else {}
        path = fields.get("__file__")
        function = fields.get(HELPER)
        if not isinstance(path, str) or not callable(function) or getattr(function, "__module__", None) != name:
            continue
        try:
            Path(path).resolve().relative_to(root)
        except ValueError:
            continue
        if _draws_on_cpu(function) and fields.get("consts") is not None:
            found.append((name, function))
    return found


def device_draw(original: Callable[..., Any], consts: Any, counter: list[int],
                refused: Callable[[BaseException], None]) -> Callable[..., Any]:
    """FlagGems' ``generate_tensor_input`` with its integer and bool draws made on ``device``."""
    import torch

    ints = tuple(getattr(consts, "INT_DTYPES", ()) or ())
    bools = tuple(getattr(consts, "BOOL_DTYPES", ()) or ())

    def generate_tensor_input(shape: Any, dtype: Any, device: Any) -> Any:
        if dtype in ints:
            low, high = torch.iinfo(dtype).min, torch.iinfo(dtype).max
        elif dtype in bools:
            low, high = 0, 2
        else:
            return original(shape, dtype, device)
        try:
            drawn = torch.randint(low, high, shape, dtype=dtype, device=device)
        except (RuntimeError, NotImplementedError, TypeError) as exc:
            refused(exc)
            return original(shape, dtype, device)
        counter[0] += 1
        return drawn

    generate_tensor_input.__wrapped__ = original  # type: ignore[attr-defined]
    return generate_tensor_input


@dataclass
class DeviceInputs:
    """The helpers replaced in this process, and where: put back by :meth:`restore`."""

    replaced: list[tuple[ModuleType, Callable[..., Any]]] = field(default_factory=list)
    drawn: list[int] = field(default_factory=lambda: [0])
    refusals: list[str] = field(default_factory=list)

    def _refused(self, exc: BaseException) -> None:
        if not self.refusals:
            self.refusals.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    def replace(self, modules: dict[str, ModuleType], root: Path) -> list[str]:
        """Replace each helper under ``root`` in its module and every module that imported it;
        the lines the op's log gets."""
        lines = []
        for name, original in helpers_in(modules, root):
            replacement = device_draw(original, vars(modules[name])["consts"], self.drawn, self._refused)
            holders = [m for m in modules.values()
                       if hasattr(m, "__dict__") and vars(m).get(HELPER) is original]
            for module in holders:
                self.replaced.append((module, original))
                vars(module)[HELPER] = replacement
            lines.append(f"{name}.{HELPER} draws integer and bool inputs on the device "
                         f"({len(holders)} module(s) use it; --plugins -device_inputs: FlagGems' CPU draw)")
        return lines or [f"no {HELPER} drawing on the CPU was loaded from {root}: inputs as FlagGems draws them"]

    def restore(self) -> None:
        while self.replaced:
            module, original = self.replaced.pop()
            vars(module)[HELPER] = original

    def summary(self) -> str:
        line = f"{self.drawn[0]} integer or bool input(s) drawn on the device"
        return line + (f"; a draw the device refused ran FlagGems' code ({self.refusals[0]})" if self.refusals else "")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """After collection (FlagGems' test modules and their helpers are imported), before any
    benchmark draws an input."""
    state = session.config.stash[_KEY] = DeviceInputs()
    for line in state.replace(dict(sys.modules), Path(str(session.config.rootpath)).resolve()):
        say(session.config, PREFIX, line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_KEY, None)
    if state is not None and state.replaced:
        say(session.config, PREFIX, state.summary())


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None)
    if state is not None:
        state.restore()
