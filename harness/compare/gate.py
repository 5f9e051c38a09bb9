"""`harness gate-run`: the body of `nox -s gate`.

Runs the benchmark for two versions of the code under test (git refs, checked
out as temporary worktrees, or directories) on this host's device,
interleaved ABBA (base, head, head, base, ...) so that slow drift of the
machine weighs on both sides alike, pools each side's repeats into one run
directory, then compares them as `harness gate` does. Each side's run 1 records the
configs its autotuners choose and that side's later runs replay them (``--replay-from``), so
an autotuner flipping between two near-equal configs does not read as a change of the code;
the comparison shows where base and head chose differently.

Each side runs ``python -m harness run`` with its own tree as the working
directory and first on PYTHONPATH, so the harness and ops of that version are
the ones measured, and relative paths in the run arguments (``--ops-module
my_ops.py``) resolve inside that version.

With ``untrusted_sides`` (`gate-run --container`: a side's code may be a pull request's) each
side writes into an empty folder of its own, beside OUT and never shared with the other side.
After each run the host checks that whole folder (harness.compare.untrusted: no links, FIFOs,
sockets or device nodes, nothing but the side's run directories) and copies the run into
OUT/repeats/ without following anything; otherwise the gate fails closed. OUT then holds only
what the host wrote after those checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.compare.compare import load_run
from harness.compare.untrusted import (
    check_tree,
    commands_stopped,
    copy_checked,
    refusal,
    remove_tree,
)
from harness.errors import HarnessError, UsageError
from harness.results.schema import Measurement, Timing
from harness.results.store import append_record, write_json
from harness.run.provenance import git

__all__ = [
    "GateSide",
    "SideRunner",
    "collect_run",
    "interleaved_order",
    "merge_records",
    "merged_info",
    "merged_ops",
    "pool_side",
    "run_command",
    "run_gate",
    "side_folders",
    "side_replay",
    "side_trees",
]

SIDES = ("base", "head")


@dataclass(frozen=True)
class GateSide:
    name: str  # "base" or "head"
    ref: str  # what the user gave: a git ref or a directory
    tree: Path  # where that version's files are


def interleaved_order(repeats: int) -> list[tuple[str, int]]:
    """ABBA order: (base 1, head 1), (head 2, base 2), (base 3, head 3), ...

    Alternating which side goes first cancels a linear drift of the machine
    (clocks, temperature) over each pair of repeats.
    """
    if repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {repeats}.")
    order: list[tuple[str, int]] = []
    for k in range(1, repeats + 1):
        first, second = SIDES if k % 2 == 1 else SIDES[::-1]
        order += [(first, k), (second, k)]
    return order


def run_command(python: str, out_dir: Path, run_id: str, run_args: Sequence[str]) -> list[str]:
    return [python, "-m", "harness", "run", "--out", str(out_dir), "--run-id", run_id, *run_args]


def _how_timed(r: Measurement) -> tuple[str, str]:
    return (r.timer, r.fallback.reason if r.fallback else "")


def _pooled(timings: Sequence[Timing]) -> Timing | None:
    """The samples of several runs in one Timing that remembers which run each came from."""
    if not timings:
        return None
    samples = [x for t in timings for x in t.samples_ms]
    blocks = [n for t in timings for n in (t.blocks or (len(t.samples_ms),))]
    return Timing.of(samples, blocks=blocks, settled=all(t.settled for t in timings))


def _missing(template: Measurement, run_id: str, repeat: int, repeats: int) -> Measurement:
    return replace(
        template, run_id=run_id, status="error", candidate=None, baseline=None, speedup=None, gbps=None,
        tflops=None, correctness=None,
        message=(f"{template.case_id}: no record in repeat {repeat} of {repeats} (the op crashed, hung or "
                 "was not run there: see that repeat's ops_status.csv and logs/)"),
        notes=(f"missing in repeat {repeat}",),
    )


def _merge_case(group: Sequence[Measurement | None], run_id: str) -> Measurement:
    present = [r for r in group if r is not None]
    gap = next((k for k, r in enumerate(group, start=1) if r is None), None)
    if gap is not None:
        return _missing(present[0], run_id, gap, len(group))
    bad = next((r for r in present if r.status != "pass"), None)
    if bad is not None:
        return replace(bad, run_id=run_id)
    # Samples are pooled only across repeats timed alike (same timer, same fallback): the most
    # common way wins, ties to the first repeat's; the others are left out and said so.
    ways = [_how_timed(r) for r in present]
    chosen = max(dict.fromkeys(ways), key=ways.count)
    left_out = len(present) - ways.count(chosen)
    kept = [r for r in present if _how_timed(r) == chosen]
    first = kept[0]
    candidate = _pooled([r.candidate for r in kept if r.candidate])
    baseline = _pooled([r.baseline for r in kept if r.baseline])
    scale = None
    if candidate and first.candidate and candidate.summary.median > 0:
        scale = first.candidate.summary.median / candidate.summary.median
    # A repeat that tuned live while replaying makes the pooled row a replay-miss too.
    misses = any(r.autotune == "replay-miss" for r in kept)
    notes = tuple(dict.fromkeys(n for r in kept for n in r.notes)) + (f"pooled from {len(kept)} runs",)
    if left_out:
        notes += (f"{left_out} repeat(s) timed differently (timer/fallback) left out of the pool",)
    return replace(
        first,
        run_id=run_id,
        candidate=candidate,
        baseline=baseline,
        speedup=(baseline.summary.median / candidate.summary.median
                 if baseline and candidate and candidate.summary.median > 0 else None),
        gbps=first.gbps * scale if first.gbps is not None and scale else None,
        tflops=first.tflops * scale if first.tflops is not None and scale else None,
        duration_s=sum(r.duration_s for r in kept),
        autotune="replay-miss" if misses else first.autotune,
        notes=notes,
        device_state=tuple(s for r in kept for s in r.device_state),
    )


def merge_records(runs: Sequence[Sequence[Measurement]], run_id: str) -> list[Measurement]:
    """Pool the repeats of one side: per case, all raw samples together, each run's samples a
    block of their own (``Timing.blocks``), so the statistics can tell the runs apart.

    A case that did not pass in some repeat is carried as that failing record, and a case some
    repeat has no record of (its op crashed or hung there) as an error naming that repeat, so
    it is reported rather than compared.
    """
    groups: dict[str, list[Measurement | None]] = {}
    for k, records in enumerate(runs):
        for r in records:
            groups.setdefault(r.case_id, [None] * len(runs))[k] = r
    return [_merge_case(group, run_id) for group in groups.values()]


def merged_ops(infos: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """run.json ``ops`` of a pooled side: per op, the first repeat's row unless some repeat ended
    worse (not PASS or SKIP), then that repeat's row, its notes naming the repeat."""
    out: dict[str, dict[str, Any]] = {}
    for k, info in enumerate(infos, start=1):
        for row in info.get("ops") or ():
            if not isinstance(row, Mapping) or "op" not in row:
                continue
            op = str(row["op"])
            bad = str(row.get("status")) not in ("PASS", "SKIP")
            if op not in out or (bad and str(out[op].get("status")) in ("PASS", "SKIP")):
                note = f"repeat {k}" + (f": {row.get('notes')}" if row.get("notes") else "")
                out[op] = {**row, "notes": note if bad else row.get("notes", "")}
    return list(out.values())


