"""Versioned files and their checked readers: run.json, the child spec, and the one fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.contract import CHILD_SPEC_VERSION, ChildSpec
from harness.errors import UsageError
from harness.options import RunOptions
from harness.results.runinfo import (
    ALIKE_FIELDS,
    RUN_SCHEMA_VERSION,
    RunInfo,
    alike_values,
    fingerprint,
    read_run_info,
)


def _info(**extra: object) -> dict[str, object]:
    info: dict[str, object] = {"schema_version": RUN_SCHEMA_VERSION, "run_id": "r1", "status": "complete",
                               "backend": "cuda",
                               "timer": "graph", "level": "core",
                               "identity": {"device_name": "NVIDIA H200", "device_arch": "sm_90"},
                               "options": {"cache": "cold", "provider": "builtin"}}
    info.update(extra)
    return info


def test_a_newer_or_damaged_run_json_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_info(schema_version=RUN_SCHEMA_VERSION + 1)))
    with pytest.raises(UsageError, match="written by a newer harness.*Upgrade the harness"):
        read_run_info(path)
    path.write_text('{"run_id": "r1", "schema_versi')
    with pytest.raises(UsageError, match="not valid JSON.*damaged"):
        read_run_info(path)
    path.write_text(json.dumps({"something": "else"}))
    with pytest.raises(UsageError, match="not a run.json"):
        read_run_info(path)
    with pytest.raises(UsageError, match="no run.json there"):
        read_run_info(tmp_path / "nowhere" / "run.json")
    path.write_text(json.dumps(_info()))
    assert read_run_info(path)["run_id"] == "r1"


@pytest.mark.parametrize(("change", "says"), [
    ({"status": None}, "lacks status, which every run.json has"),
    ({"backend": None}, "lacks backend"),
    ({"status": None, "backend": None}, "lacks status, backend"),
    ({"status": 1}, "status 1 is not what `harness run` writes"),
    ({"status": "PASS"}, "status 'PASS' (one of running, interrupted, complete, complete-with-failures)"),
    ({"backend": ["cpu"]}, "backend ['cpu'] is not what"),
])
def test_a_run_json_missing_a_required_field_is_refused(tmp_path: Path, change: dict[str, object], says: str) -> None:
    info = {k: v for k, v in {**_info(), **change}.items() if v is not None}
    (tmp_path / "run.json").write_text(json.dumps(info))
    with pytest.raises(UsageError) as caught:
        read_run_info(tmp_path / "run.json")
    assert says in caught.value.message


def test_an_option_this_harness_does_not_know_is_named_not_a_type_error() -> None:
    stored = {**RunOptions().to_dict(), "warp_drive": True}
    with pytest.raises(UsageError, match="run.json was written with option.*warp_drive.*harness version that started it"):
        RunOptions.from_stored(stored, "reports/x/run.json")
    assert RunOptions.from_stored(RunOptions(ops=("mm",)).to_dict(), "x").ops == ("mm",)


def test_resume_of_a_run_with_an_unknown_option_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps(_info(options={**RunOptions().to_dict(), "removed_flag": 1}, plan=[],
                                                   status="interrupted")))
    assert main(["run", "--resume", str(run)], env={}) == 2
    assert "removed_flag" in capsys.readouterr().err


def test_a_child_spec_of_another_version_is_refused(tmp_path: Path) -> None:
    spec = ChildSpec(run_id="r", run_dir=str(tmp_path), backend="cpu", device="cpu", op="add", provider="builtin",
                     dtypes=("float32",), shapes=((4,),), seed=0, timer="cpu")
    path = tmp_path / "spec.json"
    spec.dump(path)
    assert ChildSpec.load(path) == spec
    path.write_text(path.read_text().replace(f'"spec_version": {CHILD_SPEC_VERSION}', '"spec_version": 0'))
    with pytest.raises(ValueError, match="different harness versions"):
        ChildSpec.load(path)


def test_the_fingerprint_changes_with_each_alike_field_and_nothing_else() -> None:
    base = _info()
    assert fingerprint(base) == fingerprint(_info(run_id="other", started_at="later"))
    changed = {
        "backend": _info(backend="rocm"),
        "device model": _info(identity={"device_name": "NVIDIA H100", "device_arch": "sm_90"}),
        "device arch": _info(identity={"device_name": "NVIDIA H200", "device_arch": "sm_100"}),
        "timer": _info(timer="direct"),
        "level": _info(level="comprehensive"),
        "cache": _info(options={"cache": "warm", "provider": "builtin"}),
        "provider": _info(options={"cache": "cold", "provider": "flaggems"}),
    }
    assert set(changed) == set(ALIKE_FIELDS)
    for label, info in changed.items():
        assert fingerprint(info) != fingerprint(base), label
        assert alike_values(info)[label] != alike_values(base)[label]


def test_run_info_reads_back_what_it_wrote_and_keeps_what_it_does_not_type(tmp_path: Path) -> None:
    info = RunInfo(run_id="r", status="complete", backend="cpu", devices=("cpu",), level="smoke", timer="cpu",
                   plan=({"op": "add", "device": "cpu", "dtypes": ["float32"], "shapes": [[8]],
                          "provider": "builtin", "autotuned": False},),
                   ops=({"op": "add", "status": "PASS"},),
                   sections={"suite": {"path": "/fg/benchmark"}, "merged_from": ["a", "b"]}).with_fingerprint()
    path = tmp_path / "run.json"
    info.dump(path)
    data = json.loads(path.read_text())
    assert data["suite"] == {"path": "/fg/benchmark"} and data["devices"] == ["cpu"]
    assert "shard" not in data and "report_html" not in data  # optional fields left out are not written
    assert data["finished_at"] is None and data["fingerprint"] == fingerprint(data)
    assert RunInfo.load(path) == info
    assert read_run_info(path) == data


def test_run_info_refuses_what_read_run_info_refuses(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    RunInfo(run_id="r", status="running", backend="cpu", devices=("cpu",)).dump(path)
    path.write_text(path.read_text().replace('"status": "running"', '"status": "done"'))
    with pytest.raises(UsageError, match="status 'done'") as by_mapping:
        read_run_info(path)
    with pytest.raises(UsageError) as by_class:
        RunInfo.load(path)
    assert by_class.value.message == by_mapping.value.message


def test_a_resume_under_another_commit_keeps_the_earlier_sessions_commits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run measured by two versions of the code names both: the resuming harness's commit, and
    the earlier sessions' in earlier_commits (part 5 of the H200 corpus sample ran two)."""
    from harness.run import execute
    from harness.run.provenance import CommitState

    monkeypatch.setattr(execute, "_source", lambda: CommitState("new", False))
    monkeypatch.setattr(execute, "_digest", lambda: "code-new")
    first = RunInfo.from_dict(_info(git_commit="old", git_dirty=True))
    assert execute._earlier_commits(first) == ("old+dirty",)
    again = RunInfo.from_dict(_info(git_commit="mid", git_dirty=False, earlier_commits=["old+dirty"]))
    assert again.earlier_commits == ("old+dirty",)  # read back as a tuple
    assert execute._earlier_commits(again) == ("old+dirty", "mid")
    assert execute._earlier_commits(RunInfo.from_dict(_info(git_commit="new", git_dirty=False))) == ()
    assert "earlier_commits" not in RunInfo.from_dict(_info()).to_dict()  # written only where there are some
    # the same code under another label (a copied tree's stale .git) is not another version
    relabelled = RunInfo.from_dict(_info(git_commit="old", git_dirty=True, harness_digest="code-new"))
    assert execute._earlier_commits(relabelled) == ()
    assert RunInfo.from_dict(_info(earlier_commits=["a"])).to_dict()["earlier_commits"] == ["a"]


