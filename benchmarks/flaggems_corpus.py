"""FlagGems' benchmark corpus under the harness on a GPU machine: a stratified sample run as the
parts of one `harness run --shard K/N`, finished across calls by `--resume`, joined by `harness
merge`, and the harness's wall time per file against FlagGems' own runner (docs/flaggems.md,
"Evidence on an H200", lists the knobs and a sequence of calls).

    python3 benchmarks/flaggems_corpus.py plan                          # CPU: the sample's strata
    STEPS="sample1" python3 benchmarks/flaggems_corpus.py run --out OUT # GPU: a call
    python3 benchmarks/flaggems_corpus.py merge RUNS1 RUNS2 --out benchmarks/results/NAME   # CPU
    python3 benchmarks/flaggems_corpus.py timeline RUNS1 RUNS2          # CPU: time split of the parts

Steps of ``run`` (STEPS; default every sample part, then throughput):

- ``sampleK``: part K/PARTS of the sample (``--ops-file RUNS/sample.txt --shard K/PARTS``), or
  RUNS/sample-K resumed where an earlier call left it;
- ``throughput``: FlagGems' own runner per file against the harness's op wall times: OUT/throughput.csv.

Each harness run stops starting ops at its step's budget (``--budget``) and is ended GRACE_S
later. Every call writes OUT/corpus.json (harness.suite.costing: statuses, costs, the projected
nightly; ``timeline``), OUT/corpus.log and OUT/runs.tgz (RUNS' runs without IR, caches and
HTML; with their completion markers, op timelines and recorded autotune configs).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.results.store import atomic_write_text, csv_text  # noqa: E402
from harness.run.spawn import end_group, reap_group, wait_exit  # noqa: E402
from harness.run.timeline import ENDED, final_status, read_csv, run_spans, side_by_side, timeline  # noqa: E402
from harness.suite.costing import sample_summary  # noqa: E402
from harness.suite.inventory import read_inventory  # noqa: E402
from harness.suite.layout import locate_suite  # noqa: E402
from harness.suite.projection import _rank, category, stratified_sample  # noqa: E402
from harness.suite.select import SuiteOp, all_ops  # noqa: E402

knob = os.environ.get
SUITE = Path(knob("SUITE", str(REPO / ".flaggems" / "v5.3.4" / "benchmark")))
RUNS = Path(knob("RUNS", "/tmp/flaggems-corpus"))
SITE = Path(knob("SITE", "/tmp/site"))
DEVICES = knob("DEVICES", "0").split()
BACKEND = knob("BACKEND", "cuda")  # cpu: a dry run of the plumbing on a stand-in tree (tests/data)
SAMPLE_SIZE, SAMPLE_SEED = int(knob("SAMPLE_SIZE", "160")), knob("SAMPLE_SEED", "")  # "" is the committed sample
PARTS = int(knob("PARTS", "2"))
OP_TIMEOUT = knob("OP_TIMEOUT", "120")
CAP_MS = knob("CAP_MS", "300")  # --cap-ms: rows of small kernels rarely settle, each costs the cap (docs/timing.md)
HARNESS_ARGS = knob("HARNESS_ARGS", "").split()  # added to every harness run: "--plugins -wall --ir off"
SHARD_WEIGHTS = knob("SHARD_WEIGHTS", "")  # the sample's --shard-weights (an earlier ops_status.csv)
BUDGETS = {step: float(knob(f"{step.upper()}_BUDGET_S", default)) for step, default in
           (("sample", "440"), ("throughput", "90"))}
GRACE_S = float(knob("GRACE_S", "120"))
THROUGHPUT_FILES = int(knob("THROUGHPUT_FILES", "6"))
THROUGHPUT_PREVIOUS = knob("THROUGHPUT_PREVIOUS", "")
THROUGHPUT_HARNESS = knob("THROUGHPUT_HARNESS", "sample")
THROUGHPUT_HARNESS_BUDGET_S = float(knob("THROUGHPUT_HARNESS_BUDGET_S", "240"))
ARCHIVE_TO = Path(knob("ARCHIVE_TO", "")) if knob("ARCHIVE_TO") else None
ARCHIVE_EVERY_S = float(knob("ARCHIVE_EVERY_S", "60"))
LEAD_MIN_S = 12.0
# FlagGems' own runner on a file (its defaults otherwise: 1000 ms warm-up, 100 ms per call)
FLAGGEMS_OWN_OPTIONS = ("--level", "core", "--mode", "kernel", "--dtypes", "bfloat16")
LOG: list[str] = []


def say(*parts: Any) -> None:
    LOG.append(line := " ".join(str(p) for p in parts))
    print(line, flush=True)


def child_env() -> dict[str, str]:
    """This script's environment for its children, less HARNESS_ARGS (the harness warns of unknown HARNESS_*)."""
    vendor = {"GEMS_VENDOR": "nvidia"} if BACKEND == "cuda" else {}
    own = {k: v for k, v in os.environ.items() if k != "HARNESS_ARGS"}
    return {**own, "PYTHONPATH": f"{SITE}{os.pathsep}{REPO}", "PYTHONUNBUFFERED": "1", **vendor}


