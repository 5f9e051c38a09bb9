"""Which FlagGems benchmark tree a path is: its layout, the package it benchmarks, its version.

Two layouts are driven (docs/flaggems.md, "Layouts"), told apart by files, never by test file
names:

- ``v5.0``: FlagGems v2.2 to v5.0.x. ``benchmark/performance_utils.py`` holds ``Benchmark``;
  ``test_<category>_perf.py`` files benchmark many ops each, one pytest mark per op.
- ``v5.3``: FlagGems v5.3 and later, and FlagGems-vllm. ``benchmark/base.py`` holds
  ``Benchmark`` next to ``consts.py`` (and no performance_utils.py); one ``test_<op>.py`` per op.

The package a tree benchmarks (``flag_gems``, or ``flaggems_vllm`` for FlagGems-vllm, a separate
repository with the v5.3 layout) is read from the imports of its base module, so a variant is
data here, not code. Reading a tree imports nothing of it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.run.provenance import describe

__all__ = [
    "KNOWN_PACKAGES",
    "LAYOUTS",
    "SuiteTree",
    "locate_suite",
    "major_minor",
    "tree_ref",
]

LAYOUTS = ("v5.0", "v5.3")
# Packages a benchmark tree may benchmark, in the order they are looked for.
KNOWN_PACKAGES = ("flaggems_vllm", "flag_gems")
REF_FILE = "FLAGGEMS_REF"  # written next to benchmark/ by benchmarks/fetch_flaggems.sh
_BASE_MODULE = {"v5.0": "performance_utils.py", "v5.3": "base.py"}
_HINT = ("Give the benchmark/ directory of a FlagGems checkout or export at the tag of the installed "
         "flag_gems (benchmarks/fetch_flaggems.sh GIT_DIR v5.3.4 exports one into .flaggems/v5.3.4).")


@dataclass(frozen=True)
class SuiteTree:
    """A FlagGems benchmark directory the harness can drive."""

    suite_dir: Path  # .../benchmark
    layout: str  # one of LAYOUTS
    package: str  # the module its benchmarks import and time: flag_gems or flaggems_vllm
    ref: str  # where it came from, when known: "v5.3.4 (v5.3.4, f7c55cb...)", a git describe, a version

    @property
    def root(self) -> Path:
        """The directory pytest puts on sys.path so that ``import benchmark`` works."""
        return self.suite_dir.parent

    @property
    def base_module(self) -> Path:
        """The file defining ``Benchmark`` (and its ``get_latency``, the harness's way in)."""
        return self.suite_dir / _BASE_MODULE[self.layout]

    @property
    def shapes_yaml(self) -> Path:
        return self.suite_dir / "core_shapes.yaml"

    @property
    def version(self) -> tuple[int, int] | None:
        """The tree's major.minor, from its ref; None when the ref names no version."""
        return major_minor(self.ref)

    def to_dict(self) -> dict[str, object]:
        version = self.version
        return {"path": str(self.suite_dir), "layout": self.layout, "package": self.package, "ref": self.ref,
                "version": f"{version[0]}.{version[1]}" if version else None}


def major_minor(text: str) -> tuple[int, int] | None:
    """The first ``X.Y`` version in ``text`` ("v5.3.4 (v5.3.4-166-g...)" -> (5, 3)); None if none."""
    found = re.search(r"(?<![\d.])v?(\d+)\.(\d+)(?:[.\d]|\b)", text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def _imported_packages(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _package(suite_dir: Path, layout: str) -> str | None:
    imported: set[str] = set()
    for name in (_BASE_MODULE[layout], "conftest.py"):
        imported |= _imported_packages(suite_dir / name)
    return next((p for p in KNOWN_PACKAGES if p in imported), None)


def tree_ref(suite_dir: Path, package: str) -> str:
    """Where the tree came from: the FLAGGEMS_REF file next to benchmark/, else ``git describe``
    of the checkout, else the version setuptools-scm wrote into the tree (``src/<package>/_version.py``);
    "" when none says."""
    ref_path = suite_dir.parent / REF_FILE
    if ref_path.is_file():
        return ref_path.read_text(encoding="utf-8", errors="replace").strip()
    described = describe(suite_dir.parent)
    if described and described != "unknown":
        return described
    version_file = suite_dir.parent / "src" / package / "_version.py"
    if version_file.is_file():
        found = re.search(r"""version\s*=\s*['"]([^'"]+)['"]""", version_file.read_text(errors="replace"))
        if found:
            return found.group(1)
    return ""


def _found(suite_dir: Path) -> str:
    names = sorted(p.name for p in suite_dir.iterdir()) if suite_dir.is_dir() else []
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return shown or "nothing"


def locate_suite(path: Path) -> SuiteTree:
    """``path`` as a FlagGems benchmark tree; UsageError naming what was found otherwise."""
    suite_dir = path.resolve()
    if not suite_dir.is_dir():
        raise UsageError(f"--suite {path}: no such directory. {_HINT}")
    if suite_dir.name != "benchmark":
        raise UsageError(f"--suite {path}: FlagGems' benchmarks import themselves as the package 'benchmark', "
                         f"so the directory must be named benchmark (got {suite_dir.name!r}). {_HINT}")
    if (suite_dir / "performance_utils.py").is_file():
        layout = "v5.0"
    elif (suite_dir / "base.py").is_file() and (suite_dir / "consts.py").is_file():
        layout = "v5.3"
    else:
        raise UsageError(
            f"--suite {path}: not a FlagGems benchmark tree: neither performance_utils.py (FlagGems up to "
            f"v5.0.x) nor base.py with consts.py (v5.3 and later) is there; found {_found(suite_dir)}. {_HINT}")
    missing = [name for name in ("conftest.py", "core_shapes.yaml") if not (suite_dir / name).is_file()]
    if missing:
        raise UsageError(f"--suite {path}: a FlagGems {layout} benchmark tree lacks {' and '.join(missing)} "
                         f"(its options and its shapes come from them). {_HINT}")
    package = _package(suite_dir, layout)
    if package is None:
        raise UsageError(f"--suite {path}: {_BASE_MODULE[layout]} imports none of {', '.join(KNOWN_PACKAGES)}; "
                         f"this is not a FlagGems benchmark tree the harness knows. {_HINT}")
    return SuiteTree(suite_dir=suite_dir, layout=layout, package=package, ref=tree_ref(suite_dir, package))
