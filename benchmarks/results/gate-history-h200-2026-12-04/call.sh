#!/usr/bin/env bash
# One call on the H200 for the gate's calibration with a history: runs rep-FIRST.. of the ops in
# ops.txt (beside this file), each a `harness run` of its own (its own processes: independent runs
# of the same code), with the autotune configs of the seed-nightly-b sample replayed (--replay-from
# REPLAY, the merged sample's run.json and autotune/) and one Triton and FlagGems cache kept across
# the call's runs (the call's first run compiles into it, as a nightly's first on a new cache).
# The nightly's options otherwise (bf16, --level core, --cap-ms 300, pre-start depth 3). A run is
# started only while DEADLINE_S (seconds from this script's start) leaves room for one more like
# the last. What ran: $OUT/call$CALL.log and $OUT/runs.tgz (the runs, benchmarks/flaggems_corpus.py's
# archive: records, statuses, logs).
set -u
exec > >(tee "$OUT/call${CALL}.log") 2>&1
t0=$(date +%s)
left() { echo $(( DEADLINE_S - ($(date +%s) - t0) )); }
here=$(dirname "$0")
cat .corpus/commit; nvidia-smi -L
export SITE=/tmp/site RUNS=/tmp/reps GEMS_VENDOR=nvidia PYTHONUNBUFFERED=1 \
  TRITON_CACHE_DIR=/tmp/rep-cache/triton FLAGGEMS_CACHE_DIR=/tmp/rep-cache/flaggems
mkdir -p $RUNS
python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE $(ls .whl/*.whl | grep -v /flag_gems-) .whl/flaggems-v5.3.4/*.whl
export PYTHONPATH=$SITE:$PWD
python3 -c 'import torch, triton, flag_gems; print(torch.__version__, triton.__version__, flag_gems.__version__)'
last=${FIRST_ESTIMATE_S:-150}
for i in $(seq "$FIRST" "$LAST"); do
  [ "$(left)" -lt $(( last + 20 )) ] && { echo "rep-$i: $(left) s left, the last run took $last s: not started"; break; }
  s=$(date +%s)
  timeout $(( $(left) - 10 )) python3 -m harness run --progress plain --backend cuda --suite .flaggems/v5.3.4/benchmark \
    --level core --dtypes bfloat16 --devices 0 --op-timeout 300 --cap-ms 300 --plugins -wall --ir off \
    --triton-cache user --replay-from "$REPLAY" --ops-file "$here/ops.txt" --out $RUNS/rep-$i > $RUNS/rep-$i.log 2>&1
  rc=$?; last=$(( $(date +%s) - s ))
  echo "rep-$i rc=$rc $last s: $(tail -n +2 $RUNS/rep-$i/ops_status.csv | cut -d, -f1,3,5 | tr '\n' ' ')"
done
python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import flaggems_corpus as c; from pathlib import Path; c.archive(Path('$OUT'))"
echo "done $(( $(date +%s) - t0 )) s"
