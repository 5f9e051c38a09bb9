#!/usr/bin/env bash
# Session 15, call 3: compare_memory (the correctness check whole and in slices, 1G elements),
# then sample-48: linalg_lu_factor_ex_out's float64 rows with the sliced check (call 2's last row, 4096x512x512
# float64, ran the whole check out of memory).
set -u
exec > >(tee "$OUT/call3.log") 2>&1
cat .corpus/commit; git diff --stat; nvidia-smi -L
t0=$(date +%s)
timeout 90 python3 benchmarks/compare_memory.py --out "$OUT/compare-memory.json"; echo "compare_memory rc=$? $(( $(date +%s) - t0 )) s"
R=/tmp/runs48
mkdir -p $R/sample-1 && cp .corpus/02d-ops_status.csv $R/sample-1/ops_status.csv
mkdir -p "$OUT/pE"
RUNS=$R SAMPLE_SIZE=200 STEPS=rerun OP_TIMEOUT=${OPT:-330} HARNESS_ARGS="--plugins -wall --ir off --dtypes float64" RUN_NAME=sample-48 \
  RERUN_OPS=.corpus/list-47.txt RERUN_BUDGET_S=${BUDGET:-345} ARCHIVE_TO="$OUT/pE" python3 benchmarks/flaggems_corpus.py run --out /tmp/cE
echo "sample-48 rc=$? $(( $(date +%s) - t0 )) s"; cat $R/sample-48/ops_status.csv
tar czf "$OUT/cE.tgz" -C /tmp cE
echo "done $(( $(date +%s) - t0 )) s"
