"""The host's side of an untrusted gate side: the check of its output folder, the copy that
follows no link, the folders of its own, and text that reaches a workflow log inert
(harness.compare.untrusted, harness.compare.gate). No docker: tests/integration/
test_gate_container.py plants the same attacks from an op in the real container."""

from __future__ import annotations

import io
import os
import socket
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from harness.compare import untrusted
from harness.compare.gate import GateSide, run_gate
from harness.compare.untrusted import (
    BLOCK_DEVICE,
    CHAR_DEVICE,
    FIFO,
    HARD_LINK,
    HOST_OWNED,
    NOT_A_RUN,
    SOCKET,
    SYMLINK,
    TOO_DEEP,
    TOO_LARGE,
    Finding,
    check_tree,
    commands_stopped,
    copy_checked,
    entry_kind,
    inert,
    log_safe,
    log_safe_errors,
    refusal,
    remove_tree,
)
from harness.errors import GateFailed, UsageError
from tests.actions_log import RESUMED, read_log
from tests.unit.test_gate_evidence import record, write_run

SECRET = "runner-only-secret-7f3a"
HOSTILE_NAME = "x\n::warning::forged ##[error]forged"


def _run(path: Path) -> Path:
    """A run directory as `harness run` leaves it: folders and plain files."""
    run = write_run(path, [record("add")])
    (run / "logs").mkdir()
    (run / "logs" / "add.log").write_text("ok\n")
    (run / "autotune").mkdir()
    (run / "autotune" / "add.json").write_text("{}\n")
    (run / "specs").mkdir()
    (run / "specs" / "compare.json").write_text("{}\n")  # an op named compare: its spec, not the host's
    return run


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    secret.chmod(0o600)
    return secret


def _kinds(findings: Sequence[Finding]) -> dict[str, str]:
    return {f.path: f.kind for f in findings}


def test_a_run_as_harness_run_leaves_it_passes_the_check(tmp_path: Path) -> None:
    _run(tmp_path / "side" / "head-1")
    _run(tmp_path / "side" / "head-2")
    assert check_tree(tmp_path / "side", run_dirs=["head-1", "head-2"]) == []
    assert check_tree(tmp_path / "absent") == []


def test_every_link_and_special_file_is_named_with_its_path_and_kind(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    run = _run(tmp_path / "side" / "head-1")
    (run / "autotune" / "mm.json").symlink_to(secret)  # the R1 attack: a link to a host file
    (run / "ir").symlink_to(secret.parent, target_is_directory=True)  # a link to a host folder
    (run / "logs" / "a.log").write_text("a")
    os.link(run / "logs" / "a.log", run / "logs" / "b.log")
    os.mkfifo(run / "fifo")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(run / "sock"))
        found = check_tree(tmp_path / "side", run_dirs=["head-1"])
    assert _kinds(found) == {
        "head-1/autotune/mm.json": SYMLINK, "head-1/ir": SYMLINK, "head-1/logs/a.log": HARD_LINK,
        "head-1/logs/b.log": HARD_LINK, "head-1/fifo": FIFO, "head-1/sock": SOCKET,
    }
    by_path = {f.path: f for f in found}
    assert by_path["head-1/autotune/mm.json"].detail == f"to {secret}"
    assert by_path["head-1/logs/a.log"].detail == "2 names"
    # Nothing was read through the links: the folder linked to is not listed either.
    assert not any("secret.txt" in f.path for f in found)


def test_device_nodes_and_unknown_types_are_named_from_the_mode_alone() -> None:
    def status(mode: int, nlink: int = 1) -> os.stat_result:
        return os.stat_result((mode, 1, 1, nlink, 0, 0, 0, 0, 0, 0))

    assert entry_kind(status(stat.S_IFCHR | 0o666)) == CHAR_DEVICE
    assert entry_kind(status(stat.S_IFBLK | 0o660)) == BLOCK_DEVICE
    assert entry_kind(status(stat.S_IFREG | 0o644)) is None
    assert entry_kind(status(stat.S_IFREG | 0o644, nlink=3)) == HARD_LINK
    assert entry_kind(status(stat.S_IFDIR | 0o755, nlink=5)) is None  # a folder's links are its subfolders
    assert entry_kind(status(0o170000)) == untrusted.UNKNOWN


def test_anything_beside_the_runs_and_the_hosts_file_names_are_refused(tmp_path: Path) -> None:
    side = tmp_path / "side"
    run = _run(side / "head-1")
    (side / "compare.md").write_text("## Performance comparison: PASS\n")  # a forged verdict
    (side / "base-1").mkdir()  # where the base side's run was, when both shared one folder
    (side / "base-1" / "records.jsonl").write_text("")
    (run / "compare.md").write_text("forged")
    (run / "compare.html").write_text("forged")
    found = check_tree(side, run_dirs=["head-1"])
    assert _kinds(found) == {"base-1": NOT_A_RUN, "compare.md": NOT_A_RUN,
                             "head-1/compare.html": HOST_OWNED, "head-1/compare.md": HOST_OWNED}
    # A run of a later repeat is not there yet: head-2 is refused after run 1.
    _run(side / "head-2")
    assert "head-2" in _kinds(check_tree(side, run_dirs=["head-1"]))
    # Without the layout, only the kinds of entries count.
    assert check_tree(side) == []


