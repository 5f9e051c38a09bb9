"""--replay-from a run of another FlagGems version is refused with both versions named, unless
--allow-version-mismatch asks for it (the corpus nightly replays last night only when it measured
the same version)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.suite.replay import check_replay_version


def _night(tmp_path: Path, version: str) -> str:
    night = tmp_path / "night"
    night.mkdir()
    (night / "run.json").write_text(json.dumps({"schema_version": 1, "run_id": "n", "status": "complete", "backend": "cuda",
                                                    "suite": {"installed": version}}))
    return str(night)


def test_a_night_of_another_version_is_refused_naming_both(tmp_path: Path) -> None:
    night = _night(tmp_path, "5.3.4")
    with pytest.raises(UsageError) as err:
        check_replay_version(night, "flag_gems", "5.4.0", allow=False)
    message = err.value.message
    assert "flag_gems 5.3.4" in message and "flag_gems 5.4.0" in message and "--allow-version-mismatch" in message
    assert "\n" not in message and err.value.exit_code == 2


def test_the_same_version_or_an_allowed_mismatch_passes(tmp_path: Path) -> None:
    night = _night(tmp_path, "5.3.4")
    check_replay_version(night, "flag_gems", "5.3.4", allow=False)
    check_replay_version(night, "flag_gems", "5.4.0", allow=True)
    check_replay_version(None, "flag_gems", "5.4.0", allow=False)
