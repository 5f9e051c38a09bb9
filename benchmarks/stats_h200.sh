#!/usr/bin/env bash
# Issue 14's GPU evidence in one call on the H200 machine (about 8 minutes; bounded at 8.7):
#   1. benchmarks/small_kernels.py: kernels under 5 us, every timer and variant against the
#      profiler's kernel time, and the cost of a clock reading (about 60-90 s; it starts no case
#      after 100 s);
#   2. benchmarks/gate_calibration.py: 3 independent `harness run`s, `harness gate-run` (2 runs a
#      side) and `harness ab` (1 run a side), every built-in op on 11 core shapes, bf16, each A/A
#      and with softmax slowed 10%: 9 runs of about 40 s (16 rows of the 8 ops took 62 s there with
#      compiling and IR capture, 2026-12-01; these runs share the user's Triton cache and keep no
#      IR). A mode that would end after the deadline is skipped; results are written after each.
# Needs junit-xml (and six) as wheels in .whl/ (benchmarks/fetch_device_wheels.sh; carry .whl);
# torch, triton, numpy, pyyaml, pytest and scipy are on the machine. Writes into $OUT:
#   small_kernels.json, gate_calibration.json, gate_calibration-samples.json.gz, session.log
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/session.log") 2>&1
START=$(date +%s)
if ls .whl/junit_xml*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/junit_xml*.whl .whl/six*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
echo "=== $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo '?')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
python3 -c 'import torch, triton, scipy; print("torch", torch.__version__, "triton", triton.__version__, "scipy", scipy.__version__)'

echo "=== small kernels ($(date -u +%T))"
timeout 130 python3 benchmarks/small_kernels.py --deadline-s 100 --out "$OUT/small_kernels.json"
echo "rc=$?"

LEFT=$(( ${BUDGET_S:-500} - ($(date +%s) - START) ))
echo "=== gate calibration ($(date -u +%T)), ${LEFT} s left"
timeout $(( LEFT + 20 )) python3 benchmarks/gate_calibration.py --backend cuda --dtypes bf16 --shapes reduced \
  --runs 3 --gate-repeats 2 --ab-repeats 1 --deadline-s "$LEFT" --work /tmp/calibration \
  --run-args="--triton-cache user --ir off --plugins -wall" --out "$OUT/gate_calibration.json"
echo "rc=$?"
echo "=== done after $(( $(date +%s) - START )) s"
