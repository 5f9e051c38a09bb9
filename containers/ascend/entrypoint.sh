#!/bin/sh
# CANN's environment (library paths, ASCEND_* homes) comes from set_env.sh, which an
# image does not always bake into ENV; the driver's libraries are bind-mounted from the
# host at run time, so their path is added here rather than at build time.
for env_script in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/cann/set_env.sh; do
    if [ -f "$env_script" ]; then
        # shellcheck disable=SC1090
        . "$env_script"
        break
    fi
done
driver=/usr/local/Ascend/driver/lib64
export LD_LIBRARY_PATH="$driver:$driver/common:$driver/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"
