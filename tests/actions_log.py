"""How a GitHub Actions runner reads a step's log: which workflow commands it acts on.

A stand-in for actions/runner's parsing, for tests that show text from a gate side is not
obeyed: a line whose text after leading blanks starts with ``::NAME`` and holds a second
``::`` (the current form), or ``##[NAME ...]`` anywhere in a line (the older form), for a
registered NAME. After ``::stop-commands::TOKEN`` nothing is acted on until a line names
TOKEN as its command. Lines end at CR, LF or CRLF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["RunnerLog", "read_log"]

REGISTERED = frozenset({
    "set-env", "set-output", "save-state", "add-mask", "add-path", "add-matcher", "remove-matcher",
    "warning", "error", "notice", "debug", "group", "endgroup", "echo", "stop-commands",
})
RESUMED = "(resumed)"


@dataclass
class RunnerLog:
    obeyed: list[str] = field(default_factory=list)  # command names acted on, in order; RESUMED for a resume
    stopped: bool = False  # whether commands are still stopped at the end

    @property
    def others(self) -> list[str]:
        """What was obeyed besides stopping and resuming."""
        return [c for c in self.obeyed if c not in ("stop-commands", RESUMED)]


def _parse(line: str, names: frozenset[str]) -> tuple[str, str] | None:
    text = line.lstrip()
    if text.startswith("::"):
        end = text.find("::", 2)
        if end >= 0:
            name = text[2:end].split(" ", 1)[0]
            if name.lower() in names:
                return name.lower(), text[end + 2:]
    at = line.find("##[")
    if at >= 0:
        close = line.find("]", at)
        if close >= 0:
            name = line[at + 3:close].split(" ", 1)[0]
            if name.lower() in names:
                return name.lower(), line[close + 1:]
    return None


def read_log(text: str) -> RunnerLog:
    """The commands a runner would act on in ``text``."""
    log = RunnerLog()
    token = ""
    for line in re.split(r"\r\n|\r|\n", text):
        names = REGISTERED | ({token.lower()} if token else frozenset())
        parsed = _parse(line, names)
        if parsed is None:
            continue
        name, data = parsed
        if log.stopped:
            if name == token.lower():
                log.obeyed.append(RESUMED)
                log.stopped, token = False, ""
            continue
        if name == "stop-commands":
            log.obeyed.append(name)
            log.stopped, token = True, data
        else:
            log.obeyed.append(name)
    return log
