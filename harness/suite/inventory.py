"""What a FlagGems benchmark tree holds, read statically (``ast``; nothing of it is imported).

FlagGems' benchmark modules import ``flag_gems`` at module level, and ``import flag_gems``
needs a GPU and an active Triton driver (v5.3.4), so the harness reads the files instead of
collecting them: the parent can list, select and plan the corpus on any machine.

Per top-level ``test*`` function (:class:`BenchFunction`): its op marks (decorator marks and
``pytest.param(..., marks=...)``), skip marks with their reasons, and every ``Benchmark``
construction in its body or in the module helpers it calls (:class:`BenchBuild`: class, class
chain from most to least specific, op_name, backward, in-place, dtypes).

Read statically: everything above where it is written literally. Needs an import (left as
unknown here, decided in the op process at run time): whether a ``skipif`` condition holds,
dtype lists computed at run time (``FP8_DTYPES``, a vendor conditional, a helper call),
op_names built with f-strings, parametrize expansions (node ids), shapes a benchmark computes
in its own ``set_shapes``, and whether the vendor registers the op.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ConfigError
from harness.suite.layout import SuiteTree

__all__ = ["BUILTIN_MARKS", "BenchBuild", "BenchFunction", "Inventory", "read_inventory"]

# pytest's own marks (FlagGems' conftest.BUILTIN_MARKS); every other bare mark names an op.
BUILTIN_MARKS = frozenset({"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings",
                           "timeout", "tryfirst", "trylast"})
SKIP_MARKS = ("skip", "skipif", "xfail")
UNKNOWN = "?"  # a dtype list that only running the benchmark can tell
_TORCH_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "cfloat": "complex64",
                  "cdouble": "complex128", "long": "int64", "int": "int32", "short": "int16",
                  "chalf": "complex32"}
_CONSTS_MODULE = {"v5.0": "attri_util.py", "v5.3": "consts.py"}


@dataclass(frozen=True)
class BenchBuild:
    """One ``Benchmark`` construction."""

    bench_class: str
    class_chain: tuple[str, ...]  # most to least specific: the order FlagGems' shape lookup walks
    op_name: str  # as written; "" when computed at run time
    is_backward: bool
    is_inplace: bool
    dtypes: tuple[str, ...]  # declared dtype names; (UNKNOWN,) when only a run can tell
    reads_shape_file: bool  # False: a class of the test file sets its shapes itself

    @property
    def recorded_op_name(self) -> str:
        """The op_name FlagGems' results and shape lookup use (``_backward`` appended)."""
        if self.is_backward and self.op_name and "_backward" not in self.op_name:
            return self.op_name + "_backward"
        return self.op_name


@dataclass(frozen=True)
class BenchFunction:
    """One top-level benchmark function of a test file."""

    file: str  # relative to benchmark/ ("test_mm.py", "test_FLA/test_chunk.py")
    function: str
    line: int
    op_marks: tuple[str, ...]  # bare marks on the function, in decorator order
    param_marks: tuple[str, ...] = ()  # marks on pytest.param values of its parametrize
    skips: tuple[str, ...] = ()  # "skipif(<condition>): <reason>", "skip: <reason>"; module ones first
    builds: tuple[BenchBuild, ...] = ()

    @property
    def key(self) -> str:
        """The function's name without ``test_``: the name ``--ops`` takes."""
        return self.function.removeprefix("test_") or self.function

    @property
    def nodeid(self) -> str:
        return f"{self.file}::{self.function}"

    @property
    def marks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.op_marks + self.param_marks))

    @property
    def direction(self) -> str:
        """backward when it times a backward pass (autograd) or a backward op, else forward."""
        names = [self.file, self.function, *(b.op_name for b in self.builds)]
        if any(b.is_backward for b in self.builds) or any("backward" in n for n in names):
            return "backward"
        return "forward"

    @property
    def dtypes(self) -> tuple[str, ...]:
        found: list[str] = []
        for build in self.builds:
            found += [d for d in build.dtypes if d not in found]
        return tuple(found)

    @property
    def op_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.recorded_op_name for b in self.builds if b.recorded_op_name))

    @property
    def class_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for b in self.builds for c in b.class_chain))


