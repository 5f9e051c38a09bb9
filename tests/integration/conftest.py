"""Fixtures for tests against a real docker engine: the engine, the local base image, the cpu image.

No registry is reachable on the CI machine, so the cpu image is built from a
local Debian+Python base (made by .ci/docker-up.sh) and reused by every test
of the session; an unchanged tree finds it again on the next session too.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCAL_BASE = os.environ.get("HARNESS_LOCAL_BASE", "harness-base/debian:bookworm-py")


def _container_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HARNESS_BASE_IMAGE_CPU", LOCAL_BASE)
    # The CI machine keeps the torch CPU wheel in /opt/wheels (NOTES-environment.md); pip
    # there may find it through its config file rather than PIP_FIND_LINKS.
    if not env.get("HARNESS_WHEELS") and not env.get("PIP_FIND_LINKS") and Path("/opt/wheels").is_dir():
        env["HARNESS_WHEELS"] = "/opt/wheels"
    env.pop("HARNESS_REGISTRY", None)
    env.pop("HARNESS_IMAGE_POLICY", None)
    return env


@pytest.fixture(scope="session")
def container_env() -> dict[str, str]:
    """The environment the container commands run with in these tests: the local base for cpu."""
    return _container_env()


@pytest.fixture(scope="session")
def docker_engine():  # type: ignore[no-untyped-def]
    pytest.importorskip("docker", reason="the docker SDK is not installed (pip install -e .[dev])")
    from harness.container.engine import Engine
    from harness.errors import ContainerError

    try:
        return Engine.connect(_container_env())
    except ContainerError as exc:
        if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":  # set by .ci/run: no silent skips in CI
            pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but no docker engine answered: {exc.message}")
        pytest.skip(
            f"no docker engine reachable ({exc.message.split(' (')[0]}); start one with "
            "`sudo .ci/docker-up.sh` to run the container tests"
        )


@pytest.fixture(scope="session")
def local_base(docker_engine) -> str:  # type: ignore[no-untyped-def]
    """The local base image, made by .ci/docker-up.sh when missing and we may run it."""
    if not docker_engine.has_image(LOCAL_BASE):
        if os.geteuid() != 0:
            pytest.skip(f"local base image {LOCAL_BASE} is missing; run `sudo .ci/docker-up.sh` once")
        subprocess.run([str(ROOT / ".ci" / "docker-up.sh")], check=True, timeout=600)
    return LOCAL_BASE


@pytest.fixture(scope="session")
def cpu_image(docker_engine, local_base):  # type: ignore[no-untyped-def]
    """The cpu image, resolved exactly as `nox -s bench-cpu` resolves it, so the session reuses it."""
    from harness.container.image import ensure_image, load_recipe
    from harness.options import read_pyproject, resolve_container_options

    config = read_pyproject(ROOT / "pyproject.toml")  # the sessions run in the checkout
    options = resolve_container_options({}, _container_env(), config, repo_dir=ROOT, backends=["cpu"])
    recipe = load_recipe(ROOT / "containers", "cpu", options)
    return ensure_image(docker_engine, recipe, options, lambda line: None)


@pytest.fixture()
def no_leftovers(docker_engine) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Fail the test if it leaves a harness-started container behind."""
    before = set(docker_engine.managed_containers())
    yield
    left = set(docker_engine.managed_containers()) - before
    assert not left, f"containers left behind: {sorted(left)}"
