#!/usr/bin/env bash
# Issue 38's GPU evidence on one H200, no network (about 4-6 minutes; every step under `timeout`,
# the whole under 8 minutes):
#   1. shapes: FlagGems v5.3.4's conv2d and conv2d_padding benchmarks with a user's --shapes-file
#      (conv2d reads FlagGems' shape file; conv2d_padding walks a shapes list of its own, so the
#      shapes reach it at its input function: harness/child/input_shapes.py);
#   2. IR for reused kernels: FlagGems' add and mm with --ir on over several shapes of one dtype; a
#      row whose kernels an earlier row compiled lists them with "reused": true;
#   3. seeds: a tiny ops module whose inputs draw from Python's random, numpy and torch's global
#      generators writes a digest of each case's first draws; two runs with --seed 7 and one with
#      --seed 8: per generator, equal between the first two and different in the third;
#   4. causes: FlagGems' scaled_dot_product_attention and conv1d benchmarks, their records' cause
#      and ops_status.csv.
# Carry .whl (junit-xml, six, sqlalchemy, ... and .whl/flaggems-v5.3.4/) and .flaggems (the
# v5.3.4 benchmark tree). torch, triton, numpy, pyyaml and pytest are on the machine.
# BACKEND (default cuda), PY (default python3), WHEELS and SITE let it run on a CPU machine as a check.
# Writes into $OUT (7 files): session.log, shapes.json, ir.json, seeds.json, causes.json,
# ops_status.csv (every run's, with a run column), run_facts.json.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
BACKEND=${BACKEND:-cuda}
PY=${PY:-python3}
SITE=${SITE:-/tmp/site}
WORK=${WORK:-/tmp/seed-parity}
TOTAL_S=${TOTAL_S:-410}  # the steps' end, from the start: the evidence step (30 s at most) after
mkdir -p "$OUT"
rm -rf "$WORK" && mkdir -p "$WORK"
exec > >(tee "$OUT/session.log") 2>&1
START=$(date +%s)
step() { echo "=== $* ($(date -u +%H:%M:%S), $(( $(date +%s) - START )) s)"; }
limit() {  # the timeout for a step planned at $1 s: never past the whole's share
  local left=$(( TOTAL_S - ($(date +%s) - START) ))
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
harness_run() {  # NAME PLANNED_S ARGS...: one `harness run` into $WORK/NAME, its log beside it
  local name=$1 planned=$2 t
  shift 2
  t=$(limit "$planned")
  if [ "$t" -lt 15 ]; then echo "skipped $name: ${t} s left"; return 0; fi
  timeout "$t" "$PY" -m harness run --backend "$BACKEND" --progress plain --out "$WORK/$name" "$@" \
    > "$WORK/$name.log" 2>&1
  echo "$name rc=$? (limit ${t} s)"; tail -3 "$WORK/$name.log"
}

step install wheels
if [ -z "${WHEELS:-}" ]; then  # every wheel but the older FlagGems ones
  for wheel in .whl/*.whl .whl/flaggems-v5.3.4/*.whl; do
    case $wheel in */flag_gems-5.0.*) ;; *) WHEELS="${WHEELS:-} $wheel";; esac
  done
fi
# shellcheck disable=SC2086  # a list of wheel paths
timeout 60 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" $WHEELS || exit 1
export PYTHONPATH=$SITE:$PWD
echo "commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo '? (no .git)')"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv
timeout 60 "$PY" -c 'import torch, triton, numpy; print("torch", torch.__version__, "triton", triton.__version__, "numpy", numpy.__version__)'
SUITE=.flaggems/v5.3.4/benchmark

step "1. conv2d and conv2d_padding with a user's shapes"
cat > "$WORK/conv_shapes.yaml" <<'YAML'
# N, C_in, H, W, C_out, K_h, K_w, stride, padding, groups (FlagGems' Conv2DBenchmark order)
conv2d: [[8, 32, 56, 56, 64, 3, 3, 1, 1, 1]]
conv2d_padding: [[8, 32, 56, 56, 64, 3, 3, 1, 1, 1], [4, 64, 28, 28, 128, 3, 3, 2, 1, 1]]
YAML
harness_run shapes 110 --suite "$SUITE" --ops conv2d conv2d_padding --dtypes float16 \
  --shapes-file "$WORK/conv_shapes.yaml" --ir off --op-timeout 90

step "2. IR for rows whose kernels an earlier row compiled"
cat > "$WORK/ir_shapes.yaml" <<'YAML'
add: [[1024, 1024], [2048, 2048], [4096, 4096]]
mm: [[1, 2048, 2048, 2048], [1, 4096, 4096, 4096]]
YAML
harness_run ir 120 --suite "$SUITE" --ops add mm --dtypes float16 --shapes-file "$WORK/ir_shapes.yaml" \
  --ir on --op-timeout 100

step "3. the same inputs under the same seed: Python random, numpy, torch"
cat > "$WORK/seed_digest_ops.py" <<'PYOPS'
"""Inputs drawn from Python's random, numpy's and torch's global generators and the case's own;
the digest of a case's first draws goes to $SEED_DIGEST_DIR/<shape>-<dtype>.json."""
import hashlib
import json
import math
import os
import random
from pathlib import Path

import numpy
import torch

from harness.ops.base import OpSpec


def _digest(values):
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()[:16]


