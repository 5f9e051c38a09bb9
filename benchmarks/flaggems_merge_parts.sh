#!/usr/bin/env bash
# Rebuilds, on the CPU machine, the per-call "part" folders that `benchmarks/flaggems_corpus.py
# merge` takes as inputs, from what the H200 calls committed under
# benchmarks/results/flaggems-corpus-h200-2026-12-0*/ (docs/flaggems.md, "Evidence on an H200",
# and each folder's README.md). A part folder holds sample-K/ (a run directory out of
# a runs*.tgz: ops_status.csv, summary.csv, run.json, records.jsonl, the op timelines under
# specs/) and triage-K.csv, as a call's $OUT does. In merge order:
#
#   P0    01d's merged result as one part (its ops_status.csv, summary.csv as sample-1; triage.csv)
#   C1    02 call 1: sample-7..9     C2 02 call 2: sample-10..15     C3 02 call 3: sample-20..27
#   S9a   02b call 1: sample-31      S9b 02b call 2: tp-harness as sample-33, less its lead (tan)
#   S9c   02b call 3: sample-32      S10b 02c: sample-34..37
#   S11   02d: sample-38 (call 2), sample-39 (call 3), call 1's tp-harness as sample-40, less
#         its lead (arctan_)
#   S12   02e call 2: sample-41, as its last periodic archive had it (perf_fft still RUNNING;
#         the call's final statuses are 02e's sample-41-ops_status.csv; sample-44 ends it)
#   S13   03: sample-44 (call 1), sample-45 (call 2)
#   Newer calls' runs, given as PART:TGZ:RUNDIR:AS (the 03b and 03c folders' READMEs):
#   S14 = 03b's runs-call2.tgz:sample-47:47 (superseded by S15), S15 = 03c's runs-call1.tgz:sample-50:50
#
# Each run's summary.csv is made again from its records (`harness report RUN --format csv`) and
# given records.jsonl's time (`part_span` takes a cut run's end from its files' times); a run less
# its lead keeps its ops_status.csv's time; triage-K.csv comes from flaggems_corpus.triage_rows.
#
# Usage: PYTHON=/tmp/hv/bin/python bash benchmarks/flaggems_merge_parts.sh [OUT [PART:TGZ:RUNDIR:AS ...]]
#   OUT (default /tmp/m) must be missing or empty. Each PART:TGZ:RUNDIR:AS (for newer calls) adds
#   run directory RUNDIR of archive TGZ to part folder OUT/PART as sample-AS and triage-AS.csv.
#   PYTHON (default python3) must import the harness.
#
# Check: the merge of P0..S11 reproduces 02d's ops_status.csv, summary.csv and triage.csv byte
# for byte (cmp prints nothing; corpus.json too, in a checkout at /work/main, the path it names);
# append /tmp/m/S12 /tmp/m/S13 to the merge for 03's merged sample:
#   SAMPLE_SIZE=200 /tmp/hv/bin/python benchmarks/flaggems_corpus.py merge /tmp/m/P0 /tmp/m/C1 \
#     /tmp/m/C2 /tmp/m/C3 /tmp/m/S9a /tmp/m/S9b /tmp/m/S9c /tmp/m/S10b /tmp/m/S11 --out /tmp/check02d
#   for f in ops_status.csv summary.csv triage.csv; do
#     cmp benchmarks/results/flaggems-corpus-h200-2026-12-02d/$f /tmp/check02d/$f; done
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
results=$repo/benchmarks/results/flaggems-corpus-h200-2026-12
python=${PYTHON:-python3}
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}
out=${1:-/tmp/m}
if (($#)); then shift; fi
for spec in "$@"; do
    if [[ ! $spec =~ ^[^:]+:[^:]+:[^:]+:[^:]+$ ]]; then
        echo "not PART:TGZ:RUNDIR:AS: $spec" >&2
        exit 2
    fi
done

mkdir -p "$out"
if [[ -n $(find "$out" -mindepth 1 -print -quit) ]]; then
    echo "$out is not empty: remove it or name another folder" >&2
    exit 1
fi
unpack=$(mktemp -d "$out/.unpack.XXXXXX")
trap 'rm -rf "$unpack"' EXIT

# triage RUN CSV: the run directory's triage rows into CSV, as the corpus script writes them
triage() {
    "$python" -c 'import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import flaggems_corpus as fc
fc.write_csv(Path(sys.argv[3]), fc.triage_rows(Path(sys.argv[2])), ("op", "case", "status", "message"))' \
        "$repo/benchmarks" "$1" "$2"
}

# part PART TGZ RUNDIR AS [LEAD]: RUNDIR of TGZ as OUT/PART/sample-AS (less LEAD's line), its
# summary.csv made again, and OUT/PART/triage-AS.csv
part() {
    local name=$1 tgz=$2 run=$3 as=$4 lead=${5:-}
    local dest=$out/$name/sample-$as
    mkdir -p "$out/$name"
    tar xzf "$tgz" -C "$unpack" "$run"
    mv "$unpack/$run" "$dest"
    if [[ -n $lead ]]; then
        awk -F, -v op="$lead" '$1 != op' "$dest/ops_status.csv" >"$dest/ops_status.csv.new"
        touch -r "$dest/ops_status.csv" "$dest/ops_status.csv.new"
        mv "$dest/ops_status.csv.new" "$dest/ops_status.csv"
    fi
    "$python" -m harness report "$dest" --format csv --out "$dest/summary.csv" >/dev/null
    touch -r "$dest/records.jsonl" "$dest/summary.csv"
    triage "$dest" "$out/$name/triage-$as.csv"
    echo "$name/sample-$as <- ${tgz#"$repo"/}:$run${lead:+ less $lead}"
}

mkdir -p "$out/P0/sample-1"
cp "$results-01d/ops_status.csv" "$results-01d/summary.csv" "$out/P0/sample-1/"
cp "$results-01d/triage.csv" "$out/P0/triage-1.csv"
for k in 7 8 9; do part C1 "$results-02/runs-call1.tgz" "sample-$k" "$k"; done
for k in 10 11 12 13 14 15; do part C2 "$results-02/runs-call2.tgz" "sample-$k" "$k"; done
for k in 20 21 22 23 24 25 26 27; do part C3 "$results-02/runs-call3.tgz" "sample-$k" "$k"; done
part S9a "$results-02b/runs-call1.tgz" sample-31 31
part S9b "$results-02b/runs-call2.tgz" tp-harness 33 tan
part S9c "$results-02b/runs-call3.tgz" sample-32 32
for k in 34 35 36 37; do part S10b "$results-02c/runs-calls1-4.tgz" "sample-$k" "$k"; done
part S11 "$results-02d/runs-call2.tgz" sample-38 38
part S11 "$results-02d/runs-call3.tgz" sample-39 39
part S11 "$results-02d/runs-call1.tgz" tp-harness 40 arctan_
part S12 "$results-02e/runs-call2.tgz" sample-41 41
part S13 "$results-03/runs-call1.tgz" sample-44 44
part S13 "$results-03/runs-call2.tgz" sample-45 45

for spec in "$@"; do
    IFS=: read -r name tgz run as <<<"$spec"
    part "$name" "$tgz" "$run" "$as"
done
