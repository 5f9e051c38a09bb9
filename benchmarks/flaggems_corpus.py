"""FlagGems' benchmark corpus under the harness on an H200: a stratified sample, the caliber
table, throughput against FlagGems' own runner, and the projected nightly (docs/flaggems.md,
"Evidence on an H200" has the sequence of calls that was run).

    python3 benchmarks/flaggems_corpus.py plan                       # CPU: the sample and the time plan
    STEPS="sample1" python3 benchmarks/flaggems_corpus.py run        # GPU: a call
    python3 benchmarks/flaggems_corpus.py remaining OUT1 --out FILE  # CPU: the sample's ops no call ended
    python3 benchmarks/flaggems_corpus.py merge OUT1 OUT2 --out benchmarks/results/NAME   # CPU
    python3 benchmarks/flaggems_corpus.py timeline RUNS1 RUNS2       # CPU: time split of unpacked runs.tgz

Steps of ``run`` (STEPS, default all, each bounded by its budget in seconds):

- ``sampleK`` (K = 1..PARTS; SAMPLE1_BUDGET_S 440, SAMPLE2_BUDGET_S 230 for the others): part K of a
  stratified sample of the corpus (SAMPLE_SIZE ops, default 160; strata: backward, in-place, and
  the Benchmark class each forward op derives from; parts are consecutive slices of an order that
  is stratified prefix by prefix), as one harness run: ``harness run --backend cuda --suite SUITE
  --ops-file PART --dtypes bfloat16 --level core --cap-ms CAP_MS`` (CAP_MS 300). A run cut by its
  budget is interrupted cleanly and keeps what it measured. Writes
  $OUT/sample-K/{ops_status.csv,summary.csv,run.json} and $OUT/triage-K.csv.
- ``rerun`` (RERUN_BUDGET_S, default 400): the ops listed in RERUN_OPS as one run named RUN_NAME
  (default ``rerun``): with RUN_NAME=sample-K, the sample's ops an earlier call did not end (the
  list from ``remaining``); or the same ops again on other DEVICES (one GPU against two).
- ``caliber`` (CALIBER_BUDGET_S, default 150, split by CALIBER_SHARES "own direct profiler"): up to
  CALIBER_OPS (20) ops of every sample part in RUNS with bf16 kernels under 20 us, cheapest first:
  FlagGems' own runner (``pytest NODES --mode kernel --level core --dtypes bfloat16 --warmup 100
  --iter 100`` in its tree, its results streamed by benchmarks/flaggems_stream.py), the harness's
  direct timer, the sample's default timer and the profiler timer for the first PROFILED (6).
  Runs of an earlier call carried into RUNS are kept. CALIBER_PREVIOUS (a caliber.csv an earlier
  session wrote, whose runs are not here): its rows join the table, and each of its ops gets what
  its rows lack (FlagGems' own runner, or the direct timer; the other columns as measured then).
  The direct and profiler runs use the user's Triton cache (FlagGems' runner has just compiled the
  same kernels there), no IR and no wall time: they time, nothing else. Writes $OUT/caliber.csv.
- ``throughput`` (THROUGHPUT_BUDGET_S, default 90): for up to THROUGHPUT_FILES (6) new files, FlagGems'
  own runner on the file's benchmarks that passed in the sample with bf16 (its defaults: 1000 ms
  warm-up, 100 ms per call; its process start measured once with --collect-only) against the sum
  of the harness's per-op wall times for the same benchmarks; THROUGHPUT_PREVIOUS (an earlier
  call's throughput.csv): its files are kept as measured and the next ones taken. The harness's
  side comes from the sample (THROUGHPUT_HARNESS=sample, the default), from a run of its own
  (``run``: tp-harness, every file of the table alone on DEVICES, THROUGHPUT_HARNESS_BUDGET_S 240,
  and at most half the step's budget where FlagGems' runner has new files to run after it; led
  by the sample's lightest passing op of 12 s or more outside the table), or from such a run
  made before (``from:DIR``). Writes $OUT/throughput.csv.

- ``cached`` (CACHED_BUDGET_S, default 240): throughput with filled compiler caches on both sides,
  the state of a nightly on a machine that keeps them. For each file of CACHED_FILES (names as in
  throughput.csv), on a cache folder of its own (TRITON_CACHE_DIR and FLAGGEMS_CACHE_DIR: Triton's
  kernels, FlagGems' generated code and its LibTuner database of tuned configs): FlagGems' own
  runner twice (the first fills the folder, the second is timed; options as in ``throughput``),
  then the harness on the file's bf16 ops with ``--triton-cache user`` on the same folder, led by
  CACHED_LEAD (tan) so they are pre-started as in a nightly. A filling run cut by its budget (half
  the file's share) leaves the file not compared. Writes $OUT/cached.csv.

- ``autotune`` (AUTOTUNE_BUDGET_S, default 300): for each file of AUTOTUNE_FILES, where each
  runner's cold time goes to autotuning: FlagGems' own runner on a fresh cache folder, then the
  harness on the file's bf16 ops (led by CACHED_LEAD; its isolated cache), both with
  TRITON_PRINT_AUTOTUNING=1, whose "finished after" lines are counted and summed per runner.
  Writes $OUT/autotune.csv.

Every call also writes $OUT/corpus.json (what ran, counts, the projection from what is there),
$OUT/corpus.log and (ARCHIVE=1, the default) $OUT/runs.tgz: RUNS' run directories without IR,
caches, specs and HTML (with each run's recorded autotune configs, for a later ``--replay-from``).
With ARCHIVE_TO (a folder) that archive is also written there every ARCHIVE_EVERY_S (60) seconds
while a harness run goes on, so a call cut from outside keeps it.
RUNS (default /tmp/flaggems-corpus) may be a carried folder holding an earlier call's runs.
Sample parts that ran at the same time on a device (several runs side by side on one GPU) count
for the statuses, not for the projection (corpus.json: side_by_side_parts, ops_costed).
Needs, carried next to the working tree: .whl/ (benchmarks/fetch_device_wheels.sh) with
.whl/flaggems-v5.3.4/ (benchmarks/fetch_flaggems.sh) and .flaggems/v5.3.4/benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.contract import RunFiles  # noqa: E402
from harness.results.triage import CAUSES_COLUMNS, causes_rows, read_folder  # noqa: E402
from harness.run.caches import cache_env  # noqa: E402
from harness.run.timeline import (  # noqa: E402
    ENDED,
    cost_rows,
    final_status,
    part_leads,
    part_span,
    side_by_side,
    timeline,
    union_s,
)
from harness.suite import projection  # noqa: E402
from harness.suite.inventory import read_inventory  # noqa: E402
from harness.suite.layout import locate_suite  # noqa: E402
from harness.suite.projection import (  # noqa: E402
    _rank,
    category,
    parts_of,
    project_interval,
    stratified_sample,
)
from harness.suite.select import SuiteOp, all_ops  # noqa: E402

SUITE = Path(os.environ.get("SUITE", REPO / ".flaggems" / "v5.3.4" / "benchmark"))
RUNS = Path(os.environ.get("RUNS", "/tmp/flaggems-corpus"))
SITE = Path(os.environ.get("SITE", "/tmp/site"))
DEVICES = os.environ.get("DEVICES", "0").split()
BACKEND = os.environ.get("BACKEND", "cuda")  # cpu: a dry run of the plumbing on a stand-in tree (tests/data)
SAMPLE_SIZE = int(os.environ.get("SAMPLE_SIZE", "160"))
PARTS = int(os.environ.get("PARTS", "2"))
OP_TIMEOUT = os.environ.get("OP_TIMEOUT", "120")
# The time cap of a timing that does not settle (--cap-ms; the harness's default is 1000): a corpus
# nightly's setting, since rows of small kernels rarely settle and each costs the cap (docs/timing.md).
CAP_MS = os.environ.get("CAP_MS", "300")
# Options added to the sample's and rerun's harness runs (not caliber's): "--plugins -wall --ir off",
# a nightly that times and checks and keeps neither the wall timer nor the IR.
HARNESS_ARGS = os.environ.get("HARNESS_ARGS", "").split()
RERUN_OPS = os.environ.get("RERUN_OPS", "")  # step rerun: a file of op ids (one a line)
RUN_NAME = os.environ.get("RUN_NAME", "rerun")  # step rerun's run (sample-K: a sample part made elsewhere)
# Seconds per step: call 1 = sample1 (+ about 30 s of set-up) and call 2 = sample2 + caliber +
# throughput (+ set-up) each stay under 9 minutes.
BUDGETS = {"sample": float(os.environ.get("SAMPLE1_BUDGET_S", "440")),
           "sample2": float(os.environ.get("SAMPLE2_BUDGET_S", "230")),
           "caliber": float(os.environ.get("CALIBER_BUDGET_S", "150")),
           "throughput": float(os.environ.get("THROUGHPUT_BUDGET_S", "90")),
           "rerun": float(os.environ.get("RERUN_BUDGET_S", "400")),
           "cached": float(os.environ.get("CACHED_BUDGET_S", "240")),
           "autotune": float(os.environ.get("AUTOTUNE_BUDGET_S", "300"))}
CALIBER_OPS = int(os.environ.get("CALIBER_OPS", "20"))
PROFILED = int(os.environ.get("PROFILED", "6"))
CALIBER_PREVIOUS = os.environ.get("CALIBER_PREVIOUS", "")  # step caliber: an earlier session's caliber.csv
THROUGHPUT_FILES = int(os.environ.get("THROUGHPUT_FILES", "6"))
# ARCHIVE_TO (a folder, the device call's $OUT) gets runs.tgz refreshed every ARCHIVE_EVERY_S
# seconds while a harness run is going: a call cut by its limit still brings back what it measured.
ARCHIVE_TO = Path(os.environ["ARCHIVE_TO"]) if os.environ.get("ARCHIVE_TO") else None
ARCHIVE_EVERY_S = float(os.environ.get("ARCHIVE_EVERY_S", "60"))
THROUGHPUT_PREVIOUS = os.environ.get("THROUGHPUT_PREVIOUS", "")  # step throughput: an earlier call's throughput.csv
# step throughput: the harness's side from the sample's runs ("sample"), from a run of its own
# ("run": run tp-harness on every file of the table, alone on its devices), or from such a run
# made before ("from:RUN_DIR", on any machine: the table again from a call cut before it wrote it)
THROUGHPUT_HARNESS = os.environ.get("THROUGHPUT_HARNESS", "sample")
THROUGHPUT_HARNESS_BUDGET_S = float(os.environ.get("THROUGHPUT_HARNESS_BUDGET_S", "240"))
CACHED_FILES = os.environ.get("CACHED_FILES", "").split()  # step cached: benchmark files (test_x.py)
CACHED_LEAD = os.environ.get("CACHED_LEAD", "tan")  # steps cached, autotune: the harness run's first op, outside the files
AUTOTUNE_FILES = os.environ.get("AUTOTUNE_FILES", "").split()  # step autotune: benchmark files (test_x.py)
LEAD_MIN_S = 12.0
SMALL_MS = 0.020  # "kernels under 20 us"
GPUS = (1, 2, 8)
LOG: list[str] = []


def say(*parts: Any) -> None:
    line = " ".join(str(p) for p in parts)
    LOG.append(line)
    print(line, flush=True)


# -- the sample and the projection: harness/suite/projection.py -------------------------------------


def part_weights() -> list[float]:
    return [BUDGETS["sample"] if k == 1 else BUDGETS["sample2"] for k in range(1, PARTS + 1)]


def project(ops: Sequence[SuiteOp], measured: Mapping[str, float], base_classes: frozenset[str],
            start_s: float = 10.0) -> dict[str, Any]:
    return projection.project(ops, measured, base_classes, GPUS, start_s)


def _interval_or_why(ops: Sequence[SuiteOp], measured: Mapping[str, float], base_classes: frozenset[str]) -> dict[str, Any]:
    """project_interval, or why not: a GPU machine's Python may lack scipy, and a call's summary
    must not stop its archive (the merge on the CPU machine computes it)."""
    try:
        return project_interval(ops, measured, base_classes, GPUS)
    except ImportError as exc:
        return {"skipped": f"{exc} (the merge on a machine with scipy computes it)"}


# -- files ---------------------------------------------------------------------------------------


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text()))) if path.is_file() else []


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(columns or (rows[0].keys() if rows else ["empty"]))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "records.jsonl"
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def triage_rows(run_dir: Path) -> list[dict[str, str]]:
    """Every op that did not pass and every row that did not pass, with FlagGems' or the harness's words."""
    out = [{"op": o["op"], "case": "", "status": o["status"], "message": o["notes"][:400]}
           for o in read_csv(run_dir / "ops_status.csv") if o["status"] in ("FAIL", "ERROR", "CRASH", "TIMEOUT", "SKIP")]
    out += [{"op": r["op"], "case": r["case_id"], "status": r["status"], "message": r.get("message", "")[:400]}
            for r in read_records(run_dir) if r["status"] in ("fail", "error")]
    return out


# -- running -------------------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    """The environment of what this script starts: its own, less HARNESS_ARGS (this script's, not
    the harness's: the harness warns about a HARNESS_ variable it does not know)."""
    vendor = {"GEMS_VENDOR": "nvidia"} if BACKEND == "cuda" else {}
    own = {k: v for k, v in os.environ.items() if k != "HARNESS_ARGS"}
    return {**own, "PYTHONPATH": f"{SITE}{os.pathsep}{REPO}", "PYTHONUNBUFFERED": "1", **vendor}


def bounded(cmd: Sequence[str], budget_s: float, cwd: Path | None = None, log: Path | None = None,
            env: Mapping[str, str] | None = None, tick: Callable[[], None] | None = None,
            every_s: float = 60.0) -> tuple[int, float]:
    """Run ``cmd`` for at most ``budget_s``; past it, SIGTERM (the harness then finalizes an
    interrupted run), SIGKILL 60 s later. While it runs, ``tick`` is called every ``every_s``
    seconds (the archive of the runs so far). (exit code, wall seconds)."""
    start = time.monotonic()
    out = log.open("ab") if log else subprocess.DEVNULL
    child = subprocess.Popen(list(cmd), cwd=cwd, env=dict(env or child_env()), stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        while True:
            left = budget_s - (time.monotonic() - start)
            try:
                code = child.wait(timeout=max(1.0, min(left, every_s) if tick else left))
                break
            except subprocess.TimeoutExpired:
                if tick is None or time.monotonic() - start >= budget_s:
                    raise
                try:
                    tick()
                except BaseException:  # never leave the run going behind a failed tick
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
                    raise
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGTERM)
        try:
            code = child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            code = child.wait()
    if log:
        out.close()  # type: ignore[union-attr]
    return code, time.monotonic() - start


def setup() -> None:
    """The carried wheels into SITE (PyPI's flag_gems 5.0.2 left out: the tree is v5.3.4)."""
    if os.environ.get("SKIP_SETUP"):
        return
    wheels = [str(w) for w in (REPO / ".whl").glob("*.whl") if not w.name.startswith("flag_gems-")]
    wheels += [str(w) for w in (REPO / ".whl").glob("flaggems-v5.3.4/*.whl")]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--target", str(SITE), *wheels], check=True)
    probe = subprocess.run([sys.executable, "-c", "import flag_gems; print(flag_gems.__version__, flag_gems.vendor_name)"],
                           env=child_env(), capture_output=True, text=True, timeout=300)
    say("flag_gems:", probe.stdout.strip() or probe.stderr.strip()[-400:])


def harness_run(name: str, extra: Sequence[str], budget: float) -> Path:
    run_dir = RUNS / name
    cmd = [sys.executable, "-m", "harness", "run", "--backend", BACKEND, "--suite", str(SUITE), "--level", "core",
           "--dtypes", "bfloat16", "--devices", *DEVICES, "--op-timeout", OP_TIMEOUT, "--cap-ms", CAP_MS,
           "--progress", "plain",
           "--out", str(run_dir), *extra]
    code, wall = bounded(cmd, budget, log=RUNS / f"{name}.log",
                         tick=archive_now if ARCHIVE_TO and ARCHIVE_EVERY_S > 0 else None,
                         every_s=ARCHIVE_EVERY_S)
    info = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    statuses = Counter(o["status"] for o in info.get("ops", []))
    say(f"{name}: exit {code}, {wall:.0f} s, run {info.get('status', '?')}, ops {dict(statuses)}")
    return run_dir


def step_sample(k: int, sample: Sequence[SuiteOp], out: Path, base_classes: frozenset[str]) -> None:
    part = parts_of(sample, part_weights())[k - 1]
    ops_file = RUNS / f"sample-{k}.txt"
    ops_file.write_text("".join(f"{op.id}\n" for op in part))
    say(f"sample part {k}: {len(part)} ops, {dict(Counter(category(o, base_classes) for o in part))}")
    budget = part_weights()[k - 1]
    keep_outputs(harness_run(f"sample-{k}", ["--ops-file", str(ops_file), *HARNESS_ARGS], budget), out)


def keep_outputs(run_dir: Path, out: Path) -> None:
    """A run's ops_status.csv, summary.csv and run.json into $OUT/<run name>/, and for a sample
    part its triage into $OUT/triage-K.csv."""
    for name in ("ops_status.csv", "summary.csv", "run.json"):
        if (run_dir / name).is_file():
            (out / run_dir.name).mkdir(parents=True, exist_ok=True)
            (out / run_dir.name / name).write_bytes((run_dir / name).read_bytes())
    if run_dir.name.startswith("sample-"):
        write_csv(out / f"triage-{part_number(run_dir)}.csv", triage_rows(run_dir), ("op", "case", "status", "message"))


def step_rerun(out: Path) -> None:
    """The ops of RERUN_OPS as one run named RUN_NAME on DEVICES: the same ops on one GPU against
    two, or the sample's ops that an earlier call did not reach (RUN_NAME=sample-K, the list made
    with ``remaining``). Writes $OUT/RUN_NAME/{ops_status.csv,summary.csv,run.json}."""
    if not RERUN_OPS or not Path(RERUN_OPS).is_file():
        say(f"rerun: RERUN_OPS {RERUN_OPS!r} is not a file of op ids")
        return
    ops = [line.strip() for line in Path(RERUN_OPS).read_text().splitlines() if line.strip()]
    say(f"rerun: {len(ops)} ops of {RERUN_OPS} on devices {DEVICES}")
    keep_outputs(harness_run(RUN_NAME, ["--ops-file", RERUN_OPS, *HARNESS_ARGS], BUDGETS["rerun"]), out)


def archive(out: Path, limit: int = 15 << 20) -> None:
    """RUNS' run directories, without IR, compiler caches and specs, into $OUT/runs.tgz (records,
    statuses, run.json, op logs, and the autotune configs the run recorded, which a later run
    replays with ``--replay-from``), for triage and reports on another machine; without the op
    logs when that is over ``limit`` bytes."""
    def keep(logs: bool) -> Any:
        def pick(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            parts = Path(info.name).parts
            if "specs" in parts[1:] and (info.isdir() or parts[-1].endswith(".times.json")):
                return info  # the op processes' timelines (harness.child.process.times_path)
            if len(parts) in (2, 3) and parts[1] == "autotune" and (info.isdir() or parts[-1].endswith(".json")):
                return info  # RUN/autotune/<op>.json: the configs --replay-from reads (docs/compare.md)
            if any(p in ("ir", "triton-cache", "triton_cache", "cache", "specs", "sweep", "autotune") for p in parts[1:]):
                return None
            if parts[1:] and parts[-1] in ("report.html", "junit.xml"):  # remade from the records here
                return None
            if not logs and "logs" in parts[1:]:
                return None
            return info
        return pick

    target, partial = out / "runs.tgz", out / "runs.tgz.partial"
    out.mkdir(parents=True, exist_ok=True)
    for logs in (True, False):
        with tarfile.open(partial, "w:gz") as tar:
            for run in sorted(p for p in RUNS.iterdir() if p.is_dir() and (p / "run.json").is_file()):
                tar.add(run, arcname=run.name, filter=keep(logs))
        if partial.stat().st_size <= limit:
            break
    os.replace(partial, target)  # a call cut while this writes keeps the archive before it
    say(f"runs.tgz: {target.stat().st_size >> 10} KiB")


def archive_now() -> None:
    """The periodic archive into ARCHIVE_TO; a file that vanishes under it (the run goes on) only
    skips this turn. It runs beside the op being timed: one tar and gzip of a few hundred KiB
    (no IR, no caches) a minute, on one core of the GPU machine's 16; not measured to move
    timings. A call cut while it writes leaves ``runs.tgz.partial`` next to the last whole
    archive."""
    if ARCHIVE_TO is None:
        return
    try:
        archive(ARCHIVE_TO)
    except (OSError, EOFError, tarfile.TarError) as exc:
        say(f"runs.tgz not refreshed this time: {type(exc).__name__}: {exc}")


def in_suite(nodeid: str) -> str:
    """A node id relative to the tree's parent (``benchmark/test_x.py::f``) made relative to SUITE."""
    path, sep, rest = nodeid.partition("::")
    full = Path(path) if Path(path).is_absolute() else SUITE.parent / path
    try:
        return str(full.relative_to(SUITE)) + sep + rest
    except ValueError:
        return nodeid


def flaggems_own(nodes: Sequence[str], work: Path, budget: float, options: Sequence[str]) -> tuple[list[dict[str, Any]], float]:
    """FlagGems' own pytest on ``nodes`` (ids relative to SUITE); its BenchmarkResult entries, each
    kept the moment FlagGems records it (benchmarks/flaggems_stream.py: a run cut by its budget
    keeps what it finished), and the wall time. It runs in SUITE, so FlagGems' conftest (its
    options) is found; ``-c /dev/null`` keeps this repository's pytest settings out."""
    work.mkdir(parents=True, exist_ok=True)
    stream = work / "results.jsonl"
    stream.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", *nodes, "-p", "flaggems_stream", *options,
           "-c", os.devnull, "--rootdir", str(SUITE.parent), "--confcutdir", str(SUITE), "-p", "no:cacheprovider",
           "-q", "-W", "ignore::pytest.PytestUnknownMarkWarning"]
    env = child_env()
    env.update(FLAGGEMS_STREAM=str(stream), PYTHONPATH=f"{env['PYTHONPATH']}{os.pathsep}{REPO / 'benchmarks'}")
    code, wall = bounded(cmd, budget, cwd=SUITE, log=work / "pytest.log", env=env)
    results: list[dict[str, Any]] = []
    if stream.is_file():
        for line in stream.read_text(errors="replace").splitlines():
            try:
                results.append(json.loads(line))
            except json.JSONDecodeError:  # the line being written when the budget cut it
                pass
    return results, wall


Key = tuple[str, str, str, int]  # (op, op_name, dtype, n-th input of those)


def by_order(rows: Iterable[Mapping[str, Any]]) -> dict[Key, Mapping[str, Any]]:
    """Rows keyed by op, op_name, dtype and their number among the rows of those three, counted
    over every row (a row that failed or errored keeps its number; only passing ones are kept):
    both runners walk the same inputs in the same order. Rows with ``keep`` false are counted, not kept."""
    seen: Counter[tuple[str, str, str]] = Counter()
    keyed = {}
    for r in rows:
        key = (r["op"], r["op_name"], r["dtype"])
        if r.get("keep", True):
            keyed[(*key, seen[key])] = r
        seen[key] += 1
    return keyed


def _harness_rows(run_dir: Path | None) -> dict[Key, Mapping[str, Any]]:
    if run_dir is None:
        return {}
    rows = [{"op_name": r["extra"]["suite"].get("op_name", r["op"]), "dtype": r["dtype"], "op": r["op"],
             "keep": r["status"] == "pass",
             "speedup": r.get("speedup"), "base": (r.get("baseline") or {}).get("summary", {}).get("median"),
             "cand": (r.get("candidate") or {}).get("summary", {}).get("median"),
             "shape": r["extra"]["suite"].get("shape_detail"), "timer": r["timer"]}
            for r in read_records(run_dir) if "suite" in r.get("extra", {}) and r["dtype"] != "any"]
    return by_order(rows)


def _measured(rows: Sequence[Mapping[str, Any]], op: str, column: str) -> bool:
    """Whether any of ``rows`` of ``op`` has a number in ``column``."""
    return any(r["op"] == op and r.get(column) not in (None, "") for r in rows)


def part_number(path: Path) -> int:
    """K of a ``sample-K`` folder (or ``triage-K.csv``); parts sort by it (sample-10 after sample-2)."""
    digits = path.stem.rpartition("-")[2]
    return int(digits) if digits.isdigit() else 0


def parts_in(folder: Path, name: str = "ops_status.csv") -> list[Path]:
    """The ``sample-K`` folders of ``folder`` holding ``name``, in the order of K."""
    return sorted((p.parent for p in folder.glob(f"sample-*/{name}")), key=part_number)


def sample_runs() -> list[Path]:
    return parts_in(RUNS, "records.jsonl")


def _runs_named(prefix: str) -> list[Path]:
    return sorted(p for p in RUNS.glob(f"{prefix}*") if (p / "records.jsonl").is_file())


def step_caliber(out: Path) -> None:
    """FlagGems' own runner, the harness's direct and profiler timers and the sample's default timer
    on the sample's ops with bf16 kernels under 20 us, cheapest ops first. Timings an earlier call
    made (its caliber-direct*, caliber-profiler* and caliber-own* runs carried into RUNS) are kept;
    only what they lack is run (budget shares CALIBER_SHARES: own, direct, profiler)."""
    samples = sample_runs()
    if not samples:
        say("caliber: no sample run here; run a sample step first (or carry one into RUNS)")
        return
    small: dict[str, dict[str, Any]] = {}
    for r in (r for d in samples for r in read_records(d)):
        cand = (r.get("candidate") or {}).get("summary", {}).get("median")
        if r["status"] == "pass" and r["dtype"] == "bfloat16" and cand and cand < SMALL_MS:
            small.setdefault(r["op"], r)
    elapsed = {op: float(o["elapsed_s"] or 0)
               for op, o in final_status(o for d in samples for o in read_csv(d / "ops_status.csv")).items()}
    chosen = sorted((op for op in small if "::" not in op), key=lambda op: elapsed.get(op, 1e9))[:CALIBER_OPS]
    say(f"caliber: {len(small)} ops of {', '.join(d.name for d in samples)} have bf16 kernels under 20 us; "
        f"{len(chosen)} taken, cheapest first")
    previous = read_csv(Path(CALIBER_PREVIOUS)) if CALIBER_PREVIOUS else []
    nodeids = {op.id: op.functions[0].nodeid for op in all_ops(read_inventory(locate_suite(SUITE)))}
    # An earlier session's op gets what its rows lack, nothing more: FlagGems' own numbers, a direct run.
    earlier_ops = [op for op in dict.fromkeys(r["op"] for r in previous) if op not in small and op in nodeids]
    earlier = [op for op in earlier_ops if not _measured(previous, op, "flaggems_own_speedup")]
    earlier_direct = [op for op in earlier_ops if not _measured(previous, op, "direct_speedup")]
    if previous:
        say(f"caliber: of {len(earlier_ops)} ops of {CALIBER_PREVIOUS}, {len(earlier)} get FlagGems' own numbers, "
            f"{len(earlier_direct)} a direct run")
    if not chosen and not earlier and not earlier_direct:
        return
    budget = BUDGETS["caliber"]
    shares = [float(x) for x in os.environ.get("CALIBER_SHARES", "0.3 0.45 0.25").split()]
    tag = time.strftime("%H%M%S")

    def timed_ops(prefix: str) -> set[str]:
        return {r["op"] for d in _runs_named(prefix) for r in read_records(d) if r["status"] == "pass"}

    own_done = {str(r.get("harness_op")) for d in RUNS.glob("caliber-own*/own.json")
                for r in json.loads(d.read_text())}
    table_only = os.environ.get("CALIBER_TABLE_ONLY") == "1"  # the table from the runs in RUNS; nothing runs
    own_ops = [op for op in [*chosen, *earlier] if op not in own_done]
    op_names = {op: str(small[op]["extra"]["suite"].get("op_name", op)) for op in chosen}
    for row in previous:  # an earlier session's op can hold several op_names (blas_benchmark: mm, addmm, ...)
        op_names.setdefault(row["op"], row["op_name"])
    if own_ops and not table_only:
        nodes = [in_suite(small[op]["extra"]["suite"]["nodeid"] if op in small else nodeids[op]) for op in own_ops]
        own, own_wall = flaggems_own(nodes, RUNS / f"caliber-own-{tag}", shares[0] * budget,
                                     ["--level", "core", "--mode", "kernel", "--dtypes", "bfloat16",
                                      "--warmup", "100", "--iter", "100"])
        owners: dict[str, list[str]] = defaultdict(list)
        for op in own_ops:
            owners[op_names[op]].append(op)
        for row in previous:
            if row["op"] in own_ops and row["op"] not in owners[row["op_name"]]:
                owners[row["op_name"]].append(row["op"])
        for res in own:  # FlagGems names its results by op_name: one shared by two chosen ops is left out
            found = owners.get(str(res.get("op_name")), [])
            res["harness_op"] = found[0] if len(found) == 1 else None
        (RUNS / f"caliber-own-{tag}" / "own.json").write_text(json.dumps(own))
        say(f"caliber: FlagGems' own runner on {len(own_ops)} ops, {len(own)} results in {own_wall:.0f} s")
    own_results = [r for d in RUNS.glob("caliber-own*/own.json") for r in json.loads(d.read_text())]
    own_rows = by_order({"op": res["harness_op"], "op_name": res["op_name"],
                         "dtype": str(res["dtype"]).removeprefix("torch."),
                         "speedup": m.get("speedup"), "base": m.get("latency_base"), "cand": m.get("latency"),
                         "shape": m.get("shape_detail")}
                        for res in own_results if res.get("harness_op") for m in res.get("result", []))
    for prefix, timer, share, ops in (("caliber-direct", "direct", shares[1], [*chosen, *earlier_direct]),
                                      ("caliber-profiler", "profiler", shares[2], chosen[:PROFILED])):
        todo = [op for op in ops if op not in timed_ops(prefix)]
        if todo and not table_only:
            ops_file = RUNS / f"{prefix}-{tag}.txt"
            ops_file.write_text("\n".join(todo) + "\n")
            harness_run(f"{prefix}-{tag}", ["--ops-file", str(ops_file), "--timer", timer, "--triton-cache", "user",
                                            "--ir", "off", "--plugins", "-wall"], share * budget)
    graph_rows = {k: v for d in samples for k, v in _harness_rows(d).items()}
    direct_rows = {k: v for d in _runs_named("caliber-direct") for k, v in _harness_rows(d).items()}
    prof_rows = {k: v for d in _runs_named("caliber-profiler") for k, v in _harness_rows(d).items()}
    table = []
    for key, g in graph_rows.items():
        if g["op"] not in chosen:
            continue
        o, d, p = own_rows.get(key, {}), direct_rows.get(key, {}), prof_rows.get(key, {})
        table.append({"op": g["op"], "op_name": key[1], "dtype": key[2], "input": key[3], "shape": json.dumps(g["shape"]),
                      "flaggems_own_speedup": o.get("speedup"), "own_torch_ms": o.get("base"), "own_gems_ms": o.get("cand"),
                      "direct_speedup": d.get("speedup"), "direct_torch_ms": d.get("base"), "direct_gems_ms": d.get("cand"),
                      "graph_speedup": g["speedup"], "graph_torch_ms": g["base"], "graph_gems_ms": g["cand"],
                      "graph_row_timer": g["timer"],  # the default timer: profiler for rows under 5 us
                      "profiler_speedup": p.get("speedup"), "profiler_torch_ms": p.get("base"),
                      "profiler_gems_ms": p.get("cand")})
    for row in previous:  # an earlier session's rows, with FlagGems' own numbers of this call
        key = (row["op"], row["op_name"], row["dtype"], int(row["input"]))
        if row["op"] in chosen:
            continue
        o = own_rows.get(key, {})
        d = direct_rows.get(key, {}) if row["op"] in earlier_direct else {}
        table.append({**row, "flaggems_own_speedup": o.get("speedup", row.get("flaggems_own_speedup")),
                      "own_torch_ms": o.get("base", row.get("own_torch_ms")),
                      "own_gems_ms": o.get("cand", row.get("own_gems_ms")),
                      "direct_speedup": d.get("speedup", row.get("direct_speedup")),
                      "direct_torch_ms": d.get("base", row.get("direct_torch_ms")),
                      "direct_gems_ms": d.get("cand", row.get("direct_gems_ms"))})
    write_csv(out / "caliber.csv", table)
    say(f"caliber: {len(table)} rows ({len({r['op'] for r in table})} ops) -> caliber.csv")


# FlagGems' own runner on a file, as in both throughput steps (its defaults otherwise)
FLAGGEMS_OWN_OPTIONS = ("--level", "core", "--mode", "kernel", "--dtypes", "bfloat16")
THROUGHPUT_COLUMNS = ("file", "benchmarks", "flaggems_rows", "flaggems_wall_s", "flaggems_start_s", "harness_rows",
                      "harness_op_wall_s", "harness_over_flaggems", "note")


def step_throughput(out: Path) -> None:
    samples = parts_in(RUNS)
    if not samples:
        say("throughput: no sample run here; run a sample step first")
        return
    source, made = throughput_source(THROUGHPUT_HARNESS)
    inventory = read_inventory(locate_suite(SUITE))
    status = final_status({**o, "part": str(d)} for d in samples for o in read_csv(d / "ops_status.csv"))
    # ops whose time comes from a part that ran alone on its devices: an op's own (a lead is chosen among them)
    shared = side_by_side([s for d in samples if (s := part_span(d)) is not None])
    alone = {op for op, o in status.items() if o["status"] in ENDED and o["part"] not in shared}
    by_file: dict[str, list[SuiteOp]] = defaultdict(list)
    for op in all_ops(inventory):
        if status.get(op.id, {}).get("status") == "PASS" and "bfloat16" in op.functions[0].dtypes:
            by_file[op.functions[0].file].append(op)
    # THROUGHPUT_PREVIOUS (a throughput.csv an earlier call wrote): its files are kept as measured
    # then, and the next files in the same order are taken.
    rows: list[dict[str, Any]] = [dict(r) for r in read_csv(Path(THROUGHPUT_PREVIOUS))] if THROUGHPUT_PREVIOUS else []
    files = [f for f in sorted(by_file, key=_rank) if f not in {r["file"] for r in rows}][:THROUGHPUT_FILES]
    say(f"throughput: {len(by_file)} files have benchmarks that passed with bf16 in the sample; {len(files)} taken"
        + (f", {len(rows)} kept from {THROUGHPUT_PREVIOUS}" if rows else ""))
    deadline = time.monotonic() + BUDGETS["throughput"]
    if source != "sample":
        status = throughput_harness_run([r["file"] for r in rows] + files, by_file,
                                        {op: r for op, r in status.items() if op in alone}, deadline, made,
                                        own_runs_after=bool(files))
        for row in rows:  # an earlier call's file: FlagGems' side as measured then, the harness's now
            side = harness_side(by_file.get(row["file"], []), status, float(row.get("flaggems_wall_s") or 0))
            if side["harness_op_wall_s"] is None:  # not every op of it passed there (a cut run): kept as it was
                row["note"] = f"not re-measured (an op of it did not pass in tp-harness): as in {THROUGHPUT_PREVIOUS}"
            else:
                row.update(side, note=f"harness re-measured in tp-harness; FlagGems' runner as in {THROUGHPUT_PREVIOUS}")
    startup: float | None = None
    for file in files:
        if deadline - time.monotonic() < 20:
            break
        nodes = [in_suite(o.functions[0].nodeid) for o in by_file[file]]
        if startup is None:  # FlagGems' process start and collection, once: the same for every file
            _, startup = flaggems_own([*nodes, "--collect-only"], RUNS / "tp-own",
                                      min(60.0, (deadline - time.monotonic()) / 2), [])
        results, wall = flaggems_own(nodes, RUNS / "tp-own", deadline - time.monotonic(), FLAGGEMS_OWN_OPTIONS)
        side = harness_side(by_file[file], status, wall if results else 0.0)
        rows.append({"file": file, "benchmarks": len(nodes), "flaggems_rows": sum(len(r.get("result", [])) for r in results),
                     "flaggems_wall_s": round(wall, 1), "flaggems_start_s": round(startup, 1), **side,
                     "note": "" if results else "FlagGems' runner reported no results (tp-own/pytest.log): not compared"})
        say(f"  {file}: FlagGems {wall:.1f} s (its start {startup:.1f} s), harness {side['harness_op_wall_s']} s")
    write_csv(out / "throughput.csv", rows, THROUGHPUT_COLUMNS)


def throughput_source(value: str) -> tuple[str, Path | None]:
    """THROUGHPUT_HARNESS read: ("sample", None), ("run", None) or ("from", RUN_DIR); anything else
    ends the script with what it expects."""
    if value in ("sample", "run"):
        return value, None
    made = Path(value.removeprefix("from:"))
    if value.startswith("from:") and (made / "ops_status.csv").is_file():
        return "from", made
    raise SystemExit(f"THROUGHPUT_HARNESS={value!r}: expected sample, run, or from:RUN_DIR "
                     "(a run directory with ops_status.csv)")


def harness_side(ops: Sequence[SuiteOp], status: Mapping[str, Mapping[str, str]], flaggems_wall: float) -> dict[str, Any]:
    """A file's harness columns: its ops' rows and summed wall times, and the ratio to FlagGems'
    wall (none where that is 0, where an op did not pass where it was timed, or where the file has
    no op that passed with bf16 in the sample here)."""
    passed = bool(ops) and all(status.get(o.id, {}).get("status") == "PASS" for o in ops)
    harness_s = sum(float(status[o.id]["elapsed_s"]) for o in ops) if passed else None
    return {"harness_rows": sum(int(status[o.id]["rows"]) for o in ops) if passed else None,
            "harness_op_wall_s": None if harness_s is None else round(harness_s, 1),
            "harness_over_flaggems": round(harness_s / flaggems_wall, 3) if harness_s is not None and flaggems_wall else None}


def throughput_harness_run(files: Sequence[str], by_file: Mapping[str, Sequence[SuiteOp]],
                           status: Mapping[str, Mapping[str, str]], deadline: float,
                           made: Path | None = None, *, own_runs_after: bool) -> dict[str, Mapping[str, str]]:
    """The table's files' ops timed by the harness alone on DEVICES (run tp-harness, HARNESS_ARGS),
    their statuses in place of the sample's. The run leads with one op of the sample outside the
    table, so every op of the table is pre-started as in a nightly, where only a device's first op
    has its imports on the clock: the passing op that took the least time of those that took
    LEAD_MIN_S or more in the sample's parts that ran alone (``status`` holds those: long enough
    for the next ops' preparation; a long lead would only cost device time)."""
    ops = [o.id for f in sorted(files, key=_rank) for o in by_file[f]]
    passed = {op: float(r.get("elapsed_s") or 0) for op, r in status.items() if r.get("status") == "PASS" and op not in ops}
    lead = min(passed, key=lambda op: (passed[op] < LEAD_MIN_S, passed[op], _rank(op)), default=None)
    if made is not None:  # run already: its statuses (an op it did not end counts as not run)
        run_dir = made
        say(f"throughput: the harness's side from {made}")
    else:
        ops_file = RUNS / "tp-harness.txt"
        ops_file.write_text("".join(f"{op}\n" for op in ([lead] if lead else []) + ops))
        left = deadline - time.monotonic()  # half of it where FlagGems' runner has files to run after
        budget = min(THROUGHPUT_HARNESS_BUDGET_S, left / 2 if own_runs_after else left)
        say(f"throughput: the harness on {len(ops)} ops of {len(files)} files (led by {lead}), {budget:.0f} s")
        run_dir = harness_run("tp-harness", ["--ops-file", str(ops_file), *HARNESS_ARGS], budget)
    timed = {r["op"]: r for r in read_csv(run_dir / "ops_status.csv")} if (run_dir / "ops_status.csv").is_file() else {}
    return {op: timed.get(op, {"status": "NOT RUN"}) for op in ops}


def bf16_by_file() -> dict[str, list[SuiteOp]]:
    """The tree's benchmarks with bf16, by file (FlagGems' runner and the harness time a file's)."""
    by_file: dict[str, list[SuiteOp]] = defaultdict(list)
    for op in all_ops(read_inventory(locate_suite(SUITE))):
        if "bfloat16" in op.functions[0].dtypes:
            by_file[op.functions[0].file].append(op)
    return by_file


@contextlib.contextmanager
def restored_environ(*keys: str) -> Iterator[None]:
    """This process's environment variables ``keys`` as they were, once the block ends."""
    saved = {k: os.environ.get(k) for k in keys}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def files_in_shares(files: Sequence[str], by_file: Mapping[str, Sequence[SuiteOp]], step: str,
                    deadline: float) -> Iterator[tuple[str, Sequence[SuiteOp], float]]:
    """(file, its ops, when its share of the time to ``deadline`` ends) for each of ``files`` the
    tree has; a file's share is what is left over the files left."""
    for k, file in enumerate(files):
        if not by_file.get(file):
            say(f"{step}: {file}: no benchmark with bf16 in this tree; left out")
            continue
        yield file, by_file[file], time.monotonic() + (deadline - time.monotonic()) / (len(files) - k)


def fresh_caches(folder: Path) -> None:
    """Empty compiler caches in ``folder`` for what this process starts from now on (Triton's and
    FlagGems', as a harness run's own: harness.run.caches)."""
    shutil.rmtree(folder, ignore_errors=True)
    os.environ.update(cache_env(folder))


def led_ops_file(name: str, ops: Sequence[SuiteOp]) -> Path:
    """RUNS/<name>.txt: CACHED_LEAD, then ``ops``: a harness run's ops file, its ops pre-started."""
    path = RUNS / f"{name}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{op}\n" for op in [CACHED_LEAD, *(o.id for o in ops)]))
    return path