def bounded(cmd: Sequence[str], budget_s: float, cwd: Path | None = None, log: Path | None = None,
            env: Mapping[str, str] | None = None, tick: Callable[[], None] | None = None,
            every_s: float = 60.0) -> tuple[int, float]:
    """Run ``cmd`` for at most ``budget_s``; past it, SIGTERM to its process group (the harness
    then finalizes an interrupted run), SIGKILL 60 s later (harness.run.spawn.end_group). ``tick``
    is called every ``every_s`` seconds while it runs; a tick that raises ends the command first.
    (exit code, wall seconds)."""
    start = time.monotonic()
    with open(log or os.devnull, "ab") as out:
        child = subprocess.Popen(list(cmd), cwd=cwd, env=dict(env or child_env()), stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while (left := budget_s - (time.monotonic() - start)) > 0:
                if wait_exit(child.pid, time.monotonic() + min(left, every_s) if tick else start + budget_s,
                             None) == "exited":
                    reap_group(child)
                    return child.returncode, time.monotonic() - start
                if tick is not None and time.monotonic() - start < budget_s:
                    tick()
            end_group(child, signal.SIGTERM, None, grace_s=60)
        except BaseException:  # never leave the command going behind a failed tick
            reap_group(child)
            raise
    return child.returncode, time.monotonic() - start


def setup() -> None:
    """The carried wheels into SITE (PyPI's flag_gems 5.0.2 left out: the tree is v5.3.4)."""
    if knob("SKIP_SETUP"):
        return
    wheels = [str(w) for w in (REPO / ".whl").glob("*.whl") if not w.name.startswith("flag_gems-")]
    wheels += [str(w) for w in (REPO / ".whl").glob("flaggems-v5.3.4/*.whl")]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--target", str(SITE), *wheels], check=True)
    probe = subprocess.run([sys.executable, "-c", "import flag_gems; print(flag_gems.__version__)"],
                           env=child_env(), capture_output=True, text=True, timeout=300)
    say("flag_gems:", probe.stdout.strip() or probe.stderr.strip()[-400:])


def harness_run(name: str, extra: Sequence[str], budget: float) -> Path:
    """``harness run`` into RUNS/<name> with ``--budget``, ended GRACE_S after it; resumed instead
    where ``extra`` starts with ``--resume`` (with this call's budget)."""
    run_dir = RUNS / name
    cmd = [sys.executable, "-m", "harness", "run", "--progress", "plain", "--budget", f"{budget:g}"]
    if extra[:1] != ["--resume"]:
        cmd += ["--backend", BACKEND, "--suite", str(SUITE), "--level", "core", "--dtypes", "bfloat16",
                "--devices", *DEVICES, "--op-timeout", OP_TIMEOUT, "--cap-ms", CAP_MS, "--out", str(run_dir)]
    code, wall = bounded([*cmd, *extra], budget + GRACE_S, log=RUNS / f"{name}.log",
                         tick=archive_now if ARCHIVE_TO and ARCHIVE_EVERY_S > 0 else None, every_s=ARCHIVE_EVERY_S)
    info = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    ops = dict(Counter(o["status"] for o in info.get("ops", [])))
    say(f"{name}: exit {code}, {wall:.0f} s, run {info.get('status', '?')}, ops {ops}")
    return run_dir


def step_sample(k: int, sample: Sequence[SuiteOp], base_classes: frozenset[str]) -> None:
    """Part K of the sample as ``--shard K/PARTS``, or RUNS/sample-K resumed where an earlier call left it."""
    run_dir, ops_file = RUNS / f"sample-{k}", RUNS / "sample.txt"
    extra = ["--resume", str(run_dir)]
    if not (run_dir / "run.json").is_file():
        ops_file.write_text("".join(f"{op.id}\n" for op in sample))
        weights = ["--shard-weights", SHARD_WEIGHTS] if SHARD_WEIGHTS else []
        extra = ["--ops-file", str(ops_file), "--shard", f"{k}/{PARTS}", *weights, *HARNESS_ARGS]
    say(f"sample part {k}/{PARTS} of {len(sample)} ops {dict(Counter(category(o, base_classes) for o in sample))}:",
        *extra[:2])
    harness_run(run_dir.name, extra, BUDGETS["sample"])


def kept(info: tarfile.TarInfo, logs: bool) -> tarfile.TarInfo | None:
    """What runs.tgz keeps of a run: the op timelines of specs/, RUN/autotune/<op>.json (what
    --replay-from reads); not IR, caches, specs, sweep files, HTML or JUnit; the logs if ``logs``."""
    parts = Path(info.name).parts
    if "specs" in parts[1:] and (info.isdir() or parts[-1].endswith(".times.json")) or (
            len(parts) in (2, 3) and parts[1] == "autotune" and (info.isdir() or parts[-1].endswith(".json"))):
        return info
    if {"ir", "triton-cache", "triton_cache", "cache", "specs", "sweep", "autotune"} & set(parts[1:]):
        return None
    return None if parts[-1] in ("report.html", "junit.xml") or not logs and "logs" in parts[1:] else info


def archive(out: Path, limit: int = 15 << 20) -> None:
    """RUNS' run directories into OUT/runs.tgz (``kept``); without the op logs where it is over ``limit``."""
    target, partial = out / "runs.tgz", out / "runs.tgz.partial"
    out.mkdir(parents=True, exist_ok=True)
    for logs in (True, False):
        with tarfile.open(partial, "w:gz") as tar:
            for run in sorted(p for p in RUNS.iterdir() if p.is_dir() and (p / "run.json").is_file()):
                tar.add(run, arcname=run.name, filter=functools.partial(kept, logs=logs))
        if partial.stat().st_size <= limit:
            break
    os.replace(partial, target)  # a call cut while this writes keeps the archive before it
    say(f"runs.tgz: {target.stat().st_size >> 10} KiB")


def archive_now() -> None:
    """The periodic archive into ARCHIVE_TO; a file vanishing under it (the run goes on) skips a turn."""
    if ARCHIVE_TO is not None:
        try:
            archive(ARCHIVE_TO)
        except (OSError, EOFError, tarfile.TarError) as exc:
            say(f"runs.tgz not refreshed this time: {type(exc).__name__}: {exc}")


def flaggems_own(nodes: Sequence[str], work: Path, budget: float, options: Sequence[str]) -> tuple[list[dict[str, Any]], float]:
    """FlagGems' own pytest on ``nodes`` in SUITE (``-c /dev/null``: not this repository's settings):
    its results as it recorded them (benchmarks/flaggems_stream.py), and the wall time. Cold, as
    the harness's side (a Triton and FlagGems cache of its run's own): each call compiles into
    empty caches of its own (``work/cache``, emptied first)."""
    work.mkdir(parents=True, exist_ok=True)
    stream, cache = work / "results.jsonl", work / "cache"
    stream.unlink(missing_ok=True)
    shutil.rmtree(cache, ignore_errors=True)
    cmd = [sys.executable, "-m", "pytest", *nodes, "-p", "flaggems_stream", *options, "-c", os.devnull,
           "--rootdir", str(SUITE.parent), "--confcutdir", str(SUITE), "-p", "no:cacheprovider", "-q",
           "-W", "ignore::pytest.PytestUnknownMarkWarning"]
    own_env = child_env()
    own_env.update(FLAGGEMS_STREAM=str(stream), PYTHONPATH=f"{own_env['PYTHONPATH']}{os.pathsep}{REPO / 'benchmarks'}",
                   TRITON_CACHE_DIR=str(cache / "triton"), FLAGGEMS_CACHE_DIR=str(cache / "flaggems"))
    _, wall = bounded(cmd, budget, cwd=SUITE, log=work / "pytest.log", env=own_env)
    results = []
    for line in stream.read_text(errors="replace").splitlines() if stream.is_file() else []:
        with contextlib.suppress(json.JSONDecodeError):  # the line a budget cut mid-write
            found = json.loads(line)
            if isinstance(found, dict):  # a result; anything else FlagGems handed over is none
                results.append(found)
    return results, wall


def part_number(path: Path) -> int:
    return int(path.name.removeprefix("sample-"))


def parts_in(folder: Path, name: str = "ops_status.csv") -> list[Path]:
    """The ``sample-K`` folders of ``folder`` holding ``name``, in the order of K (sample-10 after sample-2)."""
    found = (p.parent for p in folder.glob(f"sample-*/{name}"))
    return sorted((p for p in found if p.name.removeprefix("sample-").isdigit()), key=part_number)


def harness_side(ops: Sequence[SuiteOp], status: Mapping[str, Mapping[str, str]], flaggems_wall: float) -> dict[str, Any]:
    """A file's rows, summed op wall times and their ratio to FlagGems' wall; none where an op did
    not pass or FlagGems' wall is 0."""
    passed = bool(ops) and all(status.get(o.id, {}).get("status") == "PASS" for o in ops)
    harness_s = sum(float(status[o.id]["elapsed_s"]) for o in ops) if passed else None
    return {"harness_rows": sum(int(status[o.id]["rows"]) for o in ops) if passed else None,
            "harness_op_wall_s": None if harness_s is None else round(harness_s, 1),
            "harness_over_flaggems": round(harness_s / flaggems_wall, 3) if harness_s is not None and flaggems_wall else None}


def file_order(file: str) -> int:
    """The order throughput takes files in: a hash of SAMPLE_SEED and the file's name, so another
    sample's seed draws other files (the committed sample, no seed: the name alone)."""
    return _rank(f"{SAMPLE_SEED}:{file}" if SAMPLE_SEED else file)


def throughput_harness_run(files: Sequence[str], by_file: Mapping[str, Sequence[SuiteOp]],
                           alone: Mapping[str, Mapping[str, str]], deadline: float,
                           made: Path | None = None, *, own_runs_after: bool) -> dict[str, Mapping[str, str]]:
    """The table's ops timed alone on DEVICES (tp-harness), led by the quickest passing op of
    ``alone`` taking LEAD_MIN_S or more, so every op of the table is pre-started as in a nightly."""
    ops = [o.id for f in sorted(files, key=file_order) for o in by_file[f]]
    passed = {op: float(r.get("elapsed_s") or 0) for op, r in alone.items() if r.get("status") == "PASS" and op not in ops}
    lead = min(passed, key=lambda op: (passed[op] < LEAD_MIN_S, passed[op], _rank(op)), default=None)
    run_dir = made
    if run_dir is None:
        ops_file = RUNS / "tp-harness.txt"
        ops_file.write_text("".join(f"{op}\n" for op in ([lead] if lead else []) + ops))
        left = deadline - time.monotonic()
        budget = min(THROUGHPUT_HARNESS_BUDGET_S, left / 2 if own_runs_after else left)
        say(f"throughput: the harness on {len(ops)} ops of {len(files)} files (led by {lead}), {budget:.0f} s")
        run_dir = harness_run("tp-harness", ["--ops-file", str(ops_file), *HARNESS_ARGS], budget)
    timed = {r["op"]: r for r in read_csv(run_dir / "ops_status.csv")}
    return {op: timed.get(op, {"status": "NOT RUN"}) for op in ops}


THROUGHPUT_COLUMNS = ("file", "benchmarks", "flaggems_rows", "flaggems_wall_s", "flaggems_start_s", "harness_rows",
                      "harness_op_wall_s", "harness_over_flaggems", "note")


def step_throughput(out: Path) -> None:
    samples = parts_in(RUNS)
    if not samples:
        say("throughput: no sample run here; run a sample step first")
        return
    made = Path(THROUGHPUT_HARNESS.removeprefix("from:")) if THROUGHPUT_HARNESS.startswith("from:") else None
    if THROUGHPUT_HARNESS not in ("sample", "run") and not (made and (made / "ops_status.csv").is_file()):
        raise SystemExit(f"THROUGHPUT_HARNESS={THROUGHPUT_HARNESS!r}: expected sample, run, or from:RUN_DIR "
                         "(a run directory with ops_status.csv)")
    status: Mapping[str, Mapping[str, str]] = final_status(
        {**o, "part": str(d)} for d in samples for o in read_csv(d / "ops_status.csv"))
    shared = side_by_side([s for d in samples for s in run_spans(d)])
    alone = {op: o for op, o in status.items() if o["status"] in ENDED and o["part"] not in shared}
    by_file: dict[str, list[SuiteOp]] = defaultdict(list)
    for op in all_ops(read_inventory(locate_suite(SUITE))):
        if status.get(op.id, {}).get("status") == "PASS" and "bfloat16" in op.functions[0].dtypes:
            by_file[op.functions[0].file].append(op)
    rows: list[dict[str, Any]] = [dict(r) for r in read_csv(Path(THROUGHPUT_PREVIOUS))] if THROUGHPUT_PREVIOUS else []
    files = [f for f in sorted(by_file, key=file_order) if f not in {r["file"] for r in rows}][:THROUGHPUT_FILES]
    say(f"throughput: {len(by_file)} files passed with bf16 in the sample; {len(files)} taken, {len(rows)} kept")
    deadline = time.monotonic() + BUDGETS["throughput"]
    if THROUGHPUT_HARNESS != "sample":
        status = throughput_harness_run([r["file"] for r in rows] + files, by_file, alone, deadline, made,
                                        own_runs_after=bool(files))
        for row in rows:  # an earlier call's file: FlagGems' side as measured then, the harness's now
            side = harness_side(by_file.get(row["file"], []), status, float(row.get("flaggems_wall_s") or 0))
            if side["harness_op_wall_s"] is None:
                row["note"] = f"not re-measured (an op of it did not pass in tp-harness): as in {THROUGHPUT_PREVIOUS}"
            else:
                row.update(side, note=f"harness re-measured in tp-harness; FlagGems' runner as in {THROUGHPUT_PREVIOUS}")
    startup: float | None = None
    for file in files:
        if deadline - time.monotonic() < 20:
            break
        nodes = [o.functions[0].nodeid for o in by_file[file]]  # relative to SUITE, the runner's cwd
        if startup is None:  # FlagGems' process start and collection, once
            _, startup = flaggems_own([*nodes, "--collect-only"], RUNS / "tp-own", min(60.0, (deadline - time.monotonic()) / 2), [])
        results, wall = flaggems_own(nodes, RUNS / "tp-own", deadline - time.monotonic(), FLAGGEMS_OWN_OPTIONS)
        side = harness_side(by_file[file], status, wall if results else 0.0)
        rows.append({"file": file, "benchmarks": len(nodes), "flaggems_rows": sum(len(r.get("result", [])) for r in results),
                     "flaggems_wall_s": round(wall, 1), "flaggems_start_s": round(startup, 1), **side,
                     "note": "" if results else "FlagGems' runner reported no results (tp-own/pytest.log): not compared"})
        say(f"  {file}: FlagGems {wall:.1f} s (its start {startup:.1f} s), harness {side['harness_op_wall_s']} s")
    atomic_write_text(out / "throughput.csv", csv_text(THROUGHPUT_COLUMNS, ({c: r.get(c) for c in THROUGHPUT_COLUMNS}
                                                                         for r in rows)))


def summarize(parts: Sequence[Path], out: Path, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """OUT/corpus.json: harness.suite.costing's summary of the sample's parts, with the tree."""
    inventory = read_inventory(locate_suite(SUITE))
    summary = {"suite": str(SUITE), "ref": inventory.tree.ref,
               **sample_summary(parts, all_ops(inventory), inventory.base_classes), **(extra or {})}
    out.mkdir(parents=True, exist_ok=True)
    (out / "corpus.json").write_text(json.dumps(summary, indent=2) + "\n")
    say("summary:", json.dumps({k: summary[k] for k in ("ops_ended", "ops_by_status", "wall_s")}),
        "projected hours on 1/2/8 GPUs:", summary["projection"]["hours"])
    return summary


def sample_of_suite() -> tuple[list[SuiteOp], list[SuiteOp], frozenset[str]]:
    corpus, base = all_ops(inventory := read_inventory(locate_suite(SUITE))), inventory.base_classes
    return corpus, stratified_sample(corpus, SAMPLE_SIZE, base, SAMPLE_SEED), base


def cmd_plan() -> None:
    corpus, sample, base_classes = sample_of_suite()
    print(f"{SUITE}: {len(corpus)} benchmarks; sample of {len(sample)} in {PARTS} parts (--shard K/{PARTS})")
    every, sampled = (Counter(category(o, base_classes) for o in ops) for ops in (corpus, sample))
    for name in sorted(every):
        print(f"  {name:28} {every[name]:4} in the corpus, {sampled[name]:3} sampled")


def cmd_run(out: Path) -> None:
    steps = knob("STEPS", " ".join([f"sample{k}" for k in range(1, PARTS + 1)] + ["throughput"])).split()
    RUNS.mkdir(parents=True, exist_ok=True)
    begin = time.monotonic()
    say(f"steps {steps}, suite {SUITE}, devices {DEVICES}")
    setup()
    _, sample, base_classes = sample_of_suite()
    for step in steps:
        say(f"=== {step} ({time.monotonic() - begin:.0f} s)")
        if step.startswith("sample"):
            step_sample(int(step.removeprefix("sample") or 1), sample, base_classes)
        elif step == "throughput":
            step_throughput(out)
        else:
            say(f"unknown step {step!r}")
    summarize(parts_in(RUNS), out, {"steps": steps, "script_wall_s": round(time.monotonic() - begin, 1),
                                    "timeline": timeline(parts_in(RUNS))})
    if knob("ARCHIVE", "1") == "1":
        archive(out)
    (out / "corpus.log").write_text("\n".join(LOG) + "\n")


def cmd_merge(dirs: Sequence[Path], out: Path) -> None:
    """The parts (each sample-K from the last folder that has it) joined by ``harness merge`` (MERGE_ARGS
    added), its causes (``harness.results.triage``), corpus.json and the last throughput.csv given."""
    parts = sorted({p.name: p for d in dirs for p in parts_in(d, "run.json")}.values(), key=part_number)
    merge = ["harness", "merge", *map(str, parts), *knob("MERGE_ARGS", "").split(), "--out", str(out)]
    for cmd in (merge, ["harness.results.triage", str(out)]):
        if subprocess.run([sys.executable, "-m", *cmd], env=child_env()).returncode:
            raise SystemExit(f"python -m {cmd[0]} failed (above); nothing more written")
    for found in [d / "throughput.csv" for d in dirs if (d / "throughput.csv").is_file()][-1:]:
        shutil.copyfile(found, out / "throughput.csv")
    summarize(parts, out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("plan", "run", "merge", "timeline"))
    parser.add_argument("dirs", nargs="*", type=Path, help="merge, timeline: folders holding sample-K run directories")
    parser.add_argument("--out", type=Path, default=Path(knob("OUT", "/tmp/flaggems-corpus-out")))
    args = parser.parse_args(argv)
    if args.command == "plan":
        cmd_plan()
    elif args.command == "run":
        cmd_run(args.out)
    elif args.command == "timeline":
        print(json.dumps(timeline([p for d in args.dirs for p in parts_in(d)]), indent=1))
    else:
        cmd_merge(args.dirs, args.out)


if __name__ == "__main__":
    main()
