"""One line of an op's log from a compat plugin, written at once.

The op's log is the process's output. A line written while pytest captures output (a test's
setup, the end of collection) would be held back or lost, so capture is suspended for it, and a
line never joins the progress letters of ``-q`` (".."). Used by the plugins that say what they
changed in FlagGems' process (mm_cluster, device_inputs).
"""

from __future__ import annotations

import contextlib

import pytest

__all__ = ["say"]


def say(config: pytest.Config, prefix: str, line: str) -> None:
    """Write ``prefix line`` to the op's log now, on a line of its own."""
    capture = config.pluginmanager.getplugin("capturemanager")
    terminal = config.pluginmanager.getplugin("terminalreporter")
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        if terminal is not None:
            if getattr(getattr(terminal, "_tw", None), "width_of_current_line", 0):
                terminal.write("\n")
            terminal.write_line(f"{prefix} {line}", flush=True)
        else:
            print(f"{prefix} {line}", flush=True)