@dataclass(frozen=True)
class Inventory:
    tree: SuiteTree
    functions: tuple[BenchFunction, ...]
    class_names: frozenset[str] = field(default_factory=frozenset)  # every Benchmark class of the tree
    base_classes: frozenset[str] = field(default_factory=frozenset)  # those of its base module
    # functions with op marks that pytest does not collect (no ``test`` prefix): (nodeid, marks)
    uncollected: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # test files that could not be read (not UTF-8, not Python): (file, line, why); pytest would
    # fail to collect them too, so their benchmarks cannot run, and every listing says so
    unreadable: tuple[tuple[str, int, str], ...] = ()

    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.file for f in self.functions))

    def unreadable_note(self, limit: int = 3) -> str:
        """One clause naming the files that could not be read ("" when every file was read)."""
        if not self.unreadable:
            return ""
        shown = "; ".join(f"{name} line {line}: {why}" for name, line, why in self.unreadable[:limit])
        more = f"; and {len(self.unreadable) - limit} more" if len(self.unreadable) > limit else ""
        return f"{len(self.unreadable)} file(s) of the tree could not be read ({shown}{more})"

    def unreadable_warnings(self) -> tuple[str, ...]:
        """One line per test file that could not be read: the file, the line and why."""
        return tuple(f"--suite {self.tree.suite_dir}: {name} line {line}: {why}; pytest cannot collect it, "
                     "so its benchmarks are left out" for name, line, why in self.unreadable)


# -- reading expressions ----------------------------------------------------------------------


def _src(node: ast.AST | None) -> str:
    return "" if node is None else ast.unparse(node)


def _last(node: ast.expr) -> str:
    return _src(node).split(".")[-1]


