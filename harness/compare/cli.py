"""Command-line entry points: compare, gate, gate-run, ab and history.

``add_parsers`` adds the subcommands to the `harness` parser; ``dispatch``
runs one and returns its exit code, or None when the command is not one of
these. Errors are raised as HarnessError and reported by ``harness.cli.main``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.errors import GateFailed, UsageError
from harness.options import positive_int, read_project_config, resolve_history_db

if TYPE_CHECKING:  # the statistics pull in numpy: imported only when a command runs
    from harness.compare.compare import Comparison
    from harness.compare.history import HistoryStore
    from harness.compare.spread import SpreadTable
    from harness.compare.stats import Criteria

__all__ = ["COMMANDS", "add_parsers", "dispatch"]

COMMANDS = ("compare", "gate", "gate-run", "ab", "history")
_VERDICT_ORDER = ("regression", "failing", "improvement", "drift", "noisy", "unchanged", "not compared")

_COMPARE_EPILOG = """\
Rows are paired by case id (op[provider-dtype-shape]) and only rows that passed on both
sides are compared. A row is a regression when head's candidate is more than THRESHOLD
percent slower AND the change stands out from both the samples' noise (Mann-Whitney) and
the run-to-run spread (of the repeats, never less than the device's known spread:
--spread), after correcting for the number of rows compared; a row whose torch baseline
moved as much is `drift`, and one whose samples did not settle cannot be a regression.
Runs of a different backend, device model, timer, level or cache mode, or measured with a
different torch, Triton, driver, flag_gems or harness, are refused unless --allow-mismatch;
cpu backend runs unless --allow-cpu.

