"""The one options layer: CLI > environment (HARNESS_*) > [tool.harness] in pyproject.toml > defaults.

The environment arrives as a Mapping and is read nowhere else. Every value is
validated here, so code below works with frozen, well-typed values:

- ``resolve_run_options``: `harness run` (RunOptions; [tool.harness]).
- ``resolve_container_options``: the host side of `harness container run|plan|build`
  (ContainerOptions; [tool.harness.container]).
- ``resolve_history_db``: the SQLite file of `harness history` (``history-db`` in [tool.harness]).
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from harness.errors import ConfigError, UsageError
from harness.ops.base import DTYPES

__all__ = [
    "check_run_id",
    "CONTAINER_TABLE",
    "DEFAULT_HISTORY_DB",
    "ENV_PREFIX",
    "FLAGTUNE_CHOICES",
    "FLAGTUNE_ENV",
    "flagtune_env",
    "HISTORY_DB_ENV",
    "IMAGE_NAME",
    "IMAGE_POLICIES",
    "RESUME_OPTIONS",
    "resume_values",
    "ContainerOptions",
    "known_env_names",
    "unknown_env",
    "RunOptions",
    "PLUGIN_OPTIONS",
    "RUN_OPTIONS",
    "RunOption",
    "SUITE_HELP",
    "options_doc",
    "options_table",
    "SUITE_DTYPES",
    "check_dtypes_for_mode",
    "forwarded_run_env",
    "parse_user",
    "read_project_config",
    "read_pyproject",
    "resolve_container_options",
    "resolve_history_db",
    "resolve_run_options",
]

ENV_PREFIX = "HARNESS_"
LEVEL_CHOICES = ("auto", "smoke", "core", "comprehensive")
CACHE_CHOICES = ("cold", "warm")
PRESTART_CHOICES = ("auto", "on", "off")
PRESTART_DEPTH = 3  # default of --prestart-depth (1 to MAX_PRESTART_DEPTH)
MAX_PRESTART_DEPTH = 8
IR_CHOICES = ("on", "off", "full")  # full: SASS too (benchmarks/ir_overhead.py)
TRITON_CACHE_CHOICES = ("isolated", "user")
# Dtypes a suite run (--suite) passes through to FlagGems' benchmarks: every dtype torch names
# that FlagGems benchmarks (integers, bool, complex, fp64, fp8). Built-in ops take DTYPES only.
SUITE_DTYPES: tuple[str, ...] = (
    *DTYPES, "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
    "complex32", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "float8_e8m0fnu", "qint8", "quint8", "qint32",
)
IMAGE_POLICIES = ("auto", "pull", "build", "no-build")
FLAGTUNE_CHOICES = ("on", "off")
FLAGTUNE_ENV = "USE_FLAGTUNE"  # FlagGems reads it when its autotuned ops are defined: "1" is on
IMAGE_NAME = "triton-op-harness"
HISTORY_DB_ENV = ENV_PREFIX + "HISTORY_DB"
DEFAULT_HISTORY_DB = "reports/history.sqlite"
CONTAINER_TABLE = "container"  # [tool.harness.container]: the container runner's options
_CONTAINER_KEYS = ("registry", "image-policy", "base-images", "build-args", "wheels", "network", "seccomp",
                   "cap-add", "pids-limit", "shm-size")
CONTAINER_NETWORKS = ("none", "bridge")
SECCOMP_CHOICES = ("default", "unconfined")
DEFAULT_PIDS_LIMIT = 8192
# [tool.harness] keys that are not `harness run` options.
_OTHER_KEYS = ("history-db", CONTAINER_TABLE)
# RunOptions fields that must not cross into a container: paths and devices mean other
# things there, and the image fields are set by the container layer itself.
_NOT_FORWARDED = frozenset({"backend", "devices", "reports_dir", "out", "run_id", "image", "image_digest",
                            "sweep_devices"})


@dataclass(frozen=True)
class RunOptions:
    backend: str = "auto"
    ops: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = DTYPES
    level: str = "auto"  # smoke on the cpu backend, core on accelerators
    shapes_file: str | None = None
    ops_modules: tuple[str, ...] = ()
    provider: str = "builtin"
    timer: str = "auto"
    cache: str = "cold"
    seed: int = 0
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    cap_ms: float = 1000.0
    devices: tuple[str, ...] = ()
    op_timeout: float = 1800.0
    reports_dir: str = "reports"
    out: str | None = None
    run_id: str | None = None
    suite: str | None = None  # an upstream benchmark suite (FlagGems benchmark/) to run instead
    ops_file: str | None = None  # a text file of op ids, one per line (# comments)
    dismiss: str | None = None  # a YAML file mapping op id -> reason to skip it
    progress: str = "auto"  # auto (rich on a terminal), rich, plain
    image: str | None = None  # set by the container runner: the image this run is inside
    image_digest: str | None = None
    replay_from: str | None = None  # a run directory whose recorded autotune configs this run uses
    prestart: str = "auto"  # start a device's next op process early (held): auto (accelerators), on, off
    prestart_depth: int = PRESTART_DEPTH  # how many of a device's next ops are held at once (docs/batch.md)
    plugins: tuple[str, ...] = ()  # toggles of optional plugins: "-ir", "+mm_cluster" (harness.run.plugins)
    extra_plugins: tuple[str, ...] = ()  # pytest plugin modules added to every op process
    ir: str = "on"  # keep each compiled kernel's IR and metadata under RUN/ir; full: SASS too (docs/compile.md)
    triton_cache: str = "isolated"  # isolated: a Triton (and FlagGems) cache per run; user: the user's
    keep_triton_cache: bool = False  # keep RUN/triton-cache after the run
    sweep_devices: str | None = None  # N or device ids: tune autotuned ops over these first (docs/batch.md)
    shard: tuple[int, int] | None = None  # (K, N): run only the K-th of N parts of the ops (--shard K/N)
    nodes: tuple[str, ...] = ()  # --suite: FlagGems pytest nodes (FILE::FUNC[PARAMS]) to run, one op each
    allow_version_mismatch: bool = False  # --suite: run a tree whose major.minor differs from flag_gems'
    budget: float | None = None  # seconds after the ops start when no further op starts (--budget)
    shard_weights: str | None = None  # an earlier run's ops_status.csv: --shard parts balanced by its op times
    flagtune: str = "off"  # FlagGems' USE_FLAGTUNE in every op process: on (1, FlagTune's wider search) or off (0)
    table_colour: str = "off"  # --suite: FlagGems' printed table in the op's log with SUCCESS green, FAILED red

    def prestart_for(self, accelerator: bool) -> bool:
        """Whether to pre-start op processes: ``auto`` only on accelerators, where the held process's
        imports use spare CPU cores; on the CPU backend they would compete with the timing."""
        return self.prestart == "on" or (self.prestart == "auto" and accelerator)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}

    @classmethod
    def from_stored(cls, data: Any, source: str) -> RunOptions:
        """The options a run.json stored (``source`` names it); options this harness does not know
        (removed, or from a newer harness) are refused by name, not with a TypeError."""
        if not isinstance(data, Mapping):
            raise UsageError(f"{source}: 'options' is not a table of options; the file is damaged.")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UsageError(
                f"{source} was written with option(s) this harness does not know: {', '.join(unknown)} "
                "(removed, or from a newer harness). Resume it with the harness version that started it, "
                "or start a new run."
            )
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        try:
            return cls(**values)
        except TypeError as exc:
            raise UsageError(f"{source}: its options cannot be read ({exc}).") from None


def _csv(value: Any) -> tuple[str, ...]:
    """A list: a comma-separated string, or a list of strings (each may hold commas); at least
    one item. Another type (a pyproject ``ops = 5``) is refused."""
    if isinstance(value, str):
        items: list[str] = value.split(",")
    elif isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        items = [part for item in value for part in item.split(",")]
    else:
        raise ConfigError(f"must be a list of strings or a comma-separated string, got {value!r}.")
    out = tuple(part.strip() for part in items if part.strip())
    if not out:
        raise UsageError(f"names nothing ({value!r}); give at least one value, or leave the option out.")
    return out


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError
    number = float(value)
    if not math.isfinite(number):
        raise ValueError
    return number


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (``--repeats``, ``--window``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {text!r}")
    return value


def _positive_float(name: str) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        try:
            number = _finite(value)
        except (TypeError, ValueError, OverflowError):
            raise UsageError(f"{name} must be a finite number, got {value!r}.") from None
        if number <= 0:
            raise UsageError(f"{name} must be positive, got {value!r}.")
        return number

    return parse


def _int(name: str) -> Callable[[Any], int]:
    """A whole number: an int, or a string of digits (never a float, a bool or '1.5')."""

    def parse(value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            return int(value)
        raise UsageError(f"{name} must be a whole number, got {value!r}.")

    return parse


def _int_between(name: str, low: int, high: int) -> Callable[[Any], int]:
    whole = _int(name)

    def parse(value: Any) -> int:
        number = whole(value)
        if not low <= number <= high:
            raise UsageError(f"{name} must be from {low} to {high}, got {value!r}.")
        return number

    return parse


def _choice(name: str, choices: Sequence[str]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = value.strip().lower() if isinstance(value, str) else None
        if text is None or text not in choices:
            raise UsageError(f"Unknown {name} {value!r}. Choices: {', '.join(choices)}.")
        return text

    return parse


_DTYPE_ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32",
                  "fp64": "float64", "double": "float64", "long": "int64", "int": "int32", "short": "int16",
                  "cfloat": "complex64", "cdouble": "complex128", "fp8": "float8_e4m3fn"}


def _any_dtypes(value: Any) -> tuple[str, ...]:
    """Dtype names (aliases resolved) of SUITE_DTYPES; which of them a run may use depends on
    its mode (:func:`check_dtypes_for_mode`)."""
    result = []
    for item in _csv(value):
        name = _DTYPE_ALIASES.get(item.lower(), item.lower())
        if name not in SUITE_DTYPES:
            raise UsageError(
                f"Unknown dtype {item!r}. Dtypes: {', '.join(DTYPES)} (aliases fp16, bf16, fp32); with --suite "
                f"also {', '.join(d for d in SUITE_DTYPES if d not in DTYPES)}."
            )
        if name not in result:
            result.append(name)
    return tuple(result)


def _builtin_refusal(name: str) -> str:
    return (f"Unknown dtype {name!r} for the harness's own ops (they run {', '.join(DTYPES)}; aliases fp16, "
            f"bf16, fp32); {name} is passed through only to a library's own benchmarks (--suite).")


def _dtypes(value: Any) -> tuple[str, ...]:
    """Dtype names the harness's own ops run (DTYPES), aliases resolved."""
    names = _any_dtypes(value)
    other = next((d for d in names if d not in DTYPES), None)
    if other is not None:
        raise UsageError(_builtin_refusal(other))
    return names