class _Dtypes:
    """Dtype lists written as constants: torch.X attributes, names of other lists, +, slices."""

    def __init__(self, known: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.known: dict[str, tuple[str, ...]] = dict(known or {})

    def one(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
            return _TORCH_ALIASES.get(node.attr, node.attr)
        return None

    def evaluate(self, node: ast.AST | None, local: Mapping[str, tuple[str, ...]] | None = None) -> tuple[str, ...] | None:
        if node is None:
            return None
        scope = {**self.known, **(local or {})}
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list[str] = []
            for elt in node.elts:
                single = self.one(elt)
                if single is not None:
                    out.append(single)
                    continue
                sub = self.evaluate(elt.value if isinstance(elt, ast.Starred) else elt, local)
                if sub is None:
                    return None
                out += sub
            return tuple(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.evaluate(node.left, local), self.evaluate(node.right, local)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Subscript):
            return self._subscript(node, local)
        if isinstance(node, ast.Name):
            return scope.get(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return self.known.get(node.attr) if node.value.id in ("consts", "attri_util") else None
        single = self.one(node)
        return (single,) if single is not None else None

    def _subscript(self, node: ast.Subscript, local: Mapping[str, tuple[str, ...]] | None) -> tuple[str, ...] | None:
        """``X[i]``, ``X[a:b]`` with literal integers."""
        base = self.evaluate(node.value, local)
        if base is None:
            return None

        def literal(part: ast.expr | None) -> int | None:
            return part.value if isinstance(part, ast.Constant) and isinstance(part.value, int) else None

        index = node.slice
        if isinstance(index, ast.Slice):
            parts = (index.lower, index.upper)
            if index.step is not None or any(p is not None and literal(p) is None for p in parts):
                return None
            return base[literal(index.lower):literal(index.upper)]
        position = literal(index)
        if position is None or not -len(base) <= position < len(base):
            return None
        return (base[position],)


def _module_dtypes(path: Path, dtypes: _Dtypes) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError):
        return found
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = dtypes.evaluate(node.value, found)
            if value is not None:
                found[node.targets[0].id] = value
    return found


# -- classes -----------------------------------------------------------------------------------


@dataclass
class _Class:
    name: str
    bases: list[str]
    where: str  # file name relative to benchmark/
    methods: dict[str, ast.FunctionDef]
    default_dtypes: ast.expr | None

    @classmethod
    def of(cls, node: ast.ClassDef, where: str) -> _Class:
        methods = {item.name: item for item in node.body if isinstance(item, ast.FunctionDef)}
        default = next((item.value for item in node.body if isinstance(item, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "DEFAULT_DTYPES" for t in item.targets)), None)
        return cls(node.name, [_last(b) for b in node.bases], where, methods, default)


def _calls(method: ast.FunctionDef, *names: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in names for n in ast.walk(method))


@dataclass
class _Scope:
    """One test file: its classes (nested ones too), functions, imports and module constants."""

    name: str
    tree: ast.Module
    classes: dict[str, _Class]
    functions: dict[str, ast.FunctionDef]
    imported: dict[str, tuple[str, str]]  # local name -> (module, original name)

    @classmethod
    def parse(cls, name: str, text: str) -> _Scope:
        tree = ast.parse(text)
        classes: dict[str, _Class] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name not in classes:
                classes[node.name] = _Class.of(node, name)
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        imported: dict[str, tuple[str, str]] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    imported[alias.asname or alias.name] = (node.module, alias.name)
        return cls(name, tree, classes, functions, imported)


@dataclass
class _Reader:
    base: dict[str, _Class]
    scopes: dict[str, _Scope]
    dtypes: _Dtypes

    def lookup(self, scope: _Scope, name: str, qualified: str = "") -> _Class | None:
        if qualified.startswith(("base.", "performance_utils.")):
            return self.base.get(name)
        if name in scope.classes:
            return scope.classes[name]
        if name in scope.imported:
            module, original = scope.imported[name]
            short = module.split(".")[-1]
            if short.startswith("test_") and f"{short}.py" in self.scopes:
                return self.lookup(self.scopes[f"{short}.py"], original)
            return self.base.get(original)
        return None

    def chain(self, start: _Class) -> list[_Class]:
        """Depth first over every base, each class once: FlagGems' shape lookup walks the MRO,
        which this equals for the single-inheritance chains (and mixins) of the suite."""
        out: list[_Class] = []

        def visit(cls: _Class | None) -> None:
            if cls is None or any(c is cls for c in out):
                return
            out.append(cls)
            for base in cls.bases:
                if cls.where == "<base>":
                    visit(self.base.get(base))
                else:
                    visit(self.lookup(self.scopes[cls.where], base) or self.base.get(base))

        visit(start)
        return out

    def is_benchmark(self, cls: _Class) -> bool:
        return any(c.name == "Benchmark" and c.where == "<base>" for c in self.chain(cls))


def _reads_shape_file(chain: Sequence[_Class]) -> bool:
    """Whether FlagGems' shape file reaches this class: not when a test-file class replaces
    set_shapes or init_user_config without calling the base's."""
    for cls in chain:
        if cls.where == "<base>":
            continue
        own = cls.methods.get("set_shapes")
        if own is not None and not _calls(own, "set_shapes"):
            return False
        init = cls.methods.get("init_user_config")
        if init is not None and not _calls(init, "init_user_config", "set_shapes"):
            return False
    return True


# -- marks -------------------------------------------------------------------------------------


def _mark(node: ast.expr) -> tuple[str, ast.Call | None] | None:
    call = node if isinstance(node, ast.Call) else None
    text = _src(call.func if call else node)
    return (text.removeprefix("pytest.mark."), call) if text.startswith("pytest.mark.") else None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _text(node: ast.expr | None) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return _src(node)


def _describe_skip(name: str, call: ast.Call | None) -> str:
    if call is None:
        return name
    reason = _keyword(call, "reason")
    if name == "skipif":
        condition = _src(call.args[0]) if call.args else ""
        return f"skipif({condition}): {_text(reason)}" if reason is not None else f"skipif({condition})"
    if reason is None and call.args:
        reason = call.args[0]
    return f"{name}: {_text(reason)}" if reason is not None else name


def _mark_values(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, (ast.List, ast.Tuple)) else [node]


# -- one file ----------------------------------------------------------------------------------


def _bind(helper: ast.FunctionDef, call: ast.Call) -> dict[str, ast.expr]:
    params = [a.arg for a in helper.args.args]
    bound = {params[i]: arg for i, arg in enumerate(call.args) if i < len(params)}
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    return bound


def _bool(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _param_marks(call: ast.Call, marks_found: list[str], skips: list[str]) -> None:
    """The marks of a parametrize's ``pytest.param(..., marks=...)`` entries: op marks into
    ``marks_found``, skips described into ``skips``."""
    for sub in ast.walk(call):
        if not (isinstance(sub, ast.Call) and _src(sub.func) == "pytest.param"):
            continue
        marks = _keyword(sub, "marks")
        for value in _mark_values(marks) if marks is not None else []:
            inner = _mark(value)
            if inner and inner[0] not in BUILTIN_MARKS:
                marks_found.append(inner[0])
            elif inner and inner[0] in SKIP_MARKS:
                skips.append("param " + _describe_skip(*inner))


class _FileReader:
    def __init__(self, reader: _Reader, scope: _Scope) -> None:
        self.reader, self.scope = reader, scope
        self.local: dict[str, tuple[str, ...]] = {}
        self.module_skips: list[str] = []
        self.mark_vars: dict[str, ast.expr] = {}
        for node in scope.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    if alias.name in reader.dtypes.known:
                        self.local[alias.asname or alias.name] = reader.dtypes.known[alias.name]
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            self._assigned(node.targets[0].id, node.value)

    def _assigned(self, name: str, value_node: ast.expr) -> None:
        """A module-level ``name = value``: a dtype list, the module's pytestmark, or a mark kept in a
        variable for decorators to use."""
        value = self.reader.dtypes.evaluate(value_node, self.local)
        if value is not None:
            self.local[name] = value
        if name == "pytestmark":
            for item in _mark_values(value_node):
                found = _mark(item)
                if found and found[0] in SKIP_MARKS:
                    self.module_skips.append("module " + _describe_skip(*found))
        elif _mark(value_node):
            self.mark_vars[name] = value_node

    def functions(self) -> list[BenchFunction]:
        return [self.function(node) for node in self.scope.tree.body
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test")]

    def uncollected(self) -> list[tuple[str, tuple[str, ...]]]:
        """Marked functions pytest will not collect (FlagGems v5.0.2's ``tes_rms_norm``)."""
        found = []
        for node in self.scope.tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("test"):
                marks = tuple(m[0] for m in map(_mark, node.decorator_list) if m and m[0] not in BUILTIN_MARKS)
                if marks:
                    found.append((f"{self.scope.name}::{node.name}", marks))
        return found

    def function(self, node: ast.FunctionDef) -> BenchFunction:
        op_marks: list[str] = []
        skips = list(self.module_skips)
        param_marks: list[str] = []
        for decorator in node.decorator_list:
            found = _mark(decorator)
            if found is None and isinstance(decorator, ast.Name) and decorator.id in self.mark_vars:
                found = _mark(self.mark_vars[decorator.id])
            if found is None:
                continue
            name, call = found
            if name not in BUILTIN_MARKS and call is None:
                op_marks.append(name)
            elif name in SKIP_MARKS:
                skips.append(_describe_skip(name, call))
            elif name == "parametrize" and call is not None:
                _param_marks(call, param_marks, skips)
        return BenchFunction(file=self.scope.name, function=node.name, line=node.lineno,
                             op_marks=tuple(op_marks), param_marks=tuple(dict.fromkeys(param_marks)),
                             skips=tuple(skips), builds=tuple(self.builds(node)))

    def _parametrized(self, node: ast.FunctionDef) -> dict[str, tuple[str, ...]]:
        """dtype lists given to a single-argument parametrize (``@parametrize("dtype", [...])``)."""
        found: dict[str, tuple[str, ...]] = {}
        for decorator in node.decorator_list:
            mark = _mark(decorator)
            if not mark or mark[0] != "parametrize" or mark[1] is None or len(mark[1].args) < 2:
                continue
            names = mark[1].args[0]
            if isinstance(names, ast.Constant) and isinstance(names.value, str) and "," not in names.value:
                value = self.reader.dtypes.evaluate(mark[1].args[1], self.local)
                if value is not None:
                    found[names.value.strip()] = value
        return found

    def _body_dtypes(self, body: ast.FunctionDef, local: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        """``local`` with the dtype lists a function's body assigns to names."""
        body_local = dict(local)
        for sub in ast.walk(body):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                value = self.reader.dtypes.evaluate(sub.value, body_local)
                if value is not None:
                    body_local[sub.targets[0].id] = value
        return body_local

    def builds(self, node: ast.FunctionDef) -> list[BenchBuild]:
        bodies: list[tuple[ast.FunctionDef, dict[str, ast.expr]]] = [(node, {})]
        seen = {node.name}
        for body, _ in bodies:  # the module helpers it calls (they grow the list while it is walked)
            for sub in ast.walk(body):
                if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in self.scope.functions
                        and sub.func.id not in seen and len(bodies) < 8):
                    seen.add(sub.func.id)
                    bodies.append((self.scope.functions[sub.func.id], _bind(self.scope.functions[sub.func.id], sub)))
        local = {**self.local, **self._parametrized(node)}
        found: list[BenchBuild] = []
        for body, bound in bodies:
            body_local = self._body_dtypes(body, local)
            for sub in ast.walk(body):
                if isinstance(sub, ast.Call) and isinstance(sub.func, (ast.Name, ast.Attribute)):
                    build = self.build(sub, bound, body_local)
                    if build is not None:
                        found.append(build)
        return found

    def build(self, call: ast.Call, bound: Mapping[str, ast.expr], local: Mapping[str, tuple[str, ...]]) -> BenchBuild | None:
        cls = self.reader.lookup(self.scope, _last(call.func), _src(call.func))
        if cls is None or not self.reader.is_benchmark(cls):
            return None
        chain = self.reader.chain(cls)

        def arg(name: str, position: int | None = None) -> ast.expr | None:
            value = _keyword(call, name)
            if value is None and position is not None and len(call.args) > position:
                value = call.args[position]
            if isinstance(value, ast.Name) and value.id in bound:
                value = bound[value.id]
            return value

        custom_init = any("__init__" in c.methods for c in chain if c.where != "<base>")
        dtypes_node = arg("dtypes", None if custom_init else 2)
        if dtypes_node is None:
            dtypes_node = next((c.default_dtypes for c in chain if c.default_dtypes is not None), None)
        dtypes = self.reader.dtypes.evaluate(dtypes_node, local) if dtypes_node is not None else None
        op_name = arg("op_name", 0)
        return BenchBuild(
            bench_class=cls.name,
            class_chain=tuple(c.name for c in chain),
            op_name=op_name.value if isinstance(op_name, ast.Constant) and isinstance(op_name.value, str) else "",
            is_backward=_bool(arg("is_backward")),
            is_inplace=_bool(arg("is_inplace")),
            dtypes=dtypes if dtypes is not None else (UNKNOWN,),
            reads_shape_file=_reads_shape_file(chain),
        )


# -- the tree ----------------------------------------------------------------------------------


class _Unreadable(Exception):
    def __init__(self, line: int, why: str) -> None:
        super().__init__(why)
        self.line = line
        self.why = why


def _source(path: Path) -> str:
    """A Python file's text, decoded as Python reads it (UTF-8); :class:`_Unreadable` names the
    line of the first byte that is not (OSError as it is)."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Unreadable(raw.count(b"\n", 0, exc.start) + 1, f"not UTF-8 text (byte {exc.start + 1})") from None


def _not_python(exc: SyntaxError | ValueError, text: str) -> _Unreadable:
    """Why ``ast.parse`` refused ``text``: a SyntaxError's line, or a NUL byte's (a ValueError
    on Python 3.11)."""
    if isinstance(exc, SyntaxError):
        return _Unreadable(exc.lineno or 1, f"does not parse ({exc.msg})")
    return _Unreadable(text.count("\n", 0, max(0, text.find("\0"))) + 1, f"does not parse ({exc})")


def _test_files(suite_dir: Path) -> list[Path]:
    """test_*.py at the top and one level down (test_FLA/), as FlagGems' own run collects them."""
    found = sorted(suite_dir.glob("test_*.py")) + sorted(suite_dir.glob("*/test_*.py"))
    return [p for p in found if p.is_file()]


def read_inventory(tree: SuiteTree, files: Iterable[Path] | None = None) -> Inventory:
    """Every benchmark function of ``tree`` (or of ``files`` in it). A test file that is not UTF-8
    or does not parse is listed in ``unreadable`` with its line (pytest would fail to collect it
    too); a base module that cannot be read is a ConfigError naming the file and the line: without
    it no benchmark class is known."""
    dtypes = _Dtypes()
    dtypes.known.update(_module_dtypes(tree.suite_dir / _CONSTS_MODULE[tree.layout], dtypes))
    try:
        text = _source(tree.base_module)
        try:
            base_tree = ast.parse(text)
        except (SyntaxError, ValueError) as exc:
            raise _not_python(exc, text) from None
    except _Unreadable as exc:
        raise ConfigError(f"--suite {tree.suite_dir}: {tree.base_module} line {exc.line}: {exc.why}; the "
                          "benchmark base module must be read to know any benchmark. Fix the file, or give "
                          "a FlagGems checkout that is whole.") from None
    except OSError as exc:
        raise ConfigError(f"--suite {tree.suite_dir}: {tree.base_module}: cannot read it "
                          f"({exc.strerror}).") from None
    base = {n.name: _Class.of(n, "<base>") for n in base_tree.body if isinstance(n, ast.ClassDef)}
    base_dtypes = _module_dtypes(tree.base_module, dtypes)
    dtypes.known.update({k: v for k, v in base_dtypes.items() if k not in dtypes.known})
    scopes: dict[str, _Scope] = {}
    unreadable: list[tuple[str, int, str]] = []
    for path in files if files is not None else _test_files(tree.suite_dir):
        name = path.relative_to(tree.suite_dir).as_posix()
        try:
            text = _source(path)
            try:
                scopes[name] = _Scope.parse(name, text)
            except (SyntaxError, ValueError) as exc:
                raise _not_python(exc, text) from None
        except _Unreadable as exc:
            unreadable.append((name, exc.line, exc.why))
        except OSError as exc:
            unreadable.append((name, 1, f"cannot be read ({exc.strerror})"))
    reader = _Reader(base, scopes, dtypes)
    functions: list[BenchFunction] = []
    uncollected: list[tuple[str, tuple[str, ...]]] = []
    for scope in scopes.values():
        file_reader = _FileReader(reader, scope)
        functions += file_reader.functions()
        uncollected += file_reader.uncollected()
    classes = {c.name for c in base.values() if reader.is_benchmark(c)}
    for scope in scopes.values():
        classes |= {c.name for c in scope.classes.values() if reader.is_benchmark(c)}
    return Inventory(tree=tree, functions=tuple(functions), class_names=frozenset(classes),
                     base_classes=frozenset(c.name for c in base.values() if reader.is_benchmark(c)),
                     uncollected=tuple(uncollected), unreadable=tuple(unreadable))
