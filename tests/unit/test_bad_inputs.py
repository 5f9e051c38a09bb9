"""Every bad input is refused cleanly: one table, one row per input (issue 17).

A row is: the command line, the exit code (2 bad input, 3 what the machine lacks), a phrase the
message must hold, and optionally the environment, a [tool.harness] table, files to create first
and paths that must not exist afterwards. Each row runs `harness` in this process (no torch, no
op process: a refusal answers in about 0.1 s) in an empty directory ``<tmp>/a/b`` and checks:
the exit code, the phrase, no traceback, and that nothing was left behind (no file or directory
anywhere under ``<tmp>`` that the row did not create itself; so ``--run-id ../../x`` is caught).

Adding an option: add one row (``bad("run --my-option nonsense", 2, "my-option")``); the coverage
tests at the end fail until every flag of every command, every HARNESS_* variable and every
[tool.harness] key appears in some row.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.cli import main as harness_main
from harness.options import _CONTAINER_KEYS, _OTHER_ENV, RUN_OPTIONS, RunOptions, known_env_names


@dataclass(frozen=True)
class Row:
    args: str  # the command line after `harness`, shell-quoted
    code: int  # expected exit code
    says: str  # a phrase the message must hold (case-insensitive)
    env: Mapping[str, str] = field(default_factory=dict)
    toml: str = ""  # the body of [tool.harness] in ./pyproject.toml
    files: Mapping[str, str | bytes] = field(default_factory=dict)  # relative to the working directory
    absent: tuple[str, ...] = ()  # paths (relative to the working directory) that must not exist after

    @property
    def id(self) -> str:
        extra = [f"{k}={v}" for k, v in self.env.items()] + ([self.toml.replace("\n", "; ")] if self.toml else [])
        return " ".join([self.args, *extra])[:120]


def bad(args: str, code: int, says: str, **kw: object) -> Row:
    return Row(args, code, says, **kw)  # type: ignore[arg-type]


def _run_json(**over: object) -> str:
    info: dict[str, object] = {
        "schema_version": 1, "run_id": "r1", "status": "complete", "backend": "cpu", "level": "smoke",
        "timer": "cpu", "devices": ["cpu"], "identity": {"device_name": "x86_64"}, "options": RunOptions().to_dict(),
        "plan": [{"op": "add", "device": "cpu", "dtypes": ["float32"], "shapes": [[4, 4]], "provider": "builtin"}],
        "ops": [{"op": "add", "device": "cpu", "status": "PASS", "attempts": 1, "elapsed_s": 1.0, "rows": 1, "notes": ""}],
        "dismissed": {}, "started_at": "2026-12-01T00:00:00+00:00",
    }
    info.update(over)
    return json.dumps(info)


RECORD = json.dumps({
    "schema_version": 2, "run_id": "r1", "op": "add", "provider": "builtin", "dtype": "float32", "shape": [4, 4],
    "backend": "cpu", "device": "cpu", "timer": "cpu", "status": "pass", "speedup": 1.0,
    "baseline": {"samples_ms": [1.0, 1.0, 1.0], "summary": {"median": 1.0, "p10": 1.0, "p90": 1.0, "iqr": 0.0,
                                                              "mean": 1.0, "min": 1.0, "n": 3}},
    "candidate": {"samples_ms": [1.0, 1.0, 1.0], "summary": {"median": 1.0, "p10": 1.0, "p90": 1.0, "iqr": 0.0,
                                                               "mean": 1.0, "min": 1.0, "n": 3}},
})
RUN = {"run/run.json": _run_json(), "run/records.jsonl": RECORD + "\n"}  # a complete run of one case
RUN2 = {"run2/run.json": _run_json(run_id="r2"), "run2/records.jsonl": RECORD + "\n"}
CORRUPT = {"bad/run.json": _run_json(run_id="r3"), "bad/records.jsonl": RECORD + "\nnot json at all\n" + RECORD + "\n"}
RUNNING = {"live/run.json": _run_json(run_id="r4", status="running")}
NO_STATUS = {"nost/run.json": json.dumps({k: v for k, v in json.loads(_run_json(run_id="r6")).items() if k != "status"}),
             "nost/records.jsonl": RECORD + "\n"}  # a run.json without a field every run.json has
OPS = {"ops.py": "from harness.ops.base import OpSpec\nHARNESS_OPS = []\n"}


def _ops_module(body: str) -> dict[str, str]:
    """A user's op module (no torch: the parent only imports it and reads its OpSpecs)."""
    spec = ("from harness.ops.base import OpSpec\n"
            "def op(**kw):\n"
            "    base = dict(id='my_op', baseline=abs, candidate=abs, make_inputs=lambda *a: (), bytes_moved=lambda s, i: 0,"
            " flops=lambda s: 0)\n"
            "    base.update(kw)\n"
            "    return OpSpec(**base)\n")
    return {"my_ops.py": spec + body}