CACHED_COLUMNS = ("file", "benchmarks", "flaggems_rows", "flaggems_fill_s", "flaggems_cached_s", "harness_rows",
                  "harness_op_wall_s", "harness_over_flaggems", "note")


def step_cached(out: Path) -> None:
    """Per file of CACHED_FILES, both runners with filled compiler caches, on one cache folder
    (module docstring, ``cached``): FlagGems' runner fills it and is timed on the run after; then
    the harness (its op wall times, as in ``throughput``). A file's share of the budget is what is
    left over the files left; the filling run may take half of it, and one cut by that is said
    and not compared (the timed run would have been partly cold). Writes $OUT/cached.csv."""
    deadline = time.monotonic() + BUDGETS["cached"]
    rows: list[dict[str, Any]] = []
    try:
        with restored_environ(*cache_env(RUNS)):
            for file, ops, share_end in files_in_shares(CACHED_FILES, bf16_by_file(), "cached", deadline):
                stem = Path(file).stem
                fresh_caches(RUNS / "compiler-caches" / stem)
                nodes = [in_suite(o.functions[0].nodeid) for o in ops]
                fill_budget = (share_end - time.monotonic()) / 2
                filled, fill = flaggems_own(nodes, RUNS / "cached-own", fill_budget, FLAGGEMS_OWN_OPTIONS)
                results, wall = flaggems_own(nodes, RUNS / "cached-own", (share_end - time.monotonic()) / 2,
                                             FLAGGEMS_OWN_OPTIONS)
                run_dir = harness_run(f"cached-{stem}", ["--ops-file", str(led_ops_file(f"cached-{stem}", ops)),
                                                         *HARNESS_ARGS, "--triton-cache", "user"],
                                      share_end - time.monotonic())
                timed = {r["op"]: r for r in read_csv(run_dir / "ops_status.csv")} if (run_dir / "ops_status.csv").is_file() else {}
                rows_of = sum(len(r.get("result", [])) for r in results)
                cut = fill >= fill_budget - 1 or sum(len(r.get("result", [])) for r in filled) < rows_of
                why = ("FlagGems' filling run was cut by its budget, so the timed run was partly cold: not compared" if cut
                       else "" if results else "FlagGems' runner reported no results (cached-own/pytest.log): not compared")
                side = harness_side(ops, timed, 0.0 if why else wall)
                if side["harness_op_wall_s"] is None and not why:
                    why = "an op of the file did not pass in the harness's run: not compared"
                rows.append({"file": file, "benchmarks": len(nodes), "flaggems_rows": rows_of,
                             "flaggems_fill_s": round(fill, 1), "flaggems_cached_s": round(wall, 1), **side, "note": why})
                say(f"  cached {file}: FlagGems {fill:.1f} s filling, {wall:.1f} s with them filled; "
                    f"harness {side['harness_op_wall_s']} s{'; ' + why if why else ''}")
    finally:
        write_csv(out / "cached.csv", rows, CACHED_COLUMNS)


