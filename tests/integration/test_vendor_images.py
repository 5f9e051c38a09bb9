"""The vendor Dockerfiles (cuda, rocm, musa, ascend) built for real, on stand-in bases.

No vendor base image (NGC, ROCm, torch_musa, CANN) is reachable here, so each Dockerfile is
built FROM the cpu image, which has CPU torch and Triton, through the harness's own build
path (`ensure_image`, content-tagged). For musa and ascend the stand-in adds an empty
`torch_musa` / `torch_npu` package: what is checked is the Dockerfile's own logic (base
image as a build argument, root for the install steps whatever user the base ends with, the
guard that keeps the base's torch and Triton, the refusal with a message when the base lacks
what the build arguments must then supply, the user, workdir, entrypoint and command), never
the vendor stacks themselves.
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.container.image import ensure_image, load_recipe
from harness.errors import ContainerError
from harness.options import read_pyproject, resolve_container_options

ROOT = Path(__file__).resolve().parents[2]
DOCKER = "docker"

pytestmark = [pytest.mark.integration, pytest.mark.docker]

VERSIONS = "import torch, triton; print(torch.__version__, triton.__version__)"


def _docker(*args: str, stdin: str | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DOCKER, *args], input=stdin, capture_output=True, text=True, timeout=timeout)


def _stand_in(cpu_ref: str, name: str, steps: str) -> str:
    """A stand-in base: the cpu image (which ends as USER 10001) plus ``steps`` run as root."""
    ref = f"harness-standin/{name}:test"
    dockerfile = f"FROM {cpu_ref}\nUSER root\n{steps}\nUSER 10001:10001\n"
    done = _docker("build", "-q", "-t", ref, "-", stdin=dockerfile)
    assert done.returncode == 0, done.stderr
    return ref


def _site(cpu_ref: str) -> str:
    """Where the cpu image's Triton is installed (its torch and Triton live side by side)."""
    done = _docker("run", "--rm", "--entrypoint", "python3", cpu_ref, "-c",
                   "import os, triton; print(os.path.dirname(os.path.dirname(triton.__file__)))")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _build(engine, backend: str, base: str, env: dict[str, str], log: list[str],  # type: ignore[no-untyped-def]
           build_args: tuple[tuple[str, str], ...] = ()):
    """Build ``backend``'s image FROM ``base`` as `harness container build --build` would."""
    config = read_pyproject(ROOT / "pyproject.toml")
    options = resolve_container_options({}, env, config, repo_dir=ROOT, backends=[backend])
    options = dataclasses.replace(options, base_images=((backend, base),), policy="build", build_args=build_args)
    recipe = load_recipe(ROOT / "containers", backend, options)
    return ensure_image(engine, recipe, options, log.append)


def _assert_guard_passed(log: list[str]) -> None:
    """The shared install step printed its verdict, or the engine reused that very step from an
    earlier build (images of one stand-in base share it: same base, same script)."""
    text = "\n".join(log)
    steps = [i for i, line in enumerate(log) if "Step" in line and "RUN" in line and "sh /tmp/harness-common/install-harness-deps.sh" in line]
    cached = bool(steps) and any("Using cache" in line for line in log[steps[-1] + 1:steps[-1] + 3])
    assert "torch/triton kept:" in text or cached, text[-2000:]


@pytest.fixture(scope="module")
def stand_ins(cpu_image) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    site = _site(cpu_image.ref)
    made = {
        "cuda": cpu_image.ref,
        "rocm": cpu_image.ref,
        "musa": _stand_in(cpu_image.ref, "musa", f"RUN mkdir -p {site}/torch_musa && touch {site}/torch_musa/__init__.py"),
        "ascend": _stand_in(cpu_image.ref, "ascend", f"RUN mkdir -p {site}/torch_npu && touch {site}/torch_npu/__init__.py"),
        "musa-no-triton": _stand_in(cpu_image.ref, "musa-no-triton",
                                    f"RUN mkdir -p {site}/torch_musa && touch {site}/torch_musa/__init__.py "
                                    f"&& rm -rf {site}/triton"),
        "ascend-no-torch-npu": cpu_image.ref,
    }
    yield made
    _docker("image", "rm", *sorted({ref for ref in made.values() if ref.startswith("harness-standin/")}))


@pytest.mark.parametrize("backend", ["cuda", "rocm", "musa", "ascend"])
def test_vendor_dockerfile_builds_on_a_stand_in_and_keeps_its_torch_and_triton(  # type: ignore[no-untyped-def]
        docker_engine, cpu_image, stand_ins, container_env, backend: str) -> None:
    log: list[str] = []
    image = _build(docker_engine, backend, stand_ins[backend], container_env, log)
    _assert_guard_passed(log)
    assert image.action == "built" and f"triton-op-harness-{backend}:" in image.ref
    base = _docker("run", "--rm", "--entrypoint", "python3", stand_ins[backend], "-c", VERSIONS)
    built = _docker("run", "--rm", "--entrypoint", "python3", image.ref, "-c", VERSIONS)
    assert built.returncode == 0 and built.stdout == base.stdout, built.stderr
    config = _docker("image", "inspect", "--format", "{{json .Config.User}} {{json .Config.WorkingDir}} "
                     "{{json .Config.Cmd}} {{json .Config.Entrypoint}}", image.ref)
    user, workdir, cmd, entrypoint = config.stdout.split(" ", 3)
    assert user == '"10001:10001"' and workdir == '"/repo"'
    assert f'"--backend","{backend}"' in cmd
    if backend == "ascend":  # CANN's set_env.sh is sourced by the entrypoint when present
        assert "harness-entrypoint" in entrypoint
        run = _docker("run", "--rm", image.ref, "python3", "-c", "import os; print(os.environ['LD_LIBRARY_PATH'])")
        assert run.returncode == 0 and "/usr/local/Ascend/driver/lib64" in run.stdout, run.stderr


@pytest.mark.parametrize(("backend", "stand_in", "message"), [
    ("musa", "musa-no-triton", "Pass --build-arg TRITON_PACKAGE"),
    ("ascend", "ascend-no-torch-npu", "Pass --build-arg TORCH_NPU_PACKAGES"),
])
def test_a_base_lacking_the_vendor_pieces_is_refused_with_what_to_pass(  # type: ignore[no-untyped-def]
        docker_engine, stand_ins, container_env, backend: str, stand_in: str, message: str) -> None:
    log: list[str] = []
    with pytest.raises(ContainerError):
        _build(docker_engine, backend, stand_ins[stand_in], container_env, log)
    assert any(message in line for line in log), "\n".join(log[-20:])


def test_a_pinned_flag_gems_goes_in_without_touching_torch_or_triton(  # type: ignore[no-untyped-def]
        docker_engine, stand_ins, container_env) -> None:
    """FLAGGEMS_VERSION installs flag-gems from PyPI with --no-deps (its vendor extras pin torch builds)."""
    log: list[str] = []
    image = _build(docker_engine, "cuda", stand_ins["cuda"], container_env, log, (("FLAGGEMS_VERSION", "5.0.2"),))
    _assert_guard_passed(log)
    probe = "import importlib.metadata as m; print(m.version('flag-gems'), m.version('torch'), m.version('triton'))"
    base = _docker("run", "--rm", "--entrypoint", "python3", stand_ins["cuda"], "-c", VERSIONS)
    done = _docker("run", "--rm", "--entrypoint", "python3", image.ref, "-c", probe)
    assert done.returncode == 0, done.stderr
    gems, torch_version, triton_version = done.stdout.split()
    assert gems == "5.0.2" and base.stdout.split() == [torch_version, triton_version]