def test_a_run_asks_git_and_digests_its_code_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's start, a resume and its end record one answer: the code this process loaded."""
    from harness.run import execute
    from harness.run.provenance import CommitState

    asked: list[str] = []

    def git(path: Path) -> CommitState:
        asked.append("git")
        return CommitState("abc", False)

    def digest(path: Path) -> str:
        asked.append("digest")
        return "d1"

    monkeypatch.setattr(execute, "commit_state", git)
    monkeypatch.setattr(execute, "code_digest", digest)
    execute._source.cache_clear()
    execute._digest.cache_clear()
    try:
        assert [execute._source(), execute._source()] == [CommitState("abc", False)] * 2
        assert [execute._digest(), execute._digest()] == ["d1", "d1"]
        assert asked == ["git", "digest"]
    finally:  # the next test asks for the real answer
        execute._source.cache_clear()
        execute._digest.cache_clear()


def test_the_code_digest_follows_the_files_content_and_names_not_caches(tmp_path: Path) -> None:
    from harness.run.provenance import code_digest

    def package(name: str, files: dict[str, str]) -> Path:
        root = tmp_path / name
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    base = {"a.py": "x = 1\n", "t/run.html": "<p>", "c/table.yaml": "k: 1\n"}
    digest = code_digest(package("one", base))
    assert len(digest) == 16
    assert code_digest(package("two", {**base, "__pycache__/a.pyc": "junk", "notes.txt": "x"})) == digest
    assert code_digest(package("three", {**base, "a.py": "x = 2\n"})) != digest
    assert code_digest(package("four", {**base, "b.py": "x = 1\n"})) != digest
