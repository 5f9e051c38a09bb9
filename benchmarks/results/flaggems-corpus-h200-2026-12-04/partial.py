"""The seed-nightly-b sample so far: cold and warm-and-replayed costs of the ops both ended.

Usage: python3 partial.py RUNS OUT, RUNS holding sample-K (cold) and warm-K-cN (warm, the same
ops, configs replayed from sample-K) run directories (the calls' runs-callN.tgz unpacked, the
last archive's copy of each). Writes OUT/corpus-cold.json and OUT/corpus-warm.json
(harness.suite.costing.sample_summary over each kind of run: the projection of the 994 functions
from the ops ended so far, each stratum's mean from its ops measured) and OUT/cold-warm.csv.
"""

import csv
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from harness.run.timeline import ENDED  # noqa: E402
from harness.suite.costing import sample_summary  # noqa: E402
from harness.suite.inventory import read_inventory  # noqa: E402
from harness.suite.layout import locate_suite  # noqa: E402
from harness.suite.select import all_ops  # noqa: E402

runs, out = Path(sys.argv[1]), Path(sys.argv[2])
inventory = read_inventory(locate_suite(REPO / ".flaggems" / "v5.3.4" / "benchmark"))
corpus = all_ops(inventory)
ended = ENDED  # how an op ends: PASS, FAIL, ERROR, CRASH, TIMEOUT, SKIP
cold = sorted(runs.glob("sample-*"), key=lambda p: int(p.name.split("-")[1]))
# in part, then call order: a later warm run of a part (warm-5-c4 after warm-5-c3) comes last
# Warm runs left out: warm-9-c6 ran on another machine than its part's cold run (part 9's dswiglu
# and native_layer_norm ended cold in call 5; call 6 got a new machine with empty caches);
# warm-15-c11 measured again 4 ops warm-15-c10 had measured (call 11 was not given call 10's warm
# run, so its to-warm list repeated them): one warm row per op.
NOT_WARM = {"warm-9-c6", "warm-15-c11"}
warm = sorted((p for p in runs.glob("warm-*-c*") if p.name not in NOT_WARM),
              key=lambda p: (int(p.name.split("-")[1]), int(p.name.split("-c")[-1])))
for name, dirs in (("cold", cold), ("warm", warm)):
    summary = sample_summary(dirs, corpus, inventory.base_classes)
    (out / f"corpus-{name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(name, summary["ops_ended"], "ops ended; projection", summary["projection"]["hours"],
          "interval", summary["projection_interval"].get("hours"))


def statuses(dirs: list[Path]) -> dict[str, dict[str, str]]:
    return {r["op"]: {**r, "part": d.name} for d in dirs for r in csv.DictReader(open(d / "ops_status.csv"))}


c, w = statuses(cold), statuses(warm)
rows = [{"op": op, "part": c[op]["part"], "status": c[op]["status"], "cold_s": c[op]["elapsed_s"],
         "warm_s": w[op]["elapsed_s"], "warm_status": w[op]["status"]}
        for op in c if c[op]["status"] in ended and op in w and w[op]["status"] in ended]
with open(out / "cold-warm.csv", "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
cs, ws = sum(float(r["cold_s"]) for r in rows), sum(float(r["warm_s"]) for r in rows)
print(f"{len(rows)} ops ended cold and warm: cold {cs:.1f} s, warm {ws:.1f} s, warm/cold {ws / cs:.3f}; "
      f"statuses alike: {sum(r['status'] == r['warm_status'] for r in rows)} of {len(rows)}")
