"""`harness gate-run`: the body of `nox -s gate`.

Runs the benchmark for two versions of the code under test (git refs, checked
out as temporary worktrees, or directories) on this host's device,
interleaved ABBA (base, head, head, base, ...) so that slow drift of the
machine weighs on both sides alike, pools each side's repeats into one run
directory, then compares them as `harness gate` does.

Each side runs ``python -m harness run`` with its own tree as the working
directory and first on PYTHONPATH, so the harness and ops of that version are
the ones measured, and relative paths in the run arguments (``--ops-module
my_ops.py``) resolve inside that version.
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
from harness.errors import HarnessError, UsageError
from harness.results.schema import Measurement, Timing
from harness.results.store import append_record, write_json
from harness.run.provenance import git

__all__ = [
    "GateSide",
    "SideRunner",
    "interleaved_order",
    "merge_records",
    "merged_info",
    "pool_side",
    "run_command",
    "run_gate",
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


def _merge_case(group: Sequence[Measurement], run_id: str) -> Measurement:
    bad = next((r for r in group if r.status != "pass"), None)
    if bad is not None:
        return replace(bad, run_id=run_id)
    # Samples are pooled only across repeats timed alike (same timer, same fallback): the most
    # common way wins, ties to the first repeat's; the others are left out and said so.
    ways = [_how_timed(r) for r in group]
    chosen = max(dict.fromkeys(ways), key=ways.count)
    left_out = len(group) - ways.count(chosen)
    group = [r for r in group if _how_timed(r) == chosen]
    first = group[0]
    cand = [x for r in group if r.candidate for x in r.candidate.samples_ms]
    base = [x for r in group if r.baseline for x in r.baseline.samples_ms]
    candidate = Timing.of(cand) if cand else None
    baseline = Timing.of(base) if base else None
    scale = None
    if candidate and first.candidate and candidate.summary.median > 0:
        scale = first.candidate.summary.median / candidate.summary.median
    # A repeat that tuned live while replaying makes the pooled row a replay-miss too.
    misses = any(r.autotune == "replay-miss" for r in group)
    notes = first.notes + (f"pooled from {len(group)} runs",)
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
        duration_s=sum(r.duration_s for r in group),
        autotune="replay-miss" if misses else first.autotune,
        notes=notes,
    )


def merge_records(runs: Sequence[Sequence[Measurement]], run_id: str) -> list[Measurement]:
    """Pool the repeats of one side: per case, all raw samples together.

    A case that did not pass in some repeat is carried as that failing record,
    so it is reported rather than compared.
    """
    groups: dict[str, list[Measurement]] = {}
    for records in runs:
        for r in records:
            groups.setdefault(r.case_id, []).append(r)
    return [_merge_case(group, run_id) for group in groups.values()]


def merged_info(infos: Sequence[Mapping[str, Any]], run_id: str, ref: str) -> dict[str, Any]:
    """run.json of a pooled side: the first repeat's identity, with what was pooled."""
    info = dict(infos[0])
    statuses = {str(i.get("status")) for i in infos}
    info["run_id"] = run_id
    info["status"] = "complete" if statuses == {"complete"} else "complete-with-failures"
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


def _run_side(side: GateSide, out_dir: Path, run_id: str, run_args: Sequence[str],
              env: Mapping[str, str], python: str) -> None:
    child_env = dict(env)
    child_env["PYTHONPATH"] = str(side.tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = run_command(python, out_dir, run_id, run_args)
    print(f"gate: {side.name} ({side.ref}) -> {out_dir}", flush=True)
    code = subprocess.run(cmd, cwd=side.tree, env=child_env, check=False).returncode
    if code not in (0, 1):  # 1 = some case failed: reported by the comparison, not fatal here
        raise UsageError(
            f"`harness run` for {side.name} ({side.ref}) exited with code {code}; its message is above. "
            "Fix the run arguments given after `--`, or that version of the code."
        )


SideRunner = Callable[[GateSide, Path, str, Sequence[str]], None]


def run_gate(
    refs: Mapping[str, str],
    out: Path,
    run_args: Sequence[str],
    repeats: int,
    env: Mapping[str, str],
    repo: Path = Path("."),
    python: str = sys.executable,
    side_runner: SideRunner | None = None,
) -> dict[str, Path]:
    """Run both sides interleaved and write out/base and out/head; returns those two paths.

    ``side_runner(side, run_dir, run_id, run_args)`` runs one side once; the default runs
    `python -m harness run` on this host (harness.container.gate has the one that runs it in
    the backend's image)."""
    order = interleaved_order(repeats)
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"Gate output directory {out} is not empty. Choose another --out or remove it.")
    check_refs(repo.resolve(), refs)  # before anything is created
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="harness-gate-"))
    try:
        with side_trees(repo.resolve(), refs, workdir) as sides:
            for name, k in order:
                target = out / "repeats" / f"{name}-{k}"
                if side_runner is None:
                    _run_side(sides[name], target, f"gate-{name}-{k}", run_args, env, python)
                else:
                    side_runner(sides[name], target, f"gate-{name}-{k}", run_args)
            pooled: dict[str, Path] = {}
            for name in SIDES:
                repeat_dirs = [out / "repeats" / f"{name}-{k}" for k in range(1, repeats + 1)]
                pooled[name] = pool_side(repeat_dirs, out / name, f"gate-{name}", sides[name].ref)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return pooled
