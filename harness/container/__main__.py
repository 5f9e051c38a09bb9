"""`python -m harness.container run|plan|build ...` (what the nox sessions call)."""

from __future__ import annotations

import sys

from harness.container.cli import main

if __name__ == "__main__":
    sys.exit(main())
