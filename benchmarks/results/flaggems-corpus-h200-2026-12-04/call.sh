#!/usr/bin/env bash
# One call on the H200 for the seed-nightly-b sample (SAMPLE_SEED=nightly-b, 206 ops in 16 parts,
# parts weighted by the 2026-12-03c sample's op times):
#   AB=1: the device_inputs plugin's A/B on xor__ (FlagGems' CPU draw, then the device draw), after
#         a check that the device draws FlagGems' integer and bool ranges;
#   for each part K of KS: the part cold (an empty Triton and FlagGems cache of its own, live
#         autotuning: --triton-cache user on fresh folders), then the ops it ended measured again
#         warm (the same caches kept) with its autotune configs replayed (--replay-from the part):
#         what a nightly with a kept cache and last night's configs does. From call 8: only the ops
#         that ended cold on this machine (the caches live in its /tmp), CRASH and TIMEOUT included;
#         runs.tgz written after each part, so a cut call keeps the parts it finished.
#   COLD_FIRST=1: every part of KS cold first, then their warm passes with the time left.
#   CHECK_OPS="a b": first a run of those ops alone with the same settings (check-c$CALL).
# Budgets come from DEADLINE_S (seconds from the start of this script); what ran is in $OUT.
set -u
exec > >(tee "$OUT/call${CALL}.log") 2>&1
t0=$(date +%s)
left() { echo $(( DEADLINE_S - ($(date +%s) - t0) )); }
# ops K ended: the ops of part K that ended cold so far; ops K to-warm: those that ended cold on
# this machine (its caches hold their kernels: sample-K/cold-on-<machine>.txt) and ran no warm pass.
ops() { python3 - "$RUNS" "$1" "$2" "$MID" <<'P'
import csv, sys
from pathlib import Path
runs, k, what, mid = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
status = runs / f"sample-{k}" / "ops_status.csv"
rows = list(csv.DictReader(open(status))) if status.is_file() else []
ended = [r["op"] for r in rows if r["status"] in ("PASS", "FAIL", "SKIP", "ERROR", "CRASH", "TIMEOUT")]
if what == "to-warm":
    here = runs / f"sample-{k}" / f"cold-on-{mid}.txt"
    done = {r["op"] for f in runs.glob(f"warm-{k}-c*/ops_status.csv") for r in csv.DictReader(open(f))
            if r["status"] in ("PASS", "FAIL", "SKIP", "ERROR", "CRASH", "TIMEOUT")}
    ended = [op for op in (here.read_text().split() if here.is_file() else []) if op not in done]
print("\n".join(ended))
P
}
save() { python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import flaggems_corpus as c; from pathlib import Path; c.archive(Path('$OUT'))"; }
cat .corpus/commit; nvidia-smi -L
[ -f /tmp/machine-id ] || python3 -c 'import uuid; print(uuid.uuid4().hex[:8])' > /tmp/machine-id
MID=$(cat /tmp/machine-id)  # /tmp, and the parts' caches in it, last as long as this machine
export RUNS=${RUNS:-/tmp/runs} SITE=/tmp/site SAMPLE_SIZE=200 SAMPLE_SEED=nightly-b PARTS=16 OP_TIMEOUT=${OP_TIMEOUT:-150} \
  SHARD_WEIGHTS=benchmarks/results/flaggems-corpus-h200-2026-12-03c/ops_status.csv GEMS_VENDOR=nvidia PYTHONUNBUFFERED=1
mkdir -p $RUNS
python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE $(ls .whl/*.whl | grep -v /flag_gems-) .whl/flaggems-v5.3.4/*.whl
export PYTHONPATH=$SITE:$PWD
python3 -c 'import torch, triton, flag_gems; print(torch.__version__, triton.__version__, flag_gems.__version__)'
common=(--progress plain --backend cuda --suite .flaggems/v5.3.4/benchmark --level core --dtypes bfloat16 --devices 0
        --op-timeout $OP_TIMEOUT --cap-ms 300)
if [ "${AB:-0}" = 1 ]; then
  python3 - <<'P'
import torch
for dt in (torch.int16, torch.int32, torch.int64):
    x = torch.randint(torch.iinfo(dt).min, torch.iinfo(dt).max, (1 << 24,), dtype=dt, device="cuda")
    print(dt, "min", int(x.min()), "max", int(x.max()), "of", torch.iinfo(dt).min, torch.iinfo(dt).max)
b = torch.randint(0, 2, (1 << 24,), dtype=torch.bool, device="cuda")
print("bool true share", float(b.float().mean()))
P
  for side in cpu device; do
    toggles="-wall"; [ $side = cpu ] && toggles="-wall -device_inputs"
    s=$(date +%s)
    timeout 400 python3 -m harness run "${common[@]}" --ops xor__ --plugins $toggles --ir off --out $RUNS/ab-$side >/dev/null 2>&1
    echo "ab-$side rc=$? $(( $(date +%s) - s )) s"; cat $RUNS/ab-$side/ops_status.csv; grep "harness device_inputs" $RUNS/ab-$side/logs/xor__.log
  done
fi
cold() {  # part $1 cold: its own empty caches, live autotuning; records the ops it ended on this machine
  local K=$1 budget=$2
  export TRITON_CACHE_DIR=/tmp/cache-$K/triton FLAGGEMS_CACHE_DIR=/tmp/cache-$K/flaggems
  echo "=== part $K cold, budget $budget s ($(left) s left)"
  ops $K ended > /tmp/before-$K
  SKIP_SETUP=1 STEPS=sample$K SAMPLE_BUDGET_S=$budget GRACE_S=${GRACE_S:-60} ARCHIVE=0 \
    HARNESS_ARGS="--plugins -wall --ir off --triton-cache user" python3 benchmarks/flaggems_corpus.py run --out /tmp/c$K
  cat $RUNS/sample-$K/ops_status.csv
  ops $K ended | grep -vxFf /tmp/before-$K >> $RUNS/sample-$K/cold-on-$MID.txt
}
warm() {  # the ops part $1 ended cold on this machine, measured again with its caches and configs
  local K=$1 budget=$2 W=warm-$1-c$CALL
  export TRITON_CACHE_DIR=/tmp/cache-$K/triton FLAGGEMS_CACHE_DIR=/tmp/cache-$K/flaggems
  ops $K to-warm > $RUNS/$W.txt
  [ -s $RUNS/$W.txt ] || { echo "part $K: no op left to measure warm"; return; }
  echo "=== part $K warm and replayed, $(wc -l < $RUNS/$W.txt) ops, budget $budget s"
  local s=$(date +%s)
  timeout $(( budget + 60 )) python3 -m harness run "${common[@]}" --ops-file $RUNS/$W.txt --replay-from $RUNS/sample-$K \
    --plugins -wall --ir off --triton-cache user --budget $budget --out $RUNS/$W > $RUNS/$W.log 2>&1
  echo "$W rc=$? $(( $(date +%s) - s )) s"; tail -3 $RUNS/$W.log; cat $RUNS/$W/ops_status.csv
}
if [ -n "${CHECK_OPS:-}" ]; then  # a short run of named ops with the sample's settings (its own caches)
  s=$(date +%s)
  TRITON_CACHE_DIR=/tmp/cache-check/triton FLAGGEMS_CACHE_DIR=/tmp/cache-check/flaggems timeout 300 \
    python3 -m harness run "${common[@]}" --ops $CHECK_OPS --plugins -wall --ir off --triton-cache user \
    --out $RUNS/check-c$CALL > $RUNS/check-c$CALL.log 2>&1
  echo "check-c$CALL rc=$? $(( $(date +%s) - s )) s"; tail -3 $RUNS/check-c$CALL.log; cat $RUNS/check-c$CALL/ops_status.csv
fi
if [ "${COLD_FIRST:-0}" = 1 ]; then
  # every part of KS cold first, then the warm passes with what is left: a cut call keeps the cold
  # runs (the projection and the causes need every op cold; the warm ratio has many ops already)
  for K in $KS; do
    [ $(( $(left) - ${RESERVE_S:-60} )) -lt 60 ] && { echo "part $K: $(left) s left, not started"; break; }
    cold $K $(( $(left) - ${RESERVE_S:-60} )); save
  done
  for K in $KS; do
    [ $(( $(left) - ${RESERVE_S:-60} )) -lt 30 ] && { echo "part $K: no time for the warm pass"; break; }
    warm $K $(( $(left) - ${RESERVE_S:-60} )); save
  done
else
  for K in $KS; do
    budget=$(( ($(left) - ${RESERVE_S:-60}) * ${COLD_SHARE:-55} / 100 ))
    [ $budget -lt 60 ] && { echo "part $K: $(left) s left, not started"; break; }
    cold $K $budget
    [ $(( $(left) - ${RESERVE_S:-60} )) -lt 30 ] && { echo "part $K: no time for the warm pass"; break; }
    warm $K $(( $(left) - ${RESERVE_S:-60} ))
    save  # a call cut after this part keeps it
  done
fi
save
echo "done $(( $(date +%s) - t0 )) s"