Outputs (with --out): compare.md (fit for $GITHUB_STEP_SUMMARY), compare.csv, compare-junit.xml.
Exit codes: compare 0; gate 1 on a regression or a case that passed in base and fails,
crashes, hangs or is missing in head; 2 bad input (missing, damaged or unlike runs).
"""


def _percent(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5, got {text!r}") from None
    if not (0 < value < 1000):  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a percentage above 0 and below 1000, got {text!r}")
    return value / 100.0


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not (0 < value < 1):
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _add_criteria(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threshold", type=_percent, default=0.05, metavar="PCT",
                   help="smallest slowdown that counts, in percent (default 5)")
    p.add_argument("--alpha", type=_probability, default=0.05,
                   help="significance level after the correction (default 0.05)")
    p.add_argument("--correction", choices=("holm", "bh", "none"), default="holm",
                   help="multiple-comparison control over the rows compared: holm (family-wise, "
                        "default), bh (Benjamini-Hochberg, false discovery rate) or none")
    p.add_argument("--spread", metavar="FILE",
                   help="run-to-run spread table (default: the shipped harness/compare/run_spread.yaml)")
    p.add_argument("--allow-cpu", action="store_true",
                   help="judge cpu backend runs anyway (their timings show the pipeline, not kernel speed)")


def _add_compare(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    gate = name == "gate"
    p = sub.add_parser(
        name,
        help=("compare two runs and exit 1 on a regression (the CI gate)" if gate
              else "compare two runs: per-case ratio, interval, rank test, verdict"),
        description=("Same as `harness compare`, but the exit code is 1 when a regression is found."
                     if gate else "Compare the candidate timings of two runs case by case."),
        epilog=_COMPARE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("base", metavar="BASE", help="run directory of the reference run")
    p.add_argument("head", metavar="HEAD", help="run directory of the run under test")
    _add_criteria(p)
    p.add_argument("--out", metavar="DIR", help="write compare.md, compare.csv and compare-junit.xml here")
    p.add_argument("--allow-mismatch", action="store_true",
                   help="compare runs of different backend, device model, timer, level or cache, or "
                        "of different torch, Triton, driver, flag_gems or harness versions, anyway")
    p.add_argument("--history", metavar="DB",
                   help="a history database (`harness history add`): each case's run-to-run spread is "
                        "measured from its runs of base's fingerprint (4 or more), instead of assumed")


def _add_gate_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "gate-run",
        help="benchmark two versions (git refs or paths) interleaved, then gate (the body of `nox -s gate`)",
        description="Check out BASE_REF and HEAD_REF (git refs or directories), run `harness run` "
        "for each on this host's device in ABBA order, pool each side's repeats into OUT/base and "
        "OUT/head, then compare them as `harness gate` does. Arguments after `--` go to "
        "`harness run` for both sides.",
        epilog="example:\n  harness gate-run --base-ref origin/main --head-ref HEAD -- --backend cuda --level core\n"
        "Exit codes: 0 pass, 1 regression, 2 bad input, 3 missing git.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--base-ref", required=True, help="git ref or directory of the reference version")
    p.add_argument("--head-ref", required=True, help="git ref or directory of the version under test")
    p.add_argument("--repeats", type=positive_int, default=2,
                   help="runs per side, interleaved base/head then head/base (default 2)")
    p.add_argument("--out", default="reports/gate", help="output directory (default reports/gate)")
    p.add_argument("--repo", default=".", help="git repository the refs belong to (default .)")
    p.add_argument("--container", metavar="BACKEND",
                   help="run each side inside BACKEND's image (built or pulled once, from this harness's "
                        "containers/), each side's tree mounted read-only, confined as `harness container "
                        "run` is; needs --devices (docs/ci-security.md)")
    p.add_argument("--devices", metavar="ID",
                   help="with --container: the one host device both sides run on")
    p.add_argument("--no-replay", action="store_true",
                   help="let every run tune live (default: each side's run 1 records its autotune "
                        "configs and that side's later runs replay them)")
    _add_criteria(p)
    p.add_argument("run_args", nargs=argparse.REMAINDER, metavar="-- RUN_ARGS",
                   help="arguments for `harness run`, after --")


def _env_assignment(text: str) -> tuple[str, str]:
    from harness.compare.ab import parse_env_assignment

    try:
        return parse_env_assignment(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_ab(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ab",
        help="benchmark under two environments (a switch, a library path, an interpreter) interleaved, "
             "same autotune configs, then compare",
        description="Run `harness run` with the same arguments for side A and side B, which differ only "
        "by the environment given here, interleaved on this host's device. A's run 1 records the "
        "configs Triton's autotuners choose and every other run replays them (--replay-from), so only "
        "the switch differs. Each side's repeats are pooled into OUT/a and OUT/b and compared as "
        "`harness compare OUT/a OUT/b` does (A is base, B is head).",
        epilog="examples:\n"
        "  harness ab --a-env TRITON_X=0 --b-env TRITON_X=1 -- --backend cuda --ops softmax mm\n"
        "  harness ab --b-pythonpath ~/src/mylib-fix -- --ops-module mylib_ops.py\n"
        "  harness ab --b-python /opt/triton-next/bin/python --fail-on-regression -- --level core\n"
        "Exit codes: 0 done (with --fail-on-regression: no regression), 1 regression (only with "
        "--fail-on-regression), 2 bad input or a side's run failed to start.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for side in ("a", "b"):
        big = side.upper()
        p.add_argument(f"--{side}-env", action="append", type=_env_assignment, default=[], metavar="KEY=VALUE",
                       help=f"set an environment variable for side {big} (repeatable)")
        p.add_argument(f"--{side}-unset", action="append", default=[], metavar="KEY",
                       help=f"remove an environment variable for side {big} (repeatable)")
        p.add_argument(f"--{side}-pythonpath", action="append", default=[], metavar="DIR",
                       help=f"put DIR first on PYTHONPATH for side {big} (repeatable): a library path")
        p.add_argument(f"--{side}-python", metavar="PYTHON",
                       help=f"Python interpreter for side {big} (default: this one): an installed version")
    p.add_argument("--repeats", type=positive_int, default=2, help="runs per side (default 2)")
    p.add_argument("--order", choices=("abba", "abab"), default="abba",
                   help="abba (default, as gate-run: A1 B1 B2 A2 ..., cancels a steady drift) or abab")
    p.add_argument("--no-replay", action="store_true",
                   help="let every run tune live (when the switch is meant to change the autotuner's choice)")
    p.add_argument("--out", default="reports/ab", help="output directory (default reports/ab)")
    _add_criteria(p)
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when B is slower than A (as `harness gate`); without it the exit code is 0")
    p.add_argument("run_args", nargs=argparse.REMAINDER, metavar="-- RUN_ARGS",
                   help="arguments for `harness run`, after --, the same for both sides")


def _add_history(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "history",
        help="store run medians in SQLite and check new runs against them",
        description="A history of runs in SQLite. The database is --db, else $HARNESS_HISTORY_DB, "
        "else history-db in [tool.harness] of ./pyproject.toml, else reports/history.sqlite.",
    )
    hs = p.add_subparsers(dest="history_command", metavar="ACTION", required=True)

    def db(q: argparse.ArgumentParser) -> None:
        q.add_argument("--db", help="SQLite file (default $HARNESS_HISTORY_DB, else history-db in "
                       "[tool.harness], else reports/history.sqlite)")

    add = hs.add_parser("add", help="store a run", description="Store a run's medians (again: replaced).")
    add.add_argument("run", metavar="RUN", help="run directory")
    db(add)
    check = hs.add_parser(
        "check", help="check a run against the runs before it; exit 1 on a regression",
        description="Hold each case against the median of the last WINDOW runs of the same "
        "fingerprint. A case slower by more than THRESHOLD is suspect; it is a regression when "
        "suspect in PERSIST consecutive runs, or at once when slower by more than LARGE.",
    )
    check.add_argument("run", metavar="RUN", help="run directory (added already or not)")
    db(check)
    check.add_argument("--window", type=positive_int, default=5, help="runs in the baseline (default 5)")
    check.add_argument("--threshold", type=_percent, default=0.05, metavar="PCT",
                       help="suspect beyond this slowdown, percent (default 5)")
    check.add_argument("--large", type=_percent, default=0.25, metavar="PCT",
                       help="flag at once beyond this slowdown, percent (default 25)")
    check.add_argument("--persist", type=positive_int, default=2,
                       help="consecutive suspect runs that make a regression (default 2)")
    check.add_argument("--out", metavar="DIR", help="write history-check.md, history-check-junit.xml and "
                       "bisect-ranges.json (where each regression's slowdown began, as library commits) here")
    check.add_argument("--allow-mismatch", action="store_true",
                       help="check against earlier runs made with other torch, Triton, driver, flag_gems or "
                            "harness versions anyway")
    site = hs.add_parser("site", help="a static HTML site of the history: an index and one page per op",
                         description="Build a static site (index.html, ops/<op>.html) of every stored run: "
                         "each case's trend per backend, the commit of each point, regression and suspect "
                         "markers from the history rules. Self-contained pages: publish the folder as is.")
    db(site)
    site.add_argument("--out", required=True, metavar="DIR", help="folder to write the site into")
    site.add_argument("--commit-url", metavar="URL",
                      help="link for a point's commit, with {commit} in it, e.g. "
                           "https://github.com/OWNER/REPO/commit/{commit}")
    site.add_argument("--title", default="Performance history", help="the site's title")
    site.add_argument("--bisect", nargs="+", action="extend", default=[], metavar="PATH",
                      help="stored `harness bisect` results (bisect.json, or its --out folder): a regression whose "
                           "library range one bisected shows its culprit")
    export = hs.add_parser("export", help="trend CSV: one line per case and run, grouped by case",
                           description="Export stored medians as CSV, ordered by case then time.")
    db(export)
    export.add_argument("--fingerprint", help="only runs of this fingerprint (see run.json)")
    export.add_argument("--case", dest="cases", nargs="+", metavar="CASE_ID", default=[],
                        help="only these case ids")
    export.add_argument("--out", metavar="FILE", help="CSV file (default: standard output)")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add compare, gate, gate-run, ab and history to the `harness` subcommands."""
    _add_compare(sub, "compare")
    _add_compare(sub, "gate")
    _add_gate_run(sub)
    _add_ab(sub)
    _add_history(sub)


