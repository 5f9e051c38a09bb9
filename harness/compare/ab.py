"""`harness ab`: one benchmark under two environments, interleaved, with the same autotune configs.

Side A and side B run the same ``harness run`` arguments on this host's device; they differ
only by what the user names: environment variables (a compiler switch), directories put
first on PYTHONPATH (a library path), or the Python interpreter (an installed version).
Runs alternate between the sides (ABBA by default, as `gate-run`: A1 B1 B2 A2 ...), so a
slow drift of the machine weighs on both alike. A1, A's opening run, records the configs Triton's
autotuners choose; every other run replays them (``--replay-from``), so a kernel runs the
same config on both sides and only the switch differs. Each side's repeats are pooled and
compared with the functions of `harness compare` / `gate`.

Planning (order, environments, commands) is pure; :func:`run_ab` is the thin layer that
launches the runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.compare.gate import interleaved_order, pool_side, run_command
from harness.errors import UsageError
from harness.options import ENV_PREFIX, FLAGTUNE_ENV, read_project_config, resolve_run_options
from harness.results.store import read_records, write_json
from harness.runargs import cli_values, parse_run_args

__all__ = [
    "ORDERS",
    "AbResult",
    "AbSide",
    "AbStep",
    "ab_order",
    "check_run_args",
    "context_lines",
    "parse_env_assignment",
    "plan_steps",
    "run_ab",
    "side_env",
    "step_command",
]

SIDES = ("a", "b")
ORDERS = ("abba", "abab")
# Set by `harness ab` for every run; the same flag after `--` would fight it.
RESERVED_RUN_ARGS = ("--out", "--run-id", "--replay-from", "--resume")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class AbSide:
    """What one side changes, relative to the environment `harness ab` runs in."""

    name: str  # "a" or "b"
    set_env: tuple[tuple[str, str], ...] = ()
    unset_env: tuple[str, ...] = ()
    python: str | None = None  # None: the interpreter running `harness ab`
    pythonpath: tuple[str, ...] = ()  # put first on PYTHONPATH, in this order

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.set_env]
        parts += [f"unset {k}" for k in self.unset_env]
        parts += [f"PYTHONPATH+={p}" for p in self.pythonpath]
        if self.python:
            parts.append(f"python {self.python}")
        return ", ".join(parts) or "the environment as inherited"


@dataclass(frozen=True)
class AbStep:
    side: str
    repeat: int
    out_dir: Path
    replay_from: Path | None  # None: tunes live (A1, or --no-replay)

    @property
    def label(self) -> str:
        return f"{self.side}-{self.repeat}"

    @property
    def run_id(self) -> str:
        return f"ab-{self.label}"


@dataclass(frozen=True)
class AbResult:
    pooled: Mapping[str, Path]  # side -> pooled run directory
    steps: tuple[AbStep, ...]
    replay_misses: Mapping[str, int]  # side -> pooled rows marked replay-miss


def parse_env_assignment(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (VALUE may be empty) -> (KEY, VALUE); ValueError otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not _ENV_NAME.fullmatch(key):
        raise ValueError(f"expected KEY=VALUE with KEY a variable name, got {text!r}")
    return key, value


def ab_order(repeats: int, order: str = "abba") -> list[tuple[str, int]]:
    """(side, repeat) in run order; A1 always comes first (it records the configs)."""
    if order not in ORDERS:
        raise UsageError(f"Unknown --order {order!r}. Orders: {', '.join(ORDERS)}.")
    if order == "abab":
        if repeats < 1:
            raise UsageError(f"--repeats must be at least 1, got {repeats}.")
        return [(side, k) for k in range(1, repeats + 1) for side in SIDES]
    to_ab = {"base": "a", "head": "b"}
    return [(to_ab[side], k) for side, k in interleaved_order(repeats)]


def plan_steps(repeats: int, order: str, repeats_dir: Path, replay: bool) -> tuple[AbStep, ...]:
    """Every run, in order: A's first records, the others replay it (unless ``replay`` is off)."""
    sequence = ab_order(repeats, order)
    recorder = repeats_dir / "a-1"
    return tuple(
        AbStep(side=side, repeat=k, out_dir=repeats_dir / f"{side}-{k}",
               replay_from=recorder if replay and (side, k) != ("a", 1) else None)
        for side, k in sequence
    )


def check_run_args(run_args: Sequence[str], command: str = "harness ab") -> None:
    for arg in run_args:
        for flag in RESERVED_RUN_ARGS:
            if arg == flag or arg.startswith(flag + "="):
                raise UsageError(
                    f"`{command}` sets {flag} for every run itself; remove {arg!r} from the "
                    f"arguments after `--` (give the output directory as `{command} --out DIR`)."
                )


