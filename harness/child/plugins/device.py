"""Accelerator setup: pin torch to the one device the child sees, probe and record its identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.backends.state import device_reader, read_state
from harness.child.plugins.identity import probe_accelerator, write_identity
from harness.child.plugins.session import SESSION_KEY, get_session
from harness.child.timing.base import device_api


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    session = get_session(config)
    backend = session.backend
    assert backend.torch_namespace is not None  # planning loads this plugin only for accelerators
    try:
        api = device_api(backend.torch_namespace, backend.torch_extension, backend.graph_class)
    except ImportError as exc:
        raise pytest.UsageError(
            f"backend {backend.name!r} needs the Python module {backend.torch_extension!r}: {exc}. "
            "Install the vendor's torch extension, or run on the image for this backend."
        ) from exc
    if not api.namespace.is_available() or api.namespace.device_count() < 1:
        raise pytest.UsageError(
            f"backend {backend.name!r}: torch.{backend.torch_namespace} sees no device "
            f"(device {session.spec.device} was selected). Check the driver and the visibility "
            f"variables ({', '.join(backend.visibility_keys)}), or run `harness doctor`."
        )
    api.namespace.set_device(0)
    session.torch_device = f"{backend.device_type}:0"
    session.identity = probe_accelerator(backend, api.namespace)
    write_identity(session.spec.run_dir, session.spec.device, session.identity)
    session.state_reader = device_reader(backend, session.spec.device)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Clocks, temperature and power right after the op's cases, while the device is warm."""
    harness = session.config.stash.get(SESSION_KEY, None)
    if harness is None:
        return
    state = read_state(harness.backend).get(harness.spec.device)
    if state:
        line = {"op": harness.spec.op, "device": harness.spec.device, **state}
        path = Path(harness.spec.run_dir) / "device_state.jsonl"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, sort_keys=True) + "\n")