def test_too_deep_and_too_large_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = tmp_path / "deep"
    path = deep
    for _ in range(untrusted.MAX_DEPTH + 2):
        path = path / "d"
    path.mkdir(parents=True)
    assert [f.kind for f in check_tree(deep)] == [TOO_DEEP]
    big = tmp_path / "big"
    big.mkdir()
    (big / "f").write_bytes(b"x" * 100)
    monkeypatch.setattr(untrusted, "MAX_TREE_BYTES", 99)
    assert [(f.path, f.kind) for f in check_tree(big)] == [(".", TOO_LARGE)]
    with pytest.raises(GateFailed, match="more than 99 bytes"):
        copy_checked(big, tmp_path / "copy")


def test_the_copy_follows_no_link_and_gives_the_files_the_hosts_modes(tmp_path: Path) -> None:
    run = _run(tmp_path / "side" / "head-1")
    (run / "logs" / "add.log").chmod(0o4777)  # setuid, world-writable: not carried over
    (tmp_path / "copy").mkdir()
    dst = tmp_path / "copy" / "head-1"
    assert copy_checked(run, dst) == sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    assert sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*")) == sorted(
        p.relative_to(run).as_posix() for p in run.rglob("*"))
    assert (dst / "records.jsonl").read_bytes() == (run / "records.jsonl").read_bytes()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((dst / "logs" / "add.log").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((dst / "logs").stat().st_mode) == 0o777 & ~umask


def test_the_copy_refuses_a_link_met_on_the_way_and_a_linked_source(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    run = _run(tmp_path / "side" / "head-1")
    (run / "autotune" / "mm.json").symlink_to(secret)  # as if swapped in after the check
    with pytest.raises(GateFailed, match="autotune/mm.json: a symbolic link"):
        copy_checked(run, tmp_path / "copy")
    linked = tmp_path / "linked"
    linked.symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(GateFailed, match="Copying .*linked failed"):
        copy_checked(linked, tmp_path / "copy2")
    for copy in (tmp_path / "copy", tmp_path / "copy2"):
        assert all(SECRET not in p.read_text() for p in copy.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_refusal_names_each_finding_and_nothing_in_it_is_a_workflow_command(tmp_path: Path) -> None:
    findings = [Finding("head-1/" + HOSTILE_NAME, SYMLINK, "to ::add-mask::x"), Finding("head-1/f", FIFO)]
    findings += [Finding(f"head-1/n{i}", SOCKET) for i in range(untrusted.MAX_SHOWN)]
    error = refusal(findings, "The head side (pr)", tmp_path)
    assert isinstance(error, GateFailed) and error.exit_code == 1
    assert f"left {len(findings)} entries" in error.message
    assert "head-1/x\\x0a:\\x3awarning:\\x3aforged ##\\x5berror]forged: symbolic link (to :\\x3aadd-mask:\\x3ax)" \
        in error.message
    assert "and 2 more" in error.message
    assert read_log(f"harness: error: {error.message}").obeyed == []


def test_inert_and_log_safe_leave_nothing_a_runner_obeys() -> None:
    hostile = "ok\n::warning::a\r::add-mask::b\r\n  ::error title=x::c\nmid ##[set-output name=y]d\n::::"
    assert read_log(hostile).others == ["warning", "add-mask", "error", "set-output"]  # the stand-in sees them
    assert read_log(log_safe(hostile)).obeyed == []
    assert log_safe(hostile).count("\n") == hostile.count("\n")  # lines kept
    assert log_safe("std::vector at a::b") == "std::vector at a::b"  # mid-line :: left alone
    assert read_log(inert(hostile)).obeyed == [] and "\n" not in inert(hostile)
    assert inert("a\\b\u200b\udcff😀") == "a\\\\b\\u200b\\udcff\\U0001f600"


def test_log_safe_errors_keeps_the_class_and_exit_code() -> None:
    with pytest.raises(UsageError) as caught, log_safe_errors():
        raise UsageError("bad run.json:\n::add-mask::x")
    assert caught.value.exit_code == 2 and caught.value.message == "bad run.json:\n:\\x3aadd-mask::x"


def test_commands_are_stopped_around_side_text_only_under_actions() -> None:
    plain = io.StringIO()
    with commands_stopped(plain, {}) as stopped:
        plain.write("::warning::side\n")
    assert not stopped and plain.getvalue() == "::warning::side\n"

    logs: list[str] = []
    for _ in range(2):
        stream = io.StringIO()
        with pytest.raises(RuntimeError), commands_stopped(stream, {"GITHUB_ACTIONS": "true"}) as stopped:
            assert stopped
            stream.write("::warning::side\n##[add-mask]x\n::stop-commands::mine\nno newline at the end")
            raise RuntimeError("the side failed")
        logs.append(stream.getvalue())
    for log in logs:
        seen = read_log(log + "::warning::the host's own, after\n")
        assert seen.obeyed == ["stop-commands", RESUMED, "warning"] and not seen.stopped
    assert logs[0].splitlines()[0] != logs[1].splitlines()[0]  # a fresh token each time


# --- the whole gate with untrusted sides, each side run by a stand-in for the container --------


def _gate(tmp_path: Path, attack: Callable[[Path], None] | None = None, repeats: int = 1) -> tuple[Path, list[Path]]:
    """run_gate with untrusted sides; each run writes a run directory, and head's runs call
    ``attack(run_dir)`` afterwards. Returns OUT and the folders each run was given."""
    folders: list[Path] = []

    def runner(side: GateSide, run_dir: Path, run_id: str, run_args: Sequence[str]) -> None:
        folders.append(run_dir.parent)
        replay = list(run_args[run_args.index("--replay-from") + 1:]) if "--replay-from" in run_args else []
        assert replay == ([] if run_dir.name.endswith("-1") else [str(run_dir.parent / f"{side.name}-1")])
        if run_dir.name.endswith("-1"):
            assert list(run_dir.parent.iterdir()) == []  # each side starts from an empty folder
        write_run(run_dir, [record("add", 1.0, seed=len(folders))])
        if side.name == "head" and attack is not None:
            attack(run_dir)

    out = tmp_path / "gate"
    trees = {name: tmp_path / f"tree-{name}" for name in ("base", "head")}
    for tree in trees.values():
        tree.mkdir()
    run_gate({k: str(v) for k, v in trees.items()}, out, [], repeats, {}, side_runner=runner,
             untrusted_sides=True)
    return out, folders


def _published(out: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


def test_each_side_runs_in_a_folder_of_its_own_and_out_holds_only_host_copies(tmp_path: Path) -> None:
    out, folders = _gate(tmp_path, repeats=2)
    base, head = folders[0], folders[1]
    assert base != head and {folders[2], folders[3]} == {base, head}
    assert base.parent == head.parent and base.parent.parent == out.parent  # beside OUT, not in it
    assert not base.parent.exists()  # removed after the gate
    assert sorted(p.name for p in out.iterdir()) == ["base", "head", "repeats"]
    assert sorted(p.name for p in (out / "repeats").iterdir()) == ["base-1", "base-2", "head-1", "head-2"]
    assert not any(p.is_symlink() for p in out.rglob("*"))


def test_a_link_planted_by_head_fails_the_gate_closed_and_nothing_is_published(tmp_path: Path) -> None:
    secret = _secret(tmp_path)

    def plant(run_dir: Path) -> None:
        (run_dir / "autotune").mkdir()
        (run_dir / "autotune" / "mm.json").symlink_to(secret)

    with pytest.raises(GateFailed, match=r"(?s)The head side .* left 1 entry .*head-1/autotune/mm.json: symbolic link"):
        _gate(tmp_path, plant)
    out = tmp_path / "gate"
    assert sorted(p.name for p in (out / "repeats").iterdir()) == ["base-1"]  # head's run never copied
    assert not (out / "head").exists() and not (out / "compare.md").exists()
    assert SECRET not in _published(out)
    assert not any(p.name.startswith(".gate-sides-") for p in tmp_path.iterdir())  # its folder is gone


def test_head_writing_where_base_used_to_be_or_forging_the_verdict_is_refused(tmp_path: Path) -> None:
    def forge(run_dir: Path) -> None:
        (run_dir.parent / "compare.md").write_text("## Performance comparison: PASS\n")
        (run_dir.parent / "repeats" / "base-1").mkdir(parents=True)
        (run_dir.parent / "repeats" / "base-1" / "records.jsonl").write_text("forged\n")
        (run_dir / "compare.md").write_text("## Performance comparison: PASS\n")

    with pytest.raises(GateFailed) as caught:
        _gate(tmp_path, forge)
    for shown in ("compare.md: not a run directory", "repeats: not a run directory",
                  "head-1/compare.md: a file only the host writes"):
        assert shown in caught.value.message
    base = (tmp_path / "gate" / "repeats" / "base-1" / "records.jsonl").read_text()
    assert "forged" not in base and base.count("\n") == 1  # base's one record, as base wrote it


def test_a_side_folder_made_read_only_is_still_removed(tmp_path: Path) -> None:
    folder = tmp_path / "side"
    run = _run(folder / "head-1")
    (run / "logs").chmod(0o500)
    folder.chmod(0o500)
    remove_tree(folder)
    assert not folder.exists()


def test_a_replay_path_is_mapped_into_the_container_as_written_never_through_a_link(tmp_path: Path) -> None:
    from harness.container.gate import in_reports

    mount = tmp_path / "head"
    mount.mkdir()
    (mount / "head-1").symlink_to(tmp_path, target_is_directory=True)  # left by the side's run 1
    assert in_reports(str(mount / "head-1"), mount) == "reports/head-1"
    assert in_reports(str(tmp_path / "base" / "base-1"), mount) == str(tmp_path / "base" / "base-1")
