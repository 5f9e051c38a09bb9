"""GPU evidence of the toolbox issue (#13) in one command on one H200 (about 7-8 minutes).

    python3 benchmarks/toolbox_h200.py --out "$OUT"              # the H200 machine
    python3 benchmarks/toolbox_h200.py --backend cpu --quick --out /tmp/tb   # plumbing check here

Steps (each bounded; the whole under --budget seconds, later steps skipped when time runs out;
run in the order sweep, ir, sweep-mm, flaggems, cache):

1. sweep: tests/data/sweep_ops.py through Triton's real autotuner on the GPU, two sweep processes
   sharing device 0 (--sweep-devices 0,0): the shares, a key tuned differently by the two
   shards (a conflict), a failed shard (swept_fail raises at n=300) and the replayed measurement.
2. sweep-mm: the built-in mm (bf16, core shapes) tuned by two shards on device 0, then measured
   replaying; and the same without a sweep (tuned live): the single-device sweep time.
3. ir: the 8 built-in ops (bf16) at the smallest and largest core shape of each, IR kept
   (--ir on): the IR dump, each kernel's registers/spills/shared, compile time and what the capture
   cost (capture_ms), and wall vs device time per row.
4. cache: softmax and mm with the run's own Triton cache (isolated, cold) against the user's cache
   warmed by a run before it: what isolation costs per op.
5. flaggems (only where flag_gems imports): provider flaggems for softmax, mm and add with IR kept,
   then the same replaying the configs that run recorded (LibTuner replay: rows replayed / replay-miss).
6. suite (not in the default steps: `--steps suite`, about 4-6 minutes on one H200; only where
   flag_gems imports): FlagGems' own benchmarks of $TOOLBOX_SUITE_OPS (default "mm softmax", bf16,
   --level core) from the tree $TOOLBOX_SUITE (default .flaggems/v5.3.4/benchmark), swept by two
   shards sharing device 0 (--sweep-devices 0,0) and measured replaying, with IR and wall time in
   FlagGems' process; then the same ops replaying the swept run (--replay-from): shares, keys,
   conflicts, rows replayed / replay-miss, wall vs device per row.

Writes into --out (5 files): summary.json (every number), toolbox.md (tables for docs), ir.tgz
(RUN/ir of steps 3 and 5), runs.tgz (the run directories without IR and caches), log.txt.
Needs on the GPU machine: torch, triton, pyyaml, pytest, numpy; carried in .whl/ (installed into
FLAGGEMS_SITE, default /tmp/site, which goes first on the runs' PYTHONPATH): junit-xml, and for step 5
sqlalchemy, greenlet, packaging and .whl/flaggems-v5.3.4/flag_gems-5.3.4-*.whl
(benchmarks/fetch_device_wheels.sh, benchmarks/fetch_flaggems.sh). Without them step 5 is skipped.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OPS = ("softmax", "layer_norm", "rms_norm", "gelu", "silu_and_mul", "add", "sum", "mm")


class Session:
    def __init__(self, out: Path, work: Path, backend: str, budget: float, quick: bool) -> None:
        self.out, self.work, self.backend, self.quick = out, work, backend, quick
        self.deadline = time.monotonic() + budget
        self.log = open(out / "log.txt", "a", encoding="utf-8")  # noqa: SIM115 - open for the whole session
        self.summary: dict[str, Any] = {"backend": backend, "quick": quick, "steps": {}}
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("FLAGGEMS_SITE", "/tmp/site"), str(ROOT),
                                                             os.environ.get("PYTHONPATH", "")) if p)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env.pop("TRITON_CACHE_DIR", None)

    def say(self, text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def harness(self, name: str, *args: str, limit: float, env: dict[str, str] | None = None) -> dict[str, Any]:
        """`harness run ARGS --out WORK/name`; its exit code, wall time and run directory."""
        run = self.work / name
        timeout = max(10.0, min(limit, self.left()))
        cmd = [sys.executable, "-m", "harness", "run", "--backend", self.backend, "--out", str(run),
               "--progress", "plain", *args]
        self.say(f"{name}: {' '.join(cmd[3:])} (timeout {timeout:.0f} s)")
        began = time.monotonic()
        try:
            done = subprocess.run(cmd, cwd=ROOT, env={**self.env, **(env or {})}, capture_output=True, text=True,
                                  timeout=timeout)
            rc, text = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or b""
            rc, text = 124, out.decode(errors="replace") if isinstance(out, bytes) else str(out)
        wall = time.monotonic() - began
        self.log.write(text + "\n")
        self.say(f"{name}: rc={rc} in {wall:.1f} s")
        return {"rc": rc, "wall_s": round(wall, 2), "run": run}


def read_rows(run: Path) -> list[dict[str, Any]]:
    path = run / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def read_status(run: Path) -> dict[str, dict[str, str]]:
    path = run / "ops_status.csv"
    return {r["op"]: r for r in csv.DictReader(path.open())} if path.is_file() else {}


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def minmax_shapes(quick: bool) -> dict[str, list[list[int]]]:
    from harness.yamlfile import read_yaml

    path = ROOT / "harness" / "ops" / "shapes" / ("smoke.yaml" if quick else "core.yaml")
    level = read_yaml(path, str(path))
    return {op: [level[op][0], level[op][-1]] for op in OPS}


def step_sweep(s: Session) -> None:
    shapes = s.work / "sweep_shapes.yaml"
    shapes.write_text("swept_copy: [[100], [120], [200], [300]]\nswept_fail: [[100], [120], [200], [300]]\n")
    r = s.harness("sweep", "--ops-module", "tests/data/sweep_ops.py", "--ops", "swept_copy", "swept_fail",
                  "--dtypes", "fp32", "--shapes-file", str(shapes), "--sweep-devices", "0,0", limit=150,
                  env={"SWEEP_OPS_FAVOUR_0": "32", "SWEEP_OPS_FAVOUR_1": "16", "SWEEP_OPS_FAIL": "300"})
    run = r["run"]
    summary = read_json(run / "sweep" / "swept_copy" / "sweep.json") or {}
    status = read_status(run)
    s.summary["steps"]["sweep"] = {
        "rc": r["rc"], "wall_s": r["wall_s"],
        "shards": [{k: sh.get(k) for k in ("index", "device", "cases", "ok", "configs", "elapsed_s")}
                   for sh in summary.get("shards", [])],
        "keys": summary.get("keys"), "conflicts": summary.get("conflicts"), "sweep_s": summary.get("elapsed_s"),
        "marks": {row["case_id"]: row["autotune"] for row in read_rows(run)},
        "ops": {op: {"status": v["status"], "notes": v["notes"]} for op, v in status.items()},
    }


def step_sweep_mm(s: Session) -> None:
    shapes = ["--level", "smoke"] if s.quick else ["--level", "core"]
    swept = s.harness("sweep-mm", "--ops", "mm", "--dtypes", "bf16", *shapes, "--sweep-devices", "0,0", limit=170)
    live = s.harness("live-mm", "--ops", "mm", "--dtypes", "bf16", *shapes, limit=170)
    summary = read_json(swept["run"] / "sweep" / "mm" / "sweep.json") or {}

    def per_case(run: Path) -> dict[str, float | None]:
        return {r["case_id"]: (r.get("candidate") or {}).get("summary", {}).get("median") for r in read_rows(run)}

    s.summary["steps"]["sweep_mm"] = {
        "swept": {"rc": swept["rc"], "wall_s": swept["wall_s"], "op_elapsed_s": read_status(swept["run"]).get("mm", {}).get("elapsed_s"),
                  "sweep_s": summary.get("elapsed_s"), "shards": [{k: sh.get(k) for k in ("device", "cases", "elapsed_s", "compile_s")}
                                                                   for sh in summary.get("shards", [])],
                  "conflicts": len(summary.get("conflicts") or []), "marks": sorted({r["autotune"] for r in read_rows(swept["run"])}),
                  "candidate_ms": per_case(swept["run"])},
        "live": {"rc": live["rc"], "wall_s": live["wall_s"], "op_elapsed_s": read_status(live["run"]).get("mm", {}).get("elapsed_s"),
                 "candidate_ms": per_case(live["run"])},
    }


def _ir_summary(run: Path) -> dict[str, Any]:
    rows = read_rows(run)
    per_op: dict[str, Any] = {}
    for r in rows:
        ir = r.get("ir") or {}
        op = per_op.setdefault(r["op"], {"kernels": 0, "compile_ms": 0.0, "capture_ms": 0.0, "max_regs": None,
                                          "max_spills": None, "max_shared": None, "duration_s": 0.0})
        op["duration_s"] += r.get("duration_s") or 0.0
        op["kernels"] += len(ir.get("kernels", []))
        op["compile_ms"] += ir.get("compile_ms") or 0.0
        op["capture_ms"] += ir.get("capture_ms") or 0.0
        for k in ir.get("kernels", []):
            for key, field in (("max_regs", "regs"), ("max_spills", "spills"), ("max_shared", "shared")):
                if isinstance(k.get(field), int):
                    op[key] = max(op[key] or 0, k[field])
    return per_op


def _wall(run: Path) -> list[dict[str, Any]]:
    out = []
    for r in read_rows(run):
        def med(key: str, r: dict[str, Any] = r) -> float | None:
            value = (r.get(key) or {}).get("summary", {}).get("median")
            return float(f"{value:.4g}") if isinstance(value, float) else value

        out.append({"case": r["case_id"], "status": r["status"], "timer": r["timer"], "device_ms": med("candidate"),
                    "wall_ms": med("candidate_wall"), "torch_device_ms": med("baseline"),
                    "torch_wall_ms": med("baseline_wall")})
    return out


def step_ir(s: Session) -> None:
    shapes = s.work / "minmax.yaml"
    import yaml

    shapes.write_text(yaml.safe_dump(minmax_shapes(s.quick)))
    wall = ["--plugins", "+wall"] if s.backend == "cpu" else []
    r = s.harness("ir", "--ops", *OPS, "--dtypes", "bf16", "--shapes-file", str(shapes), "--ir", "on", *wall, limit=240)
    s.summary["steps"]["ir"] = {"rc": r["rc"], "wall_s": r["wall_s"], "per_op": _ir_summary(r["run"]),
                                "ops_status": {op: {"elapsed_s": v["elapsed_s"], "compile_s": v.get("compile_s")}
                                               for op, v in read_status(r["run"]).items()},
                                "wall_vs_device": _wall(r["run"])}


def step_cache(s: Session) -> None:
    shapes = s.work / "minmax.yaml"
    ops = ("softmax", "mm")
    user = {"TRITON_CACHE_DIR": str(s.work / "user-triton-cache"), "FLAGGEMS_CACHE_DIR": str(s.work / "user-flaggems")}
    common = ["--ops", *ops, "--dtypes", "bf16", "--shapes-file", str(shapes), "--ir", "off"]
    runs = {
        "isolated": s.harness("cache-isolated", *common, limit=120),
        "user-prime": s.harness("cache-user-prime", *common, "--triton-cache", "user", limit=120, env=user),
        "user-warm": s.harness("cache-user-warm", *common, "--triton-cache", "user", limit=120, env=user),
    }
    s.summary["steps"]["cache"] = {name: {"rc": r["rc"], "wall_s": r["wall_s"],
                                          "op_elapsed_s": {op: v["elapsed_s"] for op, v in read_status(r["run"]).items()}}
                                   for name, r in runs.items()}


def step_flaggems(s: Session) -> None:
    probe = subprocess.run([sys.executable, "-c", "import flag_gems; print(flag_gems.__version__)"], cwd=ROOT,
                           env=s.env, capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["flag_gems does not import"])[-1]
        s.say(f"flaggems: skipped: {reason}")
        s.summary["steps"]["flaggems"] = {"skipped": reason}
        return
    shapes = s.work / "minmax.yaml"
    common = ["--provider", "flaggems", "--ops", "softmax", "mm", "add", "--dtypes", "bf16", "--shapes-file", str(shapes)]
    first = s.harness("flaggems", *common, limit=200)
    again = s.harness("flaggems-replay", *common, "--replay-from", str(first["run"]), "--ir", "off", limit=160)
    tuned = read_json(first["run"] / "autotune" / "mm.json") or {}
    s.summary["steps"]["flaggems"] = {
        "version": probe.stdout.strip(), "rc": first["rc"], "replay_rc": again["rc"],
        "per_op": _ir_summary(first["run"]), "wall_vs_device": _wall(first["run"]),
        "mm_autotuners": [t["kernel"] for t in tuned.get("autotuners", [])], "mm_configs": len(tuned.get("configs", [])),
        "replay_marks": {r["case_id"]: r["autotune"] for r in read_rows(again["run"])},
    }


def step_suite(s: Session) -> None:
    probe = subprocess.run([sys.executable, "-c", "import flag_gems; print(flag_gems.__version__)"], cwd=ROOT,
                           env=s.env, capture_output=True, text=True, timeout=120)
    tree = os.environ.get("TOOLBOX_SUITE", str(ROOT / ".flaggems" / "v5.3.4" / "benchmark"))
    if probe.returncode != 0 or not Path(tree).is_dir():
        reason = (probe.stderr.strip().splitlines() or ["flag_gems does not import"])[-1] if probe.returncode else (
            f"no FlagGems benchmark tree at {tree}")
        s.say(f"suite: skipped: {reason}")
        s.summary["steps"]["suite"] = {"skipped": reason}
        return
    ops = os.environ.get("TOOLBOX_SUITE_OPS", "mm softmax").split()
    dtype = os.environ.get("TOOLBOX_SUITE_DTYPE", "bfloat16")
    common = ["--suite", tree, "--ops", *ops, "--dtypes", dtype, "--op-timeout", "240"]
    wall = ["--plugins", "+wall"] if s.backend == "cpu" else []
    swept = s.harness("suite-sweep", *common, "--sweep-devices", "0,0", *wall, limit=330)
    again = s.harness("suite-replay", *common, "--replay-from", str(swept["run"]), "--ir", "off", *wall, limit=200)
    sweeps = {}
    for op in ops:
        summary = read_json(swept["run"] / "sweep" / op / "sweep.json") or {}
        sweeps[op] = {"sweep_s": summary.get("elapsed_s"), "keys": summary.get("keys"),
                      "conflicts": len(summary.get("conflicts") or []), "failed": summary.get("failed"),
                      "shards": [{k: sh.get(k) for k in ("device", "cases", "ok", "configs", "elapsed_s", "compile_s")}
                                 for sh in summary.get("shards", [])]}
    s.summary["steps"]["suite"] = {
        "version": probe.stdout.strip(), "tree": tree, "rc": swept["rc"], "wall_s": swept["wall_s"],
        "replay_rc": again["rc"], "replay_wall_s": again["wall_s"], "sweeps": sweeps,
        "ops": {op: {"status": v["status"], "elapsed_s": v["elapsed_s"], "notes": v["notes"]}
                for op, v in read_status(swept["run"]).items()},
        "replay_ops": {op: {"status": v["status"], "elapsed_s": v["elapsed_s"]}
                       for op, v in read_status(again["run"]).items()},
        "sweep_marks": {r["case_id"]: r["autotune"] for r in read_rows(swept["run"])},
        "replay_marks": {r["case_id"]: r["autotune"] for r in read_rows(again["run"])},
        "per_op": _ir_summary(swept["run"]), "wall_vs_device": _wall(swept["run"]),
    }


def write_markdown(s: Session) -> None:
    st = s.summary["steps"]
    lines = [f"# Toolbox evidence ({s.backend})", "", "Numbers from benchmarks/toolbox_h200.py; summary.json holds all.", ""]
    if "sweep" in st:
        sw = st["sweep"]
        lines += ["## Sweep (two shards on device 0)", "", f"- shards: {sw['shards']}", f"- keys {sw['keys']}, conflicts "
                  f"{sw['conflicts']}, sweep {sw['sweep_s']} s", f"- marks: {sw['marks']}", f"- ops: {sw['ops']}", ""]
    if "sweep_mm" in st:
        m = st["sweep_mm"]
        lines += ["## mm: sweep vs live", "", "| | run wall s | op elapsed s | sweep s |", "|---|---:|---:|---:|",
                  f"| swept (2 shards, device 0) | {m['swept']['wall_s']} | {m['swept']['op_elapsed_s']} | {m['swept']['sweep_s']} |",
                  f"| live | {m['live']['wall_s']} | {m['live']['op_elapsed_s']} | |", ""]
    for name in ("ir", "flaggems", "suite"):
        if name in st and "per_op" in st[name]:
            lines += [f"## IR ({name})", "", "| op | kernels | compile ms | capture ms | max regs | max spills | max shared |",
                      "|---|---:|---:|---:|---:|---:|---:|"]
            for op, v in st[name]["per_op"].items():
                lines.append(f"| {op} | {v['kernels']} | {v['compile_ms']:.0f} | {v['capture_ms']:.1f} | {v['max_regs']} | "
                             f"{v['max_spills']} | {v['max_shared']} |")
            lines += ["", "| case | timer | device ms | wall ms | torch device ms | torch wall ms |", "|---|---|---:|---:|---:|---:|"]
            for w in st[name]["wall_vs_device"]:
                lines.append(f"| {w['case']} | {w['timer']} | {w['device_ms']} | {w['wall_ms']} | {w['torch_device_ms']} | "
                             f"{w['torch_wall_ms']} |")
            lines.append("")
    if "cache" in st:
        lines += ["## Isolated cache vs the user's warm cache (op elapsed s)", ""]
        for name, v in st["cache"].items():
            lines.append(f"- {name}: {v['op_elapsed_s']} (run {v['wall_s']} s)")
        lines.append("")
    for name in ("flaggems", "suite"):
        if name in st:
            facts = {k: v for k, v in st[name].items() if k not in ("per_op", "wall_vs_device")}
            lines += [f"## FlagGems ({name})", "", f"- {json.dumps(facts)}", ""]
    (s.out / "toolbox.md").write_text("\n".join(lines) + "\n")


def pack(s: Session) -> None:
    with tarfile.open(s.out / "ir.tgz", "w:gz") as tar:
        for name in ("ir", "flaggems", "suite-sweep"):
            folder = s.work / name / "ir"
            if folder.is_dir():
                tar.add(folder, arcname=f"{name}/ir")
    def small(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        """The run directories without their IR (in ir.tgz) and compiler caches."""
        parts = member.name.split("/")
        return None if parts[1:2] == ["ir"] or "triton-cache" in parts else member

    with tarfile.open(s.out / "runs.tgz", "w:gz") as tar:
        for run in sorted(p for p in s.work.iterdir() if p.is_dir() and not p.name.startswith("user-")):
            tar.add(run, arcname=run.name, filter=small)
    (s.out / "summary.json").write_text(json.dumps(s.summary, indent=2, default=str) + "\n")


def setup(s: Session) -> None:
    """The carried wheels (.whl/: junit-xml, sqlalchemy, greenlet, packaging; .whl/flaggems-v5.3.4/: the
    flag_gems 5.3.4 wheel with its overlay, benchmarks/fetch_flaggems.sh) into FLAGGEMS_SITE, as
    benchmarks/flaggems_corpus.py installs them; PyPI's flag_gems 5.0.2 wheel is left out."""
    wheels = [str(w) for w in (ROOT / ".whl").glob("*.whl") if not w.name.startswith("flag_gems-")]
    wheels += [str(w) for w in (ROOT / ".whl").glob("flaggems-v5.3.4/*.whl")]
    if not wheels or os.environ.get("SKIP_SETUP"):
        return
    site = os.environ.get("FLAGGEMS_SITE", "/tmp/site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--target", site, *wheels], capture_output=True, text=True, check=False)
    s.say(f"setup: {len(wheels)} wheel(s) into {site}: rc={done.returncode} {done.stderr.strip()[-300:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for every step together (default 480)")
    parser.add_argument("--quick", action="store_true", help="smoke shapes (the cpu plumbing check)")
    parser.add_argument("--steps", default="sweep,ir,sweep-mm,flaggems,cache")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("TOOLBOX_WORK", "/tmp/toolbox-runs")) / time.strftime("%Y%m%dT%H%M%S")
    work.mkdir(parents=True, exist_ok=True)
    s = Session(out, work, args.backend, args.budget, args.quick)
    setup(s)
    steps = {"sweep": step_sweep, "sweep-mm": step_sweep_mm, "ir": step_ir, "cache": step_cache, "flaggems": step_flaggems,
             "suite": step_suite}
    needs = {"sweep": 60, "sweep-mm": 90, "ir": 60, "cache": 60, "flaggems": 120, "suite": 120}
    try:
        for name in args.steps.split(","):
            if s.left() < needs[name]:
                s.say(f"{name}: skipped, {s.left():.0f} s left")
                s.summary["steps"][name.replace("-", "_")] = {"skipped": "out of time"}
                continue
            try:
                steps[name](s)
            except Exception as exc:  # noqa: BLE001 - one step's failure must not lose the others' results
                s.say(f"{name}: failed: {type(exc).__name__}: {exc}")
                s.summary["steps"][name.replace("-", "_")] = {"failed": f"{type(exc).__name__}: {exc}"}
    finally:
        write_markdown(s)
        pack(s)
        s.say(f"done; results in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
