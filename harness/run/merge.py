"""`harness merge RUN... --out DIR`: one run from the parts of a run made with `--shard K/N`.

Each part was run on its own machine (`harness run --shard K/N`); its run.json says which part
of which whole (``shard``: index, count, the whole run's ops and its plan digest). The merged
directory is an ordinary run directory, rendered from the records exactly as `harness run`
renders one: records.jsonl, summary.csv, junit.xml, report.md, report.html, ops_status.csv, the
completion markers, the autotune records, and run.json (written last, so a half-merged directory is never
taken for a run). `compare`, `history` and `report` read it like any other run.

Refused, before anything is written, naming the runs concerned: runs of different fingerprints
(another backend, device model, timer, level, cache or provider), parts of different splits or
of different plans, a part given twice, a missing part, a part still running, parts of different
commits. An unsharded run counts as part 1/1 of itself.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from harness.autotune.store import AUTOTUNE_DIR, META_FILE, read_meta, write_meta
from harness.contract import RunFiles
from harness.errors import UsageError
from harness.options import RunOptions
from harness.results.render import render_csv, render_junit, render_markdown
from harness.results.runinfo import (
    alike_values,
    environment_differences,
    fingerprint,
    read_run_info,
)
from harness.results.schema import Measurement
from harness.results.store import atomic_write_text, read_records, write_json
from harness.run.decide import INTERRUPTED, PENDING, OpOutcome, render_status
from harness.run.plan import make_run_id, plan_digest
from harness.run.rundir import read_markers, write_marker

__all__ = ["ShardRun", "check_shards", "merge_runs", "merged_info", "read_shard", "software_differences"]


@dataclass(frozen=True)
class ShardRun:
    """One part as read from its run directory."""

    path: Path
    info: Mapping[str, Any]
    index: int
    count: int
    digest: str
    ops: tuple[str, ...]
    all_ops: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def where(self) -> str:
        return f"{self.label} ({self.path})"


def _stored_digest(info: Mapping[str, Any], source: str) -> str:
    """The plan digest of an unsharded run, computed as `--shard` computes it."""
    from harness.run.outputs import stored_ops

    options = RunOptions.from_stored(info.get("options", {}), source)
    return plan_digest(stored_ops(info), options, str(info.get("level")), str(info.get("timer")))


def read_shard(path: Path) -> ShardRun:
    """A run directory as a part: its ``shard`` entry, or part 1/1 when it was not sharded."""
    info = read_run_info(RunFiles(path).run_info)
    shard = info.get("shard")
    plan_ops = tuple(str(o.get("op")) for o in info.get("plan", []) if isinstance(o, Mapping))
    if shard is None:
        return ShardRun(path=path, info=info, index=1, count=1,
                        digest=_stored_digest(info, f"{path}/run.json"), ops=plan_ops, all_ops=plan_ops)
    try:
        return ShardRun(path=path, info=info, index=int(shard["index"]), count=int(shard["count"]),
                        digest=str(shard["plan_digest"]), ops=tuple(shard["ops"]),
                        all_ops=tuple(shard["all_ops"]))
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{path}/run.json: its 'shard' entry is damaged ({shard!r}). Run that part "
                         "again with `harness run --shard K/N`.") from None


def _differences(first: ShardRun, other: ShardRun) -> str:
    mine, theirs = alike_values(first.info), alike_values(other.info)
    return ", ".join(f"{label} {mine[label] or '?'} vs {theirs[label] or '?'}"
                     for label in mine if mine[label] != theirs[label])


def software_differences(shards: Sequence[ShardRun]) -> list[str]:
    """One line per part whose software (torch, Triton, driver, flag_gems, harness) differs from
    part 1's, naming each difference (pure)."""
    first = shards[0]
    return [f"part {s.label} ({s.path}): " + "; ".join(f"{k} {a!r} in part {first.label}, {b!r} here"
                                                       for k, a, b in found)
            for s in shards[1:] if (found := environment_differences(first.info, s.info))]