ROWS: list[Row] = [
    # -- harness run: each option --------------------------------------------------------------
    bad("run --backend tpu", 2, "Unknown backend 'tpu'"),
    bad("run --backend ''", 2, "--backend: is empty"),
    bad("run --backend cuda --ops softmax", 3, "needs its devices"),
    bad("run --backend rocm --ops softmax", 3, "needs its devices"),
    bad("run --backend npu --ops softmax", 3, "needs its devices"),
    bad("run --backend moore --ops softmax", 3, "needs its devices"),
    bad("run --ops softmaxx", 2, "Unknown op(s): softmaxx"),
    bad("run", 2, "'softmax add' names ops separated by spaces: separate them with commas",
        env={"HARNESS_OPS": "softmax add"}),
    bad("run --ops 'soft\nmax'", 2, "Unknown op(s): soft\\nmax."),  # echoed escaped: one line
    bad("run --ops '\x1b[2J\x1b[31mred'", 2, "Unknown op(s): \\x1b[2J\\x1b[31mred."),
    bad("run --ops-file ops.txt", 2, "Unknown op(s): a\\u202eb (ops.txt line 1)", files={"ops.txt": "a\u202eb\n"}),
    bad("run --ops ''", 2, "--ops: names nothing"),
    bad("run --ops ,", 2, "--ops: names nothing"),
    bad("run --ops other:softmax", 2, "comes from 'builtin'"),
    bad("run --dtypes int3", 2, "Unknown dtype 'int3'"),
    bad("run --dtypes ''", 2, "--dtypes: names nothing"),
    bad("run --dtypes float64", 2, "Unknown dtype 'float64'"),
    bad("run --level galactic", 2, "Unknown level 'galactic'"),
    bad("run --level ''", 2, "Unknown level"),
    bad("run --shapes-file /nonexistent.yaml --ops add", 2, "cannot read it"),
    bad("run --shapes-file shapes.yaml --ops add", 2, "not valid YAML", files={"shapes.yaml": b"\x00\xff\xfe\x80"}),
    bad("run --shapes-file shapes.yaml --ops add", 2, "not valid YAML", files={"shapes.yaml": "add: [[1, 2]"}),
    bad("run --shapes-file shapes.yaml --ops add", 2, "key 'nope' matches no op", files={"shapes.yaml": "nope: [[4]]"}),
    bad("run --shapes-file shapes.yaml --ops add", 2, "shapes.yaml: not valid YAML at line 2, column 1: the key 'add' is "
        "given twice", files={"shapes.yaml": "add: [[4]]\nadd: [[8]]\n"}),
    bad("run --shapes-file shapes.yaml --ops add", 2, "list of positive integers", files={"shapes.yaml": "add: [[0, 4]]"}),
    bad("run --shapes-file shapes.yaml --ops add", 2, "list of positive integers", files={"shapes.yaml": "add: [[true]]"}),
    bad("run --shapes-file shapes.yaml --ops add", 2, "top level must be a mapping", files={"shapes.yaml": "- 1"}),
    bad("run --shapes-file shapes.yaml --ops add", 2, "non-empty list of shapes", files={"shapes.yaml": "add: []"}),
    bad("run --shapes-file shapes.yaml --ops softmax", 2, "takes shapes of 2 dimensions", files={"shapes.yaml": "softmax: [[4]]"}),
    bad("run --shapes-file . --ops add", 2, "cannot read it"),
    bad("run --shapes-file '' --ops add", 2, "--shapes-file: is empty"),
    bad("run --ops-module missing.py", 2, "no such file"),
    bad("run --ops-module no_such_module_xyz", 2, "cannot import it"),
    bad("run --ops-module my_ops.py", 2, "called sys.exit(0)", files=_ops_module("import sys\nsys.exit(0)\n")),
    bad("run --ops-module my_ops.py", 2, "failed to import: ZeroDivisionError", files=_ops_module("1 / 0\n")),
    bad("run --ops-module my_ops.py", 2, "harness_ops() raised RuntimeError",
        files=_ops_module("def harness_ops():\n    raise RuntimeError('boom')\n")),
    bad("run --ops-module my_ops.py", 2, "harness_ops() raised it called sys.exit(3)",
        files=_ops_module("def harness_ops():\n    raise SystemExit(3)\n")),
    bad("run --ops-module my_ops.py", 2, "gave int, not a list", files=_ops_module("HARNESS_OPS = 5\n")),
    bad("run --ops-module my_ops.py", 2, "is not a harness.ops.base.OpSpec", files=_ops_module("HARNESS_OPS = [1]\n")),
    bad("run --ops-module my_ops.py", 2, "defines neither HARNESS_OPS", files=_ops_module("")),
    bad("run --ops-module my_ops.py", 2, "HARNESS_OPS / harness_ops() gave no op", files=_ops_module("HARNESS_OPS = []\n")),
    bad("run --ops-module my_ops.py", 2, "gave no op", files=_ops_module("def harness_ops():\n    return ()\n")),
    bad("run --ops-module my_ops.py", 2, "'float64' is not a dtype the harness measures",
        files=_ops_module("HARNESS_OPS = [op(dtypes=('float64',))]\n")),
    bad("run --ops-module my_ops.py", 2, "dtypes must be a tuple", files=_ops_module("HARNESS_OPS = [op(dtypes='float32')]\n")),
    bad("run --ops-module my_ops.py", 2, "id 'a/b' must be", files=_ops_module("HARNESS_OPS = [op(id='a/b')]\n")),
    bad("run --ops-module my_ops.py", 2, "id 'a,b' must be", files=_ops_module("HARNESS_OPS = [op(id='a,b')]\n")),
    bad("run --ops-module my_ops.py", 2, "id '' must be", files=_ops_module("HARNESS_OPS = [op(id='')]\n")),
    bad("run --ops-module my_ops.py", 2, "id 'x:y' must be", files=_ops_module("HARNESS_OPS = [op(id='x:y')]\n")),
    bad("run --ops-module my_ops.py", 2, "shape_rank must be", files=_ops_module("HARNESS_OPS = [op(shape_rank=0)]\n")),
    bad("run --ops-module my_ops.py", 2, "case_cost must be", files=_ops_module("HARNESS_OPS = [op(case_cost=float('nan'))]\n")),
    bad("run --ops-module my_ops.py", 2, "candidate must be callable", files=_ops_module("HARNESS_OPS = [op(candidate=3)]\n")),
    bad("run --ops-module my_ops.py", 2, "tolerances must map", files=_ops_module("HARNESS_OPS = [op(tolerances={'float32': 1})]\n")),
    bad("run --ops-module my_ops.py", 2, "already defined", files=_ops_module("HARNESS_OPS = [op(), op()]\n")),
    bad("run --ops-module my_ops.py", 2, "already defined", files=_ops_module("HARNESS_OPS = [op(id='softmax')]\n")),
    bad("run --ops-module ''", 2, "--ops-module: names nothing"),
    bad("run --provider nope", 2, "Unknown provider 'nope'"),
    bad("run --provider ''", 2, "--provider: is empty"),
    bad("run --timer stopwatch", 2, "--timer: Unknown timer 'stopwatch'"),
    bad("run --backend cpu --timer graph", 2, "graph"),
    bad("run --cache lukewarm", 2, "Unknown cache mode 'lukewarm'"),
    bad("run --seed 1.5", 2, "invalid int value"),
    bad("run --seed x", 2, "invalid int value"),
    bad("run --warmup-ms nan", 2, "--warmup-ms: warmup (ms) must be a finite number"),
    bad("run --warmup-ms 0", 2, "must be positive"),
    bad("run --warmup-ms -1", 2, "must be positive"),
    bad("run --rep-ms nan", 2, "--rep-ms: rep (ms) must be a finite number"),
    bad("run --rep-ms inf", 2, "must be a finite number"),
    bad("run --rep-ms x", 2, "invalid float value"),
    bad("run --cap-ms 0", 2, "--cap-ms: cap (ms) must be positive, got 0.0"),
    bad("run --cap-ms -5", 2, "--cap-ms: cap (ms) must be positive"),
    bad("run --devices 7 --ops add", 2, "has one device, 'cpu'"),
    bad("run --devices 'foo bar' --ops add", 2, "is not a device id"),
    bad("run --devices '' --ops add", 2, "--devices: names nothing"),
    bad("run --devices 0 0 --ops add", 2, "more than once"),
    bad("run --gpus 0 --devices 1 --ops add", 2, "--gpus is the old name of --devices"),
    bad("run --gpus 'a b' --ops add", 2, "is not a device id"),
    bad("run --flagtune 1", 2, "--flagtune: Unknown FlagTune mode '1'"),
    bad("run", 2, "HARNESS_FLAGTUNE: Unknown FlagTune mode", env={"HARNESS_FLAGTUNE": "maybe"}),
    bad("run", 2, "[tool.harness] flagtune: Unknown FlagTune mode", toml="flagtune = 'maybe'"),
    bad("run --ops add", 2, "USE_FLAGTUNE: 'yes' is neither 1", env={"USE_FLAGTUNE": "yes"}),
    bad("run --table-colour red", 2, "--table-colour: Unknown table colour 'red'"),
    bad("run", 2, "HARNESS_TABLE_COLOUR: Unknown table colour", env={"HARNESS_TABLE_COLOUR": "yes"}),
    bad("run", 2, "[tool.harness] table-colour: Unknown table colour", toml="table-colour = 'always'"),
    bad("ab --allow-cpu --b-env X=1 --b-env USE_FLAGTUNE=1 -- --backend cpu --ops add", 2,
        "side A runs with FlagTune off and side B with FlagTune on"),
    bad("run --op-timeout nan", 2, "--op-timeout: op timeout (s) must be a finite number"),
    bad("run --op-timeout inf", 2, "must be a finite number"),
    bad("run --op-timeout 0", 2, "must be positive"),
    bad("run --op-timeout -5", 2, "must be positive"),
    bad("run --budget 0", 2, "--budget: budget (s) must be positive"),
    bad("run --budget -60", 2, "--budget: budget (s) must be positive"),
    bad("run --budget soon", 2, "--budget: budget (s) must be a finite number"),
    bad("run --shard-weights w.csv", 2, "--shard-weights w.csv balances the parts of --shard K/N"),
    bad("run --shard 1/2 --shard-weights none.csv", 2, "--shard-weights none.csv: cannot read it"),
    bad("run --reports-dir /etc/passwd --ops add", 2, "--reports-dir /etc/passwd: /etc/passwd is not a directory"),
    bad("run --reports-dir /proc/x --ops add", 2, "--reports-dir /proc/x: cannot write"),
    bad("run --reports-dir '' --ops add", 2, "--reports-dir: is empty"),
    bad("run --reports-dir f/sub --ops add", 2, "is not a directory", files={"f": "a file"}),
    bad("run --out /proc/x --ops add", 2, "--out /proc/x: cannot write"),
    bad("run --out /dev/null/x --ops add", 2, "--out /dev/null/x: /dev/null is not a directory"),
    bad("run --out /sys/x --ops add", 2, "--out /sys/x: cannot write"),
    bad("run --out '' --ops add", 2, "--out: is empty"),
    bad(f"run --out {'x' * 300} --ops add", 2, "cannot create it (File name too long: a name of 300 bytes"),
    bad(f"run --out {'/'.join(['y' * 200] * 21)} --ops add", 2, "cannot create it (File name too long: the path is"),
    bad(f"run --reports-dir {'x' * 300} --ops add", 2, "File name too long: a name of 300 bytes"),
    bad(f"compile --out {'x' * 300}", 2, "--out xxx"),
    bad(f"compare run run2 --out {'x' * 300}", 2, "File name too long", files={**RUN, **RUN2}),
    bad(f"gate run run2 --out {'x' * 300}", 2, "File name too long", files={**RUN, **RUN2}),
    bad(f"ab --out {'x' * 300} -- --ops add", 2, "File name too long"),
    bad(f"history check run --db h.sqlite --out {'x' * 300}", 2, "File name too long", files={**RUN, "h.sqlite": ""}),
    bad(f"history site --db h.sqlite --out {'x' * 300}", 2, "File name too long", files={"h.sqlite": ""}),
    bad(f"history export --db h.sqlite --out {'x' * 250}.csv", 2, "a name of 254 bytes and its temporary",
        files={"h.sqlite": ""}),
    bad(f"report run --out {'x' * 300}.md", 2, "File name too long", files=RUN),
    bad(f"merge run run2 --out {'x' * 300}", 2, "--out xxx", files={**RUN, **RUN2}),
    bad(f"merge run run2 --out {'/'.join(['y' * 200] * 21)}", 2, "the path is", files={**RUN, **RUN2}),
    bad("merge run run2 --out /proc/x", 2, "--out /proc/x: cannot write", files={**RUN, **RUN2}),
    bad("run --out run --ops add", 2, "already holds a finished run (status complete)", files=RUN),
    bad("run --out live --ops add", 2, "already holds an unfinished run (status running)", files=RUNNING),
    bad("run --out out.txt --ops add", 2, "is not a directory", files={"out.txt": "x"}),
    bad("run --run-id ../../x --ops add", 2, "must be one directory name", absent=("../../x", "reports")),
    bad("run --run-id a/b --ops add", 2, "must be one directory name"),
    bad("run --run-id .. --ops add", 2, "must be one directory name"),
    bad("run --run-id '' --ops add", 2, "--run-id: is empty"),
    bad("run --all --ops add", 2, "--all selects every op"),
    bad("run --all=yes", 2, "ignored explicit argument"),
    bad("run --ops-file /nonexistent.txt", 2, "--ops-file /nonexistent.txt: cannot read it"),
    bad("run --ops-file empty.txt", 2, "names no op", files={"empty.txt": "# nothing\n"}),
    bad("run --ops-file ops.txt", 2, "softmaxx (ops.txt line 2)", files={"ops.txt": "add\nsoftmaxx\n"}),
    bad("run --ops-file bin.txt", 2, "cannot read it", files={"bin.txt": b"\xff\xfe\x00"}),
    bad("run --ops-file ''", 2, "--ops-file: is empty"),
    bad("run --dismiss /nonexistent.yaml", 2, "--dismiss /nonexistent.yaml: cannot read it"),
    bad("run --dismiss d.yaml", 2, "has no reason", files={"d.yaml": "add:\n"}),
    bad("run --dismiss d.yaml", 2, "Unknown op(s): nope", files={"d.yaml": "nope: hangs\n"}),
    bad("run --dismiss d.yaml", 2, "must map each op", files={"d.yaml": "- add\n"}),
    bad("run --dismiss d.yaml", 2, "--dismiss d.yaml: not valid YAML at line 2, column 1: expected the node content",
        files={"d.yaml": "add: [\n"}),
    bad("run --dismiss d.yaml", 2, "at line 2, column 1: the key 'add' is given twice (first at line 1)",
        files={"d.yaml": "add: hangs\nadd: slow\n"}),
    bad("run --dismiss d.yaml", 2, "--dismiss d.yaml: not valid YAML at line 1, column 6: character #x0007",
        files={"d.yaml": "add: \x07\n"}),
    bad("run --progress loud", 2, "Unknown progress mode 'loud'"),
    bad("run --prestart maybe", 2, "Unknown prestart mode 'maybe'"),
    bad("run --prestart-depth 0", 2, "prestart depth must be from 1 to 8, got '0'"),
    bad("run --prestart-depth two", 2, "prestart depth must be a whole number, got 'two'"),
    bad("run --replay-from /nonexistent-run --backend cpu", 2, "/nonexistent-run"),
    bad("run --replay-from '' --backend cpu", 2, "--replay-from: is empty"),
    bad("run --suite /nonexistent-suite --backend cuda --ops softmax", 2, "--suite /nonexistent-suite: no such directory"),
    bad("run --suite /nonexistent-suite --backend cpu --ops softmax", 2, "--suite /nonexistent-suite: no such directory"),
    bad("run --backend cpu --node test_mm.py::test_mm", 2, "--node and --allow-version-mismatch apply to --suite"),
    bad("run --backend cpu --allow-version-mismatch", 2, "apply to --suite runs only"),
    bad("run --backend cpu", 2, "apply to --suite runs only", env={"HARNESS_NODES": "test_mm.py::test_mm"}),
    bad("run --backend cpu", 2, "HARNESS_ALLOW_VERSION_MISMATCH: allow-version-mismatch must be true or false",
        env={"HARNESS_ALLOW_VERSION_MISMATCH": "maybe"}),
    bad("run", 2, "[tool.harness] nodes: must be node ids", toml="nodes = 5"),
    bad("run", 2, "[tool.harness] allow-version-mismatch: allow-version-mismatch must be true or false",
        toml="allow-version-mismatch = 'maybe'"),
    bad("list suite", 2, "harness list suite needs --suite PATH"),
    bad("list suite --suite /nonexistent-suite --csv", 2, "--suite /nonexistent-suite: no such directory"),
    bad("run --suite x --replay-from y --backend cpu", 2, "there is no autotune/meta.json in it"),
    bad("run --suite x --replay-from rec --backend cuda --ops mm", 2, "recorded on backend 'cpu'",
        files={"rec/autotune/meta.json": json.dumps({"format_version": 1, "backend": "cpu", "device_name": "x86_64",
                                                     "device_arch": "x86_64", "triton_version": "3.7.1",
                                                     "run_id": "r"})}),
    bad("run --suite x --backend cpu --extra-plugin no_such_plugin_xyz", 2,
        "--extra-plugin no_such_plugin_xyz: Python cannot find this module"),
    bad("run --retry-failed --ops add", 2, "give it with --resume RUN_DIR"),
    bad("run --resume /nonexistent-run", 2, "no run.json there"),
    bad("run --resume run --ops add", 2, "--ops would be ignored", files=RUN),
    bad("run --resume run --budget 0", 2, "--budget: budget (s) must be positive", files=RUN),
    bad("run --resume run --progress bogus", 2, "--progress: unknown progress mode 'bogus'", files=RUN),
    bad("run --resume run --budget -5 --ops add", 2, "--ops would be ignored", files=RUN),
    bad("run --resume trunc", 2, "is not valid JSON", files={"trunc/run.json": _run_json()[:40]}),
    bad("run --resume binary", 2, "is not valid JSON", files={"binary/run.json": b"\xff\xfe\x00\x01"}),
    bad("run --resume newer", 2, "written by a newer harness", files={"newer/run.json": _run_json(schema_version=99)}),
    bad("run --resume noplan", 2, "the run's plan cannot be read", files={"noplan/run.json": _run_json(plan=5)}),
    bad("run --resume badplan", 2, "the run's plan cannot be read",
        files={"badplan/run.json": _run_json(plan=[{"op": "add", "shapes": "x"}])}),
    bad("run --resume badopts", 2, "option(s) this harness does not know",
        files={"badopts/run.json": _run_json(options={"warp": 9})}),
    bad("run --resume badback", 2, "Unknown backend", files={"badback/run.json": _run_json(backend="tpu")}),
    bad("run --plugins bogus", 2, "plugin toggle 'bogus' is not +NAME or -NAME"),
    bad("run --plugins +nosuchplugin", 2, "nosuchplugin"),
    bad("run --backend cpu --plugins +mm_cluster", 2, "lacks the capability hopper_cluster_mm"),
    bad("run --extra-plugin a/b.py", 2, "extra plugin 'a/b.py' is not a dotted module name"),
    bad("run --extra-plugin no_such_plugin_xyz", 2, "no_such_plugin_xyz"),
    bad("run --ir max", 2, "--ir: Unknown IR capture mode 'max'"),
    bad("run --triton-cache shared", 2, "--triton-cache: Unknown Triton cache mode 'shared'"),
    bad("run --keep-triton-cache=1", 2, "ignored explicit argument"),
    bad("run --sweep-devices 0 --ops mm", 2, "the count must be at least 1"),
    bad("run --sweep-devices '' --ops mm", 2, "--sweep-devices: names nothing"),
    bad("run --sweep-devices abc --ops add", 2, "--sweep-devices abc: the cpu backend has one device"),
    bad("run --sweep-devices 'a b' --ops add", 2, "'a b' is not a device id"),
    bad("run --bogus", 2, "unrecognized arguments: --bogus"),
    bad("run '\x1b[2Jx'", 2, "unrecognized arguments: \\x1b[2Jx"),  # echoed escaped
    # -- harness run: HARNESS_* (one per run option) --------------------------------------------
    bad("run", 2, "HARNESS_BACKEND: Unknown backend", env={"HARNESS_BACKEND": "tpu"}),
    bad("run", 2, "Unknown op(s): nope", env={"HARNESS_OPS": "nope"}),
    bad("run", 2, "HARNESS_DTYPES: Unknown dtype", env={"HARNESS_DTYPES": "int8"}),
    bad("run", 2, "HARNESS_LEVEL: Unknown level", env={"HARNESS_LEVEL": "huge"}),
    bad("run --ops add", 2, "cannot read it", env={"HARNESS_SHAPES_FILE": "/nonexistent.yaml"}),
    bad("run", 2, "no such file", env={"HARNESS_OPS_MODULES": "missing.py"}),
    bad("run", 2, "Unknown provider", env={"HARNESS_PROVIDER": "nope"}),
    bad("run", 2, "HARNESS_TIMER: Unknown timer 'sundial'", env={"HARNESS_TIMER": "sundial"}),
    bad("run", 2, "HARNESS_CACHE: Unknown cache mode", env={"HARNESS_CACHE": "hot"}),
    bad("run", 2, "HARNESS_SEED: seed must be a whole number", env={"HARNESS_SEED": "1.5"}),
    bad("run", 2, "HARNESS_WARMUP_MS: warmup (ms) must be a finite number", env={"HARNESS_WARMUP_MS": "nan"}),
    bad("run", 2, "HARNESS_REP_MS: rep (ms) must be a finite number", env={"HARNESS_REP_MS": "NaN"}),
    bad("run", 2, "HARNESS_CAP_MS: cap (ms) must be a finite number", env={"HARNESS_CAP_MS": "soon"}),
    bad("run --ops add", 2, "HARNESS_DEVICES: device id 'a b'", env={"HARNESS_DEVICES": "a b"}),
    bad("run", 2, "HARNESS_OP_TIMEOUT: op timeout (s) must be a finite number", env={"HARNESS_OP_TIMEOUT": "nan"}),
    bad("run", 2, "HARNESS_BUDGET: budget (s) must be positive", env={"HARNESS_BUDGET": "0"}),
    bad("run", 2, "--shard-weights w.csv balances the parts of --shard K/N", env={"HARNESS_SHARD_WEIGHTS": "w.csv"}),
    bad("run --ops add", 2, "--reports-dir /proc/x: cannot write", env={"HARNESS_REPORTS_DIR": "/proc/x"}),
    bad("run --ops add", 2, "--out /proc/x: cannot write", env={"HARNESS_OUT": "/proc/x"}),
    bad("run --ops add", 2, "HARNESS_RUN_ID: run id '../x'", env={"HARNESS_RUN_ID": "../x"}),
    bad("run --backend cpu --ops softmax", 2, "--suite /nonexistent: no such directory", env={"HARNESS_SUITE": "/nonexistent"}),
    bad("run", 2, "--ops-file /nonexistent.txt", env={"HARNESS_OPS_FILE": "/nonexistent.txt"}),
    bad("run", 2, "--dismiss /nonexistent.yaml", env={"HARNESS_DISMISS": "/nonexistent.yaml"}),
    bad("run", 2, "HARNESS_PROGRESS: Unknown progress mode", env={"HARNESS_PROGRESS": "fancy"}),
    bad("run --ops add", 2, "HARNESS_IMAGE: is empty", env={"HARNESS_IMAGE": " "}),
    bad("run --ops add", 2, "HARNESS_IMAGE_DIGEST: is empty", env={"HARNESS_IMAGE_DIGEST": " "}),
    bad("run --backend cpu", 2, "/nonexistent-run", env={"HARNESS_REPLAY_FROM": "/nonexistent-run"}),
    bad("run", 2, "HARNESS_PRESTART: Unknown prestart mode", env={"HARNESS_PRESTART": "sometimes"}),
    bad("run", 2, "HARNESS_PRESTART_DEPTH: prestart depth must be from 1 to 8", env={"HARNESS_PRESTART_DEPTH": "9"}),
    bad("run", 2, "HARNESS_PLUGINS: plugin toggle 'bogus'", env={"HARNESS_PLUGINS": "bogus"}),
    bad("run", 2, "HARNESS_EXTRA_PLUGINS: extra plugin 'a/b'", env={"HARNESS_EXTRA_PLUGINS": "a/b"}),
    bad("run", 2, "HARNESS_IR: Unknown IR capture mode 'max'", env={"HARNESS_IR": "max"}),
    bad("run", 2, "HARNESS_TRITON_CACHE: Unknown Triton cache mode", env={"HARNESS_TRITON_CACHE": "shared"}),
    bad("run", 2, "HARNESS_KEEP_TRITON_CACHE: keep-triton-cache must be true or false",
        env={"HARNESS_KEEP_TRITON_CACHE": "maybe"}),
    bad("run --ops mm", 2, "HARNESS_SWEEP_DEVICES: --sweep-devices 0: the count must be at least 1",
        env={"HARNESS_SWEEP_DEVICES": "0"}),
    bad("run", 2, "Unknown backend", env={"HARNESS_BACKEND": "tpu", "HARNESS_OPS_MODULE": "x.py"}),  # + a warning
    # -- harness run: [tool.harness] (one per key, and wrong TOML types) ---------------------------
    bad("run", 2, "Unknown backend '5'", toml="backend = '5'"),
    bad("run", 2, "[tool.harness] backend: must be a string", toml="backend = 5"),
    bad("run", 2, "[tool.harness] ops: must be a list of strings", toml="ops = 5"),
    bad("run", 2, "[tool.harness] ops: must be a list of strings", toml="ops = [1, 2]"),
    bad("run", 2, "[tool.harness] dtypes: must be a list of strings", toml="dtypes = 5"),
    bad("run", 2, "Unknown dtype 'float64'", toml="dtypes = ['float64']"),
    bad("run", 2, "[tool.harness] level: Unknown level", toml="level = 3"),
    bad("run", 2, "[tool.harness] shapes-file: must be a string", toml="shapes-file = 5"),
    bad("run", 2, "[tool.harness] ops-modules: must be a list of strings", toml="ops-modules = true"),
    bad("run", 2, "[tool.harness] provider: must be a string", toml="provider = []"),
    bad("run", 2, "[tool.harness] timer: Unknown timer 1", toml="timer = 1"),
    bad("run", 2, "[tool.harness] cache: Unknown cache mode", toml="cache = true"),
    bad("run", 2, "[tool.harness] seed: seed must be a whole number, got 1.5", toml="seed = 1.5"),
    bad("run", 2, "[tool.harness] seed: seed must be a whole number", toml="seed = true"),
    bad("run", 2, "[tool.harness] warmup-ms: warmup (ms) must be a finite number", toml="warmup-ms = nan"),
    bad("run", 2, "[tool.harness] rep-ms: rep (ms) must be a finite number", toml="rep-ms = inf"),
    bad("run", 2, "[tool.harness] rep-ms: rep (ms) must be a finite number", toml="rep-ms = true"),
    bad("run", 2, "[tool.harness] cap-ms: cap (ms) must be positive", toml="cap-ms = -1"),
    bad("run", 2, "[tool.harness] devices: must be a list of strings", toml="devices = true"),
    bad("run", 2, "[tool.harness] devices: must be a list of strings", toml="devices = [0, 1]"),
    bad("run", 2, "[tool.harness] op-timeout: op timeout (s) must be a finite number", toml="op-timeout = nan"),
    bad("run", 2, "[tool.harness] op-timeout: op timeout (s) must be positive", toml="op-timeout = -1"),
    bad("run", 2, "[tool.harness] budget: budget (s) must be positive", toml="budget = -60"),
    bad("run", 2, "[tool.harness] shard-weights: ", toml="shard-weights = 3"),
    bad("run", 2, "[tool.harness] reports-dir: must be a string", toml="reports-dir = 1"),
    bad("run", 2, "[tool.harness] out: must be a string", toml="out = false"),
    bad("run", 2, "[tool.harness] run-id: run id '../x'", toml="run-id = '../x'"),
    bad("run", 2, "[tool.harness] suite: must be a string", toml="suite = 2"),
    bad("run", 2, "[tool.harness] ops-file: must be a string", toml="ops-file = ['a']"),
    bad("run", 2, "[tool.harness] dismiss: must be a string", toml="dismiss = {a = 1}"),
    bad("run", 2, "[tool.harness] progress: Unknown progress mode", toml="progress = 'loud'"),
    bad("run", 2, "[tool.harness] image: must be a string", toml="image = 1"),
    bad("run", 2, "[tool.harness] image-digest: must be a string", toml="image-digest = 1"),
    bad("run", 2, "[tool.harness] replay-from: must be a string", toml="replay-from = 1"),
    bad("run", 2, "[tool.harness] prestart: Unknown prestart mode", toml="prestart = true"),
    bad("run", 2, "[tool.harness] prestart-depth: prestart depth must be a whole number", toml="prestart-depth = 1.5"),
    bad("run", 2, "[tool.harness] plugins: must be a list of strings", toml="plugins = 5"),
    bad("run", 2, "[tool.harness] extra-plugins: must be a list of strings", toml="extra-plugins = 5"),
    bad("run", 2, "[tool.harness] ir: Unknown IR capture mode True", toml="ir = true"),
    bad("run", 2, "[tool.harness] triton-cache: Unknown Triton cache mode 1", toml="triton-cache = 1"),
    bad("run", 2, "[tool.harness] keep-triton-cache: keep-triton-cache must be true or false",
        toml="keep-triton-cache = 'maybe'"),
    bad("run", 2, "[tool.harness] sweep-devices: must be a count", toml="sweep-devices = true"),
    bad("run", 2, "[tool.harness] has unknown key(s): levle", toml="levle = 'core'"),
    bad("run", 2, "[tool.harness] has unknown key(s): resume", toml="resume = 'reports/x'"),
    bad("run", 2, "not valid TOML", toml="level = "),
    bad("run", 2, "not valid TOML", files={"pyproject.toml": b"\xff\xfe[tool.harness]\n"}),
    bad("run", 2, "[tool.harness] must be a table", files={"pyproject.toml": "[tool]\nharness = 5\n"}),
    bad("run", 2, "[tool.harness] history-db: the history database must be a string", toml="history-db = 5"),
    bad("run", 2, "[tool.harness] container must be a table", toml="container = 5"),
    bad("run", 2, "[tool.harness.container] has unknown key(s): colour",
        files={"pyproject.toml": "[tool.harness.container]\ncolour = 'blue'\n"}),
    # -- harness list / plugins / doctor --------------------------------------------------------
    bad("list", 2, "the following arguments are required: what"),
    bad("list things", 2, "invalid choice: 'things'"),
    bad("list ops --ops-module missing.py", 2, "no such file"),
    bad("list ops --ops-module my_ops.py", 2, "called sys.exit(0)", files=_ops_module("import sys\nsys.exit(0)\n")),
    bad("list ops --provider nope", 2, "invalid choice: 'nope'"),
    bad("plugins --backend tpu", 2, "Unknown backend 'tpu'"),
    bad("plugins --backend cuda --timer stopwatch", 2, "timer"),
    bad("plugins --ir max", 2, "invalid choice: 'max'"),
    bad("plugins --plugins bogus", 2, "plugin toggle 'bogus'"),
    bad("plugins --backend musa --suite --plugins +mm_cluster", 2, "lacks the capability hopper_cluster_mm"),
    bad("plugins --suite --plugins -records", 2, "records"),
    bad("plugins --extra-plugin a/b", 2, "extra plugin 'a/b' is not a dotted module name"),
    bad("doctor extra", 2, "unrecognized arguments: extra"),
    bad("--bogus", 2, "unrecognized arguments"),
    bad("nosuchcommand", 2, "invalid choice: 'nosuchcommand'"),
    # -- harness report -------------------------------------------------------------------------
    bad("report /nonexistent-run", 2, "no run.json there"),
    bad("report run/run.json", 2, "run/run.json is a file, not a run directory: give the directory of a `harness run` "
        "(run).", files=RUN),
    bad("compare run/run.json run", 2, "run/run.json is a file, not a run directory", files=RUN),
    bad("gate run run --allow-cpu", 2, "base and head are one run directory (run): a run compared with itself",
        files=RUN),
    bad("compare run ./run/ --allow-cpu", 2, "base and head are one run directory (run)", files=RUN),
    bad("report run --format pdf", 2, "invalid choice: 'pdf'", files=RUN),
    bad("report trunc", 2, "is not valid JSON", files={"trunc/run.json": "{"}),
    bad("report noplan", 2, "the run's plan cannot be read", files={"noplan/run.json": _run_json(plan=5)}),
    bad("report run --out /proc/x.md", 2, "--out /proc/x.md: cannot write", files=RUN),
    bad("report run --out .", 2, "--out .: . is a directory", files=RUN),
    bad("report --across run", 2, "--across needs at least two run directories", files=RUN),
    bad("report --across run /nonexistent-run", 2, "no run.json there", files=RUN),
    bad("report --across run bad", 2, "line 2: not JSON", files={**RUN, **CORRUPT}),
    bad("report run --across run run2", 2, "Give either RUN_DIR or --across", files={**RUN, **RUN2}),
    bad("report", 2, "needs a run directory"),
    bad("report badops", 2, "cannot be read (it has no 'device')", files={"badops/run.json": _run_json(ops=[{"op": "add"}])}),
    # -- harness compare / gate ----------------------------------------------------------------
    bad("compare /nonexistent-a /nonexistent-b", 2, "no run.json there"),
    bad("compare run", 2, "the following arguments are required: head", files=RUN),
    bad("compare run run2 --threshold 0", 2, "expected a percentage above 0 and below 1000", files={**RUN, **RUN2}),
    bad("compare run run2 --threshold 5000", 2, "below 1000", files={**RUN, **RUN2}),
    bad("compare run run2 --threshold nan", 2, "expected a percentage", files={**RUN, **RUN2}),
    bad("compare run run2 --threshold x", 2, "expected a percentage", files={**RUN, **RUN2}),
    bad("compare run run2 --alpha 1", 2, "expected a number in (0, 1)", files={**RUN, **RUN2}),
    bad("compare run run2 --alpha nan", 2, "expected a number in (0, 1)", files={**RUN, **RUN2}),
    bad("compare run run2 --correction bonferroni", 2, "invalid choice: 'bonferroni'", files={**RUN, **RUN2}),
    bad("compare run run2 --out /proc/x", 2, "--out /proc/x: cannot write", files={**RUN, **RUN2}),
    bad("compare run run2 --out /dev/null/x", 2, "/dev/null is not a directory", files={**RUN, **RUN2}),
    bad("compare run run2 --allow-mismatch=yes", 2, "ignored explicit argument", files={**RUN, **RUN2}),
    bad("compare run bad", 2, "line 2: not JSON", files={**RUN, **CORRUPT}),
    bad("compare run live", 2, "status 'running'", files={**RUN, **RUNNING}),
    bad("gate /nonexistent-a /nonexistent-b", 2, "no run.json there"),
    bad("gate run run2 --threshold -1", 2, "expected a percentage", files={**RUN, **RUN2}),
    bad("gate run run2 --alpha 0", 2, "expected a number in (0, 1)", files={**RUN, **RUN2}),
    bad("gate run run2 --correction x", 2, "invalid choice", files={**RUN, **RUN2}),
    bad("gate run run2 --out /proc/x", 2, "--out /proc/x: cannot write", files={**RUN, **RUN2}),
    bad("gate run bad", 2, "line 2: not JSON", files={**RUN, **CORRUPT}),
    bad("gate run run2 --allow-mismatch=1", 2, "ignored explicit argument", files={**RUN, **RUN2}),
    bad("gate run run2", 2, "pass --allow-cpu to compare them anyway", files={**RUN, **RUN2}),
    bad("gate run run2 --allow-cpu=1", 2, "ignored explicit argument", files={**RUN, **RUN2}),
    bad("compare run run2 --allow-cpu=yes", 2, "ignored explicit argument", files={**RUN, **RUN2}),
    bad("compare run run2 --spread missing.yaml", 2, "Cannot read the run-spread table", files={**RUN, **RUN2}),
    bad("compare run run2 --history none.sqlite", 2, "--history none.sqlite: no such history database",
        files={**RUN, **RUN2}),
    bad("gate run run2 --history run", 2, "--history run: no such history database", files={**RUN, **RUN2}),
    bad("compare run nost", 2, "nost/run.json lacks status, which every run.json has", files={**RUN, **NO_STATUS}),
    bad("gate run nost", 2, "nost/run.json lacks status", files={**RUN, **NO_STATUS}),
    bad("report nost", 2, "nost/run.json lacks status", files=NO_STATUS),
    bad("history add nost --db h.sqlite", 2, "nost/run.json lacks status", files=NO_STATUS, absent=("h.sqlite",)),
    bad("merge run nost --out m", 2, "nost/run.json lacks status", files={**RUN, **NO_STATUS}, absent=("m",)),
    bad("compare run bads", 2, "status 'PASS' (one of running", files={**RUN, "bads/run.json": _run_json(status="PASS")}),
    bad("compare run run2 --spread s.yaml", 2, "Run-spread table s.yaml: not valid YAML at line 2, column 1",
        files={**RUN, **RUN2, "s.yaml": "format_version: [\n"}),
    bad("compare run run2 --spread s.yaml", 2, "s.yaml: not valid YAML at line 2, column 1: the key 'format_version'",
        files={**RUN, **RUN2, "s.yaml": "format_version: 1\nformat_version: 1\n"}),
    bad("gate run run2 --spread s.yaml", 2, "is not usable: format_version",
        files={**RUN, **RUN2, "s.yaml": "format_version: 9\n"}),
    bad("compare run torch2 --allow-cpu", 2, "torch '2.13.0' in base, '2.14.0' in head",
        files={"run/run.json": _run_json(identity={"device_name": "x86_64", "torch": "2.13.0"}),
               "run/records.jsonl": RECORD + "\n",
               "torch2/run.json": _run_json(run_id="r5", identity={"device_name": "x86_64", "torch": "2.14.0"}),
               "torch2/records.jsonl": RECORD + "\n"}),
    # -- harness gate-run ----------------------------------------------------------------------
    bad("gate-run --head-ref HEAD", 2, "the following arguments are required: --base-ref"),
    bad("gate-run --base-ref HEAD", 2, "the following arguments are required: --head-ref"),
    bad("gate-run --base-ref a --head-ref b --repeats 0", 2, "expected at least 1"),
    bad("gate-run --base-ref a --head-ref b --repeats x", 2, "expected a whole number"),
    bad("gate-run --base-ref a --head-ref b --threshold 0", 2, "expected a percentage"),
    bad("gate-run --base-ref a --head-ref b --alpha 2", 2, "expected a number in (0, 1)"),
    bad("gate-run --base-ref a --head-ref b --correction x", 2, "invalid choice"),
    bad("gate-run --base-ref a --head-ref b --out /proc/x", 2, "--out /proc/x: cannot write"),
    bad("gate-run --base-ref a --head-ref b --repo /nonexistent-repo", 2, "/nonexistent-repo"),
    bad("gate-run --base-ref . --head-ref . --out g -- --out x", 2, "`harness gate-run` sets --out", absent=("g",)),
    bad("gate-run --base-ref nope --head-ref . --out g", 2, "--base-ref 'nope' is neither", absent=("g",)),
    bad("gate-run --base-ref . --head-ref . --out g -- --backend cpu --ops add", 2,
        "the runs would be on the cpu backend", absent=("g",)),
    bad("ab --out o -- --backend cpu --ops add", 2, "harness ab: the runs would be on the cpu backend",
        absent=("o",)),
    bad("gate-run --base-ref a --head-ref b --no-replay=1", 2, "ignored explicit argument"),
    bad("gate-run --base-ref a --head-ref b --allow-cpu=1", 2, "ignored explicit argument"),
    bad("gate-run --base-ref . --head-ref . --out g --spread missing.yaml", 2, "Cannot read the run-spread table",
        absent=("g",)),
    # -- harness ab ----------------------------------------------------------------------------
    bad("ab --a-env NOEQUALS", 2, "KEY=VALUE"),
    bad("ab --b-env =1", 2, "KEY=VALUE"),
    bad("ab --a-unset '' -- --ops add", 2, "--a-unset '' is not an environment variable name"),
    bad("ab --b-unset 'A=B' -- --ops add", 2, "--b-unset 'A=B' is not an environment variable name"),
    bad("ab --a-pythonpath /nonexistent-dir -- --ops add", 2, "/nonexistent-dir"),
    bad("ab --b-pythonpath /nonexistent-dir -- --ops add", 2, "/nonexistent-dir"),
    bad("ab --a-python /nonexistent/python -- --ops add", 2, "/nonexistent/python"),
    bad("ab --b-python /nonexistent/python -- --ops add", 2, "/nonexistent/python"),
    bad("ab --repeats 0", 2, "expected at least 1"),
    bad("ab --order abc", 2, "invalid choice: 'abc'"),
    bad("ab --no-replay=1", 2, "ignored explicit argument"),
    bad("ab --fail-on-regression=1", 2, "ignored explicit argument"),
    bad("ab --out /proc/x -- --ops add", 2, "--out /proc/x: cannot write"),
    bad("ab --threshold 0", 2, "expected a percentage"),
    bad("ab --alpha 5", 2, "expected a number in (0, 1)"),
    bad("ab --correction x", 2, "invalid choice"),
    bad("ab -- --out x", 2, "--out"),
    bad("ab --allow-cpu=1", 2, "ignored explicit argument"),
    bad("ab --out a --spread missing.yaml -- --ops add", 2, "Cannot read the run-spread table", absent=("a",)),
    # -- harness history -----------------------------------------------------------------------
    bad("history", 2, "the following arguments are required: ACTION"),
    bad("history add /nonexistent-run --db h.sqlite", 2, "no run.json there", absent=("h.sqlite",)),
    bad("history add run --db /proc/h.sqlite", 2, "Cannot open the history database", files=RUN),
    bad("history add run --db .", 2, "is a directory", files=RUN),
    bad("history add bad --db h.sqlite", 2, "line 2: not JSON", files=CORRUPT, absent=("h.sqlite",)),
    bad("history add live --db h.sqlite", 2, "status 'running'", files=RUNNING, absent=("h.sqlite",)),
    bad("history add run --db h.sqlite", 2, "not a usable history database", files={**RUN, "h.sqlite": "not sqlite"}),
    bad("history check /nonexistent-run --db /nonexistent/h.sqlite", 2, "does not exist"),
    bad("history check run --db missing.sqlite", 2, "does not exist", files=RUN, absent=("missing.sqlite",)),
    bad("history check run --window 0", 2, "expected at least 1", files=RUN),
    bad("history check run --db h.sqlite --window 2", 2, "a baseline needs 3 earlier runs",
        files={**RUN, "h.sqlite": ""}),
    bad("history check run --threshold 0", 2, "expected a percentage", files=RUN),
    bad("history check run --large 0", 2, "expected a percentage", files=RUN),
    bad("history check run --persist 0", 2, "expected at least 1", files=RUN),
    bad("history check run --allow-mismatch=1", 2, "ignored explicit argument", files=RUN),
    bad("history check run --db h.sqlite --out /proc/x", 2, "--out /proc/x: cannot write",
        files={**RUN, "h.sqlite": ""}),
    bad("history export --db missing.sqlite", 2, "does not exist", absent=("missing.sqlite",)),
    bad("history export --db h.sqlite --out /proc/x.csv", 2, "--out /proc/x.csv: cannot write", files={"h.sqlite": ""}),
    bad("history export --db h.sqlite --out .", 2, "is a directory", files={"h.sqlite": ""}),
    bad("history export --db h.sqlite --fingerprint", 2, "expected one argument", files={"h.sqlite": ""}),
    bad("history export --db h.sqlite --case", 2, "expected at least one argument", files={"h.sqlite": ""}),
    bad("history export --db h.sqlite", 2, "not a usable history database", files={"h.sqlite": "junk" * 100}),
    bad("history export", 2, "does not exist", env={"HARNESS_HISTORY_DB": "missing.sqlite"}, absent=("missing.sqlite",)),
    bad("history export", 2, "HARNESS_HISTORY_DB", env={"HARNESS_HISTORY_DB": " "}),
    bad("history export", 2, "does not exist", toml="history-db = 'missing.sqlite'", absent=("missing.sqlite",)),
    bad("history export", 2, "history-db: the history database must be a string", toml="history-db = []"),
    bad("history site --db missing.sqlite --out site", 2, "does not exist", absent=("missing.sqlite", "site")),
    bad("history site --db h.sqlite", 2, "the following arguments are required: --out", files={"h.sqlite": ""}),
    bad("history site --db h.sqlite --out /proc/site", 2, "--out /proc/site: cannot write", files={"h.sqlite": ""}),
    bad("history site --db h.sqlite --out f", 2, "--out f: f is not a directory", files={"h.sqlite": "", "f": "x"}),
    bad("history site --db h.sqlite --out site --commit-url http://x/", 2, "must be an http(s) URL with {commit} in it",
        files={"h.sqlite": ""}, absent=("site",)),
    bad("history site --db h.sqlite --out site --title", 2, "expected one argument", files={"h.sqlite": ""}),
    bad("history site --db h.sqlite --out site --bisect b.json", 2, "format_version 3; this harness reads 1, 2",
        files={"h.sqlite": "", "b.json": json.dumps({  # shaped as bisect.json, of another format version
            "format_version": 3, "good_sha": "a" * 40, "bad_sha": "b" * 40, "run_args": ["--ops", "add"],
            "check": {"tracked": [], "changed": False}, "culprit": None, "remaining": []})}, absent=("site",)),
    # -- harness bisect ------------------------------------------------------------------------
    bad("bisect --repo . --good a --bad b --threshold 0 -- --ops add", 2, "--threshold 0: a threshold must be above 0"),
    bad("bisect --repo . --good a --bad b --alpha 1.5", 2, "--alpha 1.5"),
    bad("bisect --repo . --good a --bad b --metric fast", 2, "invalid choice: 'fast'"),
    bad("bisect --repo . --good a --bad b --repeats 0", 2, "expected at least 1"),
    bad("bisect --repo . --good a --bad b --max-tries 0", 2, "expected at least 1"),
    bad("bisect --repo . --good a --bad b --devices 0,0", 2, "--devices '0,0'"),
    bad("bisect --repo . --good a --bad b --source-path /abs", 2, "--source-path '/abs'"),
    bad("bisect --repo . --good a --bad b --repo-url ftp://x", 2, "--repo-url 'ftp://x'"),
    bad("bisect --repo . --good a --bad b --out /proc/x", 2, "--out /proc/x: cannot write"),
    bad("bisect --repo . --good a --bad b --cache /proc/x", 2, "--cache /proc/x: cannot write"),
    bad("bisect --repo . --good a --bad b --spread missing.yaml", 2, "missing.yaml"),
    bad("bisect --repo . --good a --bad b --allow-cpu", 2, "not a git repository", absent=("reports",)),
    bad("bisect --repo . --bad b", 2, "the following arguments are required: --good"),
    bad("bisect --repo . --good a", 2, "the following arguments are required: --bad"),
    # -- harness compile -----------------------------------------------------------------------
    bad("compile --targets cuda:xx", 2, "--targets: 'cuda:xx' is not a target"),
    bad("compile --targets ,", 2, "--targets needs at least one target"),
    bad("compile --level galactic", 2, "invalid choice: 'galactic'"),
    bad("compile --ops softmaxx", 2, "--ops: unknown op(s) softmaxx"),
    bad("compile --dtypes int8", 2, "Unknown dtype 'int8'"),
    bad("compile --ops-module missing.py", 2, "no such file"),
    bad("compile --out /proc/x", 2, "--out /proc/x: cannot write"),
    bad("compile --against /nonexistent-compile", 2, "--against /nonexistent-compile"),
    bad("compile --threshold nan", 2, "--threshold nan: give a positive percentage"),
    bad("compile --threshold -5", 2, "--threshold -5.0: give a positive percentage"),
    bad("compile --jobs -1", 2, "--jobs -1: give a number of worker processes, at least 1"),
    bad("compile --jobs 0", 2, "--jobs 0: give a number of worker processes, at least 1"),
    bad("compile --jobs x", 2, "invalid int value"),
    bad("compile --variant-timeout 0", 2, "--variant-timeout 0.0: give a positive number of seconds"),
    bad("compile --variant-timeout nan", 2, "--variant-timeout nan: give a positive number of seconds"),
    bad("compile --variant-timeout x", 2, "invalid float value"),
    bad("compile --keep-triton-cache=1", 2, "ignored explicit argument"),
    # -- harness container ---------------------------------------------------------------------
    bad("container plan", 2, "the following arguments are required: --backend"),
    bad("container plan --backend tpu -- --ops add", 2, "Unknown backend 'tpu'"),
    bad("container plan --backend cpu --user abc -- --ops add", 2, "--user 'abc' must be numeric UID:GID"),
    bad("container plan --backend cpu --devices 0,0 -- --ops add", 2, "--devices: names device(s) 0 more than once"),
    bad("container plan --backend cpu --devices 'a b' -- --ops add", 2, "--devices: device id 'a b' is not a device id"),
    bad("container run --backend cpu --user 1: -- --ops add", 2, "must be numeric UID:GID"),
    bad("container plan --backend cpu --pull -- --ops add", 2, "image policy pull needs a registry"),
    bad("container plan --backend cpu --pull --build", 2, "not allowed with argument"),
    bad("container plan --backend cpu --no-build --pull", 2, "not allowed with argument"),
    bad("container run --backend cpu --pull -- --ops add", 2, "image policy pull needs a registry"),
    bad("container run --backend cpu --no-build --build", 2, "not allowed with argument"),
    bad("container plan --backend cpu --registry '' --pull -- --ops add", 2, "needs a registry"),
    bad("container plan --backend cpu --base-image rocm=x -- --ops add", 2, "--base-image 'rocm=x'"),
    bad("container plan --backend cpu --build-arg NOEQUALS -- --ops add", 2, "is not KEY=VALUE"),
    bad("container plan --backend cpu --wheels /nonexistent-wheels -- --ops add", 2, "wheel directory /nonexistent-wheels does not exist"),
    bad("container plan --backend cpu -- --backend cuda", 2, "conflicts with the container backend"),
    bad("container plan --backend cpu -- --out /tmp/elsewhere", 2, "only reports/"),
    bad("container plan --backend cpu -- --bogus", 2, "unrecognized arguments"),
    # container hardening relaxations (issue 15): each refused by name from every layer
    bad("container plan --backend cpu --network host -- --ops add", 2, "Unknown container network 'host'"),
    bad("container run --backend cpu --network host -- --ops add", 2, "Unknown container network 'host'"),
    bad("container plan --backend cpu --seccomp off -- --ops add", 2, "Unknown seccomp mode 'off'"),
    bad("container run --backend cpu --seccomp off -- --ops add", 2, "Unknown seccomp mode 'off'"),
    bad("container plan --backend cpu --cap-add ALL -- --ops add", 2, "ALL is never added back"),
    bad("container run --backend cpu --cap-add 'NOT A CAP!' -- --ops add", 2, "is not a capability name"),
    bad("container plan --backend cpu --pids-limit 3 -- --ops add", 2, "pids limit 3 is too small"),
    bad("container run --backend cpu --pids-limit lots -- --ops add", 2, "pids limit must be a whole number"),
    bad("container plan --backend cpu --shm-size lots -- --ops add", 2, "shm size 'lots' is not a size"),
    bad("container run --backend cpu --shm-size 2x -- --ops add", 2, "shm size '2x' is not a size"),
    bad("container plan --backend cpu -- --ops add", 2, "HARNESS_CONTAINER_NETWORK: Unknown container network",
        env={"HARNESS_CONTAINER_NETWORK": "host"}),
    bad("container plan --backend cpu -- --ops add", 2, "HARNESS_SECCOMP: Unknown seccomp mode",
        env={"HARNESS_SECCOMP": "no"}),
    bad("container plan --backend cpu -- --ops add", 2, "HARNESS_CAP_ADD: ALL is not a capability name",
        env={"HARNESS_CAP_ADD": "ALL"}),
    bad("container plan --backend cpu -- --ops add", 2, "HARNESS_PIDS_LIMIT: pids limit 1 is too small",
        env={"HARNESS_PIDS_LIMIT": "1"}),
    bad("container plan --backend cpu -- --ops add", 2, "HARNESS_SHM_SIZE: shm size",
        env={"HARNESS_SHM_SIZE": "big"}),
    bad("container plan --backend cpu -- --ops add", 2, "[tool.harness.container] network: Unknown container network",
        files={"pyproject.toml": "[tool.harness.container]\nnetwork = 'host'\n"}),
    bad("container plan --backend cpu -- --ops add", 2, "[tool.harness.container] seccomp: Unknown seccomp mode",
        files={"pyproject.toml": "[tool.harness.container]\nseccomp = 'no'\n"}),
    bad("container plan --backend cpu -- --ops add", 2, "[tool.harness.container] cap-add",
        files={"pyproject.toml": "[tool.harness.container]\ncap-add = ['ALL']\n"}),
    bad("container plan --backend cpu -- --ops add", 2, "[tool.harness.container] pids-limit",
        files={"pyproject.toml": "[tool.harness.container]\npids-limit = 2\n"}),
    bad("container plan --backend cpu -- --ops add", 2, "[tool.harness.container] shm-size",
        files={"pyproject.toml": "[tool.harness.container]\nshm-size = 'big'\n"}),
    # gate-run in a container (issue 15)
    bad("gate-run --base-ref . --head-ref . --out g --container tpu --devices 0", 2, "Unknown backend 'tpu'",
        absent=("g",)),
    bad("gate-run --base-ref . --head-ref . --out g --container cuda --devices 0,1", 2, "exactly one device",
        absent=("g",)),
    bad("gate-run --base-ref . --head-ref . --out g --devices 0", 2, "--container (none)", absent=("g",)),
    # --shard and harness merge (issue 15)
    bad("run --shard abc", 2, "shard 'abc' is not K/N"),
    bad("run --shard 0/3", 2, "K must be between 1 and N"),
    bad("run --shard 4/3", 2, "K must be between 1 and N"),
    bad("run", 2, "HARNESS_SHARD: shard 2/1: K must be between 1 and N", env={"HARNESS_SHARD": "2/1"}),
    bad("run", 2, "[tool.harness] shard: shard 'x' is not K/N", toml='shard = "x"'),
    bad("merge --out m", 2, "the following arguments are required: RUN", absent=("m",)),
    bad("merge /nonexistent-part --out m", 2, "no run.json there", absent=("m",)),
    # two runs of part 1/1 that started at the same second: which is the rerun cannot be told
    bad("merge run run2 --out m", 2, "Part 1/1 was run twice", files={**RUN, **RUN2}, absent=("m",)),
    bad("merge run run --out m", 2, "Part 1/1 is given twice", files=RUN, absent=("m",)),
    bad("merge run --out m --allow-mismatch=1", 2, "ignored explicit argument", files=RUN, absent=("m",)),
    bad("merge run --out m --run-id ../x", 2, "--run-id: run id '../x' must be one directory name",
        files=RUN, absent=("m", "../x")),
    bad("container plan --backend cpu --devices x --reports /proc/x --device-root / -- --ops add", 2,
        "wheel directory", env={"HARNESS_WHEELS": "/nonexistent-w"}),
    bad("container run --backend cpu -- --ops add", 2, "HARNESS_IMAGE_POLICY: Unknown image policy",
        env={"HARNESS_IMAGE_POLICY": "sometimes"}),
    bad("container run --backend cpu --devices 0 --reports r --device-root / --registry r --base-image x "
        "--build-arg A=1 --wheels /nonexistent-w -- --ops add", 2, "wheel directory /nonexistent-w"),
    bad("container plan --backend cpu -- --ops add", 2, "image policy pull needs a registry",
        env={"HARNESS_REGISTRY": " ", "HARNESS_IMAGE_POLICY": "pull"}),
    bad("container plan --backend cpu -- --ops add", 2, "HARNESS_BUILD_ARGS: build argument 'NOEQ'",
        env={"HARNESS_BUILD_ARGS": "NOEQ"}),
    bad("container plan --backend cpu -- --ops add", 2, "outside the checkout",
        env={"HARNESS_SHAPES_FILE": "/etc/hostname"}),
    bad("container plan --backend cpu -- --ops add", 2, "[tool.harness.container] registry: registry must be a string",
        files={"pyproject.toml": "[tool.harness.container]\nregistry = 3\n"}),
    bad("container plan --backend cpu -- --ops add", 2, "[tool.harness.container] image-policy",
        files={"pyproject.toml": "[tool.harness.container]\nimage-policy = 'often'\n"}),
    bad("container plan --backend cpu -- --ops add", 2, "base-images must be a table of strings",
        files={"pyproject.toml": "[tool.harness.container]\nbase-images = 'x'\n"}),
    bad("container plan --backend cpu -- --ops add", 2, "build-args must be a table of strings",
        files={"pyproject.toml": "[tool.harness.container]\nbuild-args = ['A=1']\n"}),
    bad("container plan --backend cpu -- --ops add", 2, "wheels must be a list",
        files={"pyproject.toml": "[tool.harness.container]\nwheels = 3\n"}),
    bad("container plan --backend cpu -- --ops add", 2, "wheel directory",
        env={"HARNESS_BASE_IMAGE_CPU": "x", "HARNESS_BASE_IMAGE_CUDA": "y", "HARNESS_BASE_IMAGE_ROCM": "z",
             "HARNESS_BASE_IMAGE_MUSA": "m", "HARNESS_BASE_IMAGE_ASCEND": "a", "HARNESS_WHEELS": "/nonexistent-w"}),
    bad("container build tpu", 2, "Unknown backend 'tpu'"),
    bad("container build cpu --registry r --pull --base-image a=b --build-arg X --wheels /nonexistent-w", 2,
        "--base-image 'a=b'"),
    bad("container build cpu --no-build --build-arg X", 2, "is not KEY=VALUE"),
    bad("container build cpu --build --base-image 'cuda=x'", 2, "--base-image 'cuda=x'"),
]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) + ("/" if p.is_dir() else "") for p in root.rglob("*")}


