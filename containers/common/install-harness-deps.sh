#!/bin/sh
# Shared by the vendor images (cuda, rocm, musa, ascend): the harness's small pure-Python needs
# and, when FLAGGEMS_VERSION is set, a pinned flag-gems (--no-deps, so its vendor extras cannot
# replace the vendor's torch or Triton; sqlalchemy and greenlet are what it imports beyond the
# image). The build fails if pip replaced the base's torch or Triton anyway.
# The harness copies containers/common/ into every image's build context as common/.
set -eu
versions() { python3 -c 'import torch, triton; print(torch.__version__, triton.__version__, triton.__file__)'; }
before="$(versions)"
python3 -m pip install --no-cache-dir "numpy>=1.24" "pytest>=8" "pyyaml>=6" "junit-xml>=1.9" \
    "jinja2>=3.1" "altair>=5.4" "vl-convert-python>=1.7"
if [ -n "${FLAGGEMS_VERSION:-}" ]; then
    python3 -m pip install --no-cache-dir --no-deps "flag-gems==${FLAGGEMS_VERSION}" \
        "sqlalchemy==2.0.48" "greenlet==3.5.6"
fi
after="$(versions)"
if [ "$before" != "$after" ]; then
    echo "pip replaced the vendor's torch/Triton ($before -> $after)" >&2
    exit 1
fi
echo "torch/triton kept: $after"
