"""`harness merge RUN... --out DIR`: one run from the parts of a run made with `--shard K/N`.

Each part was run on its own machine (`harness run --shard K/N`); its run.json says which part
of which whole (``shard``: index, count, the whole run's ops and its plan digest). The merged
directory is an ordinary run directory, rendered from the records exactly as `harness run`
renders one: records.jsonl, summary.csv, junit.xml, report.md, report.html, ops_status.csv, the
completion markers, the autotune records, each op's log from the run its row comes from (so the
notes' ``log: logs/<op>.log`` resolve, and `python -m harness.results.triage` reads them), and
run.json (written last, so a half-merged directory is never taken for a run). `compare`,
`history` and `report` read it like any other run. A CRASH row of a part made before the graph
timer kept its capture mark, whose log shows the process died inside a capture, gets the cause
such a run now records (``harness``), as triage reads it.

Reruns: the same part may be given more than once when it was run again (the same
`harness run --shard K/N` arguments, another run directory). Each op is then taken from the
latest run of its part that ended it (a completion marker, or its row in run.json); "latest" is
the run that started last by run.json's ``started_at`` (then ``finished_at``). An op no run of
its part ended is taken from the latest run, as not run. run.json's ``merged_from`` lists every
run given and its ``superseded`` says which op each rerun replaced. Two runs of one part that
started at the same second cannot be ordered and are refused.

Refused, before anything is written, naming the runs concerned: runs of different fingerprints
(another backend, device model, timer, level, cache or provider), parts of different splits or
of different plans, one run given twice, a missing part, a part still running, reruns that
cannot be ordered, and a case present in two parts (a part's records.jsonl holding a case of an
op that is not its own); parts measured with different software (torch, Triton, driver,
flag_gems, harness version or commit, ``+dirty`` counting as another, or a part resumed under
other code; where both parts carry ``harness_digest`` the code's digest decides, not the commit
labels) unless
--allow-mismatch, which lists the differences in run.json's ``software_mismatch``. An unsharded
run counts as part 1/1 of itself.
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
from harness.results.runinfo import (
    alike_values,
    environment_differences,
    fingerprint,
    harness_commits,
    read_run_info,
)
from harness.results.schema import Measurement
from harness.results.store import RecordsFile, atomic_write_text, read_records, write_json
from harness.results.triage import CAPTURE_DEATH_NOTE, died_capturing
from harness.run.decide import INTERRUPTED, PENDING, OpOutcome, with_causes
from harness.run.plan import make_run_id, plan_digest
from harness.run.rundir import read_markers, write_marker

__all__ = ["PartRun", "check_parts", "merge_runs", "merged_info", "read_part", "software_differences"]


@dataclass(frozen=True)
class PartRun:
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


def read_part(path: Path) -> PartRun:
    """A run directory as a part: its ``shard`` entry, or part 1/1 when it was not sharded."""
    info = read_run_info(RunFiles(path).run_info)
    part = info.get("shard")
    plan_ops = tuple(str(o.get("op")) for o in info.get("plan", []) if isinstance(o, Mapping))
    if part is None:
        return PartRun(path=path, info=info, index=1, count=1,
                        digest=_stored_digest(info, f"{path}/run.json"), ops=plan_ops, all_ops=plan_ops)
    try:
        return PartRun(path=path, info=info, index=int(part["index"]), count=int(part["count"]),
                        digest=str(part["plan_digest"]), ops=tuple(part["ops"]),
                        all_ops=tuple(part["all_ops"]))
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{path}/run.json: its 'shard' entry is damaged ({part!r}). Run that part "
                         "again with `harness run --shard K/N`.") from None


def _differences(first: PartRun, other: PartRun) -> str:
    mine, theirs = alike_values(first.info), alike_values(other.info)
    return ", ".join(f"{label} {mine[label] or '?'} vs {theirs[label] or '?'}"
                     for label in mine if mine[label] != theirs[label])


def _code(info: Mapping[str, Any]) -> str:
    return ", ".join(harness_commits(info))


def software_differences(parts: Sequence[PartRun]) -> list[str]:
    """One line per part whose software (torch, Triton, driver, flag_gems, harness version and
    commit) differs from part 1's, naming each difference, and one per part whose own ops were
    measured by more than one harness commit (a resume after the code changed) (pure)."""
    first = parts[0]
    lines = [f"part {s.label} ({s.path}): measured by harness commits {_code(s.info)} (resumed)"
             for s in parts if len(harness_commits(s.info)) > 1]
    for s in parts[1:]:
        found = environment_differences(first.info, s.info)
        mine, theirs = first.info.get("harness_digest"), s.info.get("harness_digest")
        if mine and theirs:  # both name their code by content: that decides, not the labels
            if mine != theirs:
                found.append(("harness code", f"{_code(first.info)} ({mine})", f"{_code(s.info)} ({theirs})"))
        elif _code(s.info) != _code(first.info):
            found.append(("harness commit", _code(first.info), _code(s.info)))
        if found:
            lines.append(f"part {s.label} ({s.path}): " + "; ".join(f"{k} {a!r} in part {first.label}, {b!r} here"
                                                                   for k, a, b in found))
    return lines


def _check_one_split(first: PartRun, s: PartRun) -> None:
    """``s`` and ``first`` are parts of one split: alike runs, the same split and plan (their
    software and harness commits: software_differences)."""
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
        named = _plan_differences(first, s)
        raise UsageError(
            f"{first.path} and {s.path} are parts of different run plans ("
            + (f"{named} differ" if named else "ops, shapes, dtypes, seed or timing budgets differ")
            + "). Run every part with the same arguments but --shard."
        )


# The run options that decide what a plan measures (harness.run.plan.plan_digest and what chooses
# its ops and cases), as run.json's options name them.
PLAN_OPTIONS = ("ops", "ops_file", "ops_modules", "suite", "nodes", "dtypes", "shapes_file", "level", "seed",
                "warmup_ms", "rep_ms", "cap_ms", "cache", "provider", "plugins", "extra_plugins")


def _plan_differences(first: PartRun, other: PartRun) -> str:
    """The plan options two parts were given differently, as ``--name a vs b`` (pure); "" when
    their options agree (the plans differ in what the options chose: another tree, another
    harness's shapes)."""
    mine, theirs = first.info.get("options") or {}, other.info.get("options") or {}
    return ", ".join(f"--{name.replace('_', '-')} {mine.get(name)!r} vs {theirs.get(name)!r}"
                     for name in PLAN_OPTIONS if mine.get(name) != theirs.get(name))


def check_parts(parts: Sequence[PartRun], allow_mismatch: bool = False) -> list[PartRun]:
    """The parts in order 1..N, or UsageError naming what does not fit (pure). Parts measured
    with different software are refused unless ``allow_mismatch``: the merged run.json states one
    set of versions, which compare, gate and history then trust."""
    if not parts:
        raise UsageError("harness merge: give the run directories of the parts to merge.")
    for s in parts:
        if s.info.get("status") == "running":
            raise UsageError(
                f"Part {s.where()} is still running, or ended without writing its reports (status "
                f"running). Finish it first: `harness run --resume {s.path}`."
            )
    first = parts[0]
    for s in parts[1:]:
        _check_one_split(first, s)
    differences = software_differences(parts)
    if differences and not allow_mismatch:
        raise UsageError(
            f"The parts measured with different software ({' | '.join(differences)}): a merged run states "
            "one set of versions, which compare, gate and history trust. Run every part with the same "
            "torch, Triton, driver, flag_gems and harness commit, or pass --allow-mismatch to merge them anyway "
            "(run.json then lists the differences under software_mismatch)."
        )
    runs = check_runs(parts)
    by_index = {k: group[-1] for k, group in runs.items()}
    missing = [k for k in range(1, first.count + 1) if k not in by_index]
    if missing:
        given = ", ".join(by_index[k].where() for k in sorted(by_index))
        raise UsageError(
            f"Part(s) {', '.join(f'{k}/{first.count}' for k in missing)} missing (given: {given}). "
            "A merged run needs every part; run the missing one(s) with `harness run --shard "
            f"{missing[0]}/{first.count}` and the same arguments."
        )
    ordered = [by_index[k] for k in range(1, first.count + 1)]
    _check_ops_once(ordered, first.all_ops)
    return ordered


def _check_ops_once(ordered: Sequence[PartRun], all_ops: Sequence[str]) -> None:
    """Every op of the plan is in exactly one part."""
    owner: dict[str, str] = {}
    for s in ordered:
        for op in s.ops:
            if op in owner:
                raise UsageError(f"Op {op} is in part {owner[op]} and in part {s.label}; the parts "
                                 "overlap, so they are not one split. Run the parts again.")
            owner[op] = s.label
    unplanned = [op for op in all_ops if op not in owner]
    if unplanned:
        raise UsageError(f"Op(s) {', '.join(unplanned)} of the run plan are in no part: the parts "
                         "were not made by the same harness. Run the parts again.")


def _started(run: PartRun) -> tuple[str, str]:
    return (str(run.info.get("started_at") or ""), str(run.info.get("finished_at") or ""))


def check_runs(parts: Sequence[PartRun]) -> dict[int, tuple[PartRun, ...]]:
    """Each part's runs, earliest first: one run per part, or a part and its reruns (pure).
    Refused: one run given twice (the same directory or the same run id), and two runs of one
    part that cannot be ordered by run.json's start and end times."""
    seen: dict[str, PartRun] = {}
    groups: dict[int, list[PartRun]] = {}
    for s in parts:
        keys = [f"path {s.path}"] + ([f"run id {s.info['run_id']}"] if s.info.get("run_id") else [])
        for key in keys:
            if key in seen:
                raise UsageError(f"Part {s.label} is given twice: {seen[key].path} and {s.path} are one run "
                                 f"({key}). Give each run once.")
        seen.update(dict.fromkeys(keys, s))
        groups.setdefault(s.index, []).append(s)
    ordered: dict[int, tuple[PartRun, ...]] = {}
    for index, group in sorted(groups.items()):
        group.sort(key=_started)
        for earlier, later in zip(group, group[1:], strict=False):
            if _started(earlier) == _started(later):
                raise UsageError(f"Part {later.label} was run twice ({earlier.path} and {later.path}) and both "
                                 f"runs started at {_started(later)[0] or 'an unrecorded time'}: which one is the "
                                 "rerun cannot be told. Give only the one to keep.")
        ordered[index] = tuple(group)
    return ordered


def _done(outcome: OpOutcome | None) -> bool:
    return outcome is not None and outcome.done


def choose_sources(runs: Mapping[int, Sequence[PartRun]],
                   outcomes: Mapping[Path, Mapping[str, OpOutcome]]) -> tuple[dict[str, PartRun], list[str]]:
    """Which run each op is taken from, and one line per op a later run superseded (pure).
    ``runs``: each part's runs, earliest first (:func:`check_runs`); ``outcomes``: each run's op
    rows by op. An op comes from the latest run of its part that ended it; when none did, from
    the latest run."""
    source: dict[str, PartRun] = {}
    superseded: list[str] = []
    for group in runs.values():
        latest = group[-1]
        for op in latest.ops:
            ended = [r for r in group if _done(outcomes.get(r.path, {}).get(op))]
            chosen = ended[-1] if ended else latest
            source[op] = chosen
            for earlier in ended[:-1]:
                was = outcomes[earlier.path][op].status
                now = outcomes[chosen.path][op].status
                superseded.append(f"{op}: {was} in {earlier.path} superseded by {now} in {chosen.path} "
                                  f"(started {_started(chosen)[0] or '?'})")
    return source, superseded


def check_cases(records: Mapping[Path, Sequence[Measurement]], runs: Sequence[PartRun]) -> None:
    """Refuse a case present in two parts: a run's records of an op that is not in its part, or
    one case recorded by runs of two different parts (pure)."""
    parts_of: dict[tuple[str, str], str] = {}
    for run in runs:
        mine = set(run.ops)
        for r in records.get(run.path, ()):
            if r.op not in mine:
                raise UsageError(f"Case {r.case_id} is present in two parts: {run.path} (part {run.label}) "
                                 f"holds a record of it, but op {r.op} is not in that part. Its records.jsonl "
                                 "was changed or mixed with another part's; run that part again.")
            key = (r.case_id, r.direction)
            where = parts_of.setdefault(key, run.label)
            if where != run.label:
                raise UsageError(f"Case {r.case_id} is present in two parts ({where} and {run.label}, "
                                 f"{run.path}). Run those parts again.")


def _device(part: PartRun, device: str) -> str:
    """A device named with its part: devices of different machines share numbers."""
    return f"{part.label}:{device}"


def _row_outcome(row: Mapping[str, Any]) -> OpOutcome | None:
    """An ops_status row of run.json's ``ops`` as an OpOutcome (None when it is not one)."""
    try:
        notes = tuple(n for n in str(row.get("notes", "")).split("; ") if n)
        return OpOutcome(op=str(row["op"]), device=str(row["device"]), status=str(row["status"]),
                         attempts=int(row["attempts"]), elapsed_s=float(row["elapsed_s"]),
                         rows=int(row["rows"]), notes=notes)
    except (KeyError, TypeError, ValueError):
        return None


def _outcomes(part: PartRun) -> dict[str, OpOutcome]:
    """The part's op rows by op, in plan order: its completion markers (exact), else the row
    run.json keeps (dismissed ops have no marker), else PENDING."""
    markers = read_markers(part.path)
    rows = {o.op: o for o in map(_row_outcome, part.info.get("ops") or []) if o is not None}
    found: dict[str, OpOutcome] = {}
    for entry in part.info.get("plan", []):
        op = str(entry.get("op"))
        outcome = markers.get(op) or rows.get(op) or OpOutcome(op, str(entry.get("device", "")), PENDING)
        found[op] = replace(outcome, device=_device(part, outcome.device))
    return found


def _status(parts: Sequence[PartRun], outcomes: Sequence[OpOutcome] = ()) -> str:
    """The merged run's status: interrupted while an op of the plan was not ended, else from the
    ops' and the parts' statuses."""
    statuses = {str(s.info.get("status")) for s in parts}
    if any(not o.done for o in outcomes) or (not outcomes and "interrupted" in statuses):
        return "interrupted"
    if any(o.failed for o in outcomes) or "complete-with-failures" in statuses:
        return "complete-with-failures"
    return "complete" if outcomes or statuses == {"complete"} else "complete-with-failures"


def merged_info(parts: Sequence[PartRun], run_id: str, outcomes: Sequence[OpOutcome],
                reruns: Sequence[PartRun] = (), superseded: Sequence[str] = ()) -> dict[str, Any]:
    """run.json of the merged run: part 1's identity and options, every part's plan and ops, the
    runs merged (parts, then earlier runs of a part that a rerun superseded, ``reruns``), and
    where parts were merged despite different software, the differences (pure)."""
    first = parts[0]
    info = {k: v for k, v in first.info.items() if k != "shard"}
    plan: list[dict[str, Any]] = []
    per_device: dict[str, Any] = {}
    dismissed: dict[str, Any] = {}
    for s in parts:
        for entry in s.info.get("plan", []):
            plan.append({**entry, "device": _device(s, str(entry.get("device", ""))), "shard": s.label})
        for device, ident in (s.info.get("identity_per_device") or {}).items():
            per_device[_device(s, device)] = ident
        dismissed.update(s.info.get("dismissed") or {})
    starts = [str(s.info["started_at"]) for s in parts if s.info.get("started_at")]
    ends = [str(s.info["finished_at"]) for s in parts if s.info.get("finished_at")]
    order = {op: i for i, op in enumerate(first.all_ops)}
    plan.sort(key=lambda entry: order.get(str(entry.get("op")), len(order)))
    info.update(
        run_id=run_id,
        status=_status(parts, outcomes),
        devices=[_device(s, str(d)) for s in parts for d in s.info.get("devices", [])],
        plan=plan,
        ops=[o.row() for o in outcomes],
        dismissed=dismissed,
        identity_per_device=per_device,
        device_state={s.label: s.info.get("device_state") for s in parts},
        started_at=min(starts) if starts else None,
        finished_at=max(ends) if ends else None,
        merged_from=[
            {"shard": s.label, "run_id": s.info.get("run_id"), "path": str(s.path),
             "devices": s.info.get("devices"), "device_name": (s.info.get("identity") or {}).get("device_name"),
             "container": s.info.get("container"), "status": s.info.get("status"),
             "started_at": s.info.get("started_at"), "finished_at": s.info.get("finished_at"),
             **({"rerun_of": s.label} if s in reruns else {})}
            for s in [*parts, *reruns]
        ],
        plan_digest=first.digest,
    )
    if superseded:
        info["superseded"] = list(superseded)
    mismatch = software_differences([*parts, *reruns])
    if mismatch:
        info["software_mismatch"] = mismatch
    info["fingerprint"] = fingerprint(info)
    return info


def _copy_autotune(parts: Sequence[PartRun], out: Path, run_id: str) -> None:
    for s in parts:
        folder = s.path / AUTOTUNE_DIR
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            if path.name != META_FILE:
                (out / AUTOTUNE_DIR).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, out / AUTOTUNE_DIR / path.name)
    meta = parts[0].path / AUTOTUNE_DIR / META_FILE
    if meta.is_file():
        try:
            write_meta(out, replace(read_meta(meta), run_id=run_id))
        except (ValueError, json.JSONDecodeError):
            pass  # a damaged sidecar: the merged run simply cannot be replayed from


