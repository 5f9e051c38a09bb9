"""A process that hangs after pytest finished (issue 17): its records decide the op's status (a
FAIL stays a FAIL, it is not hidden as a TIMEOUT) and the note says it hung. Real hang, so it
waits for --op-timeout: marked integration (run by `nox -s tests -- -m integration`)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_a_hang_after_pytest_finished_does_not_hide_a_fail(tmp_path: Path) -> None:
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch, triton, pytest"], check=True, timeout=300)
    op_timeout = int(10 + 4 * (time.monotonic() - start))  # a process start fits, on a loaded machine too
    (tmp_path / "shapes.yaml").write_text("rb_hang_exit: [[4, 4]]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--backend", "cpu", "--ops-module",
         str(ROOT / "tests" / "data" / "robust_ops.py"), "--ops", "rb_hang_exit", "--shapes-file", "shapes.yaml",
         "--dtypes", "fp32", "--warmup-ms", "1", "--rep-ms", "1", "--op-timeout", str(op_timeout), "--out", "run"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    row = next(csv.DictReader((tmp_path / "run" / "ops_status.csv").open()))
    assert row["status"] == "FAIL", row
    assert f"hung after pytest finished: process group ended after --op-timeout {op_timeout}s" in row["notes"]
