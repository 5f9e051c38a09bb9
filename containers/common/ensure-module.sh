#!/bin/sh
# ensure-module.sh MODULE PACKAGES HINT: keep what the base image has; install what it lacks.
# If `import MODULE` works, nothing happens. Otherwise PACKAGES (a pip requirement list, as
# given by a build argument) is installed; when it is empty the build fails with HINT, which
# says which build argument to pass. Shared by the vendor images (containers/common/).
set -eu
module="$1"
packages="$2"
hint="$3"
if python3 -c "import ${module}" 2>/dev/null; then
    exit 0
fi
if [ -z "$packages" ]; then
    echo "$hint" >&2
    exit 1
fi
# shellcheck disable=SC2086  # a list of requirements
python3 -m pip install --no-cache-dir $packages