def merged_info(infos: Sequence[Mapping[str, Any]], run_id: str, ref: str) -> dict[str, Any]:
    """run.json of a pooled side: the first repeat's identity, with what was pooled."""
    info = dict(infos[0])
    statuses = {str(i.get("status")) for i in infos}
    info["run_id"] = run_id
    info["status"] = "complete" if statuses == {"complete"} else "complete-with-failures"
    info["ops"] = merged_ops(infos)
    info["merged_from"] = [i.get("run_id") for i in infos]
    info["gate_ref"] = ref
    info["finished_at"] = infos[-1].get("finished_at")
    return info


def pool_side(repeat_dirs: Sequence[Path], target: Path, run_id: str, ref: str,
              info_extra: Mapping[str, Any] | None = None) -> Path:
    """Pool one side's repeat runs into ``target``, an ordinary run directory."""
    runs = [load_run(d) for d in repeat_dirs]
    target.mkdir()
    for record in merge_records([r.records for r in runs], run_id=run_id):
        append_record(target / "records.jsonl", record)
    # The configs the side ran with: its run 1's (the later ones replayed them, or tuned
    # alike); compare reads them to show where base and head chose differently. Copied without
    # following anything: a link there is refused.
    tuned = Path(repeat_dirs[0]) / "autotune"
    if os.path.lexists(tuned):
        copy_checked(tuned, target / "autotune")
    info = merged_info([r.info for r in runs], run_id, ref)
    info.update(info_extra or {})
    write_json(target / "run.json", info)
    return target