def _nodes(value: Any) -> tuple[str, ...]:
    """pytest node ids: separated by white space in a string (an id may hold commas), or a list."""
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise UsageError(f"must be node ids (FILE::FUNC), as a list of strings; got {value!r}.")


def _str(value: Any) -> str:
    """A string that says something (a path, an id); another type or an empty string is refused."""
    if not isinstance(value, str):
        raise ConfigError(f"must be a string, got {value!r}.")
    if not value.strip():
        raise UsageError("is empty; give a value, or leave the option out.")
    return value


def _lower(value: Any) -> str:
    return _str(value).strip().lower()


def _backend(value: Any) -> str:
    """A backend name or alias (or auto), checked here so the message names where it came from."""
    from harness.backends import get_backend

    name = _lower(value)
    if name != "auto":
        get_backend(name)
    return name


def _timer(value: Any) -> str:
    from harness.run.plugins import TIMER_CHOICES

    return _choice("timer", TIMER_CHOICES)(value)


def _provider(value: Any) -> str:
    from harness.providers import check_provider

    return check_provider(_lower(value))


_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def check_run_id(value: Any) -> str:
    """One directory name under the reports directory: nothing that climbs out of it."""
    text = _str(value)
    if not _RUN_ID.fullmatch(text):
        raise UsageError(
            f"run id {text!r} must be one directory name (letters, digits, '.', '_', '-'; at most 200, "
            "not starting with '.' or '-'): it names REPORTS_DIR/RUN_ID/. To write elsewhere, give --out DIR."
        )
    return text


_DEVICE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9:._/-]*")


def _devices(value: Any) -> tuple[str, ...]:
    ids = _csv(value)
    for item in ids:
        if not _DEVICE_ID.fullmatch(item):
            raise UsageError(f"device id {item!r} is not a device id (an index such as 0, or a vendor id such "
                             "as GPU-1a2b...); give several as separate arguments or comma-separated.")
    repeated = sorted({d for d in ids if ids.count(d) > 1})
    if repeated:
        raise UsageError(f"names device(s) {', '.join(repeated)} more than once; name each device once.")
    return ids


def _bool(name: str) -> Callable[[Any], bool]:
    def parse(value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"{name} must be true or false (1/0, yes/no, on/off), got {value!r}.")

    return parse


def _toggles(value: Any) -> tuple[str, ...]:
    """Plugin toggles, each +NAME or -NAME (names are checked by harness.run.plugins)."""
    out: list[str] = []
    for item in _csv(value):  # a string or a list of strings; another type is refused by name
        for part in item.split():
            if len(part) < 2 or part[0] not in "+-" or not part[1:].replace("_", "").isalnum():
                raise UsageError(
                    f"plugin toggle {part!r} is not +NAME or -NAME; for example --plugins -ir +wall. "
                    "`harness plugins` lists the names."
                )
            out.append(part)
    return tuple(out)


