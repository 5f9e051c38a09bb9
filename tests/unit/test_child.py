"""The op process's parent watchdog (harness.child.watch_parent, end_own_group)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness.child.process import _expected_parent, watch_parent
from harness.contract import PARENT_PID_ENV
from tests.procs import alive

ROOT = Path(__file__).resolve().parents[2]


def test_the_watchdog_acts_once_the_parent_is_not_the_one_expected() -> None:
    gone = threading.Event()
    watch_parent(-1, gone.set, interval_s=0.01)  # never anyone's parent
    assert gone.wait(5)


def test_the_watchdog_waits_while_the_parent_lives() -> None:
    gone = threading.Event()
    thread = watch_parent(os.getppid(), gone.set, interval_s=0.01)
    assert thread.daemon
    assert not gone.wait(0.2)


def test_the_expected_parent_comes_from_the_environment_and_leaves_it() -> None:
    env = {PARENT_PID_ENV: "4242", "OTHER": "x"}
    assert _expected_parent(env) == 4242 and env == {"OTHER": "x"}
    assert _expected_parent({}) == os.getppid()
    assert _expected_parent({PARENT_PID_ENV: "junk"}) == os.getppid()


def _orphan(tmp_path: Path, new_session: bool) -> tuple[int, int]:
    """A middle process starts a watched process (with a stray child of its own) and exits at
    once, as a SIGKILLed harness would. Returns the watched pid and the stray's."""
    pids = tmp_path / "pids"
    watched = (
        "import os, subprocess, sys, time\n"
        "from harness.child.process import watch_parent\n"
        "stray = subprocess.Popen(['sleep', '300'])\n"
        "watch_parent(int(sys.argv[2]), interval_s=0.05)\n"
        "open(sys.argv[1], 'w').write(f'{os.getpid()} {stray.pid}')\n"
        "time.sleep(300)\n"
    )
    middle = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {watched!r}, sys.argv[1], str(os.getpid())], "
        f"start_new_session={new_session})\n"
        "while not os.path.exists(sys.argv[1]) or not open(sys.argv[1]).read(): time.sleep(0.02)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-c", middle, str(pids)], env=env, timeout=60, check=True)
    watched_pid, stray_pid = (int(x) for x in pids.read_text().split())
    return watched_pid, stray_pid


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_an_orphaned_group_leader_ends_itself_and_its_group(tmp_path: Path) -> None:
    watched, stray = _orphan(tmp_path, new_session=True)
    try:
        assert _gone_within(watched, 10) and _gone_within(stray, 10)
    finally:
        for pid in (watched, stray):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_an_orphan_that_leads_no_group_ends_itself_only(tmp_path: Path) -> None:
    """It shares a group it did not start (here, this test's): that group is left alone."""
    watched, stray = _orphan(tmp_path, new_session=False)
    try:
        assert _gone_within(watched, 10)
        assert alive(stray)
    finally:
        for pid in (watched, stray):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_an_op_process_writes_its_timeline_next_to_its_exit_file(tmp_path: Path) -> None:
    """Where an op's time goes outside its cases: the process's start, pytest's start, its session
    and its return, as wall-clock seconds in ``<op>.times.json``."""
    import json
    import subprocess
    import sys

    from harness.child.process import times_path

    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    exit_file = tmp_path / "op.exit"
    done = subprocess.run([sys.executable, "-m", "harness.child", str(exit_file), "--", "-q", "-p", "no:cacheprovider",
                           str(tmp_path / "test_one.py")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert exit_file.read_text() == "0\n"
    times = json.loads(times_path(exit_file).read_text())
    assert times_path(exit_file).name == "op.times.json"
    order = [times[k] for k in ("started", "pytest", "session_start", "session_end", "returned")]
    assert order == sorted(order) and "go" not in times  # not pre-started: no release


def test_an_op_process_freezes_what_its_imports_and_collection_made(tmp_path: Path) -> None:
    """After collection the heap is in the collector's permanent generation (FlagGems' gc.collect()
    after each row then scans only what the tests made), and garbage the tests make is still
    collected."""
    import json
    import subprocess
    import sys

    from harness.child.process import times_path

    (tmp_path / "test_heap.py").write_text(
        "import gc\n\n"
        "def test_frozen_and_still_collecting():\n"
        "    assert gc.get_freeze_count() > 0\n"
        "    ring = []\n"
        "    ring.append(ring)\n"
        "    del ring\n"
        "    assert gc.collect() >= 1\n")
    exit_file = tmp_path / "op.exit"
    done = subprocess.run([sys.executable, "-m", "harness.child", str(exit_file), "--", "-q", "-p", "no:cacheprovider",
                           str(tmp_path / "test_heap.py")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    times = json.loads(times_path(exit_file).read_text())
    assert times["session_start"] <= times["frozen"] <= times["session_end"]


def test_an_op_processs_pytest_leaves_out_the_plugins_that_cost_it_time(tmp_path: Path) -> None:
    """PYTEST_OFF names plugins as pytest knows them: with those options, none of them is loaded
    (Hypothesis' among them where it is installed, as in the dev environment; a wrong name would
    leave it loaded), and a test written with @given still runs."""
    import importlib.util

    import pytest

    from harness.contract import PYTEST_OFF

    if importlib.util.find_spec("hypothesis") is None:
        pytest.skip("Hypothesis is not installed here")
    blocked = [PYTEST_OFF[i + 1].removeprefix("no:") for i in range(0, len(PYTEST_OFF), 2)]
    assert set(PYTEST_OFF[::2]) == {"-p"} and "hypothesispytest" in blocked
    (tmp_path / "test_plugins.py").write_text(
        "from hypothesis import given, strategies as st\n\n"
        f"BLOCKED = {blocked!r}\n\n"
        "def test_none_loaded(request):\n"
        "    pm = request.config.pluginmanager\n"
        "    assert [n for n in BLOCKED if pm.has_plugin(n)] == []\n"
        "    assert [n for n in BLOCKED if pm.is_blocked(n)] == BLOCKED\n"
        "    modules = {getattr(p, '__name__', '') for p in pm.get_plugins()}\n"
        "    assert '_hypothesis_pytestplugin' not in modules, 'Hypothesis plugin loaded under another name'\n\n"
        "def test_hypothesis_plugin_is_known_by_that_name(request):\n"
        "    import os\n"
        "    if os.environ.get('EXPECT_LOADED'):\n"
        "        assert request.config.pluginmanager.has_plugin('hypothesispytest')\n\n"
        "@given(st.integers())\n"
        "def test_given_runs(x):\n"
        "    assert isinstance(x, int)\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", *PYTEST_OFF, "-c", os.devnull,
                           "--rootdir", str(tmp_path), str(tmp_path / "test_plugins.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    # Without those options the plugin is there, under the name PYTEST_OFF blocks (a wrong name
    # would leave it loaded: the check above would then fail on its module)
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
                            "--rootdir", str(tmp_path), str(tmp_path / "test_plugins.py")],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path,
                           env={**os.environ, "EXPECT_LOADED": "1"})
    assert "1 failed, 2 passed" in plain.stdout and "test_none_loaded" in plain.stdout, plain.stdout
