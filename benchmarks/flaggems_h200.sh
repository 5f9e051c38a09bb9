#!/usr/bin/env bash
# FlagGems on one H200, no network: (1) provider flaggems over the 8 built-in ops, (2) FlagGems' own
# suite (softmax, mm) under the harness at v5.0.2 with the 5.0.2 wheel, (3) the same at v5.0.0 with
# the 5.0.0 wheel (v5.0.2's mm benchmark raises UnboundLocalError in FlagGems itself;
# benchmarks/results/h200x2-2026-11-29/README.md).
# Needs, carried next to the working tree: .whl/ (wheels) and .flaggems/ (FlagGems benchmark/ trees).
# Results: $OUT/flaggems*/ (run directories) and the tables printed below. About 4-5 minutes
# expected; every step has a timeout, 9.5 minutes at worst.
# STEPS="list provider suite502 suite500" picks steps (default all); DEVICES="0 1" shards the
# provider run over two GPUs (mm, autotuned, weighs as much as the seven others together);
# PROVIDER_TIMEOUT (default 240 s) bounds the provider step.
set -u
want() { case " ${STEPS:-list provider suite502 suite500} " in *" $1 "*) return 0;; esac; return 1; }
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/flaggems-out}
mkdir -p "$OUT"
step() { echo "=== $* ($(date -u +%H:%M:%S))"; }
table() {  # the summary of a run directory: one line per case
  python3 - "$1" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/summary.csv")))
cols = ("case_id", "status", "timer", "baseline_median_ms", "candidate_median_ms", "speedup", "gbps", "tflops", "max_abs_err")
print("  ".join(cols))
for r in rows:
    print("  ".join(r[c] for c in cols), ("| " + r["notes"][:100]) if r["status"] != "pass" else "")
PY
  cat "$1/ops_status.csv"
}

step install wheels
# sqlalchemy/greenlet are cp312 builds; on another Python, the pure-Python sqlalchemy (.whl/py3) serves.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl ||
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    .whl/flag_gems-5.0.2-*.whl .whl/junit_xml-*.whl .whl/six-*.whl .whl/py3/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site500 .whl/flag_gems-5.0.0/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"

want list && step "list ops --provider flaggems" && timeout 90 python3 -m harness list ops --provider flaggems 2>&1 | head -14

if want provider; then
step "provider flaggems, 8 ops"
# shellcheck disable=SC2086  # DEVICES is a list of ids
timeout "${PROVIDER_TIMEOUT:-240}" python3 -m harness run --backend cuda --provider flaggems \
  --ops softmax layer_norm rms_norm gelu silu_and_mul add sum mm --level core \
  --shapes-file benchmarks/flaggems_h200_shapes.yaml --op-timeout "${OP_TIMEOUT:-120}" \
  ${DEVICES:+--devices $DEVICES} --out "$OUT/flaggems" --progress plain > "$OUT/flaggems.log" 2>&1
echo "rc=$?"; tail -4 "$OUT/flaggems.log"; table "$OUT/flaggems"
fi

if want suite502; then
step "suite v5.0.2 (wheel 5.0.2): softmax mm"
timeout 120 python3 -m harness run --suite .flaggems/benchmark --backend cuda --ops softmax mm \
  --dtypes float16 bfloat16 --shapes-file benchmarks/flaggems_suite_shapes.yaml --op-timeout 80 \
  --out "$OUT/flaggems-suite-5.0.2" --progress plain > "$OUT/flaggems-suite-5.0.2.log" 2>&1
echo "rc=$?"; tail -3 "$OUT/flaggems-suite-5.0.2.log"; table "$OUT/flaggems-suite-5.0.2"
fi

if want suite500; then
step "suite v5.0.0 (wheel 5.0.0): softmax mm"
PYTHONPATH=/tmp/site500:/tmp/site:$PWD timeout 120 python3 -m harness run \
  --suite .flaggems/v5.0.0/benchmark --backend cuda --ops softmax mm \
  --dtypes float16 bfloat16 --shapes-file benchmarks/flaggems_suite_shapes.yaml --op-timeout 80 \
  --out "$OUT/flaggems-suite-5.0.0" --progress plain > "$OUT/flaggems-suite-5.0.0.log" 2>&1
echo "rc=$?"; tail -3 "$OUT/flaggems-suite-5.0.0.log"; table "$OUT/flaggems-suite-5.0.0"
fi

step "identity"
runs=()
for d in "$OUT/flaggems" "$OUT/flaggems-suite-5.0.2" "$OUT/flaggems-suite-5.0.0"; do [ -f "$d/run.json" ] && runs+=("$d"); done
python3 -c "
import json, sys
for d in sys.argv[1:]:
    info = json.load(open(d + '/run.json'))
    print(d.rsplit('/', 1)[-1], info['identity'].get('device_name'), info['identity'].get('flag_gems'), info.get('suite', {}).get('ref', ''))
" "${runs[@]}"
step "done"