def _modules(value: Any) -> tuple[str, ...]:
    """Dotted module names of extra pytest plugins (checked for existence by harness.run.plugins)."""
    names = _csv(value)
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise UsageError(
                f"extra plugin {name!r} is not a dotted module name (a path is not accepted); give the "
                "module as Python imports it, for example my_plugins.timing, with its folder on PYTHONPATH."
            )
    return names


def _sweep(value: Any) -> str:
    """N (a count of sweep processes) or device ids separated by commas."""
    if isinstance(value, bool):
        raise ConfigError(f"must be a count (2) or device ids ('0,1'), got {value!r}.")
    text = ",".join(_csv(value)) if not isinstance(value, int) else str(value)
    if not text:
        raise UsageError("--sweep-devices needs a count (2) or device ids (0,1).")
    if text.isdigit() and int(text) < 1:
        raise UsageError(f"--sweep-devices {text}: the count must be at least 1.")
    bad = next((item for item in text.split(",") if not _DEVICE_ID.fullmatch(item)), None)
    if bad is not None:
        raise UsageError(f"--sweep-devices {text}: {bad!r} is not a device id (an index such as 0, or a vendor "
                         "id such as GPU-1a2b...); give a count (2) or device ids (0,1).")
    return text


def _shard(value: Any) -> tuple[int, int]:
    """``K/N`` (1 <= K <= N): the K-th of N parts of the run's ops, for N machines."""
    if isinstance(value, list | tuple) and len(value) == 2:  # a stored run.json holds [K, N]
        value = f"{value[0]}/{value[1]}"
    text = str(value).strip()
    index, sep, count = text.partition("/")
    if not (sep and index.strip().isdigit() and count.strip().isdigit()):
        raise UsageError(
            f"shard {value!r} is not K/N. Give the part to run and the number of parts, "
            "for example --shard 2/3 (the second of three)."
        )
    k, n = int(index), int(count)
    if n < 1 or not 1 <= k <= n:
        raise UsageError(
            f"shard {text}: K must be between 1 and N (N at least 1); the parts of --shard K/{max(n, 2)} "
            f"are 1/{max(n, 2)} to {max(n, 2)}/{max(n, 2)}."
        )
    return k, n


# -- the option table of `harness run` ------------------------------------------------------


@dataclass(frozen=True)
class RunOption:
    """One option of `harness run`: its flag, environment variable and [tool.harness] key (all
    derived from ``name`` unless given), how its value is read, its default and help. The
    parser (harness.runargs), the environment and pyproject readers (:func:`resolve_run_options`),
    docs/options.md (:func:`options_table`) and the bad-input coverage test all read this table."""

    name: str  # the RunOptions field; "" for a flag that only says what to do (--resume)
    help: str  # "{backends}" and "{max_depth}"/"{depth}" are filled in by the parser
    parse: Callable[[Any], Any] | None = None  # None: a flag only, never layered
    flag: str = ""  # default --<name with dashes>
    dest: str = ""  # the argparse destination when it differs from name (a flag only)
    metavar: str | None = None
    nargs: str | None = None
    action: str | None = None  # store_true, append
    argtype: type | None = None  # what argparse converts the flag's text to (int, float)
    default_doc: str = ""  # the default as docs/options.md says it; "" renders RunOptions' default
    env_name: str = ""  # default HARNESS_<NAME>
    key_name: str = ""  # default <name with dashes>

    @property
    def option_flag(self) -> str:
        return self.flag or f"--{_dashed(self.name or self.dest)}"

    @property
    def has_flag(self) -> bool:
        return self.flag != "-"

    @property
    def layered(self) -> bool:
        """Whether the environment and [tool.harness] may set it too."""
        return self.parse is not None

    @property
    def env(self) -> str | None:
        return (self.env_name or ENV_PREFIX + self.name.upper()) if self.layered else None

    @property
    def key(self) -> str | None:
        return (self.key_name or _dashed(self.name)) if self.layered else None

    @property
    def destination(self) -> str:
        return self.dest or self.name

    def default_text(self) -> str:
        if self.default_doc:
            return self.default_doc
        if not self.layered:
            return "(a flag only)"
        value = {f.name: f.default for f in fields(RunOptions)}[self.name]
        if isinstance(value, bool):
            return "`true`" if value else "`false`"
        if isinstance(value, float):
            return f"`{value:g}`"
        if value is None or value == ():
            return "none"
        return f"`{', '.join(value) if isinstance(value, tuple) else value}`"


SUITE_HELP = ("run FlagGems' own benchmark suite instead of the harness's cases: PATH is the benchmark/ "
              "directory of a FlagGems tree (v5.3+ or v5.0.x layout, or FlagGems-vllm) at the tag of the "
              "installed package; select with --ops (its benchmark names), --node or --all; FlagGems' own "
              "shapes at --level core|comprehensive; timed by the harness's timers, outputs checked "
              "against torch's; rows have provider flaggems-suite (docs/flaggems.md)")