def _commit(repo: Path, name: str, ref: str) -> str:
    """The commit a git ref names in ``repo``; a UsageError naming the option when it names none."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except UsageError:
        raise UsageError(
            f"--{name}-ref {ref!r} is neither a directory nor a commit known in {repo}. "
            "Fetch it first (in CI: actions/checkout with fetch-depth: 0), or give a path."
        ) from None


def check_refs(repo: Path, refs: Mapping[str, str]) -> None:
    """Refuse a ref that is neither a directory nor a commit, before anything is created."""
    for name, ref in refs.items():
        if not Path(ref).is_dir():
            _commit(repo, name, ref)


@contextmanager
def side_trees(repo: Path, refs: Mapping[str, str], workdir: Path) -> Iterator[dict[str, GateSide]]:
    """Each side's tree: a directory as given, or a detached worktree of a git ref, removed after."""
    made: list[Path] = []
    sides: dict[str, GateSide] = {}
    try:
        for name, ref in refs.items():
            if Path(ref).is_dir():
                sides[name] = GateSide(name, ref, Path(ref).resolve())
                continue
            sha = _commit(repo, name, ref)
            tree = workdir / f"src-{name}"
            git(repo, "worktree", "add", "--detach", str(tree), sha)
            made.append(tree)
            sides[name] = GateSide(name, f"{ref} ({sha[:12]})", tree)
        yield sides
    finally:
        for tree in made:
            try:
                git(repo, "worktree", "remove", "--force", str(tree))
            except HarnessError:
                pass  # best effort: the tree is in a temporary directory


def side_replay(repeats_dir: Path, name: str, k: int) -> Path | None:
    """Where run k of a side replays its autotune configs from: the side's run 1 (None for
    run 1 itself, which tunes live and records)."""
    return None if k == 1 else repeats_dir / f"{name}-1"


