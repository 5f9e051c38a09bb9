"""`harness container run|plan|build`: the command line of the container layer.

``add_parser`` hooks the subcommand into the `harness` parser and ``run``
executes a parsed namespace; ``main`` is the same command standing alone
(`python -m harness.container`), which the nox sessions use from a small
virtualenv that holds the docker SDK and no torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from harness.errors import exit_status

__all__ = ["add_parser", "main", "run"]

_RUN_EPILOG = """\
examples:
  harness container run --backend cpu -- --ops softmax
  harness container run --backend rocm --devices 0,1 -- --ops softmax mm --dtypes bf16
  harness container plan --backend ascend -- --ops add        # print the docker run, start nothing
  harness container build cpu cuda --base-image cpu=harness-base/debian:bookworm-py

Everything after `--` goes to `harness run` inside the container. Reports land in the
host's reports/ (or --reports), owned by you. The image options come from the command
line, else HARNESS_REGISTRY, HARNESS_IMAGE_POLICY (auto, pull, build, no-build),
HARNESS_BASE_IMAGE_<BACKEND>, HARNESS_BUILD_ARGS and HARNESS_WHEELS, else
[tool.harness.container] in ./pyproject.toml (registry, image-policy, base-images,
build-args, wheels); see docs/containers.md.
"""


def _add_image_options(p: argparse.ArgumentParser) -> None:
    policy = p.add_mutually_exclusive_group()
    policy.add_argument("--pull", dest="policy", action="store_const", const="pull",
                        help="pull the image from the registry; never build")
    policy.add_argument("--build", dest="policy", action="store_const", const="build",
                        help="build the image even if one with its content tag exists")
    policy.add_argument("--no-build", dest="policy", action="store_const", const="no-build",
                        help="use a local image or pull it; never build")
    p.add_argument("--registry", help="registry prefix to pull <registry>/triton-op-harness-<backend>:<tag> from")
    p.add_argument("--base-image", dest="base_images", action="append", metavar="[BACKEND=]IMAGE",
                   help="base image for the build (the Dockerfile's BASE_IMAGE argument)")
    p.add_argument("--build-arg", dest="build_args", action="append", metavar="KEY=VALUE",
                   help="build argument (repeatable), e.g. TRITON_PACKAGE=...")
    p.add_argument("--wheels", action="append", metavar="DIR",
                   help="directory of local wheels staged into images that list them (default: "
                        "HARNESS_WHEELS, else wheels in [tool.harness.container], else pip's local "
                        "find-links)")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", required=True, help="cuda, musa, rocm, ascend or cpu (aliases accepted)")
    p.add_argument("--devices", action="append", metavar="IDS",
                   help="host device indices to pass in, e.g. 0,1 (default: the host's visibility "
                        "variable for the backend, else every device)")
    p.add_argument("--reports", metavar="DIR", help="host directory mounted as reports/ (default: ./reports of the checkout)")
    p.add_argument("--user", metavar="UID:GID", help="run as this uid:gid (default: yours)")
    p.add_argument("--device-root", metavar="DIR",
                   help="prefix of every host device node and driver path (default /; for tests)")
    hard = p.add_argument_group(
        "hardening", "the container has no capabilities, no network, a read-only root, private IPC and "
        "no way to gain privileges; these relax it, one thing each (docs/containers.md, \"Hardening\")")
    hard.add_argument("--network", help="none (default) or bridge (HARNESS_CONTAINER_NETWORK)")
    hard.add_argument("--seccomp", help="default (the engine's profile) or unconfined (HARNESS_SECCOMP)")
    hard.add_argument("--cap-add", dest="cap_add", action="append", metavar="CAP",
                      help="add one capability back, e.g. SYS_NICE for ROCm's NUMA calls (repeatable; HARNESS_CAP_ADD)")
    hard.add_argument("--pids-limit", dest="pids_limit", metavar="N",
                      help="processes and threads the container may have (default 8192; HARNESS_PIDS_LIMIT)")
    hard.add_argument("--shm-size", dest="shm_size", metavar="SIZE",
                      help="size of the container's /dev/shm (default 2g; HARNESS_SHM_SIZE)")
    _add_image_options(p)
    p.add_argument("harness_args", nargs=argparse.REMAINDER, metavar="-- ARGS",
                   help="arguments of `harness run`, after --")


def add_parser(subparsers: Any) -> None:
    """Add `container` to the `harness` command's subparsers."""
    p = subparsers.add_parser(
        "container", help="run the harness in a backend's container image, or build the images",
        description="Run `harness run` inside a per-backend image with the backend's device passthrough.",
        epilog=_RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="container_command", metavar="ACTION")
    run_p = actions.add_parser("run", help="get the image, start the container, stream its output",
                               epilog=_RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_run_options(run_p)
    plan_p = actions.add_parser("plan", help="print the image and the docker run command; start nothing")
    _add_run_options(plan_p)
    build_p = actions.add_parser("build", help="build (or pull) the images of some or all backends")
    build_p.add_argument("backends", nargs="*", metavar="BACKEND", help="backends to build (default: all)")
    _add_image_options(build_p)


def _values(ns: argparse.Namespace) -> dict[str, Any]:
    keys = ("policy", "registry", "base_images", "build_args", "wheels", "devices", "reports",
            "user", "device_root", "network", "seccomp", "cap_add", "pids_limit", "shm_size")
    return {k: getattr(ns, k, None) for k in keys}


def run(ns: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Execute a parsed `harness container ...`; HarnessError propagates to the caller's handler.

    The options are resolved by harness.options from the flags, ``env`` and ./pyproject.toml.
    """
    from harness.container import launch
    from harness.options import read_project_config

    action = getattr(ns, "container_command", None)
    if action not in ("run", "plan", "build"):
        print("harness container: give an action: run, plan or build (see --help)", file=sys.stderr)
        return 2
    config = read_project_config()
    if action == "run":
        return launch.run_in_container(ns.backend, ns.harness_args or [], _values(ns), env, config)
    if action == "plan":
        return launch.describe_plan(ns.backend, ns.harness_args or [], _values(ns), env, config)
    return launch.build_images(ns.backends, _values(ns), env, config)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """`python -m harness.container ...`: the `harness container` command on its own."""
    from harness.streams import guarded_streams

    with guarded_streams():  # a closed stdout (`| head`) does not fail the command
        parser = argparse.ArgumentParser(prog="harness")
        add_parser(parser.add_subparsers(dest="command"))
        ns = parser.parse_args(["container", *(sys.argv[1:] if argv is None else argv)])
        return exit_status(lambda: run(ns, dict(os.environ if env is None else env)))
