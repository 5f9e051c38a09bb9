"""CPU backend setup: Triton kernels run in the interpreter, which needs numpy."""

from __future__ import annotations

import pytest

from harness.child.plugins.identity import probe_cpu, write_identity
from harness.child.plugins.session import get_session


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    session = get_session(config)
    try:
        import numpy  # noqa: F401  (the Triton interpreter imports it lazily and fails late)
    except ImportError as exc:
        raise pytest.UsageError(
            "the CPU backend runs Triton kernels in the Triton interpreter, which needs numpy: "
            "pip install numpy"
        ) from exc
    session.torch_device = "cpu"
    session.identity = probe_cpu()
    write_identity(session.spec.run_dir, session.spec.device, session.identity)
