"""The run directory lock (harness.run.rundir.run_lock): one harness process per run directory, no
``run.lock`` left behind once the run ends, and a lock left by a killed run never in the way."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness.run.rundir as run_module
from harness.errors import UsageError
from harness.run.rundir import run_lock as _run_lock

LOCK_FILE = "run.lock"


def test_the_lock_file_exists_while_held_and_is_removed_after(tmp_path: Path) -> None:
    with _run_lock(tmp_path):
        assert (tmp_path / LOCK_FILE).is_file()
    assert not (tmp_path / LOCK_FILE).exists()


def test_the_lock_file_is_removed_when_the_run_raises(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), _run_lock(tmp_path):
        raise KeyboardInterrupt
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_second_holder_is_refused_and_leaves_the_first_ones_lock_alone(tmp_path: Path) -> None:
    with _run_lock(tmp_path):
        for _ in range(2):  # refused, and the refusal neither removed nor released the lock
            with pytest.raises(UsageError, match="in use by another harness process"), _run_lock(tmp_path):
                pytest.fail("entered a locked run directory")
            assert (tmp_path / LOCK_FILE).is_file()
    assert not (tmp_path / LOCK_FILE).exists()


def _holder(path: Path) -> subprocess.Popen[str]:
    """Another process holding an flock on ``path``, as a running harness does."""
    code = ("import fcntl, sys, time\nfh = open(sys.argv[1], 'a+')\nfcntl.flock(fh, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\ntime.sleep(300)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "locked\n"
    return child


def test_a_live_holder_in_another_process_refuses_and_a_killed_one_does_not(tmp_path: Path) -> None:
    holder = _holder(tmp_path / LOCK_FILE)
    try:
        with pytest.raises(UsageError, match="in use"), _run_lock(tmp_path):
            pytest.fail("entered a run directory another process holds")
        assert (tmp_path / LOCK_FILE).is_file()
    finally:
        holder.kill()  # SIGKILL, as the OOM killer would: the file stays behind, locking nothing
        holder.wait()
    assert (tmp_path / LOCK_FILE).is_file()
    with _run_lock(tmp_path):  # the resume after the kill
        pass
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_lock_taken_on_a_file_removed_meanwhile_is_taken_again_on_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened before the previous holder removed the file, locked after it let go: that lock is
    on a name that is gone, and a third process may already hold the new file."""
    path = tmp_path / LOCK_FILE
    path.write_text("")
    real = fcntl.flock
    third: list[int] = []

    def flock(fd: int, operation: int) -> None:
        if not third:  # between this process's open and its lock: removed, and taken by another
            path.unlink()
            third.append(os.open(path, os.O_RDWR | os.O_CREAT))
            real(third[0], fcntl.LOCK_EX | fcntl.LOCK_NB)
        real(fd, operation)

    monkeypatch.setattr(run_module.fcntl, "flock", flock)
    try:
        with pytest.raises(UsageError, match="in use"), _run_lock(tmp_path):
            pytest.fail("entered a run directory while another process holds its lock file")
        assert path.is_file()  # the holder's file, left alone
    finally:
        os.close(third[0])
    monkeypatch.setattr(run_module.fcntl, "flock", real)
    with _run_lock(tmp_path):
        pass
    assert not path.exists()


def test_a_lock_file_removed_between_open_and_lock_is_created_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / LOCK_FILE
    real = fcntl.flock
    calls: list[int] = []

    def flock(fd: int, operation: int) -> None:
        if not calls:
            path.unlink()  # the previous holder finished in between
        calls.append(fd)
        real(fd, operation)

    monkeypatch.setattr(run_module.fcntl, "flock", flock)
    with _run_lock(tmp_path):
        assert len(calls) == 2 and path.is_file()
        other = os.open(path, os.O_RDWR)  # the file the path names now is the locked one
        try:
            with pytest.raises(BlockingIOError):
                real(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    assert not path.exists()


def test_a_fresh_run_is_refused_when_the_directory_came_to_hold_a_run(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(UsageError, match="already holds a run"), _run_lock(tmp_path, fresh=True):
        pytest.fail("a fresh run entered a directory that holds one")
    assert not (tmp_path / LOCK_FILE).exists()
    with _run_lock(tmp_path):  # a resume may
        pass


def test_the_lock_descriptor_is_not_inherited(tmp_path: Path) -> None:
    """An op process that inherited it would hold the lock after the harness died."""
    with _run_lock(tmp_path):
        lock = os.stat(tmp_path / LOCK_FILE)
        child = subprocess.Popen(["sleep", "30"], close_fds=False)  # Popen returns once it has exec'd
        try:
            held = []
            for fd in Path(f"/proc/{child.pid}/fd").iterdir():
                try:
                    held.append(os.stat(fd))
                except OSError:
                    pass
            assert not any(os.path.samestat(lock, st) for st in held)
        finally:
            child.kill()
            child.wait()
