"""One `harness compile` task in its own process: the ops' kernels for one target.

``python -m harness.compile.worker TASK_JSON``: the task names the ops (each with its shapes
and dtypes), the target, the output folder and the result file. Every case is traced on meta tensors, each
launch expanded over its autotune configs, bound for the target and compiled once per distinct
variant (kernel, argument types, constexprs, launch options); the IR of each lands under
``OUT/ir/<target>/<op>/`` and the result file lists every variant with the cases that use it.
Before compiling a variant the worker appends a line naming it to the task's progress file:
the parent ends a worker whose variant takes longer than its timeout (harness.compile.cli).
The parent runs this in a session of its own, with TRITON_INTERPRET unset and a Triton cache of
its own; like an op process, the worker ends itself and its process group once that parent is
gone (a harness killed with SIGKILL cannot end it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.compile.kernels import bind, compile_variant, expand, trace_case
from harness.compile.targets import Target, parse_targets
from harness.contract import PARENT_PID_ENV, op_file_stem
from harness.ir.capture import IrCapture, nvidia_tools
from harness.results.schema import shape_str
from harness.results.store import write_json

__all__ = ["run_task"]


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1][:400] if text else ''}".rstrip(": ")


def run_task(task: dict[str, Any], begin: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every op of the task for its target: {"target", "ops": [per op result], "elapsed_s"};
    ``begin`` is called with each variant's name before it is compiled."""
    (target,) = parse_targets(task["target"])
    started = time.perf_counter()
    capture = IrCapture(tools=nvidia_tools(), sass=False)
    capture.install()
    try:
        results = [_run_op(item, target, Path(task["out"]), tuple(task.get("ops_modules", ())), capture, begin)
                   for item in task["ops"]]
    finally:
        capture.uninstall()
    import triton

    return {"target": target.label, "ops": results, "elapsed_s": round(time.perf_counter() - started, 3),
            "triton_version": triton.__version__}


def _run_op(item: dict[str, Any], target: Target, out: Path, ops_modules: tuple[str, ...],
            capture: IrCapture, begin: Callable[[str], None]) -> dict[str, Any]:
    from harness.ops.registry import load_op

    op = load_op(item["op"], ops_modules)
    rel_root = f"ir/{op_file_stem(target.label)}/{op_file_stem(op.id)}"
    entries: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    started = time.perf_counter()
    for shape in item["shapes"]:
        for dtype in item["dtypes"]:
            if dtype not in op.dtypes:
                continue
            case = f"{dtype} {shape_str(shape)}"
            try:
                traced = trace_case(op, shape, dtype)
            except Exception as exc:  # noqa: BLE001 - an op that cannot be traced is reported, the rest go on
                problems.append(f"{case}: tracing the candidate on meta tensors failed: {_error(exc)}")
                continue
            for launch in traced:
                for variant in expand(launch):
                    try:
                        bound = bind(variant, target)
                    except Exception as exc:  # noqa: BLE001
                        problems.append(f"{case}: {variant.kernel} {variant.config}: binding failed: {_error(exc)}")
                        continue
                    entry = entries.get(bound.vid)
                    if entry is not None:
                        entry["cases"].append(case)
                        continue
                    entries[bound.vid] = entry = {
                        "op": op.id, "kernel": variant.kernel, "variant": bound.vid, "label": bound.label,
                        "config": variant.config, "target": target.label, "cases": [case], "ok": True,
                    }
                    begin(f"{op.id} {bound.label}")
                    capture.begin_case()
                    try:
                        compile_variant(bound)
                    except Exception as exc:  # noqa: BLE001 - a kernel that stops compiling is what the gate finds
                        entry["ok"] = False
                        entry["error"] = _error(exc)
                    summary = capture.end_case(out / rel_root, rel_root)
                    if summary and summary["kernels"]:
                        kernel = summary["kernels"][-1]
                        entry["ir"] = kernel
                        entry["dir"] = f"{rel_root}/{kernel['name'][:80]}-{kernel['hash'][:10]}"
                        limit = target.shared_limit
                        if limit is not None and isinstance(kernel.get("shared"), int):
                            entry["fits"] = kernel["shared"] <= limit
    return {"op": op.id, "target": target.label, "variants": list(entries.values()), "problems": problems,
            "elapsed_s": round(time.perf_counter() - started, 3)}


def _end_own_group() -> None:
    """SIGKILL this worker's process group (it leads one: the parent started it in a session of
    its own), so what it started goes with it; otherwise this process alone."""
    pid = os.getpid()
    print(f"harness.compile.worker: the harness process is gone; ending worker {pid} and its group",
          file=sys.stderr, flush=True)
    if os.getpgid(0) == pid:
        os.killpg(pid, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    from harness.child.process import watch_parent

    raw = os.environ.pop(PARENT_PID_ENV, "")
    watch_parent(int(raw) if raw.isdigit() else os.getppid(), on_gone=_end_own_group)
    task = json.loads(Path(argv[0]).read_text())
    progress = task.get("progress")
    with open(progress or os.devnull, "a", encoding="utf-8") as fh:

        def begin(variant: str) -> None:
            fh.write(variant + "\n")
            fh.flush()

        result = run_task(task, begin)
    write_json(Path(task["result"]), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