def _call(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = harness_main(args, env)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue()


def _not_refused(*args: object, **kwargs: object) -> None:
    raise AssertionError("the input was not refused: the run started")


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_is_refused_cleanly(row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    for name, content in row.files.items():
        path = cwd / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if row.toml:
        (cwd / "pyproject.toml").write_text("[tool.harness]\n" + row.toml + "\n")
    before = _tree(tmp_path)
    monkeypatch.chdir(cwd)
    import harness.compare.ab
    import harness.compare.gate
    import harness.compile.cli
    import harness.run.execute

    for module, name in ((harness.run.execute, "run_batch"), (harness.compare.gate, "_run_side"),
                         (harness.compare.ab, "_run_step"), (harness.compile.cli, "_run_tasks")):
        monkeypatch.setattr(module, name, _not_refused)  # a row that is not refused must not run anything
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path / "home"), **row.env}
    code, err = _call(shlex.split(row.args), env)
    assert code == row.code, err
    assert row.says.lower() in err.lower(), err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err  # one line says what is wrong (argparse adds its usage lines)
    assert _tree(tmp_path) == before, f"left behind: {sorted(_tree(tmp_path) - before)}"
    for relative in row.absent:
        assert not (cwd / relative).exists()


# -- coverage: every flag, variable and key has a row ----------------------------------------


