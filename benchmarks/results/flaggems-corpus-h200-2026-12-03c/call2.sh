#!/usr/bin/env bash
# Session 16, call 2: capture_pool again, cuBLAS warmed up before any capture (call 1's control
# failed its later capture for want of it), then sample-49: linalg_lu_factor's four rows a 530 s
# op timeout cut in the tenth session (float64, [1024, 512, 512] and [4096, 512, 512], both
# pivots), alone with a shapes file.
set -u
exec > >(tee "$OUT/call2.log") 2>&1
git log --oneline -1; git status --short | head; nvidia-smi -L
t0=$(date +%s)
timeout 150 python3 benchmarks/capture_pool.py --out "$OUT/capture-pool.json"; echo "capture_pool rc=$? $(( $(date +%s) - t0 )) s"
R=/tmp/runs49
mkdir -p $R/sample-1 && cp .corpus/02d-ops_status.csv $R/sample-1/ops_status.csv
mkdir -p "$OUT/pB"
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 1000 > "$OUT/memory-used.csv" 2>/dev/null &
smi=$!
RUNS=$R SAMPLE_SIZE=200 STEPS=rerun OP_TIMEOUT=${OPT:-480} RUN_NAME=sample-49 \
  HARNESS_ARGS="--plugins -wall --ir off --dtypes float64 --shapes-file .corpus/lu-batched.yaml" \
  RERUN_OPS=.corpus/list-49.txt RERUN_BUDGET_S=${BUDGET:-500} ARCHIVE_TO="$OUT/pB" python3 benchmarks/flaggems_corpus.py run --out /tmp/cB
echo "sample-49 rc=$? $(( $(date +%s) - t0 )) s"; cat $R/sample-49/ops_status.csv
kill $smi
tar czf "$OUT/cB.tgz" -C /tmp cB
echo "done $(( $(date +%s) - t0 )) s"