def _criteria(ns: argparse.Namespace) -> Criteria:
    from harness.compare.stats import Criteria

    return Criteria(threshold=ns.threshold, alpha=ns.alpha, correction=ns.correction)


def _spread(ns: argparse.Namespace) -> SpreadTable:
    from harness.compare.spread import load_spread

    return load_spread(Path(ns.spread) if ns.spread else None)


def _write_comparison(comparison: Comparison, out: Path | None, stdout: TextIO,
                      title: str = "Performance comparison", context: Sequence[str] = ()) -> None:
    from harness.compare.render import (
        render_compare_csv,
        render_compare_junit,
        render_compare_markdown,
    )
    from harness.results.store import atomic_write_text

    markdown = render_compare_markdown(comparison, title, context)
    if out is None:
        print(markdown, file=stdout)
        return
    atomic_write_text(out / "compare.md", markdown)
    atomic_write_text(out / "compare.csv", render_compare_csv(comparison.rows))
    atomic_write_text(out / "compare-junit.xml", render_compare_junit(comparison))
    problem = _write_compare_html(comparison, out, title, context)
    print(markdown.splitlines()[0].lstrip("# "), file=stdout)
    print(", ".join(f"{v} {comparison.count(v)}" for v in _VERDICT_ORDER), file=stdout)
    if comparison.resolution:
        print(comparison.resolution, file=stdout)
    for r in comparison.regressions + comparison.failing:
        print(f"  {r.verdict}: {r.case_id}: {r.reason}", file=stdout)
    if problem:
        print(problem, file=stdout)
    print(f"reports: {out}/compare.md, compare.csv, compare-junit.xml" + ("" if problem else ", compare.html"),
          file=stdout)


