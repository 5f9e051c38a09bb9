#!/usr/bin/env bash
# Issue 39's GPU evidence on one H200, no network: FlagGems ops whose speed changed between two
# tags, each bisected to a commit with `harness bisect` and the culprit checked against its parent
# with `harness ab`.
#
# JOBS lists "OP GOOD BAD [METRIC]" (';'-separated; METRIC speed, the default, or verdict), tried
# in order until BISECT_COUNT of them name a culprit. Per job:
#   1. `harness bisect --repeats 1 --max-tries MAX_TRIES` over GOOD..BAD (every first-parent commit
#      that changes src/). Its opening check (BAD against GOOD, 2 runs a side) is the measurement of
#      the op at both tags: an op that did not change ends there ("nothing to bisect") and the next
#      job runs;
#   2. `harness ab` (CHECK_REPEATS runs a side) of the culprit against its first parent.
# One benchmark tree serves every commit: TREE_SRC, FlagGems v5.3.4's. Its base.py, conftest.py,
# consts.py and the jobs' test files are the same from v5.3.1 to v5.3.4, so it matches each
# commit's src/ (docs/bisect.md: RUN_ARGS' --suite is one tree; a commit it does not match is
# skipped).
#
# The jobs (bf16, one shape each; why each was picked):
#   index_add 4096x4096 (dim 1), v5.3.3..v5.3.4 (36 commits change src/): b942ed19f "Metax fix
#     shared ops" makes bf16 index_add clone and convert the input and src to float32, add, and
#     convert back, on every vendor (no vendor check): about twice the bytes; expected slower;
#   log_normal_ 4096x4096, v5.3.2..v5.3.3 (85 commits): df1acd2df "opt for log_normal_" draws and
#     transforms in one kernel; before it randn_kernel filled a float32 temporary that a second
#     pointwise pass read back: expected faster by a third or more;
#   fused_add_rms_norm 1024x8192, v5.3.3..v5.3.4 (only when one of the two above names no
#     culprit): b942ed19f gives rows over 4096 a two-pass loop kernel (1024-wide tiles, the
#     residual read twice) instead of one 8192-wide tile a row: changed, direction unknown.
# Each lies between two neighbouring tags, the shortest range between tags that holds it: a
# bisection's runs grow with log2 of the range, and v5.3.1..v5.3.4 (188 commits, 8 rounds) for
# both would not fit one call.
#
# Time (the whole under TOTAL_S=510 s; every step under `timeout` within it). One `harness run`
# of one FlagGems op and one row is about RUN_S=13 s on the H200 machine: the op process's start
# with torch, Triton and flag_gems imported is 9-11 s (docs/batch.md, "Pre-start"), its one row
# 1-2 s, the run's own start and reports about 2 s (flaggems-corpus-h200-2026-12-03c, call 2: a
# one-op run 2 s longer than its op). A bisection of N commits takes about log2(N + 1) rounds
# (docs/bisect.md: 6.6 for N from 8 to 223) of 2 runs, after its check of 4:
#   setup: wheels, torch check, copies                               ~20 s
#   index_add (36 commits): 4 + ~5.2 rounds x 2 + culprit check 2 = ~17 runs   ~220 s
#   log_normal_ (85 commits): 4 + ~6.4 x 2 + 2 = ~19 runs              ~245 s
#   the first compile of each kernel (the Triton cache starts empty), the pack  ~20 s
#   in all                                                             ~505 s
# Tight: the first job gets what it needs and the second the rest. A job cut short by the limit
# keeps its bisect-state.json, everything comes back in session.tgz, and a second call with that
# file at .bisect/session.tgz (carried) resumes there (finished bisections and checks are not run
# again; a cut log_normal_ needs 1-2 minutes more). A step that stays noisy runs once more
# (MAX_TRIES=2); an op that did not change costs its check, 4 runs, or 8 where a row was noisy.
#
# Carry: .whl (junit-xml, six, sqlalchemy, greenlet, packaging and .whl/flaggems-v5.3.4/),
# .flaggems (the v5.3.4 benchmark tree), .bisect (the git directory from
# benchmarks/fetch_bisect_repo.sh; session.tgz in it when resuming). torch, Triton, numpy, scipy,
# pyyaml and pytest are on the machine; git must be (checked first: exit 3 without it).
# BACKEND=cpu with PY, SITE, SKIP_SETUP=1 and the REPO_SRC, TREE_SRC, JOBS, DTYPE and SHAPES_FILE
# knobs runs it on a CPU machine as a check of the flow (benchmarks/bisect_h200_dryrun.py).
# Writes into $OUT: session.log, summary.json (each job's check, culprit, rounds, runs, minutes,
# the culprit check's rows, every step's exit code and seconds), bisect-<op>.json and
# bisect-<op>.md per job that ended, session.tgz (every step's folder and log: the bisections'
# state and runs, the culprit checks' compare.md/csv).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
BACKEND=${BACKEND:-cuda}
PY=${PY:-python3}
SITE=${SITE:-/tmp/site}
WORK=${WORK:-/tmp/bisect-h200}  # fixed: bisect's state holds the paths of its inputs
TOTAL_S=${TOTAL_S:-510}
PACK_S=${PACK_S:-20}  # kept for the summary and the packing at the end
REPO_SRC=${REPO_SRC:-.bisect/FlagGems.git}
TREE_SRC=${TREE_SRC:-.flaggems/v5.3.4}  # holds benchmark/ and FLAGGEMS_REF
SESSION=${SESSION:-.bisect/session.tgz}  # the session.tgz of an earlier call, to resume
REPO_URL=${REPO_URL:-https://github.com/flagos-ai/FlagGems}
JOBS=${JOBS:-index_add v5.3.3 v5.3.4; log_normal_ v5.3.2 v5.3.3; fused_add_rms_norm v5.3.3 v5.3.4}
DTYPE=${DTYPE:-bfloat16}
SHAPES_FILE=${SHAPES_FILE:-}  # default: the shapes below
BISECT_COUNT=${BISECT_COUNT:-2}
MAX_TRIES=${MAX_TRIES:-2}
CHECK_REPEATS=${CHECK_REPEATS:-1}
RUN_S=${RUN_S:-13}  # planned seconds of one `harness run` of one op
CHECK_S=$(( CHECK_REPEATS * 2 * RUN_S + 20 ))  # planned seconds of a culprit check
mkdir -p "$OUT"
exec > >(tee "$OUT/session.log") 2>&1
START=$(date +%s)
step() { echo "=== $* ($(date -u +%H:%M:%S), $(( $(date +%s) - START )) s)"; }
left() { echo $(( TOTAL_S - PACK_S - ($(date +%s) - START) )); }
limit() {  # the timeout of a step planned at $1 s: never past the steps' end
  local l
  l=$(left)
  if [ "$l" -lt "$1" ]; then echo "$l"; else echo "$1"; fi
}
timed() {  # NAME LIMIT CMD...: run CMD under `timeout` (SIGINT first: bisect saves its state), log it
  local name=$1 t=$2 began rc pattern='^(bisect|ab:|A/B|regression|improvement|  )'
  shift 2
  if [ "$t" -lt 20 ]; then
    echo "$name: skipped, ${t} s left"
    printf '%s\tskipped\t0\t%s\n' "$name" "$t" >> "$WORK/out/steps.tsv"
    return 124
  fi
  began=$(date +%s)
  timeout -s INT -k 20 "$t" "$@" > "$WORK/out/$name.log" 2>&1 < /dev/null
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - began ))" "$t" >> "$WORK/out/steps.tsv"
  echo "$name: rc=$rc in $(( $(date +%s) - began )) s (limit $t s)"
  if grep -qE "$pattern" "$WORK/out/$name.log"; then
    grep -E "$pattern" "$WORK/out/$name.log" | tail -n 30
  else
    tail -n 4 "$WORK/out/$name.log"
  fi
  return "$rc"
}
export_src() {  # SHA DIR: the commit's src/ into DIR/src with its bytecode, as harness bisect exports it
  [ -d "$2/src" ] && return 0
  mkdir -p "$2" && git --git-dir="$WORK/repo.git" archive "$1" src | tar -x -C "$2" \
    && "$PY" -m compileall -q -j 0 "$2/src" > /dev/null
}
pack() {
  step "pack"
  timeout 15 "$PY" - "$WORK" "$OUT" <<'PY'
import csv
import json
import sys
from pathlib import Path

work, out = Path(sys.argv[1]), Path(sys.argv[2])
runs = work / "out"


def rows(path):
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return [{k: row.get(k) for k in ("op", "case_id", "verdict", "ratio", "change_pct", "ci_low", "ci_high",
                                         "base_median_ms", "head_median_ms", "base_status", "head_status",
                                         "timer", "reason")} for row in csv.DictReader(fh)]


steps = [dict(zip(("step", "rc", "seconds", "limit_s"), line.split("\t")))
         for line in (runs / "steps.tsv").read_text().splitlines()] if (runs / "steps.tsv").is_file() else []
jobs = [line.split() for line in (runs / "jobs.txt").read_text().splitlines()] if (runs / "jobs.txt").is_file() else []
summary = {"jobs": {}, "steps": steps}
for op, good, bad, *_ in jobs:
    folder = runs / f"bisect-{op}"
    entry = {"good": good, "bad": bad, "started": folder.is_dir(), "finished": (folder / "bisect.json").is_file(),
             "resumable": (folder / "bisect-state.json").is_file()}
    if entry["finished"]:
        data = json.loads((folder / "bisect.json").read_text())
        entry.update({k: data.get(k) for k in ("good_sha", "bad_sha", "culprit", "remaining", "skipped", "check",
                                              "threshold", "commits_in_range", "rounds", "runs", "cached_runs",
                                              "minutes")})
        entry["tested"] = [{k: t.get(k) for k in ("sha", "subject", "mark", "reason", "seconds")}
                           for t in data.get("tested", [])]
        for name in ("bisect.json", "bisect.md"):
            (out / name.replace("bisect", f"bisect-{op}")).write_bytes((folder / name).read_bytes())
    check = runs / f"culprit-{op}"
    entry["culprit_check"] = rows(check / "compare.csv")
    if (check / "pair.txt").is_file():
        entry["culprit_check_parent"], entry["culprit_check_culprit"] = (check / "pair.txt").read_text().split()
    summary["jobs"][op] = entry
(out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
for op, entry in summary["jobs"].items():
    if not entry["started"]:
        print(f"{op} ({entry['good']}..{entry['bad']}): not run")
    elif not entry["finished"]:
        print(f"{op} ({entry['good']}..{entry['bad']}): not finished (resumable: {entry['resumable']})")
    else:
        culprit = entry.get("culprit") or {}
        checked = [(r["verdict"], r["ratio"]) for r in entry["culprit_check"]]
        print(f"{op} ({entry['good']}..{entry['bad']}): check {(entry.get('check') or {}).get('reason')!r}; culprit "
              f"{culprit.get('sha', '-')[:12]} {culprit.get('subject', '')!r}; {entry.get('rounds')} round(s), "
              f"{entry.get('runs')} run(s), {entry.get('minutes')} min; against its parent: {checked}")
PY
  echo "summary rc=$?"
  # Every step's folder, without the exported sources (rebuilt from the git directory on resume)
  # and HTML pages (rebuilt from the records).
  tar -czf "$OUT/session.tgz" -C "$WORK" --exclude='cache/src' --exclude='*.html' out cache 2>/dev/null
  ls -la "$OUT"
  step "done after $(( $(date +%s) - START )) s"
}

step "checks"
if ! command -v git >/dev/null; then
  echo "git is not on PATH: harness bisect reads the library's history with git. Stopping (nothing run)."
  exit 3
fi
git --version
for path in "$REPO_SRC" "$TREE_SRC/benchmark"; do
  [ -e "$path" ] || { echo "missing $path (carry it: benchmarks/fetch_bisect_repo.sh, fetch_flaggems.sh)"; exit 2; }
done
if [ "${SKIP_SETUP:-0}" != 1 ]; then
  step "install wheels"
  WHEELS=""
  for wheel in .whl/*.whl .whl/flaggems-v5.3.4/*.whl; do
    case $wheel in */flag_gems-5.0.*) ;; *) WHEELS="$WHEELS $wheel";; esac
  done
  # shellcheck disable=SC2086  # a list of wheel paths
  timeout 60 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" $WHEELS || exit 1
