"""``python -m harness.upstream run --suite PATH [harness run options]``: the suite mode under a
name of its own; exactly ``harness run --suite PATH`` (the same parser and code path)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from harness.cli import main as harness_main


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] != ["run"]:
        print("usage: python -m harness.upstream run --suite PATH [harness run options]\n"
              "(the same as `harness run --suite PATH ...`)", file=sys.stderr)
        return 2
    return harness_main(args)


if __name__ == "__main__":
    sys.exit(main())
