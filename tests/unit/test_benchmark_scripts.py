"""The scripts under benchmarks/ run on lent GPU machines, where a stale import costs device time:
every name they import from the harness must exist (read with ast; the scripts are not run)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


def _harness_imports(path: Path) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "harness":
            found += [(node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_every_harness_name_a_benchmark_script_imports_exists(script: Path) -> None:
    missing = []
    for module, name in _harness_imports(script):
        owner = importlib.import_module(module)
        if not hasattr(owner, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    assert not missing, f"{script.name} imports names the harness no longer has: {missing}"


def test_pyspy_split_gives_each_op_process_its_main_threads_seconds_per_phase(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An op is told by its process's command line; the watchdog thread is left out; a stack
    counts for its first phase (compile inside FlagGems' autotuning is compile); the held wait is
    main outside pytest; the process frame's own text (its pytest options) decides nothing."""
    import gzip
    import json

    from benchmarks.pyspy_split import main, split

    proc = 'process 7:"python3 -m harness.child /r/specs/{op}.exit -- t.py -W ignore::pytest.PytestUnknownMarkWarning"'
    main_ = "_run_module_as_main (<frozen runpy>:198);main (harness/child/process.py:190)"
    run = main_ + ";main (_pytest/config/__init__.py:1);Benchmark.run (benchmark/base.py:9)"
    lines = [
        f'process 1:"";{proc.format(op="mm")};{main_};preload (harness/child/process.py:50);_find_and_load (x:1) 100',
        f'process 1:"";{proc.format(op="mm")};{main_};readline (x:1) 50',
        f'process 1:"";{proc.format(op="mm")};{run};LibTuner.run (flag_gems/utils/libentry.py:3);'
        "compile (triton/compiler/compiler.py:300) 25",
        f'process 1:"";{proc.format(op="mm")};{run};LibTuner.run (flag_gems/utils/libentry.py:3);'
        "Autotuner._bench (triton/runtime/autotuner.py:1) 75",
        f'process 1:"";{proc.format(op="mm")};Thread._bootstrap (threading.py:1);watch_parent.<locals>.watch (harness/child/process.py:80) 500',
        f'process 1:"";{proc.format(op="add")};{run};GraphTimer.measure (harness/child/timing/graph.py:206) 40',
        f'process 1:"";{proc.format(op="add")};{run};something_else (y.py:1) 10',
        'process 1:"";_run_module_as_main (<frozen runpy>:198);main (harness/cli.py:1) 999',  # the parent: no op
        "not a line",
    ]
    assert split(lines, rate=50) == {
        "mm": {"held: imports": 2.0, "held: waiting": 1.0, "Triton compile": 0.5, "FlagGems autotuning": 1.5},
        "add": {"harness timers": 0.8, "other": 0.2}}
    profile = tmp_path / "prof.txt.gz"
    with gzip.open(profile, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    main([str(profile), "--rate", "50", "--out", str(tmp_path / "split.json")])
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[:2] == ["op", "held:"] and printed[1].split()[0] == "mm" and printed[1].split()[-1] == "5.0"
    assert json.loads((tmp_path / "split.json").read_text())["seconds"]["add"]["harness timers"] == 0.8
    with pytest.raises(SystemExit, match="no op process"):
        main([str(tmp_path / "split.json")])
