"""The state database's version (SQLite's PRAGMA user_version) and the numbered steps that bring a database an
earlier ratui wrote up to this one.

Each table is created as it is now where its schema lives (history.py, ledger.py, catalog/records.py,
catalog/roots.py, reaper_reports.py; the run tables' rows are written by run/record.py); a step changes what an
older ratui left behind: the columns it lacked, the data a change of meaning needs. Every owner calls `migrate()`
before it creates its tables, so whichever opens a database first brings it up to date. Steps run once, in order,
each in one write transaction that also records its number (two processes opening an old database at once migrate it
once). A step is never edited once shipped: a change is a new step at the end.
tests/engine/state/schemas/ keeps the schema of every ratui that shipped a different one; the tests open each
with today's ratui.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Callable

from ratui.engine.state.db import open_db, schema_lock, write_tx


def _has_table(conn: sqlite3.Connection, table: str) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return found is not None


def _add_columns(conn: sqlite3.Connection, table: str, columns: dict[str, str]) -> list[str]:
    """Add the columns `table` lacks (a table not there yet is its owner's to create whole); returns them."""
    if not _has_table(conn, table):
        return []
    existing = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    added = [name for name in columns if name not in existing]
    for name in added:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {columns[name]}")
    return added


# the runs table's columns as of step 1 (sqlite-utils' types: str TEXT, int INTEGER, float FLOAT)
_RUNS_1 = {
    "id": "TEXT", "pipeline": "TEXT", "status": "TEXT", "trigger": "TEXT", "strategy": "TEXT", "run_type": "TEXT",
    "reason": "TEXT", "queued_at": "TEXT", "started_at": "TEXT", "finished_at": "TEXT", "duration_ms": "INTEGER",
    "rows_written": "INTEGER", "warnings": "INTEGER", "error_code": "TEXT", "error_message": "TEXT",
    "error_hint": "TEXT", "error_file": "TEXT", "error_line": "INTEGER", "branch": "TEXT", "phases": "TEXT",
    "write": "TEXT", "notes": "TEXT", "pid": "INTEGER", "host": "TEXT", "invocation": "TEXT",
    "pid_started": "FLOAT", "fingerprint": "TEXT", "inputs": "TEXT", "merged_at": "TEXT", "phase_status": "TEXT",
    "ref": "TEXT", "version": "TEXT",
}


def _step_1(conn: sqlite3.Connection) -> None:
    """What ratui added to its tables before it numbered its migrations (up to 2026-11-25): a run's every column,
    a quality result's line, a commit's meta, a landing file's load time, digest and purge time. A ledger without
    purge times kept archived files under their plain name with `archived_to` set: they get their path
    (_processed/RUN/NAME), as the ledger names them since."""
    _add_columns(conn, "runs", _RUNS_1)
    _add_columns(conn, "quality_results", {"line": "INTEGER"})
    _add_columns(conn, "catalog_commits", {"meta": "TEXT"})
    added = _add_columns(conn, "landing_files", {"loaded_at": "TEXT", "digest": "TEXT", "purged_at": "TEXT"})
    if "purged_at" in added:
        conn.execute(
            "UPDATE OR IGNORE landing_files SET file = substr(archived_to, instr(archived_to, '/_processed/') + 1) "
            "|| '/' || file WHERE archived_to IS NOT NULL AND instr(archived_to, '/_processed/') > 0 "
            "AND file NOT LIKE '\\_processed/%' ESCAPE '\\'")


def _step_2(conn: sqlite3.Connection) -> None:
    """A run records how its Python pipeline was isolated (2026-11-26)."""
    _add_columns(conn, "runs", {"isolation": "TEXT"})


def _step_3(conn: sqlite3.Connection) -> None:
    """The operation journal that `ratui undo` reads (undo_journal, owned by state/journal.py) (2026-11-26)."""
    conn.execute("CREATE TABLE IF NOT EXISTS undo_journal (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                 "done_at TEXT NOT NULL, kind TEXT NOT NULL, ref TEXT NOT NULL, summary TEXT NOT NULL, "
                 "before TEXT, after TEXT, data TEXT NOT NULL, undone_by INTEGER, undoes INTEGER)")


def _step_4(conn: sqlite3.Connection) -> None:
    """A run keeps its data diff against its target (2026-11-26)."""
    _add_columns(conn, "runs", {"diff": "TEXT"})


def _step_5(conn: sqlite3.Connection) -> None:
    """The run type 'backfill' is gone (2026-11-29): it named every run change detection sent because its table was
    new or missing, or its definition changed, and none of them fills a time range. A run whose table was new or
    missing (reason "first run...", "its table is missing...") is a 'rebuild'; any other (its definition changed or
    had errors, or change detection failed) ran as its strategy runs: 'full' for full_refresh, else 'incremental'
    (run/changes.py strategy_run_type)."""
    if not _has_table(conn, "runs"):
        return
    conn.execute(
        "UPDATE runs SET run_type = CASE "
        "WHEN reason LIKE 'first run%' OR reason LIKE 'its table is missing%' THEN 'rebuild' "
        "WHEN strategy IS NULL OR strategy = 'full_refresh' THEN 'full' ELSE 'incremental' END "
        "WHERE run_type = 'backfill'")


def _step_6(conn: sqlite3.Connection) -> None:
    """Schedules (2026-11-29): a run records the schedule that fired it; the schedules' state, the fires the runner
    decided and its lease (owned by state/schedule_state.py)."""
    _add_columns(conn, "runs", {"schedule": "TEXT"})
    for statement in SCHEDULE_TABLES:
        conn.execute(statement)


# the schedule tables as step 6 created them (state/schedule_state.py creates them the same way)
SCHEDULE_TABLES = (
    "CREATE TABLE IF NOT EXISTS schedule_state (name TEXT PRIMARY KEY, paused INTEGER NOT NULL DEFAULT 0, "
    "paused_at TEXT, last_fire TEXT, last_invocation TEXT, updated_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS schedule_fires (id INTEGER PRIMARY KEY AUTOINCREMENT, schedule TEXT NOT NULL, "
    "fire_at TEXT NOT NULL, decided_at TEXT NOT NULL, action TEXT NOT NULL, reason TEXT NOT NULL, invocation TEXT, "
    "pid INTEGER, host TEXT)",
    "CREATE INDEX IF NOT EXISTS schedule_fires_by_schedule ON schedule_fires (schedule, id)",
    "CREATE TABLE IF NOT EXISTS runner_lease (id INTEGER PRIMARY KEY CHECK (id = 1), holder TEXT NOT NULL, "
    "pid INTEGER NOT NULL, host TEXT NOT NULL, acquired_at TEXT NOT NULL, renewed_at TEXT NOT NULL, "
    "expires REAL NOT NULL)",
)


def _step_7(conn: sqlite3.Connection) -> None:
    """Alerts (2026-11-29): each rule's last state per pipeline, every alert attempt (owned by
    state/alert_state.py)."""
    for statement in ALERT_TABLES:
        conn.execute(statement)


# the alert tables as step 7 created them (state/alert_state.py creates them the same way)
ALERT_TABLES = (
    "CREATE TABLE IF NOT EXISTS alert_status (rule TEXT NOT NULL, pipeline TEXT NOT NULL, state TEXT NOT NULL, "
    "run_id TEXT, since TEXT NOT NULL, PRIMARY KEY (rule, pipeline))",
    "CREATE TABLE IF NOT EXISTS alert_attempts (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, "
    "at_epoch REAL NOT NULL, channel TEXT NOT NULL, rule TEXT NOT NULL, event TEXT NOT NULL, pipelines TEXT NOT NULL, "
    "run_ids TEXT NOT NULL, outcome TEXT NOT NULL, detail TEXT NOT NULL, target TEXT NOT NULL, tries INTEGER NOT NULL, "
    "pid INTEGER, host TEXT)",
    "CREATE INDEX IF NOT EXISTS alert_attempts_by_channel ON alert_attempts (channel, at_epoch)",
)


STEPS: tuple[tuple[int, Callable[[sqlite3.Connection], None]], ...] = (
    (1, _step_1),
    (2, _step_2),
    (3, _step_3),
    (4, _step_4),
    (5, _step_5),
    (6, _step_6),
    (7, _step_7),
)
CURRENT = STEPS[-1][0]

_done: set[Path] = set()  # databases this process brought up to date already (one look each)
_done_lock = threading.Lock()


def version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(db_path: Path) -> int:
    """Bring the database at `db_path` up to CURRENT; returns the version it had. Cheap once done (per process)."""
    key = Path(db_path).resolve()
    with _done_lock:
        if key in _done:
            return CURRENT
    with schema_lock(key):  # processes that open a fresh database at once take turns
        before = _migrate(key)
    with _done_lock:
        _done.add(key)
    return before


def _migrate(key: Path) -> int:
    conn = open_db(key)
    try:
        before = version(conn)
        if before < CURRENT:
            for number, step in STEPS:
                with write_tx(conn):
                    if version(conn) >= number:  # another process did it meanwhile
                        continue
                    step(conn)
                    conn.execute(f"PRAGMA user_version = {number}")
        elif before > CURRENT:
            from ratui.engine.errors import RatuiError

            raise RatuiError("RAT-PRJ-008", f"the state database is of a newer ratui (version {before}; this ratui "
                             f"knows up to {CURRENT})", file=str(key),
                             hint="Use the ratui that wrote it (pip install -U ratui), or move .ratui/ratui.db "
                                  "aside to start with empty state.")
    finally:
        conn.close()
    return before