def _write_compare_html(comparison: Comparison, out: Path, title: str, context: Sequence[str]) -> str | None:
    """compare.html; None when written, else why not (the tables are written either way)."""
    from harness.results.store import atomic_write_text

    try:
        from harness.compare.page import render_compare_html

        atomic_write_text(out / "compare.html", render_compare_html(comparison, title, context))
    except ImportError as exc:
        return f"compare.html not written: {exc.name or exc} is not installed (pip install -e . installs it)"
    except OSError:
        raise  # the system refused the write (a full disk, a quota): the command fails, as for any output
    except Exception as exc:  # noqa: BLE001 - a page that fails to render must not cost the tables
        return f"compare.html not written: {type(exc).__name__}: {exc}"
    return None


def _gate_outcome(comparison: Comparison, what: str) -> int:
    if comparison.regressions or comparison.failing:
        raise GateFailed(
            f"{what}: {len(comparison.regressions)} regression(s), {len(comparison.failing)} "
            "case(s) failing in head. The report lists each case with its numbers."
        )
    if comparison.gate_failed:
        raise GateFailed(
            f"{what}: no row could be compared (no case passed on both sides with the same "
            "timer). Check both runs' report.md for failures, or that they ran the same ops."
        )
    return 0


def _checked_out(ns: argparse.Namespace) -> Path | None:
    """--out DIR, refused before anything is computed when nothing can be written there."""
    if not ns.out:
        return None
    from harness.results.store import check_can_write_dir

    check_can_write_dir(Path(ns.out), f"--out {ns.out}")
    return Path(ns.out)


def _history_spread(ns: argparse.Namespace, spread: SpreadTable) -> SpreadTable:
    """``spread`` with each case's spread measured from ``--history DB`` (the runs of base's
    fingerprint), when given."""
    if not getattr(ns, "history", None):
        return spread
    from harness.compare.history import with_history_spread
    from harness.results.runinfo import read_run_info

    db = Path(ns.history)
    if not db.is_file():
        raise UsageError(f"--history {db}: no such history database. Give the file `harness history add` "
                         "wrote, or leave --history out.")
    return with_history_spread(spread, db, read_run_info(Path(ns.base) / "run.json"))


def _cmd_compare(ns: argparse.Namespace, stdout: TextIO) -> int:
    from harness.compare.compare import compare_runs

    _checked_out(ns)
    comparison = compare_runs(Path(ns.base), Path(ns.head), _criteria(ns), ns.allow_mismatch,
                              allow_cpu=ns.allow_cpu, spread=_history_spread(ns, _spread(ns)))
    _write_comparison(comparison, Path(ns.out) if ns.out else None, stdout)
    if ns.command == "gate":
        return _gate_outcome(comparison, f"gate {ns.base} -> {ns.head}")
    return 0


def _cmd_gate_run(ns: argparse.Namespace, env: Mapping[str, str], stdout: TextIO) -> int:
    from harness.compare.ab import check_run_args
    from harness.compare.compare import compare_runs
    from harness.compare.gate import run_gate
    from harness.compare.untrusted import commands_stopped, log_safe_errors

    run_args = _run_args(ns)
    check_run_args(run_args, "harness gate-run")
    out = _checked_out(ns) or Path(ns.out)
    spread = _spread(ns)  # a bad --spread is refused before anything runs
    side_runner = None
    if ns.container or ns.devices:
        from harness.container.gate import container_side_runner

        side_runner = container_side_runner(ns.container, ns.devices, out, env, read_project_config())
    # In a container a side's code may be a pull request's: each side gets a folder of its own,
    # checked before it is read, and what the comparison prints of its records is shown with
    # workflow commands stopped; an error quoting them is made log-safe (docs/ci-security.md).
    untrusted = side_runner is not None
    with log_safe_errors():
        sides = run_gate({"base": ns.base_ref, "head": ns.head_ref}, out, run_args, ns.repeats, env,
                         repo=Path(ns.repo), side_runner=side_runner, replay=not ns.no_replay,
                         precheck=lambda: _refuse_pipeline_only_early(run_args, ns.container, ns.allow_cpu,
                                                                      "harness gate-run"),
                         untrusted_sides=untrusted)
        with commands_stopped(stdout, env if untrusted else {}):
            # The two versions of the tree may carry two harness versions: that is what is compared.
            comparison = compare_runs(sides["base"], sides["head"], _criteria(ns), allow_mismatch=False,
                                      allow_cpu=ns.allow_cpu, spread=spread, deliberate=("harness",))
            _write_comparison(comparison, out.resolve(), stdout)
    return _gate_outcome(comparison, f"gate {ns.base_ref} -> {ns.head_ref}")


