"""The command examples of README.md and docs/*.md run as written (issue 17: docs that stay true).

Every line of a ```bash / ```sh fence is one example. Each is either run here, on the cpu backend
in an empty directory, and must exit 0; or skipped for a reason this file names (`pytest -rs`
lists them): a GPU, a docker engine, FlagGems, the network, the user's own files, a synopsis. A
line that is neither fails: mark it (adjust SKIP below) or make it runnable. Placeholders of a
run directory (``reports/<run-id>``, ``BASE_RUN``, ``HEAD_RUN``) become the run the first
``harness run`` example made (``HEAD_RUN`` a copy of it beside it). Unlabelled fences are synopses and sample output, not run.
About 15 s (one real run of softmax at the smoke level, then quick commands).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ACCELERATORS = r"(cuda|nvidia|nv|musa|mthreads|moore|rocm|amd|hip|ascend|npu|huawei)"

# (pattern, why the example is not run here); the first match wins.
SKIP: list[tuple[str, str]] = [
    (r"^(python3? -m )?pip install|^git clone|^apt-get ", "installs packages or clones over the network"),
    (r"tests/browser", "the browser tests: `nox -s browser` (needs chromium and playwright)"),
    (r"^nox ", "a nox session (builds its environment with pip; CI runs `nox -s tests` itself)"),
    (r"^harness container ", "needs a docker engine (tests/integration/test_containers.py)"),
    (rf"^harness run .*--backend {ACCELERATORS}\b", "needs an accelerator"),
    (r"--provider flaggems|--suite ", "needs FlagGems (and a GPU for --suite)"),
    (r"--sweep-devices", "tunes over two GPUs"),
    (r"benchmarks/fetch_", "downloads wheels or builds FlagGems from a FlagGems git directory (network)"),
    (r"benchmarks/flaggems_corpus\.py", "needs FlagGems' exported tree (.flaggems/) and, for `run`, an H200 "
     "(tests/unit/test_corpus_script.py checks its logic)"),
    (r"my_ops\.py|my_shapes\.yaml|nightly\.txt|--against DIR|CUDA_RUN|MUSA_RUN",
     "names the user's own files or runs of other backends"),
    (r"^harness history site", "needs a history database of nightly runs (tests/unit/test_html.py builds one)"),
    (r"\.\.\.|\w\|\w| \| ", "a synopsis of alternatives, not one command"),
    (r"^harness ab ", "four runs; tests/test_autotune_ab_cpu.py runs `harness ab` on the cpu backend"),
    (r"^harness merge ", "joins parts made on several machines; tests/test_shard_merge_cpu.py runs --shard and "
     "merge on the cpu backend"),
]
PLACEHOLDERS = ("reports/<run-id>", "BASE_RUN", "HEAD_RUN")


@dataclass(frozen=True)
class Example:
    doc: str
    line: int
    command: str  # without the trailing comment

    @property
    def skip_reason(self) -> str | None:
        return next((why for pattern, why in SKIP if re.search(pattern, self.command)), None)


def examples() -> list[Example]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for block in re.finditer(r"^```(bash|sh|shell)\n(.*?)^```", text, re.S | re.M):
            first = text[:block.start(2)].count("\n") + 1
            pending, start = "", 0
            for offset, raw in enumerate(block.group(2).splitlines()):
                command = re.sub(r"\s+#\s.*$", "", raw).strip()
                if not pending:
                    start = offset
                if command.endswith("\\"):  # the shell's line continuation: one command
                    pending += command[:-1].rstrip() + " "
                    continue
                command, pending = (pending + command).strip(), ""
                if command and not command.startswith("#"):
                    found.append(Example(str(path.relative_to(ROOT)), first + start, command))
    return found


EXAMPLES = examples()
FIRST_RUN = next(e for e in EXAMPLES if e.command.startswith("harness run ") and e.skip_reason is None)

pytestmark = pytest.mark.slow


def _harness(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    assert words[0] == "harness"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "harness", *words[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str], Path]:
    """The earliest runnable `harness run` example, run once; its run directory stands for the
    documents' placeholders."""
    work = tmp_path_factory.mktemp("docs")
    done = _harness(FIRST_RUN.command, work)
    runs = list((work / "reports").iterdir()) if (work / "reports").is_dir() else []
    return work, done, runs[0] if len(runs) == 1 else work / "no-run"


def test_every_example_is_run_or_skipped_for_a_reason() -> None:
    runnable = [e for e in EXAMPLES if e.skip_reason is None]
    strays = [f"{e.doc}:{e.line}: {e.command}" for e in runnable if not e.command.startswith("harness ")]
    assert not strays, f"examples neither runnable here nor skipped for a reason: {strays}"
    assert len(runnable) >= 8


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{e.doc}:{e.line}" for e in EXAMPLES])
def test_documented_command_runs_on_the_cpu_backend(
        example: Example, first_run: tuple[Path, subprocess.CompletedProcess[str], Path]) -> None:
    if example.skip_reason:
        pytest.skip(f"{example.command}: {example.skip_reason}")
    if not example.command.startswith("harness "):
        pytest.fail(f"{example.doc}:{example.line}: not a harness command and no reason to skip it")
    work, done, run = first_run
    if example == FIRST_RUN:
        assert done.returncode == 0, done.stdout + done.stderr
        return
    assert done.returncode == 0, "the example the others start from failed; see its test"
    command = example.command
    head = run.with_name(f"{run.name}-head")  # a run is not compared with itself: HEAD_RUN is a copy of it
    if not head.exists():
        shutil.copytree(run, head)
    for placeholder in PLACEHOLDERS:
        command = command.replace(placeholder, str(head if placeholder == "HEAD_RUN" else run))
    if re.match(r"harness (compare|gate) ", command) and "--allow-cpu" not in command:
        # The documents compare accelerator runs; here the run is a cpu run, whose timings compare
        # and gate judge only when told (docs/compare.md, "The cpu backend").
        command += " --allow-cpu"
    result = _harness(command, work)
    assert result.returncode == 0, f"{example.doc}:{example.line}: {command}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr
