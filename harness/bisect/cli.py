"""`harness bisect`: name the library commit that changed an op's speed or verdict (docs/bisect.md).

Every input is checked before anything runs: the threshold, the run arguments, the output
folder, the refs, the range and the ops; a bad one is one line and exit 2. Nothing here imports
torch or Triton: each step is a `harness ab` (harness.bisect.runner).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.contract import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from harness.errors import UsageError
from harness.options import positive_int

__all__ = ["STATE", "add_parser", "run"]

STATE = "bisect-state.json"  # the output folder's resumable state


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bisect", help="find the library commit that changed an op's speed or verdict",
        description="List the first-parent commits between --good and --bad that change the library's "
        "source (--source-path), check that bad differs from good, then bisect: each step runs a commit "
        "against good with `harness ab` (interleaved on one device, autotune configs replayed), each side's "
        "source exported from git and put first on PYTHONPATH, and judges it with the gate's statistics. A "
        "step that stays noisy, or whose op does not run at that commit, is skipped (as `git bisect skip`). "
        "Writes OUT/bisect.json and OUT/bisect.md; the same command again resumes an interrupted bisection.",
        epilog="example:\n"
        "  harness bisect --repo ~/FlagGems --good v5.3.1 --bad v5.3.4 -- --suite .flaggems/v5.3.4/benchmark "
        "--ops softmax\n"
        "Exit codes: 0 a culprit named for every case that changed, 1 not (nothing changed, or a range is left), 2 bad "
        "input (nothing run), 3 the machine lacks something (git), 130 interrupted (run it again to resume).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--repo", required=True, metavar="GIT_DIR", help="the library's git directory (clone or mirror)")
    p.add_argument("--good", required=True, metavar="REF", help="a ref that behaves as expected")
    p.add_argument("--bad", required=True, metavar="REF", help="a later ref that does not (good must be its ancestor)")
    p.add_argument("--metric", choices=("speed", "verdict"), default="speed",
                   help="speed (default): slower or faster beyond the threshold; verdict: PASS against FAIL or CRASH")
    p.add_argument("--threshold", metavar="PCT",
                   help="a step's commit is bad when its change is beyond PCT percent (default: half the change "
                        "the check of bad against good saw)")
    p.add_argument("--source-path", default="src/", metavar="PATH",
                   help="the library's source in the repository, put on PYTHONPATH (default src/)")
    p.add_argument("--repo-url", metavar="URL",
                   help="link commits as URL/commit/SHA (default: the GitHub remote 'origin', when there is one)")
    p.add_argument("--out", default="reports/bisect", metavar="DIR",
                   help="bisect.json, bisect.md and the state for resuming (default reports/bisect)")
    p.add_argument("--cache", default="reports/bisect-cache", metavar="DIR",
                   help="exported sources and every step's runs, shared by bisections (default reports/bisect-cache)")
    p.add_argument("--repeats", type=positive_int, default=2,
                   help="runs a side of a step's first try (default 2, ABBA); a noisy step tries again with twice as many")
    p.add_argument("--max-tries", type=positive_int, default=5,
                   help="tries of a noisy step before it is skipped (default 5)")
    p.add_argument("--devices", metavar="LIST",
                   help="devices to test on, comma-separated: with K devices, K commits are tested at once "
                        "(a k-ary split); default: the run arguments' device")
    p.add_argument("--alpha", type=float, default=0.05, help="the gate's significance level (default 0.05)")
    p.add_argument("--spread", metavar="FILE", help="run-to-run spread table for the gate's statistics")
    p.add_argument("--allow-cpu", action="store_true",
                   help="bisect speed on the cpu backend anyway (a test of the pipeline)")
    p.add_argument("run_args", nargs=argparse.REMAINDER, metavar="-- RUN_ARGS",
                   help="arguments for `harness run` after -- (typically --suite TREE --ops OP)")


def _threshold(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise UsageError(f"--threshold {text!r} is not a number; give a percentage such as 5.") from None
    if not (math.isfinite(value) and 0 < value < 1000):
        raise UsageError(f"--threshold {text}: a threshold must be above 0 and below 1000 percent.")
    return value / 100.0


def _run_args(ns: argparse.Namespace) -> list[str]:
    args = list(ns.run_args)
    return args[1:] if args and args[0] == "--" else args


def _check_ops(run_args: Sequence[str], env: Mapping[str, str], metric: str, allow_cpu: bool) -> None:
    """The run arguments as `harness run` reads them, and their ops found in the tree or module
    they name (nothing runs: the run is only prepared)."""
    from harness.backends import resolve_backend
    from harness.options import read_project_config, resolve_run_options
    from harness.runargs import cli_values, parse_run_args
    from harness.sources import prepare

    ns = parse_run_args(run_args)
    options = resolve_run_options(cli_values(ns), env, read_project_config())
    if metric == "speed" and not allow_cpu and not resolve_backend(options.backend).timings_comparable:
        raise UsageError("harness bisect: the runs would be on a backend whose timings show that the pipeline "
                         "runs, not how fast the kernels are. Run on an accelerator, use --metric verdict, or "
                         "pass --allow-cpu (a test of the pipeline).")
    try:
        prepare(options, env)
    except UsageError as exc:
        raise UsageError(f"the run arguments after --: {exc.message}") from None


def run(ns: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from harness.bisect.git import Repo, github_base
    from harness.bisect.report import (
        RESULT_JSON,
        RESULT_MD,
        named_every_case,
        render_markdown,
        result_json,
        summary_line,
    )
    from harness.bisect.runner import AbStepRunner
    from harness.bisect.session import Commit, Settings, bisect, check_state
    from harness.compare.ab import check_run_args
    from harness.results.store import atomic_write_text, check_can_write_dir, read_json, write_json

    threshold = _threshold(ns.threshold)
    if not (0 < ns.alpha < 1):
        raise UsageError(f"--alpha {ns.alpha}: give a number between 0 and 1.")
    run_args = _run_args(ns)
    check_run_args(run_args, "harness bisect")
    devices: tuple[str | None, ...] = (None,)
    if ns.devices is not None:
        named = [d.strip() for d in ns.devices.split(",")]
        if not all(named) or len(set(named)) != len(named):
            raise UsageError(f"--devices {ns.devices!r}: give distinct device indices separated by commas, such as 0,1.")
        if any(a == "--devices" or a.startswith("--devices=") for a in run_args):
            raise UsageError("--devices is given to `harness bisect` and after --; give it once, to bisect.")
        devices = tuple(named)
    source_path = ns.source_path.strip().strip("/")
    if not source_path or source_path.startswith("..") or os.path.isabs(ns.source_path):
        raise UsageError(f"--source-path {ns.source_path!r}: give a folder inside the repository, such as src/.")
    if ns.repo_url is not None and not ns.repo_url.startswith(("https://", "http://")):
        raise UsageError(f"--repo-url {ns.repo_url!r}: give the repository's web address, such as "
                         "https://github.com/OWNER/NAME (commits are linked as URL/commit/SHA).")
    out, cache = Path(ns.out), Path(ns.cache)
    check_can_write_dir(out, f"--out {ns.out}")
    check_can_write_dir(cache, f"--cache {ns.cache}")
    spread_file = Path(ns.spread) if ns.spread else None
    if spread_file is not None:
        from harness.compare.spread import load_spread

        load_spread(spread_file)

    repo = Repo(Path(ns.repo))
    repo.check()
    good, bad = repo.resolve(ns.good, "--good"), repo.resolve(ns.bad, "--bad")
    if good == bad or not repo.is_ancestor(good, bad):
        raise UsageError(f"--good {ns.good} is not an ancestor of --bad {ns.bad} in {ns.repo}: a bisection needs good "
                         "before bad on one history. Swap them, or pick refs on one branch.")
    commits = repo.source_commits(good, bad, source_path)
    if not commits:
        raise UsageError(f"no first-parent commit between --good {ns.good} and --bad {ns.bad} changes {source_path}/: "
                         "nothing in the library's source to bisect (check --source-path).")
    _check_ops(run_args, environ, ns.metric, ns.allow_cpu)

    key: dict[str, Any] = {"repo": str(Path(ns.repo).resolve()), "good": good, "bad": bad, "metric": ns.metric,
                           "threshold": threshold, "source_path": source_path, "run_args": run_args,
                           "repeats": ns.repeats, "max_tries": ns.max_tries, "alpha": ns.alpha,
                           "spread": str(spread_file.resolve()) if spread_file else None}
    state: dict[str, Any] | None = None
    if (out / STATE).is_file():
        try:
            state = read_json(out / STATE)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--out {out}: {STATE} cannot be read ({exc}); remove it or choose another --out.") from None
        why = check_state(state or {}, key)
        if why is not None:
            raise UsageError(f"--out {out} holds another bisection ({why}); choose another --out, or remove it.")
    elif out.is_dir() and any(out.iterdir()):
        raise UsageError(f"--out {out} is not empty and holds no bisection; choose another --out or remove it.")

    good_tree = repo.trees([good], source_path)[good]
    runner = AbStepRunner(repo, Commit(good, "good", good_tree), source_path, run_args, cache, environ,
                          allow_cpu=ns.allow_cpu, alpha=ns.alpha, spread_file=spread_file)
    out.mkdir(parents=True, exist_ok=True)
    settings = Settings(metric=ns.metric, threshold=threshold, repeats=ns.repeats, max_tries=ns.max_tries,
                        devices=devices)
    bad_commit = Commit(bad, repo.subject(bad), repo.trees([bad], source_path)[bad])
    if state is not None:
        print(f"bisect: resuming from {out / STATE}", flush=True)
    try:
        result = bisect(commits, bad_commit, runner, settings, key, state,
                        save=lambda s: write_json(out / STATE, s), say=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print(f"bisect: interrupted; the same command resumes from {out / STATE}", file=sys.stderr)
        return EXIT_INTERRUPTED
    link_base = ns.repo_url or github_base(repo.remote_url())
    facts = {"repo": str(ns.repo), "good": ns.good, "bad": ns.bad, "good_sha": good, "bad_sha": bad,
             "metric": ns.metric, "threshold_given": threshold, "source_path": source_path, "run_args": run_args,
             "devices": [d for d in devices if d is not None], "repo_url": link_base}
    data = result_json(result, facts, link_base)
    write_json(out / RESULT_JSON, data)
    atomic_write_text(out / RESULT_MD, render_markdown(data))
    print(summary_line(data))
    return EXIT_OK if named_every_case(data) else EXIT_FAILED