def _refuse_pipeline_only_early(run_args: Sequence[str], container: str | None, allow_cpu: bool, what: str) -> None:
    """gate-run and ab on a backend whose timings are not judged (cpu) are refused before their
    runs start, not after them: the backend the runs will use, from the run arguments (or the
    container's backend), auto resolved as `harness run` resolves it."""
    if allow_cpu:
        return
    from harness.backends import resolve_backend
    from harness.runargs import parse_run_args

    name = container or parse_run_args(run_args).backend or "auto"
    backend = resolve_backend(name)
    if not backend.timings_comparable:
        raise UsageError(
            f"{what}: the runs would be on the {backend.name} backend, whose timings show that the "
            "pipeline runs, not how fast the kernels are, so they are not judged. Run on an accelerator, "
            "or pass --allow-cpu (a test of the pipeline)."
        )


def _run_args(ns: argparse.Namespace) -> list[str]:
    run_args = list(ns.run_args)
    return run_args[1:] if run_args and run_args[0] == "--" else run_args


def _cmd_ab(ns: argparse.Namespace, env: Mapping[str, str], stdout: TextIO) -> int:
    from harness.compare.ab import AbSide, context_lines, run_ab
    from harness.compare.compare import compare_runs
    from harness.results.runinfo import ENVIRONMENT_FIELDS

    sides = {
        side: AbSide(
            name=side,
            set_env=tuple(getattr(ns, f"{side}_env")),
            unset_env=tuple(getattr(ns, f"{side}_unset")),
            python=getattr(ns, f"{side}_python"),
            pythonpath=tuple(str(Path(d).resolve()) for d in getattr(ns, f"{side}_pythonpath")),
        )
        for side in ("a", "b")
    }
    run_args = _run_args(ns)
    out = _checked_out(ns) or Path(ns.out)
    spread = _spread(ns)
    result = run_ab(sides, run_args, out, env, repeats=ns.repeats, order=ns.order, replay=not ns.no_replay,
                    precheck=lambda: _refuse_pipeline_only_early(run_args, None, ns.allow_cpu, "harness ab"))
    # A switch may change the software on purpose (--b-python with another torch): named, not refused.
    comparison = compare_runs(result.pooled["a"], result.pooled["b"], _criteria(ns), allow_mismatch=False,
                              allow_cpu=ns.allow_cpu, spread=spread, deliberate=tuple(ENVIRONMENT_FIELDS))
    context = context_lines(sides, result.steps, ns.order, run_args, result.replay_misses)
    _write_comparison(comparison, out.resolve(), stdout, title="A/B comparison (B against A)", context=context)
    if ns.fail_on_regression:
        return _gate_outcome(comparison, "ab: B against A")
    return 0


