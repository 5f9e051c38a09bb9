"""Nightly history: an SQLite store of run medians, and the persistence rule that reads it.

Each case of a new run is held against a baseline: the median of its medians
in the last ``window`` runs of the same fingerprint (same backend, device
model, timer, level, cache, provider). A case slower than the baseline by
more than ``threshold`` is *suspect*; it is flagged as a regression only when
it was also suspect in the previous ``persist - 1`` runs (one noisy night is
not an alarm), or at once when it is slower by more than ``large``.

A run measured with other software (torch, Triton, driver, flag_gems, harness) than the
runs of its baseline window is refused unless the user allows it
(:func:`check_history_environment`): an upgrade is not a regression of the code.

The rule itself (``HistoryRules``, ``assess_case``: pure) is harness.results.trend, which the
history pages judge with too; ``HistoryStore`` is the thin SQLite layer.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.compare.compare import RunData
from harness.compare.spread import SpreadTable, history_series, measured_spread
from harness.errors import UsageError
from harness.results.runinfo import environment_values, fingerprint, library_commit
from harness.results.store import csv_text
from harness.results.trend import (
    PLAIN_OP,
    CaseCheck,
    HistoryRules,
    RegressionRange,
    assess_case,
    check_run,
)

__all__ = [
    "APPLICATION_ID",
    "EXPORT_COLUMNS",
    "CaseCheck",
    "HistoryRules",
    "HistoryStore",
    "assess_case",
    "check_history_environment",
    "check_run",
    "RANGES_FILE",
    "RANGES_VERSION",
    "ranges_json",
    "read_ranges",
    "render_trend_csv",
    "with_history_spread",
]

# 2: runs.environment (JSON of the run's software versions); a version 1 file gains the column.
# 3: rows.cause (why a case did not pass: "kind: evidence", harness/results/causes.py); a file of
#    version 1 or 2 gains the column, empty for the rows it held.
# 4: runs.library_commit (the library commit the run measured, runinfo.library_commit); a file of
#    an earlier version gains the column, empty for the runs it held.
# 5: runs.git_dirty (1 where the run's tracked harness files differed from git_commit, run.json's
#    git_dirty; 0 where they did not); a file of an earlier version gains the column, empty for
#    the runs it held.
_SCHEMA_VERSION = 5
# PRAGMA application_id of a history database ("HrnH"): what tells the harness's own SQLite file
# from another program's, which is refused untouched. Files written before the mark was set are
# known by their schema version and their two tables, and get the mark on their next write.
APPLICATION_ID = 0x48726E48
_TABLES = {"runs", "rows"}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    fingerprint TEXT NOT NULL,
    backend TEXT, device_name TEXT, timer TEXT, level TEXT,
    git_commit TEXT, started_at TEXT NOT NULL, added_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rows (
    run_seq INTEGER NOT NULL REFERENCES runs(seq) ON DELETE CASCADE,
    case_id TEXT NOT NULL, op TEXT NOT NULL, status TEXT NOT NULL,
    median_ms REAL, p10_ms REAL, p90_ms REAL, n INTEGER, torch_median_ms REAL,
    PRIMARY KEY (run_seq, case_id)
);
CREATE INDEX IF NOT EXISTS runs_by_fingerprint ON runs (fingerprint, started_at, seq);
"""
EXPORT_COLUMNS = (
    "case_id", "fingerprint", "backend", "device_name", "run_id", "started_at", "git_commit",
    "status", "median_ms", "p10_ms", "p90_ms", "n", "torch_median_ms", "cause", "environment", "library_commit",
    "git_dirty",
)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _fingerprint(run: RunData) -> str:
    """The run's fingerprint (harness.results.runinfo); computed for a run.json that lacks it."""
    return str(run.info.get("fingerprint") or fingerprint(run.info))


def run_medians(run: RunData) -> dict[str, float | None]:
    """case id -> candidate median (ms) of a run; None for a case that did not pass."""
    return {
        r.case_id: (r.candidate.summary.median if r.status == "pass" and r.candidate else None)
        for r in run.records
    }


