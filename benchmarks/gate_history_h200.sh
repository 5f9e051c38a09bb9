#!/usr/bin/env bash
# Independent runs on one H200 for judging `harness gate` with run-to-run spread taken from a
# history of earlier runs (issue "The FlagGems nightly as a product", item 5). Runs the
# committed HEAD (exported clean, so uncommitted edits in the calling tree do not travel into
# the measurement): benchmarks/gate_calibration.py in its independent mode, every built-in op
# on its reduced core shapes, bf16, with softmax, layer_norm and add also timed as 10% slowed
# copies. Every run directory (run.json, records.jsonl with raw samples) comes back in
# runs.tgz, so the history-based gate can be judged offline on the CPU.
# Needs junit-xml and six in .whl/ (benchmarks/fetch_device_wheels.sh; carry .whl).
# Writes into $OUT: gate_calibration.json, gate_calibration-samples.json.gz, runs.tgz, session.log
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
RUNS=${RUNS:-6}
mkdir -p "$OUT"
exec > >(tee "$OUT/session.log") 2>&1
START=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/junit_xml*.whl .whl/six*.whl || exit 1
if COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  rm -rf /tmp/clean && mkdir -p /tmp/clean && git archive HEAD | tar -x -C /tmp/clean || exit 1
  cd /tmp/clean
else
  COMMIT="? (no .git here: the working tree as sent)"; git status --short 2>/dev/null
fi
export PYTHONPATH=/tmp/site:$PWD
echo "=== $(date -u +%FT%TZ) commit $COMMIT (clean export)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
python3 -c 'import torch, triton, scipy; print("torch", torch.__version__, "triton", triton.__version__, "scipy", scipy.__version__)'
timeout 560 python3 benchmarks/gate_calibration.py --backend cuda --dtypes bf16 --shapes reduced \
  --modes independent --runs "$RUNS" --slow-op softmax layer_norm add --slowdown 10 \
  --deadline-s 540 --work /tmp/calibration \
  --run-args="--triton-cache user --ir off --plugins -wall" \
  --out "$OUT/gate_calibration.json" --samples-out "$OUT/gate_calibration-samples.json.gz"
echo "rc=$?"
(cd /tmp/calibration && tar -czf "$OUT/runs.tgz" --exclude='*.log' --exclude='logs' --exclude='autotune' --exclude='specs' .)
ls -la "$OUT"
echo "=== done after $(( $(date +%s) - START )) s"
