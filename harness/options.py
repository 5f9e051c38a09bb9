"""The one options layer: CLI > environment (HARNESS_*) > [tool.harness] in pyproject.toml > defaults.

The environment arrives as a Mapping and is read nowhere else. Every value is
validated here, so code below works with a frozen, well-typed RunOptions.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, UsageError
from harness.ops.base import DTYPES

__all__ = ["ENV_PREFIX", "RunOptions", "read_pyproject", "resolve_run_options"]

ENV_PREFIX = "HARNESS_"
LEVEL_CHOICES = ("auto", "smoke", "core", "comprehensive")
CACHE_CHOICES = ("cold", "warm")
PRESTART_CHOICES = ("auto", "on", "off")


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

    def prestart_for(self, accelerator: bool) -> bool:
        """Whether to pre-start op processes: ``auto`` only on accelerators, where the held process's
        imports use spare CPU cores; on the CPU backend they would compete with the timing."""
        return self.prestart == "on" or (self.prestart == "auto" and accelerator)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}


def _csv(value: str | Sequence[str]) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            if part.strip():
                out.append(part.strip())
    return tuple(out)


def _positive_float(name: str) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"{name} must be a number, got {value!r}.") from None
        if number <= 0:
            raise UsageError(f"{name} must be positive, got {value!r}.")
        return number

    return parse


def _int(name: str) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise UsageError(f"{name} must be an integer, got {value!r}.") from None

    return parse


def _choice(name: str, choices: Sequence[str]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise UsageError(f"Unknown {name} {value!r}. Choices: {', '.join(choices)}.")
        return text

    return parse


def _dtypes(value: Any) -> tuple[str, ...]:
    aliases = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32"}
    result = []
    for item in _csv(value):
        name = aliases.get(item.lower(), item.lower())
        if name not in DTYPES:
            raise UsageError(
                f"Unknown dtype {item!r}. Dtypes: {', '.join(DTYPES)} (aliases fp16, bf16, fp32)."
            )
        if name not in result:
            result.append(name)
    if not result:
        raise UsageError("--dtypes needs at least one dtype.")
    return tuple(result)


def _str(value: Any) -> str:
    return str(value)


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "backend": lambda v: str(v).strip().lower(),
    "ops": _csv,
    "dtypes": _dtypes,
    "level": _choice("level", LEVEL_CHOICES),
    "shapes_file": _str,
    "ops_modules": _csv,
    "provider": lambda v: str(v).strip().lower(),
    "timer": lambda v: str(v).strip().lower(),
    "cache": _choice("cache mode", CACHE_CHOICES),
    "seed": _int("seed"),
    "warmup_ms": _positive_float("warmup (ms)"),
    "rep_ms": _positive_float("rep (ms)"),
    "devices": _csv,
    "op_timeout": _positive_float("op timeout (s)"),
    "reports_dir": _str,
    "out": _str,
    "run_id": _str,
    "suite": _str,
    "ops_file": _str,
    "dismiss": _str,
    "progress": _choice("progress mode", ("auto", "rich", "plain")),
    "image": _str,
    "image_digest": _str,
    "replay_from": _str,
    "prestart": _choice("prestart mode", PRESTART_CHOICES),
}


def read_pyproject(path: Path) -> dict[str, Any]:
    """The [tool.harness] table of a pyproject.toml, or {} when there is none."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}). Fix the file.") from exc
    table = data.get("tool", {}).get("harness", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.harness] must be a table.")
    return table


def resolve_run_options(
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
) -> RunOptions:
    """Merge the layers; ``cli`` holds only the flags the user gave (None means not given)."""
    config = dict(config or {})
    values: dict[str, Any] = {}
    unknown = [k for k in config if k.replace("-", "_") not in _PARSERS]
    if unknown:
        raise ConfigError(
            f"[tool.harness] has unknown key(s): {', '.join(unknown)}. Known keys: "
            f"{', '.join(k.replace('_', '-') for k in _PARSERS)}."
        )
    for name, parse in _PARSERS.items():
        raw: Any = None
        source = ""
        if cli.get(name) not in (None, (), []):
            raw, source = cli[name], f"--{name.replace('_', '-')}"
        elif env.get(ENV_PREFIX + name.upper(), "") != "":
            raw, source = env[ENV_PREFIX + name.upper()], ENV_PREFIX + name.upper()
        elif name in config or name.replace("_", "-") in config:
            raw = config.get(name, config.get(name.replace("_", "-")))
            source = f"[tool.harness] {name}"
        if raw is None:
            continue
        try:
            values[name] = parse(raw)
        except UsageError as exc:
            raise type(exc)(f"{source}: {exc.message}") from None
    return RunOptions(**values)
