"""A user's pytest plugin for --extra-plugin tests: notes that it was loaded in the op process,
and the Triton cache the op process was given."""

from __future__ import annotations

import os
from pathlib import Path


def pytest_configure(config: object) -> None:
    Path(os.environ["EXTRA_PLUGIN_MARK"]).write_text(f"loaded {os.environ.get('TRITON_CACHE_DIR', '-')}\n")
