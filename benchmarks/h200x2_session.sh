#!/usr/bin/env bash
# GPU checks on a machine with two H200s (no network there), one call:
#   1. both GPUs: benchmarks/batch_scaling.py (the built-in ops, core, bf16, on 1 device then 2);
#   2. then side by side, GPU 0: benchmarks/kernels.py, autotune record -> replay (with one shape the
#      record lacks), and `harness ab` with a no-op switch; GPU 1: FlagGems' own suite (softmax, mm)
#      at v5.0.0 with the flag-gems 5.0.0 wheel.
# STEPS="scaling gpu0 gpu1" picks steps. Needs, carried: .whl/ (benchmarks/fetch_device_wheels.sh)
# and, for gpu1, .flaggems/v5.0.0/benchmark (docs/flaggems.md). Results: $OUT/results.tgz and logs.
# Every step has a timeout: about 9 minutes at worst.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/h200x2-out}
R=/tmp/h200x2; mkdir -p "$OUT" "$R"
trap 'tar czf "$OUT/results.tgz" -C "$R" . 2>/dev/null' EXIT
step() { echo "=== $* ($(date -u +%H:%M:%S))"; }
want() { case " ${STEPS:-scaling gpu0 gpu1} " in *" $1 "*) return 0;; esac; return 1; }
column() {  # one run directory's cases: id, status, timer, candidate median, autotune, notes (cut)
  python3 - "$@" <<'PY'
import json, sys
for d in sys.argv[1:]:
    print("--", d)
    for line in open(d + "/records.jsonl"):
        r = json.loads(line)
        c = (r.get("candidate") or {}).get("summary") or {}
        print(" ", r["case_id"], r["status"], r.get("timer"), c.get("median"), "autotune=" + str(r.get("autotune")),
              "|", "; ".join(r.get("notes") or [])[:140])
PY
}

step install wheels
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/junit_xml-*.whl .whl/six-*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site500 .whl/flag_gems-5.0.0/*.whl \
  .whl/sqlalchemy-*cp312*.whl .whl/greenlet-*.whl 2>/dev/null ||
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site500 .whl/flag_gems-5.0.0/*.whl .whl/py3/*.whl
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'gpus', torch.cuda.device_count())"

if want scaling; then
  step batch scaling, 2 GPUs
  timeout 250 python3 benchmarks/batch_scaling.py --work-dir "$R/bs" --out "$R/batch_scaling.json" > "$R/batch_scaling.log" 2>&1
  echo "rc=$?"; tail -16 "$R/batch_scaling.log"
  cat "$R/bs/1dev/ops_status.csv" "$R/bs/2dev/ops_status.csv" 2>/dev/null
fi

gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  S=benchmarks/h200x2_shapes
  step kernels; timeout 110 python3 benchmarks/kernels.py --out "$R/kernels.json" 2>&1 | tail -14
  step autotune record
  timeout 90 python3 -m harness run --backend cuda --ops mm --dtypes bfloat16 --shapes-file $S/replay_record.yaml \
    --out "$R/at-record" --progress plain > "$R/at-record.log" 2>&1; echo "rc=$?"
  step autotune replay
  timeout 90 python3 -m harness run --backend cuda --ops mm --dtypes bfloat16 --shapes-file $S/replay_more.yaml \
    --replay-from "$R/at-record" --out "$R/at-replay" --progress plain > "$R/at-replay.log" 2>&1; echo "rc=$?"
  column "$R/at-record" "$R/at-replay"; ls "$R/at-record"/autotune* 2>/dev/null
  step "harness ab, no-op switch"
  timeout 200 python3 -m harness ab --b-env HARNESS_AB_NOOP=1 --repeats 2 --out "$R/ab" -- --backend cuda \
    --ops softmax mm --dtypes bfloat16 --shapes-file $S/ab.yaml --progress plain > "$R/ab.log" 2>&1; echo "rc=$?"
  tail -6 "$R/ab.log"; head -30 "$R/ab/compare.md" 2>/dev/null
  for d in "$R"/ab/repeats/*/; do [ -f "$d/records.jsonl" ] && column "${d%/}"; done 2>/dev/null | head -40
  step "gpu0 done"
}

gpu1() {
  export CUDA_VISIBLE_DEVICES=1
  step "FlagGems suite v5.0.0 (wheel 5.0.0): softmax mm"
  PYTHONPATH=/tmp/site500:/tmp/site:$PWD timeout "${SUITE_TIMEOUT:-330}" python3 -m harness run \
    --suite .flaggems/v5.0.0/benchmark --backend cuda --ops softmax mm \
    --dtypes float16 bfloat16 --shapes-file benchmarks/flaggems_suite_shapes.yaml --op-timeout "${SUITE_OP_TIMEOUT:-300}" \
    --out "$R/suite-5.0.0" --progress plain > "$R/suite-5.0.0.log" 2>&1
  echo "rc=$?"; tail -4 "$R/suite-5.0.0.log"; cat "$R/suite-5.0.0/ops_status.csv" 2>/dev/null
  column "$R/suite-5.0.0"
  step "gpu1 done"
}

want gpu0 && gpu0 > "$R/gpu0.log" 2>&1 &
want gpu1 && gpu1 > "$R/gpu1.log" 2>&1 &
wait
cat "$R/gpu0.log" "$R/gpu1.log" 2>/dev/null
step "done"
