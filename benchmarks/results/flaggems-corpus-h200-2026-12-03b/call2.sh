#!/usr/bin/env bash
# Session 15, call 2: sample-47, linalg_lu_factor_ex_out alone with the put-back and a 540 s op
# timeout (call 1's 200 s ended it after 18 of its 28 rows).
set -u
exec > >(tee "$OUT/call2.log") 2>&1
cat .corpus/commit; nvidia-smi -L
t0=$(date +%s)
R=/tmp/runs47
mkdir -p $R/sample-1 && cp .corpus/02d-ops_status.csv $R/sample-1/ops_status.csv
mkdir -p "$OUT/pD"
RUNS=$R SAMPLE_SIZE=200 STEPS=rerun OP_TIMEOUT=540 HARNESS_ARGS="--plugins -wall --ir off" RUN_NAME=sample-47 \
  RERUN_OPS=.corpus/list-47.txt RERUN_BUDGET_S=560 ARCHIVE_TO="$OUT/pD" python3 benchmarks/flaggems_corpus.py run --out /tmp/cD
echo "sample-47 rc=$? $(( $(date +%s) - t0 )) s"; cat $R/sample-47/ops_status.csv
tar czf "$OUT/cD.tgz" -C /tmp cD
echo "done $(( $(date +%s) - t0 )) s"
