"""`harness gate-run --container BACKEND --devices ID`: each side of the gate in the backend's image.

The perf gate of a pull request measures code nobody has run on the host (docs/ci-security.md):
base and head each run as `harness run` inside the backend's image, confined as every
container run is (no network, read-only root, no capabilities, non-root), on the one device
given, with that side's tree mounted read-only at /repo and that side's own output folder as
reports/ (harness.compare.gate.side_folders: one per side, never shared, checked by the host
before it reads anything there). The container's output reaches the host's stdout with
workflow commands stopped under GitHub Actions. The image comes from this harness's own
containers/ (for the PR gate: the default branch's), is built or pulled once, and both sides
run that same image ID; a pull request that changes containers/ is therefore measured on the
base's image.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from harness.compare.gate import GateSide, SideRunner
from harness.compare.untrusted import commands_stopped
from harness.container.engine import Engine
from harness.container.image import ensure_image
from harness.container.launch import Connect, assemble, device_plan, lent_run_dir, prepare_run
from harness.container.plan import plan_invocation
from harness.errors import UsageError

__all__ = ["container_side_runner", "in_reports"]


def _aliases() -> dict[str, str]:
    from harness.backends import BACKENDS

    return {alias: b.name for b in BACKENDS for alias in (b.name, *b.aliases)}


def in_reports(arg: str, mount: Path) -> str:
    """A run argument as the container sees it: a host path inside the side's output folder
    ``mount`` (the side's run 1, which later runs replay, ``--replay-from``) becomes
    reports/<path>. Compared as written, made absolute, never through links (``mount`` is the
    host's own folder; what lies under it is the side's)."""
    path = Path(arg)
    if not path.is_absolute():
        return arg
    try:
        return f"reports/{Path(os.path.abspath(path)).relative_to(os.path.abspath(mount)).as_posix()}"
    except ValueError:
        return arg


def container_side_runner(
    backend: str | None,
    devices: str | None,
    out: Path,
    env: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
    connect: Connect = Engine.connect,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> SideRunner:
    """Settle everything once (backend, device, engine, image), then return the side runner.

    The runner mounts ``run_dir``'s parent as reports/: run_gate gives each side a folder of its
    own there (``untrusted_sides``). Refused before anything is built: no backend, not exactly
    one device, an output directory that is not empty.
    """
    from harness.backends import get_backend

    ids = [d.strip() for d in (devices or "").split(",") if d.strip()]
    needs_device = backend is not None and get_backend(backend).passthrough.maps_devices
    if not backend or (needs_device and len(ids) != 1):
        raise UsageError(
            "gate-run in a container needs the backend and exactly one device, both sides on it: "
            "--container BACKEND --devices ID (for example --container cuda --devices 0). "
            f"Given: --container {backend or '(none)'} --devices {devices or '(none)'}."
        )
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"Gate output directory {out} is not empty. Choose another --out or remove it.")

    def log(message: str) -> None:
        print(f"gate: {message}", file=stderr, flush=True)

    out = out.resolve()
    prepared = prepare_run(backend, [], {"devices": ids or None, "reports": str(out)}, env, config)
    engine = connect(env)
    devices_plan = device_plan(prepared, engine.runtimes())
    image = ensure_image(engine, prepared.recipe, prepared.options, log)
    owner = prepared.options.user or (os.getuid(), os.getgid())
    log(f"both sides run in {image.ref} (image {image.image_id[:19]}, {image.action}) on "
        f"{prepared.backend.name}" + (f" device {ids[0]}" if ids else ""))

    def run_side(side: GateSide, run_dir: Path, run_id: str, run_args: Sequence[str]) -> None:
        # run_dir's parent is this side's own output folder: the only writable place it gets.
        mount = Path(os.path.abspath(run_dir.parent))
        args = ["--out", f"reports/{run_dir.name}", "--run-id", run_id, *(in_reports(a, mount) for a in run_args)]
        invocation = plan_invocation(prepared.backend, args, run_id, _aliases())
        side_run = replace(prepared, invocation=invocation,
                           options=replace(prepared.options, code_dir=side.tree.resolve(), reports_dir=mount))
        plan = assemble(side_run, devices_plan, image.ref, image.digest, image.image_id)
        print(f"gate: {side.name} ({side.ref}) -> {run_dir} in the {prepared.backend.name} container",
              file=stdout, flush=True)
        with commands_stopped(stdout, env), lent_run_dir(plan, run_dir, owner):
            code = engine.run(plan, stdout, prepared.backend.name)
        if code not in (0, 1):  # 1 = some case failed: reported by the comparison, not fatal here
            raise UsageError(
                f"`harness run` for {side.name} ({side.ref}) in the {prepared.backend.name} container "
                f"exited with code {code}; its message is above. Fix the run arguments given after "
                "`--`, or that version of the code."
            )

    return run_side