def check_shards(shards: Sequence[ShardRun], allow_mismatch: bool = False) -> list[ShardRun]:
    """The parts in order 1..N, or UsageError naming what does not fit (pure). Parts measured
    with different software are refused unless ``allow_mismatch``: the merged run.json states one
    set of versions, which compare, gate and history then trust."""
    if not shards:
        raise UsageError("harness merge: give the run directories of the parts to merge.")
    for s in shards:
        if s.info.get("status") == "running":
            raise UsageError(
                f"Part {s.where()} is still running, or ended without writing its reports (status "
                f"running). Finish it first: `harness run --resume {s.path}`."
            )
    first = shards[0]
    for s in shards[1:]:
        if s.info.get("fingerprint", fingerprint(s.info)) != first.info.get("fingerprint", fingerprint(first.info)):
            raise UsageError(
                f"Runs {first.path} and {s.path} are not alike ({_differences(first, s) or 'fingerprints differ'}): "
                "parts of one run share backend, device model, timer, level, cache and provider. Merge "
                "only the parts of one `harness run --shard K/N` split."
            )
        if s.count != first.count:
            raise UsageError(
                f"{first.path} is part {first.label} but {s.path} is part {s.label}: parts of "
                "different splits. Merge the N runs of one --shard K/N split."
            )
        if s.digest != first.digest:
            raise UsageError(
                f"{first.path} and {s.path} are parts of different run plans (ops, shapes, dtypes, "
                "seed or timing budgets differ). Run every part with the same arguments but --shard."
            )
        if s.info.get("git_commit") != first.info.get("git_commit"):
            raise UsageError(
                f"{first.path} ran commit {first.info.get('git_commit')} but {s.path} ran "
                f"{s.info.get('git_commit')}: a merged run must measure one version of the code. "
                "Run every part from the same commit."
            )
    differences = software_differences(shards)
    if differences and not allow_mismatch:
        raise UsageError(
            f"The parts measured with different software ({' | '.join(differences)}): a merged run states "
            "one set of versions, which compare, gate and history trust. Run every part with the same "
            "torch, Triton, driver, flag_gems and harness, or pass --allow-mismatch to merge them anyway "
            "(run.json then lists the differences under software_mismatch)."
        )
    by_index: dict[int, ShardRun] = {}
    for s in shards:
        if s.index in by_index:
            raise UsageError(f"Part {s.label} is given twice: {by_index[s.index].path} and {s.path}. "
                             "Give each part once.")
        by_index[s.index] = s
    missing = [k for k in range(1, first.count + 1) if k not in by_index]
    if missing:
        given = ", ".join(by_index[k].where() for k in sorted(by_index))
        raise UsageError(
            f"Part(s) {', '.join(f'{k}/{first.count}' for k in missing)} missing (given: {given}). "
            "A merged run needs every part; run the missing one(s) with `harness run --shard "
            f"{missing[0]}/{first.count}` and the same arguments."
        )
    ordered = [by_index[k] for k in range(1, first.count + 1)]
    owner: dict[str, str] = {}
    for s in ordered:
        for op in s.ops:
            if op in owner:
                raise UsageError(f"Op {op} is in part {owner[op]} and in part {s.label}; the parts "
                                 "overlap, so they are not one split. Run the parts again.")
            owner[op] = s.label
    unplanned = [op for op in first.all_ops if op not in owner]
    if unplanned:
        raise UsageError(f"Op(s) {', '.join(unplanned)} of the run plan are in no part: the parts "
                         "were not made by the same harness. Run the parts again.")
    return ordered


def _device(shard: ShardRun, device: str) -> str:
    """A device named with its part: devices of different machines share numbers."""
    return f"{shard.label}:{device}"


def _row_outcome(row: Mapping[str, Any]) -> OpOutcome | None:
    """An ops_status row of run.json's ``ops`` as an OpOutcome (None when it is not one)."""
    try:
        notes = tuple(n for n in str(row.get("notes", "")).split("; ") if n)
        return OpOutcome(op=str(row["op"]), device=str(row["device"]), status=str(row["status"]),
                         attempts=int(row["attempts"]), elapsed_s=float(row["elapsed_s"]),
                         rows=int(row["rows"]), notes=notes)
    except (KeyError, TypeError, ValueError):
        return None


def _outcomes(shard: ShardRun) -> list[OpOutcome]:
    """The part's op rows in plan order: its completion markers (exact), else the row run.json
    keeps (dismissed ops have no marker), else PENDING."""
    markers = read_markers(shard.path)
    rows = {o.op: o for o in map(_row_outcome, shard.info.get("ops") or []) if o is not None}
    found: list[OpOutcome] = []
    for entry in shard.info.get("plan", []):
        op = str(entry.get("op"))
        outcome = markers.get(op) or rows.get(op) or OpOutcome(op, str(entry.get("device", "")), PENDING)
        found.append(replace(outcome, device=_device(shard, outcome.device)))
    return found


def _status(shards: Sequence[ShardRun]) -> str:
    statuses = {str(s.info.get("status")) for s in shards}
    if "interrupted" in statuses:
        return "interrupted"
    return "complete" if statuses == {"complete"} else "complete-with-failures"


