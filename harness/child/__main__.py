"""``python -m harness.child EXIT_FILE [--hold] -- PYTEST_ARGS...``: see harness.child.process."""

from __future__ import annotations

import sys

from harness.child.process import leave, main

if __name__ == "__main__":
    leave(main(sys.argv[1:]))
