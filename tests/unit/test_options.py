from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.errors import ConfigError, UsageError
from harness.options import (
    DEFAULT_HISTORY_DB,
    IMAGE_NAME,
    ContainerOptions,
    RunOptions,
    forwarded_run_env,
    read_project_config,
    read_pyproject,
    resolve_container_options,
    resolve_history_db,
    resolve_run_options,
)

ROOT = Path(__file__).resolve().parents[2]


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


def test_bad_pyproject_value_names_the_key() -> None:
    with pytest.raises(UsageError, match=r"\[tool.harness\] rep-ms: rep \(ms\) must be a finite number"):
        resolve_run_options({}, {}, {"rep_ms": "fast"})


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


def test_run_options_accept_the_other_commands_keys() -> None:
    config = {"level": "core", "history-db": "x.sqlite", "container": {"registry": "reg.example"}}
    assert resolve_run_options({}, {}, config).level == "core"


def test_project_config_is_the_current_directorys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.harness]\nhistory-db = "h.sqlite"\n')
    monkeypatch.chdir(tmp_path)
    assert read_project_config() == {"history-db": "h.sqlite"}


# -- harness history: the database ---------------------------------------------------------


@pytest.mark.parametrize(
    "cli, env, config, expected",
    [
        ({"db": "cli.sqlite"}, {"HARNESS_HISTORY_DB": "env.sqlite"}, {"history-db": "project.sqlite"}, "cli.sqlite"),
        ({}, {"HARNESS_HISTORY_DB": "env.sqlite"}, {"history-db": "project.sqlite"}, "env.sqlite"),
        ({"db": None}, {"HARNESS_HISTORY_DB": ""}, {"history-db": "project.sqlite"}, "project.sqlite"),
        ({}, {}, {"history_db": "project.sqlite"}, "project.sqlite"),
        ({}, {}, {}, DEFAULT_HISTORY_DB),
    ],
)
def test_history_db_layers(cli: dict, env: dict, config: dict, expected: str) -> None:
    assert resolve_history_db(cli, env, config) == Path(expected)


