#!/usr/bin/env bash
# The GPU checks of the core harness and the timing work, in one call on the H200 machine
# (STEPS="core capture kernels fidelity" picks steps; no network there; junit-xml travels as a wheel in .whl/). Results: $OUT/results.tgz and logs.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/junit_xml*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=/tmp/runs; mkdir -p "$R"
trap 'tar czf "$OUT/results.tgz" -C "$R" . 2>/dev/null' EXIT
step() { echo "=== $* ($(date -u +%H:%M:%S))"; }
step doctor; nvidia-smi -L; python3 -m harness doctor
ALL="softmax layer_norm rms_norm gelu silu_and_mul add sum mm"
want() { case " ${STEPS:-core capture kernels fidelity} " in *" $1 "*) return 0;; esac; return 1; }
if want core; then
  step core run; timeout ${CORE_TIMEOUT:-330} python3 -m harness run --backend cuda --ops $ALL --level core --out "$R/core" --progress plain > "$R/core.log" 2>&1; echo "rc=$?"
  tail -5 "$R/core.log"; cat "$R/core/report.md" 2>/dev/null | head -120
fi
if want capture; then
step capture faults
timeout 90 python3 -m harness run --backend cuda --ops-module tests/data/capture_ops.py \
  --ops capture_refuser capture_fatal capture_poison add --shapes-file tests/data/capture_shapes.yaml \
  --dtypes fp32 --out "$R/capture" --progress plain > "$R/capture.log" 2>&1; echo "rc=$?"
tail -8 "$R/capture.log"; cut -d, -f1,9,11,19,20 "$R/capture/summary.csv" 2>/dev/null; cat "$R/capture/ops_status.csv" 2>/dev/null
fi
want kernels && step kernels && timeout 110 python3 benchmarks/kernels.py --out "$R/kernels.json" 2>&1 | tail -14
want fidelity && step fidelity && timeout ${FID_TIMEOUT:-200} python3 benchmarks/timing_fidelity.py --out "$R/timing_fidelity.json" 2>&1 | tail -14
step done
