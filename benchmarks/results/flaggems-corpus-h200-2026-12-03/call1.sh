#!/usr/bin/env bash
# Session 14, call 1: capture_rng (what a failed capture leaves of the generator, and the put-back),
# then sample-44: the sample's ops that were on the CUDA deny list, with the list emptied, plus
# perf_fft and fractional_max_pool2d_backward (unended in the merged sample), led by tan.
set -u
exec > >(tee "$OUT/call1.log") 2>&1
cat .corpus/commit; nvidia-smi -L; python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'
t0=$(date +%s)
timeout 90 python3 benchmarks/capture_rng.py --out "$OUT/capture-rng.json"; echo "capture_rng rc=$? $(( $(date +%s) - t0 )) s"
python3 .corpus/nodeny.py; git diff --stat
mkdir -p /tmp/runs44/sample-1 && cp .corpus/02d-ops_status.csv /tmp/runs44/sample-1/ops_status.csv
mkdir -p "$OUT/p44"
RUNS=/tmp/runs44 SAMPLE_SIZE=200 OP_TIMEOUT=300 HARNESS_ARGS="--plugins -wall --ir off" STEPS=rerun \
  RUN_NAME=sample-44 RERUN_OPS=.corpus/list-44.txt RERUN_BUDGET_S=${BUDGET:-440} ARCHIVE_TO="$OUT/p44" \
  python3 benchmarks/flaggems_corpus.py run --out /tmp/c44
echo "corpus rc=$? $(( $(date +%s) - t0 )) s"
cat /tmp/runs44/sample-44/ops_status.csv 2>/dev/null
tar czf "$OUT/c44.tgz" -C /tmp c44
echo "done $(( $(date +%s) - t0 )) s"