def _cmd_history(ns: argparse.Namespace, env: Mapping[str, str], stdout: TextIO) -> int:
    from harness.compare.compare import load_run
    from harness.compare.history import (
        RANGES_FILE,
        HistoryRules,
        HistoryStore,
        check_history_environment,
        check_run,
        ranges_json,
        render_trend_csv,
        run_medians,
    )
    from harness.results.runinfo import library_commit
    from harness.results.store import atomic_write_text
    from harness.results.trend import regression_ranges

    db = resolve_history_db({"db": ns.db or None}, env, read_project_config())
    store = HistoryStore(db)
    if ns.history_command != "add" and not db.exists():  # only add creates the database
        raise UsageError(f"History database {db} does not exist. Add runs first with "
                         "`harness history add RUN`, or point --db at the right file.")
    out = getattr(ns, "out", None)
    if out and ns.history_command == "export":
        from harness.results.store import check_can_write_file

        check_can_write_file(Path(out), f"--out {out}")
    elif out:
        _checked_out(ns)
    if ns.history_command == "add":
        run = load_run(Path(ns.run))
        part = run.info.get("shard")
        # a night is a whole run: half of one would read as its ops gone missing (--shard 1/1 is whole)
        if isinstance(part, Mapping) and part.get("count") != 1:
            raise UsageError(f"{ns.run} is part {part.get('index', '?')}/{part.get('count', '?')} of a split run "
                             "(--shard): merge the parts first (`harness merge PART... --out DIR`) and add the "
                             "merged run.")
        rows, replaced = store.add(run)
        print(f"history: {'replaced' if replaced else 'added'} run {run.run_id} ({rows} case(s), "
              f"fingerprint {run.info.get('fingerprint')}) in {db}", file=stdout)
        return 0
    if ns.history_command == "site":
        return _history_site(store, db, ns, stdout)
    if ns.history_command == "export":
        text = render_trend_csv(store.export(ns.fingerprint, ns.cases))
        if ns.out:
            atomic_write_text(Path(ns.out), text)
            print(f"history: trend written to {ns.out}", file=stdout)
        else:
            stdout.write(text)
        return 0
    from harness.compare.render import render_history_junit, render_history_markdown

    try:
        rules = HistoryRules(window=ns.window, threshold=ns.threshold, large=ns.large, persist=ns.persist)
    except ValueError as exc:
        raise UsageError(f"history check: {exc}. Give --threshold below --large.") from exc
    if rules.window < rules.min_history:
        raise UsageError(f"history check --window {rules.window}: a baseline needs {rules.min_history} earlier runs, "
                         f"so a smaller window never judges a case. Give --window {rules.min_history} or more.")
    run = load_run(Path(ns.run))
    warnings = check_history_environment(run, store.window_environments(run, rules.window), ns.allow_mismatch)
    earlier, earlier_commits = store.earlier_history(run)
    checks = check_run(run_medians(run), earlier, rules)
    commits = [*earlier_commits, library_commit(run.info)]
    ranges, unnamed = regression_ranges(checks, {r.case_id: r.op for r in run.records}, commits)
    markdown = render_history_markdown(run, checks, rules, str(db), ranges, unnamed)
    if warnings:
        head, _, rest = markdown.partition("\n")
        markdown = "\n".join([head, "", *(f"- **warning**: {w}" for w in warnings)]) + "\n" + rest
    print(markdown, file=stdout)
    if ns.out:
        out = Path(ns.out)
        atomic_write_text(out / "history-check.md", markdown)
        atomic_write_text(out / "history-check-junit.xml", render_history_junit(checks))
        atomic_write_text(out / RANGES_FILE, ranges_json(run.run_id, ranges, unnamed))
    flagged = [c for c in checks if c.status == "regression"]
    if flagged:
        raise GateFailed(f"history check of {ns.run}: {len(flagged)} regression(s) against {db}; "
                         "see the table above.")
    return 0


def _history_site(store: HistoryStore, db: Path, ns: argparse.Namespace, stdout: TextIO) -> int:
    from harness.bisect.report import read_findings
    from harness.results.html import render_history_site
    from harness.results.store import atomic_write_text

    if not db.exists():
        raise UsageError(f"History database {db} does not exist. Add runs first with "
                         "`harness history add RUN`, or point --db at the right file.")
    if ns.commit_url and ("{commit}" not in ns.commit_url
                          or not ns.commit_url.startswith(("https://", "http://", "file://"))):
        raise UsageError(f"--commit-url {ns.commit_url!r} must be an http(s) URL with {{commit}} in it; for "
                         "example https://github.com/OWNER/REPO/commit/{commit}.")
    out = Path(ns.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a folder for the site.")
    bisects = [f for p in ns.bisect for f in read_findings(Path(p))]
    _checked_out(ns)  # before any page is rendered
    pages = render_history_site(store.export(), commit_url=ns.commit_url, title=ns.title, bisects=bisects)
    for name, text in pages.items():
        atomic_write_text(out / name, text)
    html = sum(1 for name in pages if name.endswith(".html"))
    print(f"history site: {html} page(s) and {len(pages) - html} shared file(s) in {out} "
          f"(open {out / 'index.html'})", file=stdout)
    return 0


def dispatch(ns: argparse.Namespace, env: Mapping[str, str], stdout: TextIO | None = None) -> int | None:
    """Run a compare/gate/gate-run/ab/history command; None when ``ns.command`` is another one."""
    out = stdout or sys.stdout
    if ns.command in ("compare", "gate"):
        return _cmd_compare(ns, out)
    if ns.command == "gate-run":
        return _cmd_gate_run(ns, env, out)
    if ns.command == "ab":
        return _cmd_ab(ns, env, out)
    if ns.command == "history":
        return _cmd_history(ns, env, out)
    return None