AUTOTUNE_COLUMNS = ("file", "benchmarks", "flaggems_rows", "flaggems_wall_s", "flaggems_autotunings",
                    "flaggems_autotune_s", "harness_rows", "harness_op_wall_s", "harness_autotunings",
                    "harness_autotune_s", "harness_over_flaggems", "note")
# Triton's and FlagGems' LibTuner's line for each autotuning, with TRITON_PRINT_AUTOTUNING=1
_AUTOTUNED = re.compile(r"Triton autotuning for function \S+ finished after ([0-9.]+)s")


def autotunings(text: str) -> tuple[int, float]:
    """How many autotunings a log reports (TRITON_PRINT_AUTOTUNING=1) and their seconds together."""
    seconds = [float(s) for s in _AUTOTUNED.findall(text)]
    return len(seconds), round(sum(seconds), 1)


def step_autotune(out: Path) -> None:
    """Per file of AUTOTUNE_FILES, where each runner's cold time goes to autotuning: FlagGems' own
    runner on a fresh cache folder, then the harness on the file's bf16 ops (led by CACHED_LEAD,
    its own isolated cache unless HARNESS_ARGS says otherwise), both with TRITON_PRINT_AUTOTUNING=1,
    whose lines in their logs are counted and summed. Writes $OUT/autotune.csv."""
    deadline = time.monotonic() + BUDGETS["autotune"]
    rows: list[dict[str, Any]] = []
    try:
        with restored_environ(*cache_env(RUNS), "TRITON_PRINT_AUTOTUNING"):
            os.environ["TRITON_PRINT_AUTOTUNING"] = "1"
            for file, ops, share_end in files_in_shares(AUTOTUNE_FILES, bf16_by_file(), "autotune", deadline):
                stem = Path(file).stem
                fresh_caches(RUNS / "autotune-caches" / stem)
                log = RUNS / "autotune-own" / "pytest.log"
                before = log.stat().st_size if log.is_file() else 0
                nodes = [in_suite(o.functions[0].nodeid) for o in ops]
                results, wall = flaggems_own(nodes, RUNS / "autotune-own", (share_end - time.monotonic()) / 2,
                                             (*FLAGGEMS_OWN_OPTIONS, "-s"))  # -s: pytest keeps no print back
                with log.open("rb") as fh:
                    fh.seek(before)
                    own = autotunings(fh.read().decode(errors="replace"))
                for key in cache_env(RUNS):  # the harness's own (isolated) cache from here
                    os.environ.pop(key, None)
                run_dir = harness_run(f"autotune-{stem}",
                                      ["--ops-file", str(led_ops_file(f"autotune-{stem}", ops)), *HARNESS_ARGS],
                                      share_end - time.monotonic())
                timed = {r["op"]: r for r in read_csv(run_dir / "ops_status.csv")} if (run_dir / "ops_status.csv").is_file() else {}
                files = RunFiles(run_dir)
                mine = autotunings("\n".join(files.log(o.id).read_text(errors="replace") for o in ops
                                              if files.log(o.id).is_file()))
                side = harness_side(ops, timed, wall if results else 0.0)
                rows.append({"file": file, "benchmarks": len(nodes),
                             "flaggems_rows": sum(len(r.get("result", [])) for r in results),
                             "flaggems_wall_s": round(wall, 1), "flaggems_autotunings": own[0],
                             "flaggems_autotune_s": own[1], "harness_rows": side["harness_rows"],
                             "harness_op_wall_s": side["harness_op_wall_s"], "harness_autotunings": mine[0],
                             "harness_autotune_s": mine[1], "harness_over_flaggems": side["harness_over_flaggems"],
                             "note": "" if results else "FlagGems' runner reported no results (autotune-own/pytest.log)"})
                say(f"  autotune {file}: FlagGems {wall:.1f} s ({own[0]} autotunings, {own[1]} s); "
                    f"harness {side['harness_op_wall_s']} s ({mine[0]}, {mine[1]} s)")
    finally:
        write_csv(out / "autotune.csv", rows, AUTOTUNE_COLUMNS)


