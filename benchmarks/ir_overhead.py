"""What keeping the IR costs (`--ir on`), against the compile it rides on, on this machine.

Compiles built-in kernels ahead of time (no GPU: Triton's GPUTarget) with a fresh Triton cache
each round, listening only (compile times, nothing written), keeping the IR stages and assembly (``--ir
on``) and keeping SASS too (``--ir full``), and reports per target the compile time and what
the capture added (its own ``capture_ms``: the listener, registers from the
assembly or cuobjdump, copying the files, nvdisasm). The decision it informs: the default of
``--ir``. The GPU version of this number is measured in the run by benchmarks/toolbox_h200.py.

    python benchmarks/ir_overhead.py [--ops add softmax mm] [--targets cuda:90,hip:gfx942]
                                     [--out benchmarks/results/ir_overhead-cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

INNER = r"""
import json, sys, time
from pathlib import Path
from harness.compile.kernels import bind, compile_variant, expand, trace_case
from harness.compile.targets import parse_targets
from harness.ir.capture import IrCapture, nvidia_tools
from harness.ops.registry import load_op
from harness.ops.shapes import load_level
ops, targets, mode, out = sys.argv[1].split(","), parse_targets(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
keep = mode != "listen"
capture = IrCapture(keep_files=keep, sass=mode == "full", tools=nvidia_tools())
capture.install()
rows = []
for target in targets:
    compile_ms = capture_ms = 0.0
    n = 0
    for name in ops:
        op = load_op(name, ())
        for shape in load_level("core")[name][:1]:
            for launch in trace_case(op, shape, "float16"):
                for variant in expand(launch)[:3]:
                    capture.begin_case()
                    compile_variant(bind(variant, target))
                    s = capture.end_case(out / target.label.replace(":", "_") / name if keep else None)
                    compile_ms += s["compile_ms"]; capture_ms += s["capture_ms"]; n += 1
    rows.append({"target": target.label, "kernels": n, "compile_ms": round(compile_ms, 1),
                 "capture_ms": round(capture_ms, 1)})
print(json.dumps(rows))
"""


def one(ops: list[str], targets: str, mode: str) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env.update(TRITON_CACHE_DIR=f"{tmp}/cache", PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-c", INNER, ",".join(ops), targets, mode,
                               f"{tmp}/ir"], capture_output=True, text=True, env=env, check=True)
        rows: list[dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
        return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", nargs="+", default=["add", "softmax", "mm"])
    parser.add_argument("--targets", default="cuda:90,hip:gfx942")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ir_overhead-cpu.json"))
    args = parser.parse_args()
    runs = {mode: one(args.ops, args.targets, mode) for mode in ("listen", "on", "full")}
    print(f"{'target':12} {'kernels':>7} {'compile ms':>11} {'capture ms: listen':>19} {'on':>8} {'full (SASS)':>12} "
          f"{'on / compile':>13} {'full / compile':>15}")
    table = []
    for a, b, c in zip(runs["listen"], runs["on"], runs["full"], strict=True):
        compile_ms = float(b["compile_ms"])  # type: ignore[arg-type]
        on, full = float(b["capture_ms"]) / compile_ms, float(c["capture_ms"]) / compile_ms  # type: ignore[arg-type]
        print(f"{a['target']:12} {a['kernels']:>7} {compile_ms:>11.1f} {a['capture_ms']:>19} {b['capture_ms']:>8} "
              f"{c['capture_ms']:>12} {on:>12.1%} {full:>14.1%}")
        table.append({"target": a["target"], "kernels": a["kernels"], "compile_ms": compile_ms,
                      "capture_ms": {"listen": a["capture_ms"], "on": b["capture_ms"], "full": c["capture_ms"]},
                      "share_of_compile": {"on": round(on, 4), "full": round(full, 4)}})
    Path(args.out).write_text(json.dumps({"machine": platform.node(), "python": platform.python_version(),
                                          "ops": args.ops, "targets": args.targets, "rows": table}, indent=2) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