class HistoryStore:
    """One SQLite file. Each call opens and closes its own connection."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _check_own(self) -> None:
        """Refuse, without writing to it, a file that is not a history database of this harness: an
        empty file, a file that is not SQLite, another program's SQLite file. A missing file is
        created on first use."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UsageError(f"Cannot open the history database {self.path} ({exc.strerror}). "
                             "Choose a readable path with --db.") from None
        if size == 0:
            raise UsageError(f"{self.path} is an empty file, not a history database; it was left as it is. "
                             "Delete it, or give another --db (a missing file is created).")
        try:
            # immutable: no lock, journal or WAL index is made beside a file that may be another program's
            conn = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
        except sqlite3.Error as exc:
            raise UsageError(f"Cannot open the history database {self.path} ({exc}).") from None
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{self.path} is not a usable history database ({exc}); it was left as it is. Give "
                             "another --db.") from None
        finally:
            conn.close()
        if app_id == APPLICATION_ID or (app_id == 0 and 1 <= version <= _SCHEMA_VERSION and _TABLES <= tables):
            return
        holds = f"tables {', '.join(sorted(tables))}" if tables else "no tables"
        raise UsageError(f"{self.path} is an SQLite file of another program (application id {app_id}, {holds}), "
                         "not a history database of the harness; it was left as it is. Give another --db.")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if self.path.is_dir():
            raise UsageError(f"History database {self.path} is a directory. Give a file path with --db.")
        self._check_own()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path)
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(
                f"Cannot open the history database {self.path} ({exc}). Choose a writable path with --db."
            ) from exc
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA_VERSION:
                raise UsageError(
                    f"History database {self.path} was written by a newer harness (schema {version}). "
                    "Upgrade the harness, or use another --db."
                )
            conn.executescript(_SCHEMA)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
            if "environment" not in columns:
                conn.execute("ALTER TABLE runs ADD COLUMN environment TEXT")
            if "library_commit" not in columns:
                conn.execute("ALTER TABLE runs ADD COLUMN library_commit TEXT")
            if "git_dirty" not in columns:
                conn.execute("ALTER TABLE runs ADD COLUMN git_dirty INTEGER")
            if "cause" not in {row[1] for row in conn.execute("PRAGMA table_info(rows)")}:
                conn.execute("ALTER TABLE rows ADD COLUMN cause TEXT")
            conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            with conn:
                yield conn
        except sqlite3.DatabaseError as exc:
            raise UsageError(
                f"{self.path} is not a usable history database ({exc}). Move it aside or use another --db."
            ) from exc
        finally:
            conn.close()

    def add(self, run: RunData) -> tuple[int, bool]:
        """Store a run's rows; adding a run again replaces its rows. Returns (rows, replaced)."""
        fingerprint = _fingerprint(run)
        info = run.info
        ident = info.get("identity") or {}
        with self._connect() as conn:
            old = conn.execute("SELECT seq FROM runs WHERE run_id = ?", (run.run_id,)).fetchone()
            if old:
                conn.execute("DELETE FROM runs WHERE seq = ?", (old[0],))
            cur = conn.execute(
                "INSERT INTO runs (run_id, fingerprint, backend, device_name, timer, level, git_commit,"
                " started_at, added_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run.run_id, fingerprint, info.get("backend"), ident.get("device_name"),
                 info.get("timer"), info.get("level"), info.get("git_commit"),
                 info.get("started_at") or _now(), _now()),
            )
            seq = cur.lastrowid
            dirty = info.get("git_dirty")
            conn.execute("UPDATE runs SET environment = ?, library_commit = ?, git_dirty = ? WHERE seq = ?",
                         (json.dumps(environment_values(info), sort_keys=True), library_commit(info) or None,
                          None if dirty is None else int(bool(dirty)), seq))
            rows = []
            for r in run.records:
                c = r.candidate.summary if r.candidate and r.status == "pass" else None
                torch = r.baseline.summary.median if r.baseline and r.status == "pass" else None
                rows.append((seq, r.case_id, r.op, r.status, c.median if c else None,
                             c.p10 if c else None, c.p90 if c else None, c.n if c else None, torch,
                             str(r.cause) if r.cause is not None else None))
            conn.executemany("INSERT OR REPLACE INTO rows (run_seq, case_id, op, status, median_ms, p10_ms, p90_ms,"
                             " n, torch_median_ms, cause) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows), bool(old)

    def _earlier(self, conn: sqlite3.Connection, run: RunData, limit: int) -> list[tuple[int, str]]:
        """(seq, library commit) of the stored runs of this run's fingerprint that started before
        it, oldest first (the commit "" where a run names none or was stored before it was kept)."""
        fingerprint = _fingerprint(run)
        me = conn.execute("SELECT started_at, seq FROM runs WHERE run_id = ?", (run.run_id,)).fetchone()
        if me is None:
            started = str(run.info.get("started_at") or _now())
            cond, args = "(started_at < ? OR (started_at = ? AND run_id < ?))", [started, started, run.run_id]
        else:
            cond, args = "(started_at < ? OR (started_at = ? AND seq < ?))", [me[0], me[0], me[1]]
        found = [(int(seq), str(commit or "")) for seq, commit in conn.execute(
            f"SELECT seq, library_commit FROM runs WHERE fingerprint = ? AND {cond} "
            "ORDER BY started_at DESC, seq DESC LIMIT ?",
            [fingerprint, *args, limit],
        )]
        return list(reversed(found))

    def earlier_runs(self, run: RunData, limit: int = 200) -> list[dict[str, float | None]]:
        """Medians of the runs of this run's fingerprint that started before it, oldest first."""
        return self.earlier_history(run, limit)[0]

    def earlier_history(self, run: RunData, limit: int = 200) -> tuple[list[dict[str, float | None]], list[str]]:
        """:meth:`earlier_runs` and, in the same order and from the same read, each run's library
        commit ("" where a run names none or was stored before the commit was kept): two queries
        however many runs there are."""
        with self._connect() as conn:
            earlier = self._earlier(conn, run, limit)
            medians: dict[int, dict[str, float | None]] = {seq: {} for seq, _ in earlier}
            for seq, case, median in conn.execute(
                    f"SELECT run_seq, case_id, median_ms FROM rows WHERE run_seq IN ({','.join('?' * len(earlier))})",
                    [seq for seq, _ in earlier]) if earlier else ():
                medians[seq][case] = median
            return [medians[seq] for seq, _ in earlier], [commit for _, commit in earlier]

    def window_environments(self, run: RunData, window: int) -> list[tuple[str, dict[str, str]]]:
        """(run id, software versions) of the last ``window`` runs of this run's fingerprint that
        started before it; runs stored before versions were kept are left out."""
        fingerprint = _fingerprint(run)
        started = str(run.info.get("started_at") or _now())
        with self._connect() as conn:
            found = conn.execute(
                "SELECT run_id, environment FROM runs WHERE fingerprint = ? AND run_id != ? AND started_at <= ?"
                " ORDER BY started_at DESC, seq DESC LIMIT ?", (fingerprint, run.run_id, started, window),
            ).fetchall()
        out = []
        for run_id, text in found:
            try:
                env = json.loads(text) if text else None
            except ValueError:
                env = None
            if isinstance(env, dict):
                out.append((str(run_id), {str(k): str(v) for k, v in env.items()}))
        return out

    def export(self, fingerprint: str | None = None, cases: Sequence[str] = ()) -> list[dict[str, object]]:
        """Every stored value, ordered by case then time: each case's trend is contiguous. Each row
        carries its run's harness commit (``git_commit``; ``git_dirty`` 1 where the run's tracked
        files differed from it), software versions (``environment``: the
        JSON text of runinfo.environment_values) and ``library_commit``; None where the run was
        stored before they were kept."""
        where, args = [], []
        if fingerprint:
            where.append("runs.fingerprint = ?")
            args.append(fingerprint)
        if cases:
            where.append(f"rows.case_id IN ({', '.join('?' for _ in cases)})")
            args.extend(cases)
        sql = (
            "SELECT rows.case_id, runs.fingerprint, runs.backend, runs.device_name, runs.run_id,"
            " runs.started_at, runs.git_commit, rows.status, rows.median_ms, rows.p10_ms, rows.p90_ms,"
            " rows.n, rows.torch_median_ms, rows.cause, runs.environment, runs.library_commit, runs.git_dirty"
            " FROM rows JOIN runs ON rows.run_seq = runs.seq"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY rows.case_id, runs.fingerprint, runs.started_at, runs.seq"
        )
        with self._connect() as conn:
            return [dict(zip(EXPORT_COLUMNS, row, strict=True)) for row in conn.execute(sql, args)]


# `history check --out DIR` writes DIR/bisect-ranges.json: where each regression's slowdown began,
# as library commits (harness.results.trend.regression_ranges). Version 1.
RANGES_FILE = "bisect-ranges.json"
RANGES_VERSION = 1
_COMMIT = re.compile(r"[0-9a-f]{7,64}")


def ranges_json(run_id: str, ranges: Sequence[RegressionRange], unnamed: Sequence[str]) -> str:
    """bisect-ranges.json's text."""
    return json.dumps({"format_version": RANGES_VERSION, "run_id": run_id,
                       "ranges": [{"good": r.good, "bad": r.bad, "ops": list(r.ops), "cases": list(r.cases)}
                                  for r in ranges],
                       "unnamed": list(unnamed)}, indent=1) + "\n"


def read_ranges(path: Path) -> tuple[list[RegressionRange], list[str]]:
    """The ranges of a bisect-ranges.json, checked, and a line for each range left out: each commit
    must be a hex SHA and each op id plain (``trend.PLAIN_OP``), since a workflow puts them on a
    command line. UsageError, naming what is wrong, for a file that cannot be read, is not JSON
    or is of another version."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read it as JSON ({exc}).") from None
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != RANGES_VERSION:
        raise UsageError(f"{path}: format_version {version!r}; this harness reads {RANGES_VERSION}.")
    items = data.get("ranges", [])
    if not isinstance(items, list):
        raise UsageError(f"{path}: ranges: expected a list, got {type(items).__name__}.")
    found, left_out = [], []
    for i, item in enumerate(items):
        item = item if isinstance(item, dict) else {}
        good, bad, ops, cases = (item.get(k) for k in ("good", "bad", "ops", "cases"))
        if not (isinstance(good, str) and _COMMIT.fullmatch(good) and isinstance(bad, str) and _COMMIT.fullmatch(bad)):
            left_out.append(f"{path}: ranges[{i}] left out: good and bad must be hex commit ids, got {good!r} "
                            f"and {bad!r}")
        elif not (isinstance(ops, list) and ops and all(isinstance(o, str) and PLAIN_OP.fullmatch(o) for o in ops)):
            left_out.append(f"{path}: ranges[{i}] left out: ops must be plain op ids (a letter, digit or _ first, "
                            f"then those and . : / -), got {ops!r}")
        else:
            found.append(RegressionRange(good, bad, tuple(ops), tuple(str(c) for c in cases)
                                         if isinstance(cases, list) else ()))
    return found, left_out


def with_history_spread(spread: SpreadTable, db: Path, base_info: Mapping[str, object]) -> SpreadTable:
    """``spread`` with each case's own run-to-run spread measured from the runs in ``db`` of the
    fingerprint of the run ``base_info`` (its run.json) describes (cases with fewer than four
    runs keep the table's class)."""
    print_of = str(base_info.get("fingerprint") or fingerprint(base_info))
    cases = measured_spread(history_series(HistoryStore(db).export(print_of)), f"measured in {db}")
    return spread.with_cases(cases, f"{len(cases)} case(s)' spread measured in {db}")


def render_trend_csv(rows: Sequence[Mapping[str, object]]) -> str:
    return csv_text(EXPORT_COLUMNS, ({k: "" if row.get(k) is None else row.get(k) for k in EXPORT_COLUMNS}
                                     for row in rows))


def check_history_environment(run: RunData, earlier: Sequence[tuple[str, Mapping[str, str]]],
                              allow_mismatch: bool) -> list[str]:
    """Refuse to check a run against a baseline measured with other software (exit 2), unless
    allowed; then one warning line per difference. ``earlier``: (run id, versions) of the runs
    in the baseline window."""
    mine = environment_values(run.info)
    found: dict[tuple[str, str], list[str]] = {}
    for run_id, env in earlier:
        for key, value in mine.items():
            theirs = env.get(key, "")
            if theirs != value:
                found.setdefault((key, theirs or "absent"), []).append(run_id)
    lines = [f"{key} {mine[key] or 'absent'!r} in this run, {theirs!r} in {len(ids)} earlier run(s) of the "
             f"baseline ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
             for (key, theirs), ids in found.items()]
    lines += [f"this run was merged from parts of different software: {line}"  # harness merge --allow-mismatch
              for line in run.info.get("software_mismatch") or ()]
    if lines and not allow_mismatch:
        raise UsageError(
            f"Run {run.path} was measured with other software than the runs of its baseline window "
            f"({'; '.join(lines)}), so a change against them may be the upgrade's, not the code's. A new "
            "version's runs fill the window after --window runs (they are stored by `history add` all the "
            "same); until then pass --allow-mismatch to check against the older runs anyway (the report "
            "names each difference)."
        )
    return [f"baseline measured with other software (--allow-mismatch): {line}" for line in lines]
