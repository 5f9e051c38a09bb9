"""Accelerator setup: pin torch to the one device the child sees, probe and record its identity."""

from __future__ import annotations

import pytest

from harness.plugins.identity import probe_accelerator, write_identity
from harness.plugins.session import get_session
from harness.timing.base import device_api


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    session = get_session(config)
    backend = session.backend
    assert backend.torch_namespace is not None  # planning loads this plugin only for accelerators
    try:
        api = device_api(backend.torch_namespace, backend.torch_extension)
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
