#!/usr/bin/env bash
# Session 15, call 1: pairwise_distance recorded then replayed (its autotune configs from the
# first run seed the second), then sample-46: linalg_lu_factor_ex_out with the put-back, led by tan.
set -u
exec > >(tee "$OUT/call1.log") 2>&1
cat .corpus/commit; nvidia-smi -L; python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'
t0=$(date +%s)
R=/tmp/runs46
mkdir -p $R/sample-1 && cp .corpus/02d-ops_status.csv $R/sample-1/ops_status.csv
mkdir -p "$OUT/pA" "$OUT/pB" "$OUT/pC"
common="RUNS=$R SAMPLE_SIZE=200 STEPS=rerun"
env $common OP_TIMEOUT=200 HARNESS_ARGS="--plugins -wall --ir off" RUN_NAME=pw-record RERUN_OPS=.corpus/list-pwr.txt \
  RERUN_BUDGET_S=${BA:-150} ARCHIVE_TO="$OUT/pA" python3 benchmarks/flaggems_corpus.py run --out /tmp/cA
echo "pw-record rc=$? $(( $(date +%s) - t0 )) s"; cat $R/pw-record/ops_status.csv; ls $R/pw-record/autotune | head
env $common SKIP_SETUP=1 OP_TIMEOUT=200 HARNESS_ARGS="--plugins -wall --ir off --replay-from $R/pw-record" RUN_NAME=pw-replay \
  RERUN_OPS=.corpus/list-pwp.txt RERUN_BUDGET_S=${BB:-140} ARCHIVE_TO="$OUT/pB" python3 benchmarks/flaggems_corpus.py run --out /tmp/cB
echo "pw-replay rc=$? $(( $(date +%s) - t0 )) s"; cat $R/pw-replay/ops_status.csv
python3 - <<'PY'
import json, collections
for name in ("pw-record", "pw-replay"):
    c = collections.Counter()
    for line in open(f"/tmp/runs46/{name}/records.jsonl"):
        r = json.loads(line); c[(r.get("op"), r.get("autotune"), r.get("status"))] += 1
    print(name, dict(c))
PY
env $common SKIP_SETUP=1 OP_TIMEOUT=200 HARNESS_ARGS="--plugins -wall --ir off" RUN_NAME=sample-46 RERUN_OPS=.corpus/list-46.txt \
  RERUN_BUDGET_S=${BC:-220} ARCHIVE_TO="$OUT/pC" python3 benchmarks/flaggems_corpus.py run --out /tmp/cC
echo "sample-46 rc=$? $(( $(date +%s) - t0 )) s"; cat $R/sample-46/ops_status.csv
tar czf "$OUT/cABC.tgz" -C /tmp cA cB cC
echo "done $(( $(date +%s) - t0 )) s"