def _inputs(shape, dtype, gen, device):
    x = torch.randn(shape, dtype=dtype, generator=gen, device=device)
    draws = {"random": _digest([random.random() for _ in range(8)]),
             "numpy": _digest(numpy.random.rand(8).tolist()),
             "torch": _digest(torch.rand(8).tolist()),
             "inputs": hashlib.sha256(x.cpu().numpy().tobytes()).hexdigest()[:16]}
    out = Path(os.environ["SEED_DIGEST_DIR"]) / f"{'x'.join(map(str, shape))}-{dtype}.json".replace("torch.", "")
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(draws))
    return (x,)


HARNESS_OPS = [OpSpec(id="seed_digest", baseline=lambda x: x * 2, candidate=lambda x: x * 2, make_inputs=_inputs,
                      bytes_moved=lambda shape, itemsize: 2 * math.prod(shape) * itemsize,
                      flops=lambda shape: math.prod(shape),
                      description="digests of its draws from random, numpy and torch", dtypes=("float32",))]
PYOPS
printf 'seed_digest: [[1024], [256, 64]]\n' > "$WORK/seed_shapes.yaml"
for run in a:7 b:7 c:8; do
  export SEED_DIGEST_DIR="$WORK/digests/${run%%:*}"
  harness_run "seed-${run%%:*}" 45 --ops-module "$WORK/seed_digest_ops.py" \
    --ops seed_digest --shapes-file "$WORK/seed_shapes.yaml" --dtypes float32 --seed "${run##*:}" --ir off
done

step "4. scaled_dot_product_attention and conv1d: what their rows say"
harness_run causes 90 --suite "$SUITE" --ops scaled_dot_product_attention conv1d --dtypes float16 --ir off \
  --op-timeout 70

step "evidence"
timeout 30 "$PY" - "$WORK" "$OUT" <<'PY'
import csv
import json
import sys
from pathlib import Path

work, out = Path(sys.argv[1]), Path(sys.argv[2])


def records(name):
    path = work / name / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def row(r, *keys):
    return {k: r.get(k) for k in ("op", "case_id", "shape", "status", *keys)}


def dump(name, data):
    (out / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


shapes = [row(r, "notes", "message") for r in records("shapes")]
dump("shapes.json", {"rows": shapes, "given": (work / "conv_shapes.yaml").read_text()})
print("1. shapes:", [(r["op"], r["shape"], r["status"]) for r in shapes])

ir_rows = []
for r in records("ir"):
    ir = r.get("ir") or {}
    kernels = [{"name": k.get("name"), "hash": k.get("hash"), "reused": bool(k.get("reused")),
                "compile_ms": k.get("compile_ms")} for k in ir.get("kernels", [])]
    kept = (work / "ir" / ir["dir"]) if ir.get("dir") else None
    files = sorted(str(p.relative_to(kept)) for p in kept.rglob("*.ttgir")) if kept and kept.is_dir() else []
    ir_rows.append({**row(r), "compile_ms": ir.get("compile_ms"), "kernels": kernels, "ttgir": files,
                    "has_ir": bool(kernels)})
passed = [r for r in ir_rows if r["status"] == "pass"]
summary = {"rows": len(ir_rows), "passed": len(passed), "passed_without_ir": sum(not r["has_ir"] for r in passed),
           "rows_with_reused_kernels": sum(any(k["reused"] for k in r["kernels"]) for r in ir_rows)}
dump("ir.json", {"summary": summary, "rows": ir_rows})
print("2. ir:", summary)

digests = {}
for tag in "abc":
    folder = work / "digests" / tag
    digests[tag] = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}
verdict = {}
for source in ("random", "numpy", "torch", "inputs"):
    cases = sorted(set(digests["a"]) & set(digests["b"]))
    verdict[source] = {
        "same_seed_equal": bool(cases) and all(digests["a"][c][source] == digests["b"][c][source] for c in cases),
        "other_seed_differs": bool(cases) and all(digests["a"][c][source] != digests["c"].get(c, {}).get(source)
                                                  for c in cases)}
dump("seeds.json", {"verdict": verdict, "digests": digests, "cases": sorted(digests["a"])})
print("3. seeds:", verdict)

causes = [row(r, "cause", "message", "notes") for r in records("causes")]
dump("causes.json", causes)
print("4. causes:", [(r["op"], r["status"], (r["cause"] or {}).get("kind")) for r in causes])

facts, status_rows, columns = {}, [], ["run"]
for run in sorted(p for p in work.iterdir() if (p / "run.json").is_file()):
    info = json.loads((run / "run.json").read_text())

    def seeds(value, path=""):  # every run.json field whose name says seed
        if isinstance(value, dict):
            for k, v in value.items():
                yield from (((f"{path}.{k}".lstrip("."), v),) if "seed" in k.lower() else seeds(v, f"{path}.{k}"))

    identity = info.get("identity", {})
    facts[run.name] = {"status": info.get("status"), "seed_fields": dict(seeds(info)),
                       "software": {k: identity.get(k) for k in ("torch", "triton", "flag_gems", "device_name")},
                       "ops": {o.get("op"): o.get("status") for o in info.get("ops", [])}}
    if (run / "ops_status.csv").is_file():
        with open(run / "ops_status.csv", newline="") as fh:
            for line in csv.DictReader(fh):
                columns += [c for c in line if c not in columns]
                status_rows.append({"run": run.name, **line})
dump("run_facts.json", facts)
with open(out / "ops_status.csv", "w", newline="") as fh:
    writer = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(status_rows)
PY
echo "evidence rc=$?"
ls -la "$OUT"
step "done after $(( $(date +%s) - START )) s"