def check_side(side: AbSide) -> None:
    """A side's switch, checked before anything runs: variable names and library directories."""
    for name in side.unset_env:
        if not _ENV_NAME.fullmatch(name):
            raise UsageError(f"--{side.name}-unset {name!r} is not an environment variable name (letters, "
                             "digits and '_', not starting with a digit).")
    for directory in side.pythonpath:
        if not Path(directory).is_dir():
            raise UsageError(f"--{side.name}-pythonpath {directory}: no such directory. Give a directory that "
                             "holds the library's package.")


def _flagtune_key(name: str) -> bool:
    return name in (FLAGTUNE_ENV, ENV_PREFIX + "FLAGTUNE")


def _besides_flagtune(side: AbSide) -> tuple[object, ...]:
    """What a side changes, leaving out the variables that set FlagTune."""
    return (sorted((k, v) for k, v in side.set_env if not _flagtune_key(k)),
            sorted(k for k in side.unset_env if not _flagtune_key(k)), side.python, side.pythonpath)


def _flagtune_switch(side: AbSide) -> tuple[object, ...]:
    """How a side sets FlagTune (empty: as inherited)."""
    return (sorted((k, v.strip()) for k, v in side.set_env if _flagtune_key(k)),
            sorted(k for k in side.unset_env if _flagtune_key(k)))


def check_flagtune(sides: Mapping[str, AbSide], run_args: Sequence[str], env: Mapping[str, str],
                   config: Mapping[str, Any]) -> None:
    """Both sides run with the same FlagTune mode (FlagGems' USE_FLAGTUNE: it widens the configs its
    autotuners search, so it would be a second switch), unless FlagTune is the whole switch; a switch
    of FlagTune that --flagtune in the run arguments overrides on both sides is refused too."""
    cli = cli_values(parse_run_args(run_args))
    modes = {name: resolve_run_options(cli, side_env(side, env, ""), config).flagtune for name, side in sides.items()}
    a, b = sides["a"], sides["b"]
    switches = [f"--{s.name}-env {k}" for s in (a, b) for k, _ in s.set_env if _flagtune_key(k)]
    switches += [f"--{s.name}-unset {k}" for s in (a, b) for k in s.unset_env if _flagtune_key(k)]
    if modes["a"] != modes["b"] and _besides_flagtune(a) != _besides_flagtune(b):
        raise UsageError(
            f"harness ab: side A runs with FlagTune {modes['a']} and side B with FlagTune {modes['b']} "
            f"({', '.join(switches)}) besides the switch; give both sides the same {FLAGTUNE_ENV}, or make "
            "FlagTune the only switch.")
    if modes["a"] == modes["b"] and _flagtune_switch(a) != _flagtune_switch(b):
        raise UsageError(
            f"harness ab: the sides set FlagTune differently ({', '.join(switches)}), yet both run with FlagTune "
            f"{modes['a']} (--flagtune and HARNESS_FLAGTUNE win over {FLAGTUNE_ENV}). To switch FlagTune, give "
            f"--a-env/--b-env {FLAGTUNE_ENV}=0|1 and no --flagtune after `--`.")


def side_env(side: AbSide, parent_env: Mapping[str, str], harness_path: str) -> dict[str, str]:
    """The environment of a side's `harness run`: the parent's, with the side's changes.

    ``harness_path`` holds only this harness's package, so the side's Python (perhaps another
    interpreter, with its own torch and triton) imports this harness and nothing else from here.
    """
    env = {k: v for k, v in parent_env.items() if k not in side.unset_env}
    env.update(side.set_env)
    path = [*side.pythonpath, harness_path]
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def step_command(step: AbStep, python: str, run_args: Sequence[str]) -> list[str]:
    replay = ["--replay-from", str(step.replay_from)] if step.replay_from is not None else []
    return run_command(python, step.out_dir, step.run_id, [*run_args, *replay])


def context_lines(sides: Mapping[str, AbSide], steps: Sequence[AbStep], order: str,
                  run_args: Sequence[str], misses: Mapping[str, int]) -> list[str]:
    """What compare.md says about an A/B: the two sides, the run order, the autotune configs."""
    lines = [f"A/B: base is side A ({sides['a'].describe()}), head is side B ({sides['b'].describe()})",
             f"same `harness run` arguments on both sides: `{' '.join(run_args) or '(none)'}`",
             f"runs, in order ({order}): {', '.join(s.label for s in steps)}"]
    if any(s.replay_from is not None for s in steps):
        lines.append("autotune: configs recorded by a-1 and replayed by every other run")
    else:
        lines.append("autotune: every run tuned live (--no-replay)")
    if sides["a"].describe() == sides["b"].describe():
        lines.append("the two sides are identical: this is an A/A run")
    for name, count in misses.items():
        if count:
            lines.append(
                f"**warning**: {count} row(s) of side {name.upper()} tuned live while replaying "
                "(autotune replay-miss): an autotuner's key or kernels differ on that side, so "
                "those rows may compare different configs"
            )
    return lines