fi
export PYTHONPATH=$SITE:$PWD
echo "harness commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo '? (no .git)')"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 "$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' \
  || exit 1

step "prepare $WORK"
rm -rf "$WORK"
mkdir -p "$WORK"
if [ -f "$SESSION" ]; then
  tar -xzf "$SESSION" -C "$WORK" && echo "resuming from $SESSION"
fi
mkdir -p "$WORK/out" "$WORK/flaggems"
cp -r "$REPO_SRC" "$WORK/repo.git"
cp -r "$TREE_SRC" "$WORK/flaggems/tree"
if [ -n "$SHAPES_FILE" ]; then
  cp "$SHAPES_FILE" "$WORK/shapes.yaml"
else
  cat > "$WORK/shapes.yaml" <<'YAML'
index_add: [[4096, 4096]]
log_normal_: [[4096, 4096]]
fused_add_rms_norm: [[1024, 8192]]
YAML
fi
CPU=()
[ "$BACKEND" = cpu ] && CPU=(--allow-cpu)
# One Triton cache for every run (--triton-cache user): each kernel source compiles once, not once
# a run (the default, a cache of each run's own, would compile every kernel again in each of
# ~36 runs; log_normal_'s autotuned kernel has six configs). Triton keys its cache by the
# kernel's source, so two commits share a binary only where their kernel is the same. FlagGems'
# cache beside it holds generated code, written anew by each process, and the LibTuner database,
# which neither op uses.
export TRITON_CACHE_DIR=$WORK/caches/triton FLAGGEMS_CACHE_DIR=$WORK/caches/flaggems
RUN_ARGS=(--backend "$BACKEND" --suite "$WORK/flaggems/tree/benchmark" --dtypes "$DTYPE"
          --shapes-file "$WORK/shapes.yaml" --ir off --plugins -wall --triton-cache user --op-timeout 150
          --progress plain)