# In the order `harness run --help` lists them.
RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("backend", "backend or alias: {backends} (default: auto)", _backend),
    RunOption("ops", "op ids (default: every op); see `harness list ops`", _csv, nargs="+", metavar="OP",
              default_doc="every op"),
    RunOption("dtypes", "float16 bfloat16 float32 (aliases fp16 bf16 fp32; default: all three); with --suite also "
              "float64, int8..int64, uint8, bool, complex64/128, float8_e4m3fn... (default: each benchmark's own)",
              _any_dtypes, nargs="+", metavar="DTYPE",  # the mode decides which (check_dtypes_for_mode)
              default_doc="`float16, bfloat16, float32`; with `--suite`: each benchmark's own (any dtype "
                          "FlagGems benchmarks is accepted there)"),
    RunOption("level", "shape level: smoke, core, comprehensive, or auto (smoke on cpu, core on accelerators; "
              "with --suite: FlagGems' core or comprehensive, auto = core)", _choice("level", LEVEL_CHOICES),
              default_doc="`auto` (smoke on cpu, core on accelerators)"),
    RunOption("shapes_file", "YAML mapping op id -> list of shapes; overrides the level for the ops it names", _str),
    RunOption("ops_modules", "load extra ops from a Python file or module defining HARNESS_OPS (repeatable); "
              "see docs/ops.md", _csv, flag="--ops-module", action="append", metavar="PATH_OR_MODULE"),
    RunOption("provider", "where candidates come from (default: builtin)", _provider),
    RunOption("timer", "auto, graph, direct, profiler, cpu (default: auto = graph where the backend captures "
              "device graphs, direct where it only has events, cpu on the cpu backend; docs/timing.md)", _timer),
    RunOption("cache", "cold (flush L2 before each timed call, default) or warm", _choice("cache mode", CACHE_CHOICES)),
    RunOption("seed", "base seed; each case derives its own (default 0)", _int("seed"), argtype=int),
    RunOption("warmup_ms", "warm-up budget per measurement in ms (default 25)", _positive_float("warmup (ms)"),
              argtype=float),
    RunOption("rep_ms", "measurement budget per timing in ms (default 100)", _positive_float("rep (ms)"), argtype=float),
    RunOption("cap_ms", "most ms one timing samples when its spread does not settle (default 1000; docs/timing.md)",
              _positive_float("cap (ms)"), argtype=float),
    RunOption("devices", "device ids to deal ops over (default: the backend's visible devices)", _devices,
              nargs="+", metavar="ID", default_doc="the backend's visible devices"),
    RunOption("gpus", "the old driver's name of --devices, an alias of it (giving both is refused)", nargs="+",
              metavar="ID", dest="gpus", default_doc="the old driver's name of `--devices`, an alias of it (giving both is refused, exit 2)"),
    RunOption("op_timeout", "seconds before a hung op's process group is killed (default 1800)",
              _positive_float("op timeout (s)"), argtype=float),
    RunOption("shard_weights", "with --shard: balance the parts by the op times (elapsed_s) of an earlier run's "
              "ops_status.csv, such as last night's; every part must be given the same file", _str,
              metavar="OPS_STATUS_CSV",
              default_doc="none (with `--shard`: an earlier run's ops_status.csv; the parts are balanced by its "
                          "`elapsed_s`, ops it lacks at the rate the others show)"),
    RunOption("budget", "no op starts this long after the ops began; the ops left end as not run (cause: "
              "environment, budget) and `harness run --resume` runs them; given with --resume, that session's "
              "budget (default: no budget)",
              _positive_float("budget (s)"), metavar="SECONDS",
              default_doc="none (seconds; no op starts after it, the rest end not run and `--resume` runs them, "
                          "with a new `--budget` if given)"),
    RunOption("reports_dir", "where run directories are created (default: reports)", _str),
    RunOption("out", "exact run directory (default: REPORTS_DIR/RUN_ID)", _str, default_doc="`REPORTS_DIR/RUN_ID`"),
    RunOption("run_id", "run id (default: UTC time, backend and a random token)", check_run_id,
              default_doc="UTC time, backend, a random token"),
    RunOption("", "every known op (the default when neither --ops nor --ops-file is given)", dest="all",
              action="store_true", default_doc="(a flag only; every op is also the default)"),
    RunOption("ops_file", "text file of op ids, one per line (# starts a comment)", _str),
    RunOption("dismiss", "YAML file mapping op id -> reason; those ops are skipped and the reason recorded", _str),
    RunOption("progress", "auto (live display on a terminal), rich, or plain lines",
              _choice("progress mode", ("auto", "rich", "plain"))),
    RunOption("prestart", "auto (default: on for accelerators, off on the cpu backend), on or off: start each "
              "device's next op process while the current op runs, held before it touches the device, so its "
              "imports (5 s a process on the H200 machine, 9-11 s with FlagGems) overlap",
              _choice("prestart mode", PRESTART_CHOICES)),
    RunOption("prestart_depth", "how many of a device's next ops are pre-started at once (1-{max_depth}, default "
              "{depth}): an op process's preparation (imports, the profiler's warm-up: 10-15 s on the H200 "
              "machine) overlaps that many ops before it, so short ops do not wait for it",
              _int_between("prestart depth", 1, MAX_PRESTART_DEPTH), metavar="N",
              default_doc=f"`{PRESTART_DEPTH}` (1-{MAX_PRESTART_DEPTH})"),
    RunOption("replay_from", "use the autotune configs recorded by an earlier run of the same backend instead of "
              "tuning; a key it lacks is tuned live and its row says replay-miss (docs/compare.md)", _str,
              metavar="RUN_DIR"),
    RunOption("suite", SUITE_HELP, _str, metavar="PATH"),
    RunOption("flagtune", "on or off (default off, or as USE_FLAGTUNE=1|0 says): FlagGems' USE_FLAGTUNE in every "
              "op process, FlagTune's wider autotune search; recorded in run.json, and `harness ab` refuses sides "
              "that differ in it unless it is the switch (docs/flaggems.md)", _choice("FlagTune mode", FLAGTUNE_CHOICES),
              default_doc="`off`, or as the old `USE_FLAGTUNE` (1 or 0) says when no layer sets it: FlagGems' "
                          "`USE_FLAGTUNE` in every op process (docs/flaggems.md)"),
    RunOption("table_colour", "on or off (default): with --suite, FlagGems' printed result table in each op's log "
              "has SUCCESS in green and FAILED in red (its Size Detail is folded either way)",
              _choice("table colour", ("on", "off")),
              default_doc="`off` (with `--suite`: `on` colours SUCCESS green and FAILED red in FlagGems' printed "
                          "table in each op's log; docs/flaggems.md)"),
    RunOption("plugins", "turn optional plugins on or off: -ir -autotune -wall +skipguards +mm_cluster "
              "(`harness plugins` lists them and what each does by default here)", _toggles, nargs="+",
              metavar="TOGGLE", default_doc="none (toggles such as `-ir +wall`)"),
    RunOption("extra_plugins", "also load this pytest plugin module in every op process (repeatable)", _modules,
              flag="--extra-plugin", action="append", metavar="MODULE"),
    RunOption("ir", "on (default where Triton compiles), full (SASS too) or off: keep each compiled kernel's IR, "
              "metadata and compile time under RUN/ir/<op>/<case>/ (docs/compile.md)",
              _choice("IR capture mode", IR_CHOICES)),
    RunOption("triton_cache", "isolated (default: a Triton and FlagGems cache of this run's own, so it compiles "
              "and tunes what it measures) or user (the usual caches)",
              _choice("Triton cache mode", TRITON_CACHE_CHOICES)),
    RunOption("keep_triton_cache", "keep the run's own cache (RUN/triton-cache) after the run",
              _bool("keep-triton-cache"), action="store_true", default_doc="off"),
    RunOption("sweep_devices", "tune each autotuned op first over N processes or these devices (ids, repeats "
              "allowed), then measure it on one device replaying the configs (docs/batch.md)", _sweep,
              metavar="N|IDS"),
    RunOption("nodes", "with --suite: run exactly these pytest nodes of the suite (test_mm.py::test_mm, "
              "parameters in [...] allowed), one op each", _nodes, flag="--node", nargs="+", metavar="FILE::FUNC",
              default_doc="none (with `--suite`: pytest node ids, one op each)"),
    RunOption("allow_version_mismatch", "with --suite: run even when the installed flag_gems' major.minor differs "
              "from the tree's", _bool("allow-version-mismatch"), action="store_true",
              default_doc="`false` (with `--suite`)"),
    RunOption("", "finish an interrupted run: redo only ops without a completion marker", dest="resume",
              metavar="RUN_DIR", default_doc="(a flag only: it names what to do, not how)"),
    RunOption("", "with --resume: also run again, from their first case, the ops that ended FAIL, ERROR, CRASH "
              "or TIMEOUT (their records are replaced)", dest="retry_failed", action="store_true",
              default_doc="(a flag only, with `--resume`: the ops that did not pass run again)"),
    RunOption("shard", "run only the K-th of N parts of the selected ops (cost-weighted, the same parts on every "
              "machine); join the N runs with `harness merge` (docs/compare.md)", _shard, metavar="K/N",
              default_doc="none (the whole run; `K/N` runs the K-th of N parts, joined by `harness merge`)"),
    # No flag: the container runner sets them to say which image a run is in.
    RunOption("image", "the image this run is inside (set by the container runner)", _str, flag="-"),
    RunOption("image_digest", "the digest of that image (set by the container runner)", _str, flag="-"),
)
PLUGIN_OPTIONS = ("plugins", "extra_plugins")  # `harness plugins` takes these two as well
# What `harness run --resume` may be given anew: how it shows progress, and how long this session
# may start ops for (a night resumed in a later window gets that window's budget, not the first one's).
RESUME_OPTIONS = ("progress", "budget")