# ---------------------------------------------------------------------------------------------
# I/O


def _check_python(side: AbSide) -> str:
    if side.python is None:
        return sys.executable
    found = shutil.which(side.python)
    if found is None:
        raise UsageError(f"--{side.name}-python {side.python!r} is not an executable file. Give the "
                         "path of a Python interpreter (for example /opt/venv/bin/python).")
    return found


@contextmanager
def _harness_only_path() -> Iterator[str]:
    """A directory holding a link to this harness's package and nothing else."""
    package = Path(__file__).resolve().parent.parent
    shim = Path(tempfile.mkdtemp(prefix="harness-ab-"))
    try:
        (shim / "harness").symlink_to(package, target_is_directory=True)
        yield str(shim)
    finally:
        shutil.rmtree(shim, ignore_errors=True)


def _run_step(step: AbStep, side: AbSide, python: str, run_args: Sequence[str], env: Mapping[str, str]) -> int:
    role = ("records autotune configs" if step.label == "a-1" and step.replay_from is None
            else f"replays {step.replay_from.name}" if step.replay_from is not None else "tunes live")
    print(f"ab: {step.label} ({side.describe()}; {role}) -> {step.out_dir}", flush=True)
    code = subprocess.run(step_command(step, python, run_args), env=dict(env), check=False).returncode
    if code not in (0, 1):  # 1 = some case failed: reported by the comparison, not fatal here
        raise UsageError(
            f"`harness run` for side {side.name.upper()} (run {step.label}: {side.describe()}) exited with "
            f"code {code}; its message is above. Fix the arguments after `--` or that side's switch."
        )
    if not (step.out_dir / "run.json").is_file():
        hint = (f" --{side.name}-python must be able to import the harness's dependencies (pytest, numpy, "
                "pyyaml, junit-xml, torch, triton)." if side.python else "")
        raise UsageError(f"`harness run` for side {side.name.upper()} (run {step.label}) wrote no run.json "
                         f"(exit code {code}); its output is above.{hint}")
    return code


def run_ab(
    sides: Mapping[str, AbSide],
    run_args: Sequence[str],
    out: Path,
    env: Mapping[str, str],
    repeats: int = 2,
    order: str = "abba",
    replay: bool = True,
    precheck: Callable[[], None] | None = None,
) -> AbResult:
    """Run both sides interleaved into out/repeats/, pool them into out/a and out/b.
    ``precheck`` runs after the inputs are checked and before anything is created."""
    check_run_args(run_args)
    for side in sides.values():
        check_side(side)
    check_flagtune(sides, run_args, env, read_project_config())
    pythons = {name: _check_python(side) for name, side in sides.items()}
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"A/B output directory {out} is not empty. Choose another --out or remove it.")
    if precheck is not None:
        precheck()
    out = out.resolve()
    steps = plan_steps(repeats, order, out / "repeats", replay)
    out.mkdir(parents=True, exist_ok=True)
    codes: dict[str, int] = {}
    with _harness_only_path() as harness_path:
        envs = {name: side_env(side, env, harness_path) for name, side in sides.items()}
        for step in steps:
            codes[step.label] = _run_step(step, sides[step.side], pythons[step.side], run_args, envs[step.side])
    pooled: dict[str, Path] = {}
    misses: dict[str, int] = {}
    for name in SIDES:
        dirs = [s.out_dir for s in sorted(steps, key=lambda s: s.repeat) if s.side == name]
        pooled[name] = pool_side(dirs, out / name, f"ab-{name}", sides[name].describe(),
                                 {"ab_side": name})
        misses[name] = sum(1 for r in read_records(pooled[name] / "records.jsonl") if r.autotune == "replay-miss")
    summary: dict[str, Any] = {
        "sides": {n: {"describe": s.describe(), "set_env": dict(s.set_env), "unset_env": list(s.unset_env),
                      "pythonpath": list(s.pythonpath), "python": pythons[n]} for n, s in sides.items()},
        "run_args": list(run_args),
        "order": order,
        "repeats": repeats,
        "replay": replay,
        "runs": [{"run": s.label, "out": str(s.out_dir), "exit_code": codes[s.label],
                  "replay_from": str(s.replay_from) if s.replay_from else None} for s in steps],
        "replay_misses": misses,
    }
    write_json(out / "ab.json", summary)
    return AbResult(pooled=pooled, steps=steps, replay_misses=misses)
