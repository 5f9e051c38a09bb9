#!/usr/bin/env bash
# Session 16, call 1: capture_pool (what a failed capture leaves of the stream and the caching
# allocator: as the graph timer captured before ea688fb, ended by hand, and the graph timer of
# ea688fb), then sample-50: linalg_lu_factor_ex_out whole (both dtypes), with the sliced check
# (2f80b33) and the pool ended after each failed capture (ea688fb), the GPU's memory in use
# sampled every second.
set -u
exec > >(tee "$OUT/call1.log") 2>&1
cat .corpus/commit; git log --oneline -1; git status --short | head; nvidia-smi -L
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'
t0=$(date +%s)
timeout 150 python3 benchmarks/capture_pool.py --out "$OUT/capture-pool.json"; echo "capture_pool rc=$? $(( $(date +%s) - t0 )) s"
R=/tmp/runs50
mkdir -p $R/sample-1 && cp .corpus/02d-ops_status.csv $R/sample-1/ops_status.csv
mkdir -p "$OUT/pA"
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 1000 > "$OUT/memory-used.csv" 2>/dev/null &
smi=$!
RUNS=$R SAMPLE_SIZE=200 STEPS=rerun OP_TIMEOUT=${OPT:-470} HARNESS_ARGS="--plugins -wall --ir off" RUN_NAME=sample-50 \
  RERUN_OPS=.corpus/list-47.txt RERUN_BUDGET_S=${BUDGET:-490} ARCHIVE_TO="$OUT/pA" python3 benchmarks/flaggems_corpus.py run --out /tmp/cA
echo "sample-50 rc=$? $(( $(date +%s) - t0 )) s"; cat $R/sample-50/ops_status.csv
kill $smi
tar czf "$OUT/cA.tgz" -C /tmp cA
echo "done $(( $(date +%s) - t0 )) s"
