"""Where each op process's time went, from a py-spy profile of a harness run (raw, collapsed
stacks): a table of seconds per phase and op, and the same as JSON.

    py-spy record --subprocesses --idle --nonblocking --rate 50 --format raw -o prof.txt -- \\
        python3 -m harness run ...
    python3 benchmarks/pyspy_split.py prof.txt[.gz] --rate 50 [--out split.json]

Each op process is told by its command line (``specs/<op>.exit``: the op's file stem, its id
with any character outside ``[A-Za-z0-9_.-]`` made ``_``, harness.contract.op_file_stem); its
watchdog thread (``watch_parent``) is left out, so an op's seconds are its main thread's (``--idle`` keeps the
time it waits: on its device, for the release of a held process). A sample counts for the first
phase in :data:`PHASES` one of whose frames it holds (Triton's compiler inside FlagGems'
autotuning counts as compile); else, in the op process's main outside pytest, the held wait. Seconds are samples / rate: py-spy's rate is a target, so they
are approximate (benchmarks/results/flaggems-corpus-h200-2026-12-02b/README.md, "Where a suite op's
time goes").
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.contract import RunFiles  # noqa: E402

# (phase, frame substrings): the first phase a sample's stack matches takes it
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("held: imports", ("preload (harness/child/process.py",)),
    ("held: profiler warm-up", ("warm_profiler (harness/child/process.py",)),
    ("pytest start", ("_prepareconfig (_pytest/", "pytest_collection (_pytest/")),
    ("pytest end", ("pytest_sessionfinish (", "pytest_terminal_summary (", "pytest_unconfigure (")),
    ("Triton compile", ("compile (triton/compiler/compiler.py",)),
    ("FlagGems autotuning", ("LibTuner.run (", "Autotuner._bench (")),
    ("FlagGems inputs", ("get_input_iter (",)),
    ("harness timers", ("Timer.measure (harness/child/timing/",)),
    ("harness reference and check", ("LatencySeam._outputs (", "compare_outputs (", "clone_tree (")),
)
HELD_WAIT = "held: waiting"  # the op process's main, outside pytest and the phases above: stdin's "go"
OTHER = "other"
# an op process's command line names its exit file: RunFiles.exit_file's folder and suffix
_EXIT = RunFiles(Path("run")).exit_file("OP")
_OP = re.compile(rf"{re.escape(_EXIT.parent.name)}/([^/\s\"]+){re.escape(_EXIT.suffix)}")


def phase_of(frames: Sequence[str]) -> str:
    for phase, marks in PHASES:
        if any(mark in frame for frame in frames for mark in marks):
            return phase
    if any("main (harness/child/process.py" in f for f in frames) and not any("(_pytest/" in f for f in frames):
        return HELD_WAIT
    return OTHER


def split(lines: Iterable[str], rate: float) -> dict[str, dict[str, float]]:
    """{op: {phase: seconds}} from py-spy's raw lines ("frame;frame;... COUNT")."""
    samples: dict[str, Counter[str]] = defaultdict(Counter)
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        op = next((m.group(1) for f in frames[:3] if (m := _OP.search(f))), None)
        if op is None or any("watch_parent" in f for f in frames):
            continue
        samples[op][phase_of([f for f in frames if not f.startswith("process ")])] += int(count)
    return {op: {phase: round(n / rate, 2) for phase, n in counts.items()} for op, counts in samples.items()}


def table(result: dict[str, dict[str, float]]) -> str:
    phases = [p for p in (*(p for p, _ in PHASES), HELD_WAIT, OTHER) if any(p in r for r in result.values())]
    head = ["op", *phases, "total"]
    rows = [[op, *(f"{r.get(p, 0.0):.1f}" for p in phases), f"{sum(r.values()):.1f}"] for op, r in result.items()]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    return "\n".join("  ".join(str(x).rjust(w) for x, w in zip(line, widths, strict=True)) for line in [head, *rows])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", type=Path, help="py-spy's raw output (.gz read as such)")
    parser.add_argument("--rate", type=float, default=50.0, help="py-spy's --rate (samples per second)")
    parser.add_argument("--out", type=Path, help="the split as JSON")
    args = parser.parse_args(argv)
    if not args.profile.is_file():
        raise SystemExit(f"{args.profile}: no such file")
    opener = gzip.open if args.profile.suffix == ".gz" else open
    with opener(args.profile, "rt", encoding="utf-8") as fh:
        result = split(fh, args.rate)
    if not result:
        raise SystemExit(f"{args.profile}: no op process's samples (not a profile of a harness run with --subprocesses?)")
    print(table(result))
    if args.out:
        args.out.write_text(json.dumps({"profile": args.profile.name, "rate": args.rate, "seconds": result},
                                       indent=2) + "\n")


if __name__ == "__main__":
    main()
