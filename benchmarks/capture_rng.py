"""What a failed graph capture leaves of torch's device generator, and whether swapping in a
copy of its state taken before the capture gives it back (docs/timing.md, "Capture failures").

    python3 benchmarks/capture_rng.py --out FILE.json        # on a machine with a CUDA device

Each kind of failure runs in a fresh process: a capture made as the harness's graph timer makes
it (under ``torch.random.fork_rng``, inside ``torch.cuda.graph``) whose body does something a
capture refuses (a host read-back, a cuSOLVER factorisation...), its body run once outside
capture before (as the timer's warm-up: library handles exist). After it the process checks, in
order: the graph timer's probe (one draw under a forked state), a plain draw (what FlagGems' next
input does), and, where the plain draw failed, a plain draw after
``generator.graphsafe_set_state(<clone_state() taken before the capture>)``, and then a capture
that works (a draw replayed) and a draw outside it. It also checks that the generator continues
the stream it had before the capture (the draw equals the one a fresh process makes after the
same set-up). The table is printed and written
to ``--out`` (JSON, with torch's version and the device).

Where no CUDA device is present it says so and exits 2, writing nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# What each kind of failure does inside the capture; ``x`` is a 64x64 float32 matrix on the device.
KINDS: dict[str, str] = {
    "item": "x.sum().item()",  # a host read-back: "operation not permitted when stream is capturing"
    "draw_then_item": "torch.randn(4, device=x.device); x.sum().item()",  # the generator moved inside
    "nonzero": "x.nonzero()",  # an output size read back
    "lu_factor": "torch.linalg.lu_factor(x @ x.T + 64 * torch.eye(64, device=x.device))",
    "ldl_factor": "torch.linalg.ldl_factor(x @ x.T + 64 * torch.eye(64, device=x.device))",
    "none": "x @ x",  # a capture that works: the control (a copy taken before it changes nothing)
}

CHILD = r"""
import json, sys, torch
kind, body = sys.argv[1], sys.argv[2]
dev = torch.device("cuda:0")
torch.manual_seed(0)
x = torch.randn(64, 64, device=dev)
gen = torch.cuda.default_generators[0]
out = {"kind": kind}

def attempt(fn):
    try:
        fn()
        return "ok"
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"

with torch.random.fork_rng(devices=[0], device_type="cuda"):  # the stream stays where the set-up left it
    exec(body, {"torch": torch, "x": x})  # once outside capture, as the graph timer's warm-up (library handles made)
torch.cuda.synchronize()
saved = gen.clone_state()
graph = torch.cuda.CUDAGraph()

def capture():
    with torch.random.fork_rng(devices=[0], device_type="cuda"):
        with torch.cuda.graph(graph):
            exec(body, {"torch": torch, "x": x})

out["capture"] = attempt(capture)
torch.cuda.synchronize() if out["capture"] == "ok" else attempt(torch.cuda.synchronize)

def probe():
    with torch.random.fork_rng(devices=[0], device_type="cuda"):
        torch.randn(1, device=dev)

out["probe"] = attempt(probe)
drawn = {}

def plain():
    drawn["plain"] = torch.randn(4, device=dev).tolist()

out["plain_draw"] = attempt(plain)
if out["plain_draw"] != "ok":
    out["restore"] = attempt(lambda: gen.graphsafe_set_state(saved))

    def after():
        drawn["restored"] = torch.randn(4, device=dev).tolist()

    out["draw_after_restore"] = attempt(after)
    out["restored_values"] = drawn.get("restored")

    def captured_draw():  # the restored generator in a capture that works: a draw replayed, then one outside
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            torch.randn(4, device=dev)
        g.replay()
        torch.cuda.synchronize()
        torch.randn(4, device=dev)

    out["capture_after_restore"] = attempt(captured_draw)
else:
    out["plain_values"] = drawn.get("plain")
print("RESULT " + json.dumps(out))
"""

# The stream a generator restored to its pre-capture state continues: the first draw after the set-up.
REFERENCE = r"""
import json, torch
torch.manual_seed(0)
x = torch.randn(64, 64, device="cuda:0")
print("RESULT " + json.dumps(torch.randn(4, device="cuda:0").tolist()))
"""


def child(code: str, *args: str) -> Any:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ['(no output)']}"}
    return json.loads(lines[-1].removeprefix("RESULT "))


def close(a: Sequence[float] | None, b: Sequence[float] | None) -> bool | None:
    if a is None or b is None:
        return None
    return all(abs(p - q) <= 1e-6 for p, q in zip(a, b, strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), choices=list(KINDS))
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("capture_rng: no CUDA device here; run it on the GPU machine", file=sys.stderr)
        return 2
    reference = child(REFERENCE)
    rows = []
    for kind in args.kinds:
        row = child(CHILD, kind, KINDS[kind])
        if "restored_values" in row:
            row["continues_stream"] = close(row["restored_values"], reference)
        elif "plain_values" in row:
            row["continues_stream"] = close(row["plain_values"], reference)
        rows.append(row)
    columns = ("kind", "capture", "probe", "plain_draw", "draw_after_restore", "continues_stream",
               "capture_after_restore")
    for row in rows:
        print(" | ".join(f"{c}={str(row.get(c, '-'))[:70]}" for c in columns))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                                    "reference_draw": reference, "rows": rows}, indent=1) + "\n")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
