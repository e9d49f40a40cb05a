"""The `reaper_reports` table: every reaper pass, dry or real, with its counts and its whole report (JSON). Written
here alone (every table has one writer: tests/engine/test_record_owners.py); ops/reaper.py makes the reports and
reads them back."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from ratui.engine.state import migrations
from ratui.engine.state.db import open_db, write_tx

SCHEMA = """
CREATE TABLE IF NOT EXISTS reaper_reports (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at  TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    dry_run     INTEGER NOT NULL,
    found       INTEGER NOT NULL,
    removed     INTEGER NOT NULL,
    bytes_freed INTEGER NOT NULL,
    errors      INTEGER NOT NULL,
    report      TEXT NOT NULL          -- JSON: settings and, per task, found/removed/kept lists, bytes, error
);
CREATE INDEX IF NOT EXISTS reaper_reports_started ON reaper_reports (started_at);
"""


class ReaperReports:
    def __init__(self, db_path: Path):
        self.db_path = Path(db_path)
        migrations.migrate(self.db_path)
        with self._connect() as conn, write_tx(conn):
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)

    def _connect(self) -> closing[sqlite3.Connection]:
        conn = open_db(self.db_path)
        conn.row_factory = sqlite3.Row
        return closing(conn)

    def add(self, *, started_at: str, finished_at: str, dry_run: bool, found: int, removed: int, bytes_freed: int,
            errors: int, report: str) -> int:
        """Store one pass; its id."""
        with self._connect() as conn, write_tx(conn):
            cur = conn.execute(
                "INSERT INTO reaper_reports (started_at, finished_at, dry_run, found, removed, bytes_freed, errors,"
                " report) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (started_at, finished_at, int(dry_run), found, removed, bytes_freed, errors, report),
            )
            return int(cur.lastrowid or 0)

    def newest(self, limit: int = 20) -> list[sqlite3.Row]:
        with self._connect() as conn:
            return conn.execute("SELECT * FROM reaper_reports ORDER BY id DESC LIMIT ?", (limit,)).fetchall()

    def get(self, report_id: int) -> sqlite3.Row | None:
        with self._connect() as conn:
            return conn.execute("SELECT * FROM reaper_reports WHERE id = ?", (report_id,)).fetchone()
