"""Run the real `harness` command in a subprocess, as a user would, for the end-to-end tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_harness(*args: str, cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m harness ARGS` from this checkout; the caller's HARNESS_* variables are dropped
    so a developer's environment cannot change what a test sees."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
