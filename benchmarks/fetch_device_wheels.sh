#!/usr/bin/env bash
# Download, on this machine (PyPI reachable), the wheels the lent H200 machines lack (no network
# there): junit-xml and six for the harness, flag-gems 5.0.2 (PyPI's newest) with what FlagGems
# imports: sqlalchemy and greenlet, and packaging>=26 (FlagGems 5.3's requirement).
# They land in .whl/ (git-ignored); pass `carry=[".whl"]` to the device tool and install them there:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD
# FlagGems 5.3+ is not on PyPI, nor is any benchmark/ tree (for --suite): benchmarks/fetch_flaggems.sh
# exports the tree of a tag into .flaggems/TAG/ and builds that tag's wheel into .whl/flaggems-TAG/
# (a folder of its own, so `.whl/*.whl` never installs two flag_gems; docs/flaggems.md).
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
grep -qxF '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d .whl \
  junit-xml==1.9 six==1.17.0 flag-gems==5.0.2 sqlalchemy==2.0.48 greenlet==3.5.6 packaging==26.0
ls -l .whl