def summarize(sample_dirs: Sequence[Path], out: Path, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Counts per status, wall time and the projection over every sample part in ``sample_dirs``.
    The projection takes its op costs from parts that ran alone on their devices (side_by_side),
    leaving out each part's leads (part_leads; ``part_leads`` in corpus.json)."""
    span_of = {d: part_span(d) for d in sample_dirs}
    spans = [span for span in span_of.values() if span is not None]
    unspanned = [d.name for d, span in span_of.items() if span is None and (d / "run.json").is_file()]
    if unspanned:
        say(f"no start in run.json: {', '.join(unspanned)} counted as run alone, in the projection")
    shared = side_by_side(spans)
    ops_rows = [dict(row, part=str(d)) for d in sample_dirs for row in read_csv(d / "ops_status.csv")]
    final = final_status(ops_rows)
    ended = {op for op, r in final.items() if r["status"] in ENDED}
    leads = {str(d): part_leads(d) for d in sample_dirs if str(d) not in shared}
    done = cost_rows(ops_rows, shared, leads)
    # the compile time of the row each cost came from (cost_rows keeps the last alone row)
    compiled = {row["op"]: float(row.get("compile_s") or 0) for row in ops_rows
                if row["op"] in done and row["status"] in ENDED and row["part"] not in shared}
    warm = {op: max(0.0, done[op] - compiled[op]) for op in done}
    inventory = read_inventory(locate_suite(SUITE))
    corpus = all_ops(inventory)
    summary = {"suite": str(SUITE), "ref": inventory.tree.ref, "sample_parts": [d.name for d in sample_dirs],
               "side_by_side_parts": sorted(Path(p).name for p in shared),
               "ops_planned": len(final), "ops_ended": len(ended), "ops_costed": len(done),
               # each part's leads and the seconds of their time taken as the part's start
               "part_leads": {Path(part).name: ops for part, ops in leads.items() if ops},
               "ops_by_status": dict(Counter(r["status"] for r in final.values())),
               "strata_ended": dict(Counter(category(o, inventory.base_classes) for o in corpus if o.id in ended)),
               "wall_s": round(union_s(spans), 1), "projection": project(corpus, done, inventory.base_classes),
               # An estimate, not a measurement: each op's time less its Triton compile time (the
               # records' ir.compile_ms), what a nightly whose compiler cache persists would not pay
               # again for unchanged kernels. FlagGems' autotuning runs are not subtracted.
               "projection_without_compile": project(corpus, warm, inventory.base_classes),
               "projection_interval": _interval_or_why(corpus, done, inventory.base_classes),
               "compile_s": round(sum(compiled.values()), 1),
               **(extra or {})}
    (out / "corpus.json").write_text(json.dumps(summary, indent=2) + "\n")
    say("summary:", json.dumps({k: summary[k] for k in ("ops_ended", "ops_by_status", "wall_s")}),
        "projected hours on 1/2/8 GPUs:", summary["projection"]["hours"])
    return summary


# -- commands ------------------------------------------------------------------------------------


def cmd_plan() -> None:
    inventory = read_inventory(locate_suite(SUITE))
    corpus = all_ops(inventory)
    sample = stratified_sample(corpus, SAMPLE_SIZE, inventory.base_classes)
    print(f"{SUITE}: {len(corpus)} benchmarks; sample of {len(sample)} in {PARTS} parts")
    strata_all = Counter(category(o, inventory.base_classes) for o in corpus)
    strata_sample = Counter(category(o, inventory.base_classes) for o in sample)
    for name in sorted(strata_all):
        print(f"  {name:28} {strata_all[name]:4} in the corpus, {strata_sample[name]:3} sampled")
    for k, part in enumerate(parts_of(sample, part_weights()), start=1):
        print(f"  part {k}: {len(part)} ops, first: {', '.join(o.id for o in part[:6])} ...")
    call2 = BUDGETS["sample2"] + BUDGETS["caliber"] + BUDGETS["throughput"]
    print(f"budgets (s): {BUDGETS}; call 1 = sample1 ({BUDGETS['sample']:.0f} s + about 30 s of set-up); call 2 = "
          f"sample2 + caliber + throughput ({call2:.0f} s + set-up)")


def cmd_run(out: Path) -> None:
    steps = os.environ.get("STEPS", " ".join([f"sample{k}" for k in range(1, PARTS + 1)] + ["caliber", "throughput"])).split()
    RUNS.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    begin = time.monotonic()
    say(f"steps {steps}, suite {SUITE}, devices {DEVICES}")
    setup()
    inventory = read_inventory(locate_suite(SUITE))
    sample = stratified_sample(all_ops(inventory), SAMPLE_SIZE, inventory.base_classes)
    for step in steps:
        say(f"=== {step} ({time.monotonic() - begin:.0f} s)")
        if step.startswith("sample"):
            step_sample(int(step.removeprefix("sample") or 1), sample, out, inventory.base_classes)
        elif step == "caliber":
            step_caliber(out)
        elif step == "throughput":
            step_throughput(out)
        elif step == "rerun":
            step_rerun(out)
        elif step == "cached":
            step_cached(out)
        elif step == "autotune":
            step_autotune(out)
        else:
            say(f"unknown step {step!r}")
    summarize(parts_in(RUNS), out,
              {"steps": steps, "script_wall_s": round(time.monotonic() - begin, 1),
               "timeline": timeline(parts_in(RUNS))})
    if os.environ.get("ARCHIVE", "1") == "1":
        archive(out)
    (out / "corpus.log").write_text("\n".join(LOG) + "\n")


def cmd_remaining(dirs: Sequence[Path], out: Path) -> None:
    """The sample's ops that no part in ``dirs`` ended (in the sample's stratified order), into
    ``out`` (a file): the next call's RERUN_OPS (CPU only)."""
    inventory = read_inventory(locate_suite(SUITE))
    sample = stratified_sample(all_ops(inventory), SAMPLE_SIZE, inventory.base_classes)
    ended = {r["op"] for d in dirs for p in d.glob("sample-*") for r in read_csv(p / "ops_status.csv")
             if r["status"] not in ("PENDING", "INTERRUPTED", "RUNNING")}
    left = [op.id for op in sample if op.id not in ended]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{op}\n" for op in left))
    print(f"{len(ended)} of the sample's {len(sample)} ops ended; {len(left)} left -> {out}")


def cmd_merge(dirs: Sequence[Path], out: Path) -> None:
    """The calls' outputs into one: ops_status.csv, summary.csv, triage.csv, corpus.json (CPU only)."""
    out.mkdir(parents=True, exist_ok=True)
    parts = [p for d in dirs for p in parts_in(d)]  # the calls in the order given, each's parts by K
    final = final_status({**row, "part": str(p)} for p in parts for row in read_csv(p / "ops_status.csv"))
    write_csv(out / "ops_status.csv", [{k: v for k, v in row.items() if k != "part"} for row in final.values()])
    # An op's rows and triage lines come from the part its final status came from.
    write_csv(out / "summary.csv", [row for p in parts for row in read_csv(p / "summary.csv")
                                    if final.get(row["op"], {}).get("part") == str(p)])
    write_csv(out / "triage.csv", [row for p in parts for row in read_csv(p.parent / f"triage-{part_number(p)}.csv")
                                   if final.get(row["op"], {}).get("part") == str(p)],
              ("op", "case", "status", "message"))
    # Each op and case that did not pass with its cause (harness/results/causes.py), from the merged CSVs.
    ops, cases, _ = read_folder(out)
    write_csv(out / "causes.csv", causes_rows(ops, cases), CAUSES_COLUMNS)
    for name in ("caliber.csv", "throughput.csv"):
        found = [d / name for d in dirs if (d / name).is_file()]
        if found:
            (out / name).write_bytes(found[-1].read_bytes())
    summarize(parts, out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("plan", "run", "merge", "remaining", "timeline"))
    parser.add_argument("dirs", nargs="*", type=Path, help="merge: the $OUT folders of the GPU calls")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/flaggems-corpus-out")))
    args = parser.parse_args(argv)
    if args.command == "plan":
        cmd_plan()
    elif args.command == "run":
        cmd_run(args.out)
    elif args.command == "remaining":
        cmd_remaining(args.dirs, args.out)
    elif args.command == "timeline":  # the sample parts' time split, from run folders (a call's runs.tgz unpacked)
        print(json.dumps(timeline([p for d in args.dirs for p in parts_in(d)]), indent=1))
    else:
        cmd_merge(args.dirs, args.out)


if __name__ == "__main__":
    main()
