#!/usr/bin/env bash
# Download, on this machine (PyPI reachable), the wheels the lent H200 machines lack (no network
# there): junit-xml and six for the harness, flag-gems with what it imports for the FlagGems runs.
# They land in .whl/ (git-ignored); pass `carry=[".whl"]` to the device tool and install them there:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD
# FlagGems' benchmark/ tree (for --suite) is not on PyPI: export it from a checkout at the tag
# of the wheel into .flaggems/benchmark (docs/flaggems.md).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d .whl \
  junit-xml==1.9 six==1.17.0 flag-gems==5.0.2 sqlalchemy==2.0.48 greenlet==3.5.6
ls -l .whl