def _capture_death(outcome: OpOutcome, run: PartRun) -> OpOutcome:
    """A CRASH row whose log shows its process died inside the graph timer's capture, from a run
    made before the timer kept its capture mark: noted, and its cause left to be derived again, as
    such a run now says it (`python -m harness.results.triage` reads the same)."""
    row = {"op": outcome.op, "status": outcome.status, "notes": "; ".join(outcome.notes)}
    if outcome.op not in died_capturing(run.path, [row]):
        return outcome
    return replace(outcome, notes=(*outcome.notes, CAPTURE_DEATH_NOTE), cause="", evidence="")


def _copy_logs(source: Mapping[str, PartRun], out: Path) -> None:
    """Each op's log from the run its row is taken from, where that run kept one."""
    for op, run in source.items():
        log = RunFiles(run.path).log(op)
        if log.is_file():
            target = RunFiles(out).log(op)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, target)


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"Merge output {out} exists and is not an empty directory. Choose another "
                         "--out, or remove it.")


def merge_runs(dirs: Sequence[Path], out: Path, run_id: str | None = None,
               stdout: TextIO | None = None, allow_mismatch: bool = False) -> dict[str, Any]:
    """Merge the parts in ``dirs`` into ``out``; returns the merged run.json."""
    from harness.run.outputs import render_outputs, stored_ops, unreached_cases

    given = [read_part(Path(d)) for d in dirs]
    parts = check_parts(given, allow_mismatch)
    _check_out(out)
    groups = check_runs(given)
    every = [r for group in groups.values() for r in group]
    outcomes_of = {r.path: _outcomes(r) for r in every}
    source, superseded = choose_sources(groups, outcomes_of)
    found = {r.path: read_records(RunFiles(r.path).records) for r in every}
    check_cases(found, every)
    run_id = run_id or make_run_id(str(parts[0].info.get("backend", "run")))
    # In the whole run's op order, as an unsharded run lists them.
    order = {op: i for i, op in enumerate(parts[0].all_ops)}
    records = sorted((replace(r, run_id=run_id) for run in every for r in found[run.path] if source.get(r.op) is run),
                     key=lambda r: order.get(r.op, len(order)))
    outcomes = with_causes(sorted((_capture_death(outcomes_of[s.path][op], s) for op, s in source.items()),
                                  key=lambda o: order.get(o.op, len(order))), records)
    reruns = [r for r in every if r not in parts]
    info = merged_info(parts, run_id, outcomes, reruns, superseded)
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(r.to_dict(), sort_keys=True, allow_nan=False) + "\n" for r in records)
    atomic_write_text(RunFiles(out).records, lines)
    for outcome in outcomes:
        if outcome.status not in (PENDING, INTERRUPTED):
            write_marker(out, outcome)
    # the rendered files as `harness run` renders them; its ops_status.csv names the merged run's directory
    info["options"] = {**(info.get("options") or {}), "out": str(out)}
    for name, text in render_outputs(stored_ops(info), info, RecordsFile(RunFiles(out).records, tuple(records)),
                                     outcomes).items():
        atomic_write_text(out / name, text)
    from harness.run.outputs import write_html_report

    problem = write_html_report(out, info, records, unreached_cases(stored_ops(info), records,
                                                                    {o.op: o for o in outcomes}))
    if problem:
        info["report_html"] = problem
    _copy_autotune(every, out, run_id)  # a later run of a part overwrites an earlier one's
    _copy_logs(source, out)
    write_json(RunFiles(out).run_info, info)
    if stdout is not None:
        counts: dict[str, int] = {}
        for r in records:
            counts[r.status] = counts.get(r.status, 0) + 1
        print(f"merged {len(parts)} part(s) of plan {parts[0].digest} into {out}: run {run_id}, "
              f"status {info['status']}, {len(records)} case(s) "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=stdout)
        if problem:
            print(problem, file=stdout)
        for line in superseded:
            print(f"rerun: {line}", file=stdout)
        for line in info.get("software_mismatch", ()):
            print(f"warning: different software merged (--allow-mismatch): {line}", file=stdout)
    return info
