"""A suite run's --replay-from checked against the library it measures: configs tuned with one
FlagGems version are not replayed into another unless asked for (pure but for reading run.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.results.runinfo import read_run_info

__all__ = ["check_replay_version", "replayed_version"]


def replayed_version(info: dict[str, Any]) -> str | None:
    """The library version a run measured (its suite's installed package, else its identity's)."""
    def part(data: Any, key: str) -> dict[str, Any]:
        value = data.get(key) if isinstance(data, dict) else None
        return value if isinstance(value, dict) else {}

    found = part(info, "suite").get("installed") or part(part(info, "identity"), "flag_gems").get("version")
    return str(found) if found else None


def check_replay_version(replay_from: str | None, package: str, installed: str | None, allow: bool) -> None:
    """Refuse, in one line naming both versions, a --replay-from run that measured another version
    of ``package`` than the ``installed`` one, unless ``allow`` (--allow-version-mismatch)."""
    if not replay_from or allow or installed is None:
        return
    run_json = Path(replay_from) / "run.json"
    if not run_json.is_file():
        return  # a directory of configs without its run: nothing says which version tuned them
    was = replayed_version(read_run_info(run_json))
    if was is not None and was != installed:
        raise UsageError(
            f"--replay-from {replay_from}: its autotune configs were tuned with {package} {was}, but this run "
            f"measures {package} {installed}; another version's kernels may have other keys and configs. Replay a "
            f"run of {package} {installed}, drop --replay-from to tune live, or pass --allow-version-mismatch "
            "to replay them anyway.")
