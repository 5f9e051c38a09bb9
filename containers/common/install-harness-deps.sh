#!/bin/sh
# Shared by the vendor images (cuda, rocm, musa, ascend): the harness's small pure-Python needs,
# from locks with hashes (harness-deps.lock, numpy.lock; made by `nox -s locks`), and, when
# FLAGGEMS_VERSION is set, a pinned flag-gems (--no-deps, so its vendor extras cannot replace the
# vendor's torch or Triton; sqlalchemy and greenlet are what it imports beyond the image; pinned by
# version, not by hash: an opt-in). The build fails if pip replaced the base's torch or Triton.
# The harness copies containers/common/ into every image's build context as common/; the images
# copy it to /tmp/harness-common/ and run this script from there.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
versions() { python3 -c 'import torch, triton; print(torch.__version__, triton.__version__, triton.__file__)'; }
before="$(versions)"
# numpy: the base's own is kept (built against its torch); installed from the lock only if missing.
if python3 -c "import numpy" 2>/dev/null; then
    echo "numpy kept: $(python3 -c 'import numpy; print(numpy.__version__)')"
else
    python3 -m pip install --no-cache-dir --no-deps --require-hashes -r "$here/numpy.lock"
fi
python3 -m pip install --no-cache-dir --no-deps --require-hashes -r "$here/harness-deps.lock"
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