def _run_side(side: GateSide, out_dir: Path, run_id: str, run_args: Sequence[str],
              env: Mapping[str, str], python: str, replay_from: Path | None = None) -> None:
    child_env = dict(env)
    child_env["PYTHONPATH"] = str(side.tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    replay = ["--replay-from", str(replay_from)] if replay_from is not None else []
    cmd = run_command(python, out_dir, run_id, [*run_args, *replay])
    role = f"replays {replay_from.name}" if replay_from is not None else "records autotune configs"
    print(f"gate: {side.name} ({side.ref}; {role}) -> {out_dir}", flush=True)
    # Under GitHub Actions the side's output, both streams in one, is shown with workflow
    # commands stopped: the version measured may be a pull request's.
    with commands_stopped(sys.stdout, env) as stopped:
        code = subprocess.run(cmd, cwd=side.tree, env=child_env, check=False,
                              stderr=subprocess.STDOUT if stopped else None).returncode
    if code not in (0, 1):  # 1 = some case failed: reported by the comparison, not fatal here
        raise UsageError(
            f"`harness run` for {side.name} ({side.ref}) exited with code {code}; its message is above. "
            "Fix the run arguments given after `--`, or that version of the code."
        )


SideRunner = Callable[[GateSide, Path, str, Sequence[str]], None]


def side_folders(out: Path) -> tuple[Path, dict[str, Path]]:
    """For untrusted sides: a new folder beside ``out`` (``.OUT-sides-XXXX``, private to the
    caller) holding one empty folder per side, each side's only writable place. Beside and not
    inside ``out``, so nothing that publishes ``out`` can reach what a side wrote."""
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-sides-", dir=out.parent))
    folders = {name: staging / name for name in SIDES}
    for folder in folders.values():
        folder.mkdir()
    return staging, folders


def collect_run(side: GateSide, folder: Path, k: int, repeats_dir: Path) -> Path | None:
    """After run ``k`` of an untrusted side: check the side's whole folder, then copy that run
    into ``repeats_dir`` (a folder of the host's) without following anything; the copy, or None
    when the run left no directory. GateFailed, naming each entry, when the folder holds
    anything but the side's runs so far made of folders and plain files."""
    names = [f"{side.name}-{j}" for j in range(1, k + 1)]
    findings = check_tree(folder, run_dirs=names)
    if findings:
        raise refusal(findings, f"The {side.name} side ({side.ref})", folder)
    run = folder / names[-1]
    if not os.path.lexists(run):
        return None
    target = repeats_dir / names[-1]
    repeats_dir.mkdir(exist_ok=True)
    copy_checked(run, target)
    return target


def _run_untrusted(side_runner: SideRunner, side: GateSide, folder: Path, k: int, run_args: Sequence[str],
                   repeats_dir: Path) -> None:
    """One run of an untrusted side, then :func:`collect_run`: also after a run that failed, so
    its logs are kept; a refused folder outranks the run's own failure."""
    failure: HarnessError | None = None
    try:
        side_runner(side, folder / f"{side.name}-{k}", f"gate-{side.name}-{k}", run_args)
    except HarnessError as exc:
        failure = exc
    collect_run(side, folder, k, repeats_dir)
    if failure is not None:
        raise failure


def run_gate(
    refs: Mapping[str, str],
    out: Path,
    run_args: Sequence[str],
    repeats: int,
    env: Mapping[str, str],
    repo: Path = Path("."),
    python: str = sys.executable,
    side_runner: SideRunner | None = None,
    replay: bool = True,
    precheck: Callable[[], None] | None = None,
    untrusted_sides: bool = False,
) -> dict[str, Path]:
    """Run both sides interleaved and write out/base and out/head; returns those two paths.

    ``side_runner(side, run_dir, run_id, run_args)`` runs one side once; the default runs
    `python -m harness run` on this host (harness.container.gate has the one that runs it in
    the backend's image, whose writable place is ``run_dir``'s parent). With
    ``untrusted_sides`` each side runs into a folder of its own (:func:`side_folders`), checked
    and copied into out/repeats after each run (:func:`collect_run`), and removed at the end."""
    order = interleaved_order(repeats)
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"Gate output directory {out} is not empty. Choose another --out or remove it.")
    check_refs(repo.resolve(), refs)  # before anything is created
    if precheck is not None:
        precheck()
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    repeats_dir = out / "repeats"
    staging: Path | None = None
    folders = {name: repeats_dir for name in SIDES}
    if untrusted_sides:
        staging, folders = side_folders(out)
    workdir = Path(tempfile.mkdtemp(prefix="harness-gate-"))
    try:
        with side_trees(repo.resolve(), refs, workdir) as sides:
            for name, k in order:
                replay_from = side_replay(folders[name], name, k) if replay else None
                replay_args = ["--replay-from", str(replay_from)] if replay_from is not None else []
                if untrusted_sides:
                    runner = side_runner or _host_runner(env, python)
                    _run_untrusted(runner, sides[name], folders[name], k, [*run_args, *replay_args], repeats_dir)
                elif side_runner is None:
                    _run_side(sides[name], repeats_dir / f"{name}-{k}", f"gate-{name}-{k}", run_args, env, python,
                              replay_from=replay_from)
                else:
                    side_runner(sides[name], repeats_dir / f"{name}-{k}", f"gate-{name}-{k}", [*run_args, *replay_args])
            pooled: dict[str, Path] = {}
            for name in SIDES:
                repeat_dirs = [repeats_dir / f"{name}-{k}" for k in range(1, repeats + 1)]
                pooled[name] = pool_side(repeat_dirs, out / name, f"gate-{name}", sides[name].ref)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if staging is not None:
            remove_tree(staging)
    return pooled


def _host_runner(env: Mapping[str, str], python: str) -> SideRunner:
    """The default side runner as a SideRunner: `python -m harness run` on this host."""
    def run(side: GateSide, run_dir: Path, run_id: str, run_args: Sequence[str]) -> None:
        _run_side(side, run_dir, run_id, run_args, env, python)

    return run
