"""The first minute: `harness --help`, the listings, `doctor` and every refusal of bad input
answer without importing torch, Triton or pytest (what makes them slow). The time itself is
measured by benchmarks/cli_latency.py, not asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# (arguments, expected exit code)
COMMANDS: list[tuple[tuple[str, ...], int]] = [
    (("--help",), 0),
    (("list", "backends"), 0),
    (("list", "ops"), 0),
    (("plugins",), 0),
    (("plugins", "--backend", "musa"), 0),
    (("doctor",), 0),
    (("run", "--ops", "softmaxx"), 2),
    (("run", "--backend", "tpu"), 2),
    (("run", "--dtypes", "int3"), 2),
    (("run", "--level", "galactic"), 2),
    (("run", "--backend", "cuda", "--timer", "cpu-ish"), 2),
    (("run", "--backend", "cuda", "--ops", "softmax"), 3),  # no GPU on this machine: refused, nothing run
    (("run", "--shapes-file", "/nonexistent.yaml"), 2),
    (("run", "--resume", "/nonexistent-run"), 2),
    (("run", "--suite", "/nonexistent-suite", "--backend", "cuda", "--ops", "softmax"), 2),
    (("compare", "/nonexistent-a", "/nonexistent-b"), 2),
    (("gate", "/nonexistent-a", "/nonexistent-b"), 2),
    (("report", "/nonexistent-run"), 2),
    (("history", "add", "/nonexistent-run", "--db", "/nonexistent/h.sqlite"), 2),
    (("history", "check", "/nonexistent-run", "--db", "/nonexistent/h.sqlite"), 2),
    (("run", "--shard", "0/3"), 2),
    (("run", "--shard", "4/3"), 2),
    (("run", "--shard", "abc"), 2),
    (("merge", "/nonexistent-a", "/nonexistent-b", "--out", "merged"), 2),
]


def probe(args: tuple[str, ...], cwd: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "cli_probe.py"), *args], cwd=cwd,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("args, code", COMMANDS, ids=[" ".join(a) for a, _ in COMMANDS])
def test_answers_without_importing_torch_triton_or_pytest(args: tuple[str, ...], code: int, tmp_path: Path) -> None:
    result = probe(args, tmp_path)
    assert result["exit"] == code, result["stderr"]
    assert result["heavy"] == [], f"harness {' '.join(args)} imported {result['heavy']}"
    if code != 0:
        assert "Traceback" not in str(result["stderr"]) and str(result["stderr"]).startswith("harness")
    assert not list(tmp_path.iterdir()), "a refusal left files behind"
