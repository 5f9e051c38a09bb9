"""`--shard K/N` (options, assignment) and `harness merge`'s checks, without running anything."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.errors import UsageError
from harness.options import RunOptions, resolve_run_options
from harness.results.runinfo import fingerprint, harness_commits
from harness.run.decide import OpOutcome
from harness.run.merge import PartRun, check_parts, merged_info
from harness.run.plan import OpPlan, assign_parts, plan_digest, plan_part

# -- the option ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [("1/1", (1, 1)), ("2/3", (2, 3)), (" 3/3 ", (3, 3))])
def test_shard_spec_is_read_from_every_layer(text: str, expected: tuple[int, int]) -> None:
    assert resolve_run_options({"shard": text}, {}).shard == expected
    assert resolve_run_options({}, {"HARNESS_SHARD": text}).shard == expected
    assert resolve_run_options({}, {}, {"shard": text}).shard == expected
    assert resolve_run_options({"shard": "1/5"}, {"HARNESS_SHARD": text}).shard == (1, 5)  # CLI wins


@pytest.mark.parametrize("bad", ["0/3", "4/3", "abc", "1/0", "-1/3", "1/", "/3", "1/2/3", "1.5/3"])
def test_bad_shard_specs_are_refused_naming_the_source(bad: str) -> None:
    with pytest.raises(UsageError) as err:
        resolve_run_options({"shard": bad}, {})
    message = err.value.message
    assert message.startswith("--shard:") and ("is not K/N" in message or "between 1 and N" in message)
    with pytest.raises(UsageError) as env_err:
        resolve_run_options({}, {"HARNESS_SHARD": bad})
    assert env_err.value.message.startswith("HARNESS_SHARD:")


def test_a_stored_shard_comes_back_as_a_tuple() -> None:
    stored = RunOptions(shard=(2, 3)).to_dict()
    assert stored["shard"] == [2, 3]
    assert RunOptions.from_stored(stored, "run.json").shard == (2, 3)


# -- assignment ----------------------------------------------------------------------------------


def _op(name: str, cases: int = 4, cost: float = 1.0) -> OpPlan:
    shapes = tuple((n + 1, 8) for n in range(cases))
    return OpPlan(op=name, device="0", dtypes=("float32",), shapes=shapes, provider="builtin", case_cost=cost)


OPS = [_op("add"), _op("softmax", 6), _op("mm", 2, cost=20.0), _op("sum", 3), _op("gelu", 5),
       _op("layer_norm", 4), _op("rms_norm", 4), _op("silu_and_mul", 2)]


def test_every_op_goes_to_exactly_one_shard_and_the_parts_do_not_depend_on_order() -> None:
    for count in (1, 2, 3, 5):
        parts = assign_parts(OPS, count)
        assert set(parts) == {o.op for o in OPS}
        assert set(parts.values()) <= set(range(1, count + 1))
        for shuffled in itertools.islice(itertools.permutations(OPS), 0, 40, 7):
            assert assign_parts(list(shuffled), count) == parts


def test_parts_are_balanced_by_cost_not_by_op_count() -> None:
    parts = assign_parts(OPS, 2)
    weight = {o.op: 1.0 + len(o.cases()) * o.case_cost for o in OPS}
    loads = [sum(w for op, w in weight.items() if parts[op] == k) for k in (1, 2)]
    # mm alone (41) outweighs any three of the others: its part holds it and few else.
    assert max(loads) <= sum(loads) / 2 + max(weight.values())
    mm_part = parts["mm"]
    assert sum(1 for p in parts.values() if p == mm_part) < sum(1 for p in parts.values() if p != mm_part)


def test_more_parts_than_ops_leaves_some_parts_empty_but_valid() -> None:
    ops = OPS[:2]
    seen = []
    for k in range(1, 6):
        mine, shard = plan_part(ops, k, 5, ["0"], digest="d")
        assert shard.all_ops == ("add", "softmax") and shard.label == f"{k}/5"
        seen += [o.op for o in mine]
    assert sorted(seen) == ["add", "softmax"]


def test_a_part_spreads_its_own_ops_over_this_machines_devices() -> None:
    mine, shard = plan_part(OPS, 2, 2, ["0", "1"], digest="d")  # part 1 holds mm alone
    assert [o.op for o in mine] == list(shard.ops)
    assert {o.device for o in mine} <= {"0", "1"} and len({o.device for o in mine}) == 2
    assert shard.to_dict() == {"index": 2, "count": 2, "ops": list(shard.ops),
                               "all_ops": [o.op for o in OPS], "plan_digest": "d"}


def test_dismissed_ops_weigh_only_their_start() -> None:
    heavy = [_op("mm", 50, cost=10.0), _op("add"), _op("sum")]
    counted = assign_parts(heavy, 2)
    assert counted["add"] == counted["sum"] != counted["mm"]  # mm's 500 cases fill a part alone
    dismissed = assign_parts(heavy, 2, weightless={"mm"})
    assert dismissed["add"] != dismissed["sum"]  # mm never runs: add and sum are what to balance


def _open(name: str, rows: int) -> OpPlan:
    """A suite op as prepare_suite plans it: no shapes, about ``rows`` rows from the inventory."""
    return OpPlan(op=name, device="0", dtypes=(), shapes=(), provider="flaggems-suite", open_cases=rows)


# A corpus the size of FlagGems v5.3.4's (994 benchmark functions), rows spread as a real one's are:
# most functions a few rows, some dozens, a handful in the hundreds.
CORPUS = [_open(f"bench_{i:03d}", 1 + (i * 37) % 23 + (150 if i % 97 == 0 else 0)) for i in range(994)]


@pytest.mark.parametrize("count", [2, 3, 8])
def test_suite_ops_are_dealt_once_each_balanced_by_expected_rows_and_stably(count: int) -> None:
    parts = assign_parts(CORPUS, count)
    assert sorted(parts) == sorted(o.op for o in CORPUS)  # every op in exactly one part
    assert set(parts.values()) == set(range(1, count + 1))  # and every part gets work
    weight = {o.op: 1.0 + o.expected_cases for o in CORPUS}  # as over --devices: its start plus its rows
    loads = [sum(w for op, w in weight.items() if parts[op] == k) for k in range(1, count + 1)]
    assert max(loads) - min(loads) <= max(weight.values())
    shuffled = list(CORPUS)
    random.Random(count).shuffle(shuffled)
    assert assign_parts(shuffled, count) == parts  # machines may list the selection in any order
    # Each machine plans only its part from the whole selection, and the parts are the split.
    for k in range(1, count + 1):
        mine, shard = plan_part(shuffled, k, count, ["0", "1"], digest="d")
        assert {o.op for o in mine} == {op for op, part in parts.items() if part == k} == set(shard.ops)


def test_a_heavy_suite_op_fills_its_part_and_dismissed_ones_weigh_nothing() -> None:
    ops = [_open("mm", 400), *(_open(f"unary_{i}", 6) for i in range(20))]
    parts = assign_parts(ops, 2)
    assert [op for op, part in parts.items() if part == parts["mm"]] == ["mm"]  # rows, not op count
    dismissed = assign_parts(ops, 2, weightless={"mm"})
    assert sum(1 for part in dismissed.values() if part == 1) in (10, 11)


def test_plan_digest_changes_with_what_is_measured_only() -> None:
    options = RunOptions()
    digest = plan_digest(OPS, options, "smoke", "cpu")
    assert plan_digest(list(OPS), RunOptions(devices=("3",), run_id="x", shard=(1, 2)), "smoke", "cpu") == digest
    assert plan_digest(OPS[:-1], options, "smoke", "cpu") != digest
    assert plan_digest(OPS, RunOptions(seed=1), "smoke", "cpu") != digest
    assert plan_digest(OPS, options, "core", "cpu") != digest
    # Facts beyond the op plans (a suite's tree and shapes) count when given, and only then.
    suite = {"tree": {"ref": "v5.3.4"}}
    assert plan_digest(OPS, options, "smoke", "cpu", suite) == plan_digest(OPS, options, "smoke", "cpu", dict(suite))
    assert plan_digest(OPS, options, "smoke", "cpu", suite) != digest
    assert plan_digest(OPS, options, "smoke", "cpu", {"tree": {"ref": "v5.3.3"}}) != plan_digest(
        OPS, options, "smoke", "cpu", suite)


# -- merge's checks ------------------------------------------------------------------------------


def _info(**over: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "schema_version": 1, "run_id": "r", "status": "complete", "backend": "cuda", "timer": "graph",
        "level": "core", "identity": {"device_name": "H200", "device_arch": "sm_90"},
        "options": {"cache": "cold", "provider": "builtin"}, "git_commit": "abc", "fingerprint": "fp1",
        "devices": ["0"], "plan": [], "started_at": "2026-12-01T00:00:00+00:00",
    }
    info.update(over)
    return info


def _shard(index: int, count: int = 3, ops: tuple[str, ...] = (), digest: str = "d",
           all_ops: tuple[str, ...] = ("a", "b", "c"), **info: Any) -> PartRun:
    ops = ops or (all_ops[index - 1],)
    plan = [{"op": op, "device": "0", "dtypes": ["float32"], "shapes": [[8]], "provider": "builtin"} for op in ops]
    return PartRun(path=Path(f"/runs/s{index}"), info=_info(plan=plan, run_id=f"r{index}", **info),
                    index=index, count=count, digest=digest, ops=ops, all_ops=all_ops)


def _refusal(shards: list[PartRun]) -> str:
    with pytest.raises(UsageError) as err:
        check_parts(shards)
    return err.value.message


def test_parts_in_any_order_come_back_in_order() -> None:
    assert [s.index for s in check_parts([_shard(3), _shard(1), _shard(2)])] == [1, 2, 3]


def test_a_missing_part_is_named_with_what_was_given() -> None:
    message = _refusal([_shard(1), _shard(3)])
    assert "2/3 missing" in message and "1/3 (/runs/s1)" in message and "3/3 (/runs/s3)" in message
    assert "--shard 2/3" in message


def test_a_part_given_twice_is_refused() -> None:
    message = _refusal([_shard(1), _shard(2), _shard(2), _shard(3)])
    assert "2/3 is given twice" in message


def test_parts_of_different_fingerprints_are_refused_naming_the_difference() -> None:
    other = _shard(2, fingerprint="fp2", identity={"device_name": "H100", "device_arch": "sm_90"})
    message = _refusal([_shard(1), other, _shard(3)])
    assert "not alike" in message and "device model H200 vs H100" in message and "/runs/s2" in message


def test_parts_of_other_splits_or_plans_are_refused() -> None:
    assert "different splits" in _refusal([_shard(1), _shard(2, count=2)])
    assert "different run plans" in _refusal([_shard(1), _shard(2, digest="e"), _shard(3)])
    # the options given differently are named
    fp32 = _shard(2, digest="e", options={"cache": "cold", "provider": "builtin", "dtypes": ["float32"]})
    named = _refusal([_shard(1, options={"cache": "cold", "provider": "builtin", "dtypes": ["bfloat16"]}), fp32])
    assert "(--dtypes ['bfloat16'] vs ['float32'] differ)" in named


def test_parts_of_other_harness_commits_or_resumed_under_another_are_refused_unless_allowed() -> None:
    other = _refusal([_shard(1), _shard(2, git_commit="def", git_dirty=True), _shard(3)])
    assert "part 2/3 (/runs/s2): harness commit 'abc' in part 1/3, 'def+dirty' here" in other
    assert "--allow-mismatch" in other
    # part 3 was resumed under "abc" after a session of "old": its ops were measured by both
    mixed = [_shard(1), _shard(2), _shard(3, earlier_commits=["old"])]
    message = _refusal(mixed)
    assert "part 3/3 (/runs/s3): measured by harness commits old, abc (resumed)" in message
    shards = check_parts(mixed, allow_mismatch=True)
    info = merged_info(shards, "merged", [OpOutcome(op, "0", "PASS") for s in shards for op in s.ops])
    assert any("old, abc" in line for line in info["software_mismatch"])
    assert harness_commits({"git_commit": "abc", "git_dirty": True, "earlier_commits": ["old", "abc+dirty"]}) == [
        "old", "abc+dirty"]
    assert harness_commits({"git_commit": None}) == ["no git"]
    # the code's digest decides where both parts have one: equal code under other labels merges,
    # other code under one label (two dirty trees of one HEAD) does not
    same = [_shard(1, harness_digest="d1"), _shard(2, git_commit="def", harness_digest="d1"),
            _shard(3, harness_digest="d1")]
    assert [s.index for s in check_parts(same)] == [1, 2, 3]
    dirty = [_shard(1, git_dirty=True, harness_digest="d1"), _shard(2, git_dirty=True, harness_digest="d2"),
             _shard(3, git_dirty=True, harness_digest="d1")]
    assert "harness code 'abc+dirty (d1)' in part 1/3, 'abc+dirty (d2)' here" in _refusal(dirty)
    assert harness_commits({"git_commit": "abc", "earlier_commits": ["no git"]}) == ["no git", "abc"]
    # a tree that differed from its commit is another version: refused too
    assert "'abc' in part 1/3, 'abc+dirty' here" in _refusal([_shard(1), _shard(2, git_dirty=True), _shard(3)])


def test_a_part_still_running_is_refused_with_the_resume_command() -> None:
    message = _refusal([_shard(1), _shard(2, status="running"), _shard(3)])
    assert "still running" in message and "harness run --resume /runs/s2" in message


def test_overlapping_or_incomplete_parts_are_refused() -> None:
    assert "overlap" in _refusal([_shard(1, ops=("a", "b")), _shard(2), _shard(3)])
    assert "in no part" in _refusal([_shard(1, all_ops=("a", "b", "c", "d")), _shard(2), _shard(3)])


def test_merged_run_json_names_every_part_and_keeps_the_fingerprint() -> None:
    shards = check_parts([_shard(2, status="complete-with-failures"), _shard(1), _shard(3)])
    outcomes = [OpOutcome(op, f"{s.label}:0", "PASS") for s in shards for op in s.ops]
    info: Mapping[str, Any] = merged_info(shards, "merged", outcomes)
    assert info["run_id"] == "merged" and "shard" not in info
    assert info["status"] == "complete-with-failures"
    assert [p["op"] for p in info["plan"]] == ["a", "b", "c"]
    assert [p["device"] for p in info["plan"]] == ["1/3:0", "2/3:0", "3/3:0"]
    assert [m["run_id"] for m in info["merged_from"]] == ["r1", "r2", "r3"]
    assert info["devices"] == ["1/3:0", "2/3:0", "3/3:0"]
    assert info["fingerprint"] == fingerprint(_shard(1).info)


def test_parts_made_with_different_software_are_refused_unless_allowed_and_then_listed() -> None:
    def ident(torch: str, gems: str = "5.3.4") -> dict[str, Any]:
        return {"device_name": "H200", "device_arch": "sm_90", "torch": torch, "flag_gems": {"version": gems}}

    parts = [_shard(1, identity=ident("2.11.0")), _shard(2, identity=ident("2.11.0", "5.3.3")),
             _shard(3, identity=ident("2.12.0"))]
    message = _refusal(parts)
    assert "different software" in message and "--allow-mismatch" in message
    assert "part 2/3 (/runs/s2): flag_gems '5.3.4' in part 1/3, '5.3.3' here" in message
    assert "part 3/3 (/runs/s3): torch '2.11.0' in part 1/3, '2.12.0' here" in message
    shards = check_parts(parts, allow_mismatch=True)
    info = merged_info(shards, "merged", [OpOutcome(op, "0", "PASS") for s in shards for op in s.ops])
    assert len(info["software_mismatch"]) == 2 and info["fingerprint"] == fingerprint(parts[0].info)
    assert "software_mismatch" not in merged_info(check_parts([_shard(1), _shard(2), _shard(3)]), "m", [])


def test_compare_refuses_a_run_merged_from_parts_of_different_software_unless_allowed(tmp_path: Path) -> None:
    from harness.compare.compare import RunData, check_environment

    alike = RunData(path=tmp_path / "base", info=_info(), records=())
    merged = RunData(path=tmp_path / "head", info=_info(software_mismatch=["part 2/2 (/p2): torch ..."]), records=())
    with pytest.raises(UsageError) as err:
        check_environment(alike, merged, allow_mismatch=False)
    assert "merged from parts of different software" in err.value.message
    (line,) = check_environment(alike, merged, allow_mismatch=True)
    assert "--allow-mismatch" in line and "torch" in line
    from harness.compare.history import check_history_environment

    with pytest.raises(UsageError) as err:
        check_history_environment(merged, [], allow_mismatch=False)
    assert "merged from parts of different software" in err.value.message
    assert check_history_environment(alike, [], allow_mismatch=False) == []
