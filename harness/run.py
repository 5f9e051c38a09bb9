"""`harness run`: validate, plan, execute op by op, then render every output from the records."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from harness import __version__
from harness.backends import enumerate_devices, resolve_backend
from harness.batch import OpOutcome, read_markers, render_status, run_batch
from harness.errors import UsageError
from harness.ops.registry import build_catalog, select_ops
from harness.ops.shapes import load_level, load_shapes_file
from harness.options import RunOptions
from harness.plan import OpPlan, RunPlan, make_run_id, plan_run, resolve_level
from harness.plugins.planning import plan_plugins
from harness.providers import check_provider
from harness.results.render import Unreached, render_csv, render_junit, render_markdown
from harness.results.store import atomic_write_text, read_json, read_records, write_json

__all__ = ["RUN_SCHEMA_VERSION", "execute", "prepare", "prepare_resume"]

RUN_SCHEMA_VERSION = 1


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def git_commit(where: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-c", "safe.directory=*", "rev-parse", "HEAD"],
            cwd=where, capture_output=True, text=True, timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _check_out_dir(path: Path) -> None:
    """Fail before anything is written if the run directory cannot be used."""
    if path.exists() and (path / "run.json").exists():
        raise UsageError(
            f"Output directory {path} already holds a run. Use --resume {path} to finish it, "
            "or choose another --out."
        )
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK):
        raise UsageError(
            f"Output directory {path} is not writable ({probe} does not allow writing). "
            "Choose another --out or fix the permissions."
        )
    if probe.is_file():
        raise UsageError(f"Output path {probe} is a file, not a directory. Choose another --out.")


@dataclass(frozen=True)
class Prepared:
    plan: RunPlan
    run_dir: Path
    resumed: bool = False


def prepare(options: RunOptions, env: Mapping[str, str]) -> Prepared:
    """Validate everything the user gave and plan the run; nothing is written yet."""
    backend = resolve_backend(options.backend)
    check_provider(options.provider)
    plan_plugins(backend, options.timer)  # validates the timer for this backend
    catalog = build_catalog(options.ops_modules)
    ops = select_ops(catalog, options.ops)
    level = resolve_level(options.level, backend)
    level_shapes = load_level(level)
    user_shapes = load_shapes_file(options.shapes_file, catalog.keys()) if options.shapes_file else None
    devices = enumerate_devices(backend, options.devices or None, env)
    run_id = options.run_id or make_run_id(backend.name)
    plan = plan_run(options, backend, ops, level, level_shapes, user_shapes, devices, run_id)
    run_dir = Path(options.out) if options.out else Path(options.reports_dir) / run_id
    _check_out_dir(run_dir)
    return Prepared(plan=plan, run_dir=run_dir)


def prepare_resume(run_dir: Path, env: Mapping[str, str]) -> Prepared:
    """Rebuild the plan stored in an earlier run directory."""
    path = run_dir / "run.json"
    if not path.is_file():
        raise UsageError(f"--resume {run_dir}: no run.json there. Give the directory of an earlier run.")
    info = read_json(path)
    opts = info["options"]
    options = RunOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in opts.items()})
    backend = resolve_backend(info["backend"])
    ops = tuple(
        OpPlan(op=o["op"], device=o["device"], dtypes=tuple(o["dtypes"]),
               shapes=tuple(tuple(s) for s in o["shapes"]), provider=o["provider"])
        for o in info["plan"]
    )
    plan = RunPlan(
        run_id=info["run_id"], backend=backend, level=info["level"],
        plugins=plan_plugins(backend, options.timer), devices=tuple(info["devices"]),
        ops=ops, options=options,
    )
    return Prepared(plan=plan, run_dir=run_dir, resumed=True)


def fingerprint(backend: str, identity: Mapping[str, Any], plan: RunPlan) -> str:
    """What must match for two runs to be compared: backend, device model, timer, level, cache..."""
    key = {
        "backend": backend,
        "device_name": identity.get("device_name"),
        "device_arch": identity.get("device_arch"),
        "timer": plan.timer,
        "level": plan.level,
        "cache": plan.options.cache,
        "provider": plan.options.provider,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _run_info(plan: RunPlan, status: str, started: str, identity: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": RUN_SCHEMA_VERSION,
        "run_id": plan.run_id,
        "status": status,
        "backend": plan.backend.name,
        "backend_description": plan.backend.description,
        "devices": list(plan.devices),
        "level": plan.level,
        "timer": plan.timer,
        "plugins": list(plan.plugins.modules),
        "identity": identity,
        "harness_version": __version__,
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "python": sys.version.split()[0],
        "container": {"image": plan.options.image, "digest": plan.options.image_digest},
        "options": plan.options.to_dict(),
        "plan": [
            {"op": o.op, "device": o.device, "dtypes": list(o.dtypes),
             "shapes": [list(s) for s in o.shapes], "provider": o.provider}
            for o in plan.ops
        ],
        "fingerprint": fingerprint(plan.backend.name, identity, plan),
        "started_at": started,
        "finished_at": None if status == "running" else _now(),
    }


def _identity(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    per_device: dict[str, Any] = {}
    for path in sorted((run_dir / "identity").glob("*.json")):
        per_device[path.stem] = read_json(path)
    first = next(iter(per_device.values()), {})
    return dict(first), per_device


def _unreached(plan: RunPlan, records: list[Any], outcomes: dict[str, OpOutcome]) -> list[Unreached]:
    seen = {r.case_id for r in records}
    missing: list[Unreached] = []
    for op_plan in plan.ops:
        outcome = outcomes.get(op_plan.op)
        why = "; ".join(outcome.notes) if outcome and outcome.notes else "not run"
        status = outcome.status if outcome else "not started"
        for case in op_plan.cases():
            if case.case_id not in seen:
                missing.append(Unreached(op=op_plan.op, case_id=case.case_id, status="error",
                                         message=f"op {status}: {why}"))
    return missing


def finalize(plan: RunPlan, run_dir: Path, outcomes: list[OpOutcome], status: str, started: str) -> dict[str, Any]:
    """Render every output from the records; each file replaced atomically."""
    records = read_records(run_dir / "records.jsonl")
    identity, per_device = _identity(run_dir)
    info = _run_info(plan, status, started, identity)
    info["identity_per_device"] = per_device
    by_op = {o.op: o for o in outcomes}
    info["ops"] = [o.row() for o in outcomes]
    unreached = _unreached(plan, records, by_op)
    atomic_write_text(run_dir / "summary.csv", render_csv(records))
    atomic_write_text(
        run_dir / "junit.xml",
        render_junit(records, unreached, op_notes={o.op: f"{o.status} {'; '.join(o.notes)}".strip() for o in outcomes}),
    )
    atomic_write_text(run_dir / "report.md", render_markdown(records, info, unreached))
    atomic_write_text(run_dir / "ops_status.csv", render_status(outcomes))
    write_json(run_dir / "run.json", info)
    return info


def execute(prepared: Prepared, env: Mapping[str, str], out: TextIO) -> int:
    plan, run_dir = prepared.plan, prepared.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    started = _now()
    already: dict[str, OpOutcome] = {}
    if prepared.resumed:
        old = read_json(run_dir / "run.json")
        started = old.get("started_at", started)
        already = read_markers(run_dir)
    write_json(run_dir / "run.json", _run_info(plan, "running", started, {}))
    total = len(plan.ops)
    done_count = [len(already)]
    print(
        f"harness run {plan.run_id}: backend {plan.backend.name}, devices {','.join(plan.devices)}, "
        f"level {plan.level}, timer {plan.timer}, {total} op(s), {plan.total_cases()} case(s)"
        + (f", resuming ({len(already)} op(s) already complete)" if already else ""),
        file=out, flush=True,
    )

    def on_start(device: str, op: str) -> None:
        print(f"[{done_count[0]}/{total}] device {device}: {op} ...", file=out, flush=True)

    def on_done(o: OpOutcome) -> None:
        done_count[0] += 1
        note = f" ({'; '.join(o.notes)})" if o.notes else ""
        print(f"[{done_count[0]}/{total}] device {o.device}: {o.op} {o.status}, {o.rows} row(s), "
              f"{o.elapsed_s:.1f}s{note}", file=out, flush=True)

    try:
        outcomes = run_batch(plan, run_dir, env, on_start, on_done, already_done=already)
    except KeyboardInterrupt:
        from harness.batch import read_markers as _markers

        got = _markers(run_dir)
        outcomes = [got.get(o.op, OpOutcome(op=o.op, device=o.device, status="ERROR",
                                            notes=["interrupted; resume with --resume"])) for o in plan.ops]
        finalize(plan, run_dir, outcomes, "interrupted", started)
        print(f"interrupted: partial results in {run_dir}; finish with `harness run --resume {run_dir}`",
              file=out, flush=True)
        return 130
    bad = [o for o in outcomes if o.status not in ("PASS", "SKIP")]
    info = finalize(plan, run_dir, outcomes, "complete" if not bad else "complete-with-failures", started)
    records = read_records(run_dir / "records.jsonl")
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    print(
        f"done: {len(records)} case(s) " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + f"; ops: " + ", ".join(f"{o.op} {o.status}" for o in outcomes),
        file=out,
    )
    print(f"device: {info['identity'].get('device_name', '?')}; reports: {run_dir}/ "
          "(run.json, records.jsonl, summary.csv, junit.xml, report.md, ops_status.csv)", file=out)
    return 1 if bad else 0
