"""One exception family for everything the harness reports to a user.

Each subclass carries its process exit code (harness.contract names them). Only
:func:`exit_status`, called by the command entry points, turns them into a message
and an exit code; everywhere else raises with a message that names the input, the
cause and the fix.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

__all__ = [
    "HarnessError",
    "UsageError",
    "ConfigError",
    "EnvironmentProblem",
    "ContainerError",
    "GateFailed",
    "ContextPoisoned",
    "exit_status",
    "printable",
]


class HarnessError(Exception):
    """Base class: a problem the user can act on."""

    exit_code: int = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(HarnessError):
    """Bad input on the command line or in a file the user named (exit 2)."""

    exit_code = 2


class ConfigError(UsageError):
    """A malformed or inconsistent configuration file (shapes YAML, pyproject) (exit 2)."""


class EnvironmentProblem(HarnessError):
    """Something the machine lacks: a package, a device node, a driver (exit 3)."""

    exit_code = 3


class ContainerError(EnvironmentProblem):
    """The container engine is missing, unreachable or refused the request (exit 3)."""


class GateFailed(HarnessError):
    """A comparison found regressions (exit 1)."""

    exit_code = 1


class ContextPoisoned(Exception):
    """Raised inside an op's process when the device context is unusable (for example a graph
    capture that killed it). Not a user error: the records plugin marks the case, and the op's
    process stops with ``harness.contract.POISONED_EXIT`` so the rest of the run goes on."""


def printable(text: str) -> str:
    """``text`` with each character that is not printable written as its Python escape (``\\n``,
    ``\\x1b``, ``\\u202e``, ``\\udcff``): input echoed in a message (an op name, a path) cannot end
    the line, move the cursor, colour or clear the terminal, or reorder the text it stands in."""
    return "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape", "backslashreplace")
                   .decode("ascii") for ch in text)


def exit_status(action: Callable[[], int], stderr: TextIO | None = None) -> int:
    """Run a command's body: its exit code, or a HarnessError's message on stderr and its code.
    Messages go through :func:`printable`: whatever user input they echo stays one line of text.

    An OSError that reaches here (a disk that filled up, a file system that refused a write the
    checks could not foresee) is the machine's: one line naming the file and the cause, exit 3.
    """
    try:
        return action()
    except HarnessError as exc:
        print(f"harness: error: {printable(exc.message)}", file=stderr or sys.stderr)
        return exc.exit_code
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"harness: error: {printable(where + str(exc.strerror or exc))} (the system refused; free space "
              "or fix the permissions, then run again)", file=stderr or sys.stderr)
        return EnvironmentProblem.exit_code