tr ';' '\n' <<< "$JOBS" | awk 'NF' > "$WORK/out/jobs.txt"
mapfile -t jobs < "$WORK/out/jobs.txt"
echo "jobs (op good bad [metric]):"
cat "$WORK/out/jobs.txt"

found=0
n=0
for line in "${jobs[@]}"; do
  read -r op good bad metric <<< "$line"
  metric=${metric:-speed}
  n=$((n + 1))
  [ "$found" -ge "$BISECT_COUNT" ] && break
  folder=$WORK/out/bisect-$op
  step "$n.1 bisect $op, $good..$bad ($(git --git-dir="$WORK/repo.git" rev-list --first-parent --count \
    "$good..$bad" 2>/dev/null) first-parent commits)"
  if [ ! -f "$folder/bisect.json" ]; then
    # what is left, less this job's culprit check and a minute for each later culprit wanted: one
    # job finished whole is worth more than two cut short (a cut one resumes in a second call)
    wanted=$((BISECT_COUNT - found))
    share=$(( $(left) - CHECK_S - (wanted - 1) * 60 ))
    [ "$share" -lt 90 ] && share=90
    timed "bisect-$op" "$(limit "$share")" "$PY" -m harness bisect --repo "$WORK/repo.git" --good "$good" \
      --bad "$bad" --metric "$metric" --repeats 1 --max-tries "$MAX_TRIES" --repo-url "$REPO_URL" --out "$folder" \
      --cache "$WORK/cache" ${CPU[@]+"${CPU[@]}"} -- "${RUN_ARGS[@]}" --ops "$op"
  fi
  culprit=$("$PY" -c 'import json, sys; print((json.load(open(sys.argv[1])).get("culprit") or {}).get("sha", ""))' \
            "$folder/bisect.json" 2>/dev/null)
  if [ -z "$culprit" ]; then
    echo "$op: no culprit named (see bisect-$op.log)"
    continue
  fi
  found=$((found + 1))
  step "$n.2 $op: culprit ${culprit:0:12} against its parent"
  check=$WORK/out/culprit-$op
  if [ ! -f "$check/compare.csv" ]; then
    rm -rf "$check"
    parent=$(git --git-dir="$WORK/repo.git" rev-parse "$culprit^")
    export_src "$parent" "$WORK/src/$parent" && export_src "$culprit" "$WORK/src/$culprit"
    timed "culprit-$op" "$(limit "$CHECK_S")" "$PY" -m harness ab \
      --a-pythonpath "$WORK/src/$parent/src" --b-pythonpath "$WORK/src/$culprit/src" --repeats "$CHECK_REPEATS" \
      --out "$check" ${CPU[@]+"${CPU[@]}"} -- "${RUN_ARGS[@]}" --ops "$op"
    [ -d "$check" ] && printf '%s %s\n' "$parent" "$culprit" > "$check/pair.txt"
  fi
done

pack