def merged_info(shards: Sequence[ShardRun], run_id: str, outcomes: Sequence[OpOutcome]) -> dict[str, Any]:
    """run.json of the merged run: part 1's identity and options, every part's plan and ops, and
    where parts were merged despite different software, the differences (pure)."""
    first = shards[0]
    info = {k: v for k, v in first.info.items() if k != "shard"}
    plan: list[dict[str, Any]] = []
    per_device: dict[str, Any] = {}
    dismissed: dict[str, Any] = {}
    for s in shards:
        for entry in s.info.get("plan", []):
            plan.append({**entry, "device": _device(s, str(entry.get("device", ""))), "shard": s.label})
        for device, ident in (s.info.get("identity_per_device") or {}).items():
            per_device[_device(s, device)] = ident
        dismissed.update(s.info.get("dismissed") or {})
    starts = [str(s.info["started_at"]) for s in shards if s.info.get("started_at")]
    ends = [str(s.info["finished_at"]) for s in shards if s.info.get("finished_at")]
    order = {op: i for i, op in enumerate(first.all_ops)}
    plan.sort(key=lambda entry: order.get(str(entry.get("op")), len(order)))
    info.update(
        run_id=run_id,
        status=_status(shards),
        devices=[_device(s, str(d)) for s in shards for d in s.info.get("devices", [])],
        plan=plan,
        ops=[o.row() for o in outcomes],
        dismissed=dismissed,
        identity_per_device=per_device,
        device_state={s.label: s.info.get("device_state") for s in shards},
        started_at=min(starts) if starts else None,
        finished_at=max(ends) if ends else None,
        merged_from=[
            {"shard": s.label, "run_id": s.info.get("run_id"), "path": str(s.path),
             "devices": s.info.get("devices"), "device_name": (s.info.get("identity") or {}).get("device_name"),
             "container": s.info.get("container"), "status": s.info.get("status"),
             "started_at": s.info.get("started_at"), "finished_at": s.info.get("finished_at")}
            for s in shards
        ],
        plan_digest=first.digest,
    )
    mismatch = software_differences(shards)
    if mismatch:
        info["software_mismatch"] = mismatch
    info["fingerprint"] = fingerprint(info)
    return info


def _records(shards: Sequence[ShardRun], run_id: str) -> list[Measurement]:
    return [replace(r, run_id=run_id) for s in shards for r in read_records(RunFiles(s.path).records)]


def _copy_autotune(shards: Sequence[ShardRun], out: Path, run_id: str) -> None:
    for s in shards:
        folder = s.path / AUTOTUNE_DIR
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            if path.name != META_FILE:
                (out / AUTOTUNE_DIR).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, out / AUTOTUNE_DIR / path.name)
    meta = shards[0].path / AUTOTUNE_DIR / META_FILE
    if meta.is_file():
        try:
            write_meta(out, replace(read_meta(meta), run_id=run_id))
        except (ValueError, json.JSONDecodeError):
            pass  # a damaged sidecar: the merged run simply cannot be replayed from


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"Merge output {out} exists and is not an empty directory. Choose another "
                         "--out, or remove it.")


def merge_runs(dirs: Sequence[Path], out: Path, run_id: str | None = None,
               stdout: TextIO | None = None, allow_mismatch: bool = False) -> dict[str, Any]:
    """Merge the parts in ``dirs`` into ``out``; returns the merged run.json."""
    from harness.run.outputs import stored_ops, unreached_cases

    shards = check_shards([read_shard(Path(d)) for d in dirs], allow_mismatch)
    _check_out(out)
    run_id = run_id or make_run_id(str(shards[0].info.get("backend", "run")))
    # In the whole run's op order, as an unsharded run lists them.
    order = {op: i for i, op in enumerate(shards[0].all_ops)}
    records = sorted(_records(shards, run_id), key=lambda r: order.get(r.op, len(order)))
    outcomes = sorted((o for s in shards for o in _outcomes(s)), key=lambda o: order.get(o.op, len(order)))
    info = merged_info(shards, run_id, outcomes)
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(r.to_dict(), sort_keys=True, allow_nan=False) + "\n" for r in records)
    atomic_write_text(RunFiles(out).records, lines)
    for outcome in outcomes:
        if outcome.status not in (PENDING, INTERRUPTED):
            write_marker(out, outcome)
    by_op = {o.op: o for o in outcomes}
    unreached = unreached_cases(stored_ops(info), records, by_op)
    atomic_write_text(out / "summary.csv", render_csv(records))
    atomic_write_text(
        out / "junit.xml",
        render_junit(records, unreached, op_notes={o.op: f"{o.status} {'; '.join(o.notes)}".strip() for o in outcomes}),
    )
    atomic_write_text(out / "report.md", render_markdown(records, info, unreached))
    atomic_write_text(out / "ops_status.csv", render_status(outcomes))
    from harness.run.outputs import write_html_report

    problem = write_html_report(out, info, records, unreached)
    if problem:
        info["report_html"] = problem
    _copy_autotune(shards, out, run_id)
    write_json(RunFiles(out).run_info, info)
    if stdout is not None:
        counts: dict[str, int] = {}
        for r in records:
            counts[r.status] = counts.get(r.status, 0) + 1
        print(f"merged {len(shards)} part(s) of plan {shards[0].digest} into {out}: run {run_id}, "
              f"status {info['status']}, {len(records)} case(s) "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=stdout)
        if problem:
            print(problem, file=stdout)
        for line in info.get("software_mismatch", ()):
            print(f"warning: different software merged (--allow-mismatch): {line}", file=stdout)
    return info