@pytest.mark.parametrize(
    "config, needle",
    [
        ({"history-db": 5}, r"\[tool.harness\] history-db: the history database must be a string"),
        ({"history-db": " "}, "must be a file path"),
        ({"histroy-db": "x.sqlite"}, "unknown key"),
    ],
)
def test_history_db_bad_values(config: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        resolve_history_db({}, {}, config)


# -- harness container: the host side of a container run -------------------------------------


def _container(
    cli: dict | None = None, env: dict | None = None, config: dict | None = None,
    backends: tuple[str, ...] = ("cpu",), repo: Path = ROOT,
) -> ContainerOptions:
    return resolve_container_options(cli or {}, env or {}, config, repo_dir=repo, backends=backends)


def test_container_defaults() -> None:
    opts = _container()
    assert opts == ContainerOptions(repo_dir=ROOT.resolve(), reports_dir=(ROOT / "reports").resolve())
    assert opts.policy == "auto" and opts.registry is None and opts.image_name == IMAGE_NAME
    assert opts.devices is None and opts.user is None and opts.device_root == "/"


@pytest.mark.parametrize(
    "cli, env, table, registry, policy",
    [
        ({"registry": "cli.reg/", "policy": "build"}, {"HARNESS_REGISTRY": "env.reg", "HARNESS_IMAGE_POLICY": "no-build"},
         {"registry": "toml.reg", "image-policy": "pull"}, "cli.reg", "build"),
        ({}, {"HARNESS_REGISTRY": "env.reg/team/", "HARNESS_IMAGE_POLICY": "No-Build"},
         {"registry": "toml.reg", "image-policy": "pull"}, "env.reg/team", "no-build"),
        ({}, {"HARNESS_REGISTRY": "", "HARNESS_IMAGE_POLICY": ""},
         {"registry": "toml.reg", "image_policy": "pull"}, "toml.reg", "pull"),
        ({}, {}, {}, None, "auto"),
    ],
)
def test_container_registry_and_policy_layers(
    cli: dict, env: dict, table: dict, registry: str | None, policy: str
) -> None:
    opts = _container(cli, env, {"container": table})
    assert (opts.registry, opts.policy) == (registry, policy)


def test_container_base_images_per_backend_cli_over_env_over_pyproject() -> None:
    table = {"base-images": {"cpu": "toml/cpu", "cuda": "toml/cuda", "rocm": "toml/rocm"}}
    env = {"HARNESS_BASE_IMAGE_CUDA": "env/cuda", "HARNESS_BASE_IMAGE_ROCM": "env/rocm"}
    opts = _container({"base_images": ["rocm=cli/rocm"]}, env, {"container": table},
                      backends=("cpu", "cuda", "rocm", "musa"))
    assert opts.base_images == (("cpu", "toml/cpu"), ("cuda", "env/cuda"), ("rocm", "cli/rocm"))
    assert _container({}, {}, {"container": table}).base_images == (("cpu", "toml/cpu"),)  # only the backends run
    assert _container({"base_images": ["cli/only"]}, env, {"container": table}).base_image("cpu") == "cli/only"


def test_container_build_args_merge_key_by_key() -> None:
    table = {"build-args": {"A": "toml", "C": "toml"}}
    env = {"HARNESS_BUILD_ARGS": "A=env B=env"}
    opts = _container({"build_args": ["B=cli"]}, env, {"container": table})
    assert dict(opts.build_args) == {"A": "env", "B": "cli", "C": "toml"}
    assert _container({"build_args": ["B=2"]}, {"HARNESS_BUILD_ARGS": "A=1"}).build_args == (("A", "1"), ("B", "2"))


def test_container_wheels_cli_over_env_over_pyproject_over_pip(tmp_path: Path) -> None:
    dirs = {name: tmp_path / name for name in ("cli", "env1", "env2", "toml", "pip")}
    for path in dirs.values():
        path.mkdir()
    env = {"HARNESS_WHEELS": f"{dirs['env1']}{os.pathsep}{dirs['env2']}",
           "PIP_FIND_LINKS": f"file://{dirs['pip']} https://example.invalid/links"}
    config = {"container": {"wheels": [str(dirs["toml"])]}}
    assert _container({"wheels": [str(dirs["cli"])]}, env, config).wheel_dirs == (dirs["cli"],)
    assert _container({}, env, config).wheel_dirs == (dirs["env1"], dirs["env2"])
    assert _container({}, {"PIP_FIND_LINKS": env["PIP_FIND_LINKS"]}, config).wheel_dirs == (dirs["toml"],)
    assert _container({}, {"PIP_FIND_LINKS": env["PIP_FIND_LINKS"]}).wheel_dirs == (dirs["pip"],)


def test_container_command_line_only_options(tmp_path: Path) -> None:
    opts = _container({"devices": ["0,1", "3"], "reports": str(tmp_path / "r"), "user": "7:8",
                       "device_root": str(tmp_path)}, repo=tmp_path)
    assert opts.devices == ("0", "1", "3") and opts.reports_dir == (tmp_path / "r").resolve()
    assert opts.user == (7, 8) and opts.device_root == str(tmp_path)


def test_container_forwards_run_options_but_not_paths_devices_backend() -> None:
    env = {
        "HARNESS_LEVEL": "core", "HARNESS_DTYPES": "bf16", "HARNESS_OUT": "/tmp/x", "HARNESS_DEVICES": "3",
        "HARNESS_BACKEND": "cuda", "HARNESS_IMAGE": "spoof", "CUDA_VISIBLE_DEVICES": "1", "HOME": "/root",
        "HARNESS_REGISTRY": "reg", "HARNESS_HISTORY_DB": "h.sqlite",
    }
    assert forwarded_run_env(env) == {"HARNESS_LEVEL": "core", "HARNESS_DTYPES": "bf16"}
    assert _container({}, env).forwarded_env == (("HARNESS_DTYPES", "bf16"), ("HARNESS_LEVEL", "core"))


def test_container_forwards_flagtunes_own_variable_so_the_image_runs_the_same_mode() -> None:
    # `USE_FLAGTUNE=1 nox -s bench-cuda`: the harness on the host reads it (no layer sets --flagtune);
    # the one in the image must too, or its op processes run FlagTune off.
    assert forwarded_run_env({"USE_FLAGTUNE": "1", "HOME": "/root"}) == {"USE_FLAGTUNE": "1"}
    both = forwarded_run_env({"USE_FLAGTUNE": "0", "HARNESS_FLAGTUNE": "on"})
    assert both == {"USE_FLAGTUNE": "0", "HARNESS_FLAGTUNE": "on"}  # the image's harness ranks them as the host's
    inside = {**both, "HARNESS_LEVEL": "core"}
    assert resolve_run_options({}, inside).flagtune == "on"
    assert resolve_run_options({}, {"USE_FLAGTUNE": "1"}).flagtune == "on"
    assert forwarded_run_env({"USE_FLAGTUNE": ""}) == {}


@pytest.mark.parametrize(
    "cli, env, config, error, needle",
    [
        ({"policy": "pull"}, {}, None, UsageError, r"--pull: .*needs a registry"),
        ({}, {"HARNESS_IMAGE_POLICY": "pull"}, None, UsageError, r"HARNESS_IMAGE_POLICY: .*needs a registry"),
        ({}, {"HARNESS_IMAGE_POLICY": "sometimes"}, None, UsageError,
         r"HARNESS_IMAGE_POLICY: Unknown image policy 'sometimes'\. Choices: auto, pull, build, no-build"),
        ({}, {}, {"container": {"image-policy": "never"}}, UsageError,
         r"\[tool.harness.container\] image-policy: Unknown image policy 'never'"),
        ({"base_images": ["x/y"]}, {}, None, UsageError, "BACKEND=IMAGE"),
        ({"user": "me"}, {}, None, UsageError, "UID:GID"),
        ({"build_args": ["NOVALUE"]}, {}, None, UsageError, r"--build-arg: build argument 'NOVALUE' is not KEY=VALUE"),
        ({}, {"HARNESS_BUILD_ARGS": "=x"}, None, UsageError, "HARNESS_BUILD_ARGS: build argument '=x'"),
        ({}, {"HARNESS_WHEELS": "/nonexistent/wheels"}, None, UsageError,
         "HARNESS_WHEELS: wheel directory /nonexistent/wheels does not exist"),
        ({}, {}, {"container": {"registry": 3}}, ConfigError, r"\[tool.harness.container\] registry: registry must be a string"),
        ({}, {}, {"container": {"wheels": 3}}, ConfigError, r"\[tool.harness.container\] wheels: wheels must be a list"),
        ({}, {}, {"container": {"build-args": ["A=1"]}}, ConfigError, "build-args must be a table of strings"),
        ({}, {}, {"container": {"base-images": {"tpu": "x"}}}, ConfigError, "unknown backend.*tpu"),
        ({}, {}, {"container": {"regsitry": "x"}}, ConfigError, r"\[tool.harness.container\] has unknown key.*regsitry"),
        ({}, {}, {"container": "reg.example"}, ConfigError, "must be a table"),
        ({}, {}, {"registry": "reg.example"}, ConfigError, r"\[tool.harness\] has unknown key.*registry"),
    ],
)
def test_container_bad_values_name_their_source(
    cli: dict, env: dict, config: dict | None, error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        _container(cli, env, config, backends=("cpu", "cuda"))


def test_container_table_is_read_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.harness]\nlevel = "core"\n\n[tool.harness.container]\nregistry = "reg.example/team"\n'
        'image-policy = "no-build"\nbase-images = { cpu = "mirror/python:3.11" }\n'
        'build-args = { EXTRA = "1" }\n'
    )
    config = read_pyproject(tmp_path / "pyproject.toml")
    opts = _container({}, {}, config)
    assert (opts.registry, opts.policy, opts.base_images, opts.build_args) == (
        "reg.example/team", "no-build", (("cpu", "mirror/python:3.11"),), (("EXTRA", "1"),)
    )
    assert resolve_run_options({}, {}, config).level == "core"
