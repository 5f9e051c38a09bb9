#!/usr/bin/env bash
# Session 14, call 2: sample-45, linalg_lu_factor with the deny list emptied (led by tan)
# then sample-45: the sample's ops that were on the CUDA deny list, with the list emptied, plus
# perf_fft and fractional_max_pool2d_backward (unended in the merged sample), led by tan.
set -u
exec > >(tee "$OUT/call2.log") 2>&1
cat .corpus/commit; nvidia-smi -L; python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'
t0=$(date +%s)
python3 .corpus/nodeny.py; git diff --stat
mkdir -p /tmp/runs45/sample-1 && cp .corpus/02d-ops_status.csv /tmp/runs45/sample-1/ops_status.csv
mkdir -p "$OUT/p45"
RUNS=/tmp/runs45 SAMPLE_SIZE=200 OP_TIMEOUT=${OPT:-530} HARNESS_ARGS="--plugins -wall --ir off" STEPS=rerun \
  RUN_NAME=sample-45 RERUN_OPS=.corpus/list-45.txt RERUN_BUDGET_S=${BUDGET:-450} ARCHIVE_TO="$OUT/p45" \
  python3 benchmarks/flaggems_corpus.py run --out /tmp/c45
echo "corpus rc=$? $(( $(date +%s) - t0 )) s"
cat /tmp/runs45/sample-45/ops_status.csv 2>/dev/null
tar czf "$OUT/c45.tgz" -C /tmp c45
echo "done $(( $(date +%s) - t0 )) s"