def resume_values(cli: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`RESUME_OPTIONS` the command line gave with ``--resume`` (``cli``: by option
    name, None where not given), each checked as a new run's is."""
    return {o.name: _parse(_PARSERS[o.name], cli[o.name], o.option_flag) for o in RUN_OPTIONS
            if o.name in RESUME_OPTIONS and cli.get(o.name) is not None}


_PARSERS: dict[str, Callable[[Any], Any]] = {o.name: o.parse for o in RUN_OPTIONS if o.parse is not None}


def _flagtune_variable(value: str) -> str:
    """USE_FLAGTUNE as FlagGems reads it: 1 is on, 0 is off; anything else is refused, since
    FlagGems would read it as off whatever was meant."""
    mode = {"1": "on", "0": "off"}.get(value.strip())
    if mode is None:
        raise UsageError(f"{value!r} is neither 1 (FlagTune on) nor 0 (off). Set it to 1 or 0, or give --flagtune on|off.")
    return mode


def flagtune_env(options: RunOptions) -> dict[str, str]:
    """What every op process's environment gets for ``options.flagtune``: FlagGems' own variable."""
    return {FLAGTUNE_ENV: "1" if options.flagtune == "on" else "0"}




def _text(name: str) -> Callable[[Any], str]:
    """A string as given (pyproject values may be other TOML types: those are refused)."""

    def parse(value: Any) -> str:
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be a string, got {value!r}.")
        return value

    return parse


def _paths(value: Any) -> tuple[Path, ...]:
    """Directories: a string is os.pathsep-separated (as HARNESS_WHEELS); a list names one each."""
    if isinstance(value, str):
        return tuple(Path(p) for p in value.split(os.pathsep) if p)
    if isinstance(value, list | tuple) and all(isinstance(p, str) for p in value):
        return tuple(Path(p) for p in value if p)
    raise ConfigError(f"wheels must be a list of directories, got {value!r}.")


def read_pyproject(path: Path) -> dict[str, Any]:
    """The [tool.harness] table of a pyproject.toml, or {} when there is none."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror}).") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}). Fix the file.") from None
    tool = data.get("tool", {})
    table = tool.get("harness", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.harness] must be a table, got {table!r}.")
    return table


def read_project_config() -> dict[str, Any]:
    """The [tool.harness] table of ./pyproject.toml: the pyproject layer of every command."""
    return read_pyproject(Path("pyproject.toml"))


def _dashed(key: str) -> str:
    return key.replace("_", "-")


def _config_value(table: Mapping[str, Any], key: str) -> Any:
    """A pyproject key spelt with _ or - (the _ spelling wins); None when absent."""
    under = key.replace("-", "_")
    return table.get(under, table.get(_dashed(key)))


def _container_table(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """[tool.harness.container], checked: a table of known keys ({} when absent)."""
    table = config.get(CONTAINER_TABLE, {})
    if not isinstance(table, dict):
        raise ConfigError(
            f"[tool.harness] {CONTAINER_TABLE} must be a table ([tool.harness.container]), got {table!r}."
        )
    unknown = [k for k in table if _dashed(k) not in _CONTAINER_KEYS]
    if unknown:
        raise ConfigError(
            f"[tool.harness.container] has unknown key(s): {', '.join(unknown)}. "
            f"Known keys: {', '.join(_CONTAINER_KEYS)}."
        )
    return table


def _check_keys(config: Mapping[str, Any]) -> None:
    """Every command checks the whole [tool.harness] table, so a misspelt key or a value of the
    wrong type never passes silently, whichever command reads it."""
    known = [_dashed(k) for k in _PARSERS] + list(_OTHER_KEYS)
    unknown = [k for k in config if _dashed(k) not in known]
    if unknown:
        raise ConfigError(
            f"[tool.harness] has unknown key(s): {', '.join(unknown)}. Known keys: {', '.join(known)}."
        )
    for name, parse in _PARSERS.items():
        value = _config_value(config, name)
        if value is not None:
            _parse(parse, value, f"[tool.harness] {_dashed(name)}")
    db = _config_value(config, "history-db")
    if db is not None:
        _parse(_text("the history database"), db, "[tool.harness] history-db")
    _container_table(config)


@dataclass(frozen=True)
class _Layers:
    """The sources of one group of options, highest first: flags given, environment, a pyproject table."""

    cli: Mapping[str, Any]  # only the flags the user gave (None, () or [] mean not given)
    env: Mapping[str, str]
    table: Mapping[str, Any]
    table_name: str  # "[tool.harness]" or "[tool.harness.container]", for messages

    def pick(self, cli_key: str, flag: str, env_key: str, table_key: str) -> tuple[Any, str]:
        """The raw value of the highest layer that sets the option and where it came from,
        or (None, "") when none does."""
        if self.cli.get(cli_key) not in (None, (), []):
            return self.cli[cli_key], flag
        if self.env.get(env_key, "") != "":
            return self.env[env_key], env_key
        value = _config_value(self.table, table_key)
        if value is not None:
            return value, f"{self.table_name} {_dashed(table_key)}"
        return None, ""


def _parse(parse: Callable[[Any], Any], raw: Any, source: str) -> Any:
    """Validate a raw value; the error names where the value came from."""
    try:
        return parse(raw)
    except UsageError as exc:
        raise type(exc)(f"{source}: {exc.message}") from None


# -- harness run ----------------------------------------------------------------------------


def resolve_run_options(
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
) -> RunOptions:
    """Merge the layers; ``cli`` holds only the flags the user gave (None means not given)."""
    table = dict(config or {})
    _check_keys(table)
    layers = _Layers(cli, env, table, "[tool.harness]")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in RUN_OPTIONS:
        if option.parse is None or option.env is None or option.key is None:
            continue  # a flag only: cli.py reads it
        raw, source = layers.pick(option.name, option.option_flag, option.env, option.key)
        if raw is not None:
            values[option.name] = _parse(option.parse, raw, source)
            sources[option.name] = source
    if "flagtune" not in values and env.get(FLAGTUNE_ENV, "") != "":  # the old driver's variable, read last
        values["flagtune"] = _parse(_flagtune_variable, env[FLAGTUNE_ENV], FLAGTUNE_ENV)
    return check_dtypes_for_mode(RunOptions(**values), source=sources.get("dtypes"))


def check_dtypes_for_mode(options: RunOptions, source: str | None = "--dtypes") -> RunOptions:
    """Built-in ops run DTYPES only; a suite run passes any of SUITE_DTYPES through to FlagGems,
    and without --dtypes (``source`` None: not given) it runs every dtype each benchmark declares
    (``dtypes`` empty)."""
    if options.suite:
        return options if source is not None else replace(options, dtypes=())
    other = next((d for d in options.dtypes if d not in DTYPES), None)
    if other is not None:
        raise UsageError(f"{source or '--dtypes'}: {_builtin_refusal(other)}")
    return options


# Run options that name files: forwarded into a container relative to the checkout (mounted there
# as the working directory), so they name the same files inside.
_PATH_OPTIONS = ("shapes_file", "ops_modules", "ops_file", "dismiss", "replay_from", "suite", "shard_weights")


def _is_path(item: str) -> bool:
    return "/" in item or item.endswith((".py", ".yaml", ".yml", ".txt", ".json")) or Path(item).exists()


def _inside_checkout(key: str, value: str, repo_dir: Path, cwd: Path) -> str:
    """``value`` (one path, or ops_modules' comma-separated list) as paths relative to the checkout;
    a path outside it means nothing inside the container and is refused."""
    items = value.split(",") if key == ENV_PREFIX + "OPS_MODULES" else [value]
    kept = []
    for item in (i.strip() for i in items):
        if not item or (key == ENV_PREFIX + "OPS_MODULES" and not _is_path(item)):
            kept.append(item)  # a dotted module name: imported inside as outside
            continue
        where = (cwd / item).resolve()
        if not where.is_relative_to(repo_dir.resolve()):
            raise UsageError(
                f"{key}={value}: {item} is outside the checkout {repo_dir}, and a container sees only the "
                "checkout (and reports/). Put the file in the checkout, or unset the variable."
            )
        kept.append(str(where.relative_to(repo_dir.resolve())))
    return ",".join(kept)


def forwarded_run_env(env: Mapping[str, str], repo_dir: Path | None = None, cwd: Path | None = None
                      ) -> dict[str, str]:
    """The HARNESS_* run options of the host that mean the same inside a container, and FlagGems'
    USE_FLAGTUNE (the harness reads it last, where no layer sets --flagtune: forwarded as it is,
    the container's harness gives it the same place).

    `HARNESS_LEVEL=core nox -s bench-cpu` then behaves like the host run. Output paths,
    devices and the backend are not forwarded (see ``_NOT_FORWARDED``). Options that name files
    (:data:`_PATH_OPTIONS`) are, rewritten relative to the checkout (``repo_dir``, mounted as the
    container's working directory; host paths relative to ``cwd``); one outside the checkout is
    refused. The pyproject layer needs no forwarding: the container reads the mounted checkout's.
    """
    keys = [ENV_PREFIX + f.name.upper() for f in fields(RunOptions) if f.name not in _NOT_FORWARDED]
    forwarded = {key: env[key] for key in keys + [FLAGTUNE_ENV] if env.get(key, "") != ""}
    if repo_dir is not None:
        for name in _PATH_OPTIONS:
            key = ENV_PREFIX + name.upper()
            if key in forwarded:
                forwarded[key] = _inside_checkout(key, forwarded[key], repo_dir, cwd or Path.cwd())
    return forwarded


# -- HARNESS_* variables that are not the harness's -------------------------------------------

# Set by the harness for its op processes (harness.contract) and by its own test suite; not options.
_OTHER_ENV = ("HARNESS_PARENT_PID", "HARNESS_RUN_MARK", "HARNESS_OP_MARK", "HARNESS_SWEEP_SHARD",
              "HARNESS_REQUIRE_DOCKER", "HARNESS_LOCAL_BASE", "HARNESS_REQUIRE_BROWSER", "HARNESS_CHROMIUM",
              "HARNESS_SCREENSHOT_DIR")
# Flags with no environment form (they say what to do, not how).
_FLAG_ONLY = {ENV_PREFIX + o.destination.upper(): o.option_flag for o in RUN_OPTIONS if not o.layered}
_CONTAINER_ENV = ("HARNESS_REGISTRY", "HARNESS_IMAGE_POLICY", "HARNESS_BUILD_ARGS", "HARNESS_WHEELS",
                  "HARNESS_CONTAINER_NETWORK", "HARNESS_SECCOMP", "HARNESS_CAP_ADD", "HARNESS_PIDS_LIMIT",
                  "HARNESS_SHM_SIZE")


def known_env_names() -> tuple[str, ...]:
    """Every HARNESS_* variable the harness reads (or sets), for the check of the environment."""
    from harness.backends import BACKENDS

    return (tuple(ENV_PREFIX + name.upper() for name in _PARSERS) + (HISTORY_DB_ENV,) + _CONTAINER_ENV
            + tuple(f"HARNESS_BASE_IMAGE_{b.name.upper()}" for b in BACKENDS) + _OTHER_ENV)


def unknown_env(env: Mapping[str, str]) -> list[str]:
    """One warning per HARNESS_* variable the harness does not read (a misspelt option must not
    pass silently); each names the variable, what happens (nothing) and the likely fix."""
    known = known_env_names()
    warnings = []
    for key in sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in known):
        if key in _FLAG_ONLY:
            fix = f"{_FLAG_ONLY[key]} has no environment form: give it on the command line"
        else:
            names = {k.removeprefix(ENV_PREFIX): k for k in known}
            close = difflib.get_close_matches(key.removeprefix(ENV_PREFIX), list(names), n=1, cutoff=0.75)
            fix = (f"did you mean {names[close[0]]}?" if close
                   else "the options and their variables: docs/options.md")
        warnings.append(f"{key} is not a harness variable and is ignored; {fix}")
    return warnings


# -- harness history ------------------------------------------------------------------------


def resolve_history_db(
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
) -> Path:
    """The history database: --db (``cli["db"]``), else HARNESS_HISTORY_DB, else
    ``history-db`` in [tool.harness], else reports/history.sqlite."""
    table = dict(config or {})
    _check_keys(table)
    layers = _Layers(cli, env, table, "[tool.harness]")
    raw, source = layers.pick("db", "--db", HISTORY_DB_ENV, "history-db")
    if raw is None:
        return Path(DEFAULT_HISTORY_DB)
    path = _parse(_text("the history database"), raw, source)
    if not path.strip():
        raise ConfigError(f"{source}: the history database must be a file path, got an empty string.")
    return Path(path)


# -- harness container ----------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerOptions:
    """The host side of a container run (which image, which devices, what crosses in).

    The options of `harness run` itself are resolved again inside the container.
    """

    repo_dir: Path
    reports_dir: Path
    registry: str | None = None
    policy: str = "auto"
    base_images: tuple[tuple[str, str], ...] = ()  # (backend, image), for the backends asked for
    build_args: tuple[tuple[str, str], ...] = ()
    wheel_dirs: tuple[Path, ...] = ()
    devices: tuple[str, ...] | None = None  # host device ids given with --devices
    device_root: str = "/"
    user: tuple[int, int] | None = None  # None: the caller's uid:gid
    image_name: str = IMAGE_NAME
    forwarded_env: tuple[tuple[str, str], ...] = ()  # HARNESS_* run options that cross into the container
    # What the container may do beyond computing (docs/containers.md, "Hardening"): the defaults
    # allow nothing more.
    network: str = "none"
    seccomp: str = "default"
    cap_add: tuple[str, ...] = ()
    pids_limit: int = DEFAULT_PIDS_LIMIT
    shm_size: str | None = None  # None: the backend's size, else the harness default
    code_dir: Path | None = None  # the tree mounted at /repo, when not repo_dir (the gate's sides)

    def base_image(self, backend: str) -> str | None:
        return dict(self.base_images).get(backend)


def parse_user(value: str) -> tuple[int, int]:
    uid, sep, gid = value.partition(":")
    if not (uid.isdigit() and sep and gid.isdigit()):
        raise UsageError(f"--user {value!r} must be numeric UID:GID, for example 1000:1000.")
    if int(uid) == 0:
        raise UsageError(f"--user {value}: the container never runs as root. Give a non-root UID:GID, "
                         "or leave --user out (a root caller runs as 65532:65532 inside).")
    return int(uid), int(gid)


_CAP = re.compile(r"^(CAP_)?[A-Z_]{2,32}$")
_SIZE = re.compile(r"^[1-9][0-9]*[bkmg]?$")


def _hardening(layers: _Layers) -> dict[str, Any]:
    """network, seccomp, cap-add, pids-limit and shm-size: each from the highest layer that sets it."""
    values: dict[str, Any] = {}
    raw, source = layers.pick("network", "--network", "HARNESS_CONTAINER_NETWORK", "network")
    if raw is not None:
        values["network"] = _parse(_choice("container network", CONTAINER_NETWORKS), raw, source)
    raw, source = layers.pick("seccomp", "--seccomp", "HARNESS_SECCOMP", "seccomp")
    if raw is not None:
        values["seccomp"] = _parse(_choice("seccomp mode", SECCOMP_CHOICES), raw, source)
    raw, source = layers.pick("cap_add", "--cap-add", "HARNESS_CAP_ADD", "cap-add")
    if raw is not None:
        caps = _parse(_csv, raw.replace(" ", ",") if isinstance(raw, str) else raw, source)
        bad = [c for c in caps if not _CAP.match(c.upper()) or c.upper() in ("ALL", "CAP_ALL")]
        if bad:
            raise UsageError(f"{source}: {', '.join(bad)} is not a capability name (for example "
                             "SYS_NICE); ALL is never added back.")
        values["cap_add"] = tuple(c.upper().removeprefix("CAP_") for c in caps)
    raw, source = layers.pick("pids_limit", "--pids-limit", "HARNESS_PIDS_LIMIT", "pids-limit")
    if raw is not None:
        limit = _parse(_int("pids limit"), raw, source)
        if limit < 64:
            raise UsageError(f"{source}: pids limit {limit} is too small to start the harness (64 at least).")
        values["pids_limit"] = limit
    raw, source = layers.pick("shm_size", "--shm-size", "HARNESS_SHM_SIZE", "shm-size")
    if raw is not None:
        size = str(raw).strip().lower()
        if not _SIZE.match(size):
            raise UsageError(f"{source}: shm size {raw!r} is not a size such as 2g or 512m.")
        values["shm_size"] = size
    return values


def _registry(layers: _Layers) -> str | None:
    raw, source = layers.pick("registry", "--registry", "HARNESS_REGISTRY", "registry")
    if raw is None:
        return None
    return _parse(_text("registry"), raw, source).strip().rstrip("/") or None


def _policy(layers: _Layers, registry: str | None) -> str:
    flag = f"--{layers.cli.get('policy')}"
    raw, source = layers.pick("policy", flag, "HARNESS_IMAGE_POLICY", "image-policy")
    if raw is None:
        return "auto"
    policy: str = _parse(_choice("image policy", IMAGE_POLICIES), raw, source)
    if policy == "pull" and not registry:
        raise UsageError(
            f"{source}: image policy pull needs a registry to pull from: give --registry HOST/PATH, "
            "set HARNESS_REGISTRY or registry in [tool.harness.container], or choose another policy "
            "(auto, the default, builds the image locally)."
        )
    return policy


def _split_pairs(items: Sequence[str], source: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"{source}: build argument {item!r} is not KEY=VALUE. "
                "Example: --build-arg TRITON_PACKAGE=triton-ascend==3.2.0."
            )
        pairs[key.strip()] = value
    return pairs


def _string_table(layers: _Layers, key: str, example: str) -> dict[str, str]:
    """A pyproject sub-table of strings ({} when absent)."""
    value = _config_value(layers.table, key)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(
            f"{layers.table_name} {key} must be a table of strings, for example {example}; got {value!r}."
        )
    return {str(k).strip(): v for k, v in value.items()}


def _build_args(layers: _Layers) -> tuple[tuple[str, str], ...]:
    """Merged key by key: --build-arg over HARNESS_BUILD_ARGS over [tool.harness.container] build-args."""
    merged = _string_table(layers, "build-args", 'build-args = { TRITON_PACKAGE = "triton-ascend==3.2.0" }')
    merged.update(_split_pairs(layers.env.get("HARNESS_BUILD_ARGS", "").split(), "HARNESS_BUILD_ARGS"))
    merged.update(_split_pairs(list(layers.cli.get("build_args") or ()), "--build-arg"))
    return tuple(merged.items())


def _table_base_images(layers: _Layers, backends: Sequence[str]) -> dict[str, str]:
    from harness.backends import BACKENDS

    table = _string_table(layers, "base-images", 'base-images = { rocm = "mirror.local/rocm/pytorch:7.2" }')
    names = [b.name for b in BACKENDS]
    unknown = [k for k in table if k not in names]
    if unknown:
        raise ConfigError(
            f"{layers.table_name} base-images: unknown backend(s) {', '.join(unknown)}. "
            f"Backends: {', '.join(names)}."
        )
    return {k: v for k, v in table.items() if k in backends}


def _cli_base_images(items: Sequence[str], backends: Sequence[str]) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for item in items:
        backend, sep, image = item.partition("=")
        if sep and backend in backends:
            chosen[backend] = image
        elif not sep and len(backends) == 1:
            chosen[backends[0]] = item
        else:
            raise UsageError(
                f"--base-image {item!r}: say which backend it is for, as BACKEND=IMAGE "
                f"(backends here: {', '.join(backends)})."
            )
    return chosen


def _base_images(layers: _Layers, backends: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Per backend: --base-image over HARNESS_BASE_IMAGE_<BACKEND> over [tool.harness.container] base-images."""
    chosen = _table_base_images(layers, backends)
    for name in backends:
        value = layers.env.get(f"HARNESS_BASE_IMAGE_{name.upper()}", "").strip()
        if value:
            chosen[name] = value
    chosen.update(_cli_base_images(list(layers.cli.get("base_images") or ()), backends))
    return tuple(sorted(chosen.items()))


def _local_dirs(find_links: str) -> tuple[Path, ...]:
    """Local directories among pip's find-links (URLs to other hosts are left to pip)."""
    dirs: list[Path] = []
    for item in find_links.split():
        path = urlparse(item).path if item.startswith("file:") else item
        if "://" not in path and Path(path).is_dir():
            dirs.append(Path(path))
    return tuple(dirs)


def _wheel_dirs(layers: _Layers) -> tuple[Path, ...]:
    """--wheels, HARNESS_WHEELS, [tool.harness.container] wheels; default: pip's local find-links."""
    raw, source = layers.pick("wheels", "--wheels", "HARNESS_WHEELS", "wheels")  # each --wheels: one dir
    if raw is None:
        return _local_dirs(layers.env.get("PIP_FIND_LINKS", ""))
    dirs: tuple[Path, ...] = _parse(_paths, raw, source)
    for path in dirs:
        if not path.is_dir():
            raise UsageError(f"{source}: wheel directory {path} does not exist.")
    return dirs


def _container_devices(cli: Mapping[str, Any]) -> tuple[str, ...] | None:
    """--devices (repeatable, comma-separated); None lets the runner use the host's visibility variable."""
    if not cli.get("devices"):
        return None
    devices: tuple[str, ...] = _parse(_devices, [str(item) for item in cli["devices"]], "--devices")
    return devices  # checked as `harness run --devices` checks them: ids, each once


def resolve_container_options(
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    config: Mapping[str, Any] | None,
    *,
    repo_dir: Path,
    backends: Sequence[str],
) -> ContainerOptions:
    """Merge the layers for the ``backends`` being run or built (canonical names).

    ``cli`` keys (None: not given): policy, registry, base_images, build_args, wheels,
    devices, reports, user, device_root, code, network, seccomp, cap_add, pids_limit,
    shm_size. Environment: HARNESS_REGISTRY, HARNESS_IMAGE_POLICY,
    HARNESS_BASE_IMAGE_<BACKEND>, HARNESS_BUILD_ARGS (space-separated KEY=VALUE),
    HARNESS_WHEELS (os.pathsep-separated; default: the local directories in
    PIP_FIND_LINKS), HARNESS_CONTAINER_NETWORK, HARNESS_SECCOMP, HARNESS_CAP_ADD,
    HARNESS_PIDS_LIMIT, HARNESS_SHM_SIZE; the HARNESS_* run options to forward.
    ``config`` is [tool.harness]; its [tool.harness.container] table may set registry,
    image-policy, base-images, build-args, wheels, network, seccomp, cap-add, pids-limit
    and shm-size. --devices, --reports, --user, --device-root and the code directory come
    from the command line (or the caller) only.
    """
    table = dict(config or {})
    _check_keys(table)
    layers = _Layers(cli, env, _container_table(table), "[tool.harness.container]")
    registry = _registry(layers)
    reports = Path(cli["reports"]) if cli.get("reports") else repo_dir / "reports"
    return ContainerOptions(
        repo_dir=repo_dir.resolve(),
        reports_dir=reports.resolve(),
        registry=registry,
        policy=_policy(layers, registry),
        base_images=_base_images(layers, backends),
        build_args=_build_args(layers),
        wheel_dirs=_wheel_dirs(layers),
        devices=_container_devices(cli),
        device_root=str(cli.get("device_root") or "/"),
        user=parse_user(cli["user"]) if cli.get("user") else None,
        forwarded_env=tuple(sorted(forwarded_run_env(env, repo_dir).items())),
        code_dir=Path(cli["code"]).resolve() if cli.get("code") else None,
        **_hardening(layers),
    )


OPTIONS_DOC = Path(__file__).resolve().parent.parent / "docs" / "options.md"
_DOC_BEGIN = "<!-- generated from harness.options.RUN_OPTIONS by `python -m harness.options`: do not edit -->"
_DOC_END = "<!-- end of the generated table -->"


def options_table() -> str:
    """docs/options.md's table of `harness run`'s options, from :data:`RUN_OPTIONS`."""
    rows = ["| flag | variable | `[tool.harness]` key | default |", "|---|---|---|---|"]
    for o in RUN_OPTIONS:
        if not o.has_flag:
            continue
        env, key = (f"`{o.env}`", f"`{o.key}`") if o.layered else ("none", "none")
        rows.append(f"| `{o.option_flag}` | {env} | {key} | {o.default_text()} |")
    return "\n".join(rows) + "\n"


def options_doc(text: str) -> str:
    """``text`` (docs/options.md) with its generated table replaced by :func:`options_table`."""
    head, begin, rest = text.partition(_DOC_BEGIN)
    _, end, tail = rest.partition(_DOC_END)
    if not (begin and end):
        raise ValueError(f"docs/options.md lacks the markers {_DOC_BEGIN!r} ... {_DOC_END!r}")
    return f"{head}{_DOC_BEGIN}\n{options_table()}{_DOC_END}{tail}"


if __name__ == "__main__":  # regenerate docs/options.md's table
    OPTIONS_DOC.write_text(options_doc(OPTIONS_DOC.read_text()))
