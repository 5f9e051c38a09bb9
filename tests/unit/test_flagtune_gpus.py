"""--gpus (the old driver's name of --devices) and --flagtune (FlagGems' USE_FLAGTUNE as a run
option): how they resolve, what reaches the op process, and `harness ab`'s check that both sides
run with the same FlagTune mode unless FlagTune is the switch."""

from __future__ import annotations

import pytest

from harness.compare.ab import AbSide, check_flagtune
from harness.errors import UsageError
from harness.options import RunOptions, flagtune_env, resolve_run_options
from harness.runargs import cli_values, parse_run_args


def _options(*args: str, env: dict[str, str] | None = None) -> RunOptions:
    return resolve_run_options(cli_values(parse_run_args(args)), env or {}, {})


def test_gpus_is_an_alias_of_devices_and_both_together_are_refused() -> None:
    assert _options("--gpus", "0", "1").devices == ("0", "1")
    assert _options("--gpus", "0,1").devices == _options("--devices", "0,1").devices
    with pytest.raises(UsageError, match="old name of --devices"):
        _options("--gpus", "0", "--devices", "1")
    with pytest.raises(UsageError, match="more than once"):
        _options("--gpus", "0", "0")


def test_flagtune_is_off_unless_a_layer_or_the_old_variable_says_on() -> None:
    assert _options().flagtune == "off"
    assert _options("--flagtune", "on").flagtune == "on"
    assert _options(env={"HARNESS_FLAGTUNE": "on"}).flagtune == "on"
    assert _options(env={"USE_FLAGTUNE": "1"}).flagtune == "on"
    assert _options(env={"USE_FLAGTUNE": "0"}).flagtune == "off"
    assert resolve_run_options({}, {"USE_FLAGTUNE": "1"}, {"flagtune": "off"}).flagtune == "off"  # pyproject wins
    assert _options("--flagtune", "off", env={"USE_FLAGTUNE": "1"}).flagtune == "off"
    with pytest.raises(UsageError, match="USE_FLAGTUNE: 'yes' is neither 1"):
        _options(env={"USE_FLAGTUNE": "yes"})
    with pytest.raises(UsageError, match="--flagtune: Unknown FlagTune mode"):
        _options("--flagtune", "1")


def test_the_op_process_gets_flagtune_as_flaggems_reads_it_and_run_json_keeps_it() -> None:
    assert flagtune_env(RunOptions(flagtune="on")) == {"USE_FLAGTUNE": "1"}
    assert flagtune_env(RunOptions()) == {"USE_FLAGTUNE": "0"}
    stored = RunOptions(flagtune="on").to_dict()
    assert stored["flagtune"] == "on"
    assert RunOptions.from_stored(stored, "run.json").flagtune == "on"


def _sides(a: dict[str, str], b: dict[str, str], b_unset: tuple[str, ...] = ()) -> dict[str, AbSide]:
    return {"a": AbSide("a", set_env=tuple(a.items())), "b": AbSide("b", set_env=tuple(b.items()), unset_env=b_unset)}


def test_ab_accepts_flagtune_as_the_whole_switch_or_the_same_on_both_sides() -> None:
    check_flagtune(_sides({"USE_FLAGTUNE": "0"}, {"USE_FLAGTUNE": "1"}), ["--ops", "mm"], {}, {})
    check_flagtune(_sides({}, {"HARNESS_FLAGTUNE": "on"}), [], {}, {})
    check_flagtune(_sides({"X": "0"}, {"X": "1"}), ["--flagtune", "on"], {"USE_FLAGTUNE": "0"}, {})
    check_flagtune(_sides({"X": "0", "USE_FLAGTUNE": "1"}, {"X": "1", "USE_FLAGTUNE": "1"}), [], {}, {})


def test_ab_refuses_sides_that_differ_in_flagtune_besides_the_switch() -> None:
    with pytest.raises(UsageError, match="side A runs with FlagTune off and side B with FlagTune on"):
        check_flagtune(_sides({"X": "0"}, {"X": "1", "USE_FLAGTUNE": "1"}), [], {}, {})
    with pytest.raises(UsageError, match="--b-unset USE_FLAGTUNE"):  # B drops the inherited value, A keeps it
        check_flagtune(_sides({"X": "0"}, {"X": "1"}, b_unset=("USE_FLAGTUNE",)), [], {"USE_FLAGTUNE": "1"}, {})


def test_ab_refuses_a_flagtune_switch_that_the_run_arguments_override() -> None:
    with pytest.raises(UsageError, match="yet both run with FlagTune off"):
        check_flagtune(_sides({"USE_FLAGTUNE": "0"}, {"USE_FLAGTUNE": "1"}), ["--flagtune", "off"], {}, {})
