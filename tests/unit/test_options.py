from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError, UsageError
from harness.options import RunOptions, read_pyproject, resolve_run_options


def test_defaults() -> None:
    opts = resolve_run_options({}, {}, {})
    assert opts == RunOptions()
    assert opts.level == "auto" and opts.backend == "auto"


def test_layering_cli_over_env_over_config() -> None:
    config = {"level": "comprehensive", "backend": "rocm", "seed": 3}
    env = {"HARNESS_LEVEL": "core", "HARNESS_BACKEND": "musa"}
    opts = resolve_run_options({"backend": "cuda"}, env, config)
    assert opts.backend == "cuda"  # CLI
    assert opts.level == "core"  # env
    assert opts.seed == 3  # config


def test_dtype_aliases_and_dedup() -> None:
    opts = resolve_run_options({"dtypes": ["bf16", "fp16", "bfloat16"]}, {}, {})
    assert opts.dtypes == ("bfloat16", "float16")
    env_opts = resolve_run_options({}, {"HARNESS_DTYPES": "fp32,bf16"}, {})
    assert env_opts.dtypes == ("float32", "bfloat16")


@pytest.mark.parametrize(
    "cli, env, needle",
    [
        ({"dtypes": ["int4"]}, {}, "Unknown dtype 'int4'"),
        ({"level": "huge"}, {}, "Unknown level 'huge'"),
        ({}, {"HARNESS_REP_MS": "fast"}, "HARNESS_REP_MS"),
        ({"op_timeout": -1}, {}, "must be positive"),
    ],
)
def test_bad_values_name_their_source(cli: dict, env: dict, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        resolve_run_options(cli, env, {})


def test_unknown_config_key_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key"):
        resolve_run_options({}, {}, {"levle": "core"})


def test_pyproject_table(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.harness]\nlevel = "core"\n')
    assert read_pyproject(tmp_path / "pyproject.toml") == {"level": "core"}
    assert read_pyproject(tmp_path / "missing.toml") == {}
    (tmp_path / "bad.toml").write_text("[tool.harness\n")
    with pytest.raises(ConfigError):
        read_pyproject(tmp_path / "bad.toml")