def _flags(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> set[tuple[tuple[str, ...], str]]:
    found: set[tuple[tuple[str, ...], str]] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _flags(sub, (*path, name))
        for flag in action.option_strings:
            if flag.startswith("--") and flag not in ("--help", "--version"):
                found.add((path, flag))
    return found


def _row_uses(row: Row, path: tuple[str, ...], flag: str) -> bool:
    words = shlex.split(row.args)
    if words[:len(path)] != list(path):
        return False
    rest = words[len(path):]
    stop = rest.index("--") if "--" in rest else len(rest)  # after --: another command's arguments
    return any(w == flag or w.startswith(flag + "=") for w in rest[:stop])


def test_every_flag_of_every_command_has_a_row() -> None:
    missing = sorted(" ".join((*path, flag)) for path, flag in _flags(build_parser())
                     if not any(_row_uses(row, path, flag) for row in ROWS))
    assert not missing, f"add a row of bad input for: {missing}"


def test_every_harness_variable_has_a_row() -> None:
    used = {key for row in ROWS for key in row.env}
    missing = sorted(set(known_env_names()) - set(_OTHER_ENV) - used)
    assert not missing, f"add a row of bad input for: {missing}"


def test_every_pyproject_key_has_a_row() -> None:
    text = "\n".join(row.toml + "\n" + "\n".join(str(v) for v in row.files.values()) for row in ROWS)
    keys = [o.key for o in RUN_OPTIONS if o.key] + ["history-db", "container", *_CONTAINER_KEYS]
    missing = sorted(k for k in keys if f"{k} =" not in text)
    assert not missing, f"add a row of bad input for: {missing}"


def test_the_table_is_large() -> None:
    assert len(ROWS) >= 150
