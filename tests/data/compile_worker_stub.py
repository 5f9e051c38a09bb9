"""A stand-in for ``python -m harness.compile.worker TASK_JSON`` (tests/unit/test_compile.py).

It writes its pid to PIDS/worker, starts a ``sleep`` in its own process group (PIDS/group) and,
when the task's ``stub.stray`` is set, one in a session of its own (PIDS/stray), which ending the
group does not reach. It waits ``stub.start_s`` seconds (its imports), then begins the task's
``stub.steps`` one by one as the real worker begins variants (a line in the progress file), each
taking its seconds; -1 never ends. After the last step it writes an empty result and exits 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

task = json.loads(Path(sys.argv[1]).read_text())
stub = task["stub"]
pids = Path(stub["pids"])
pids.mkdir(parents=True, exist_ok=True)
(pids / "worker").write_text(str(os.getpid()))
group = subprocess.Popen(["sleep", "300"])
(pids / "group").write_text(str(group.pid))
if stub.get("stray"):
    stray = subprocess.Popen(["sleep", "300"], start_new_session=True)
    (pids / "stray").write_text(str(stray.pid))


def take(seconds: float) -> None:
    while seconds < 0:
        time.sleep(60)
    time.sleep(seconds)


take(stub.get("start_s", 0.0))
with open(task["progress"], "a") as progress:
    for index, seconds in enumerate(stub["steps"]):
        progress.write(f"stub variant-{index}\n")
        progress.flush()
        take(seconds)
group.kill()
group.wait()
Path(task["result"]).write_text(json.dumps({"target": task["target"], "ops": [], "triton_version": ""}))
