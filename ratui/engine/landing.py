"""The landing-file ledger: every landing file, per zone and consuming pipeline, with its state.

States follow SingleStore's pipeline file states:
    unloaded   seen, not yet loaded by this pipeline (or made loadable again by a reset)
    loaded     loaded by a run whose branch merged into main (set in the merge's own SQLite transaction)
    skipped    failed `max_attempts` runs in a row: left out so the other files can load

A file whose size or modification time changes is a new version and becomes `unloaded` again.
Attempts count only failures that concern the data (build, write, quality), never a cancelled run or a
template/config error.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .db import open_db, write_tx
from .errors import RatuiError
from .history import now_iso

MAX_ATTEMPTS = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS landing_files (
    namespace TEXT NOT NULL,
    zone TEXT NOT NULL,
    pipeline TEXT NOT NULL,
    file TEXT NOT NULL,            -- name at the zone's root
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    etag TEXT,                     -- for object stores (S3): kept empty for local files
    version TEXT,
    state TEXT NOT NULL DEFAULT 'unloaded',
    run_id TEXT,                   -- the run that loaded it
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    archived_to TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (namespace, zone, pipeline, file)
);
CREATE INDEX IF NOT EXISTS landing_files_state ON landing_files (namespace, zone, state);
"""


@dataclass(frozen=True)
class LandingFile:
    namespace: str
    zone: str
    pipeline: str
    file: str
    size: int
    mtime_ns: int
    state: str
    run_id: str | None
    attempts: int
    last_error: str | None
    archived_to: str | None
    updated_at: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Ledger:
    def __init__(self, db_path: Path, max_attempts: int = MAX_ATTEMPTS):
        self.db_path = db_path
        self.max_attempts = max_attempts
        with self._conn() as conn:
            conn.executescript(SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = open_db(self.db_path)
        conn.row_factory = sqlite3.Row
        return _Closing(conn)

    def sync(self, namespace: str, zone: str, pipeline: str, files: Iterable[Path]) -> list[LandingFile]:
        """Record the zone's active files for a pipeline; a changed file (size or mtime) becomes unloaded again."""
        now = now_iso()
        with self._conn() as conn, write_tx(conn):
            for path in files:
                stat = path.stat()
                conn.execute(
                    """INSERT INTO landing_files (namespace, zone, pipeline, file, size, mtime_ns, updated_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (namespace, zone, pipeline, file) DO UPDATE SET
                         state = CASE WHEN size <> excluded.size OR mtime_ns <> excluded.mtime_ns
                                      THEN 'unloaded' ELSE state END,
                         attempts = CASE WHEN size <> excluded.size OR mtime_ns <> excluded.mtime_ns
                                         THEN 0 ELSE attempts END,
                         archived_to = CASE WHEN size <> excluded.size OR mtime_ns <> excluded.mtime_ns
                                            THEN NULL ELSE archived_to END,
                         size = excluded.size, mtime_ns = excluded.mtime_ns,
                         updated_at = CASE WHEN size <> excluded.size OR mtime_ns <> excluded.mtime_ns
                                           THEN excluded.updated_at ELSE updated_at END""",
                    (namespace, zone, pipeline, path.name, stat.st_size, stat.st_mtime_ns, now),
                )
        return self.files(namespace, zone, pipeline)

    def files(self, namespace: str | None = None, zone: str | None = None, pipeline: str | None = None,
              state: str | None = None) -> list[LandingFile]:
        clauses, params = [], []
        for column, value in (("namespace", namespace), ("zone", zone), ("pipeline", pipeline), ("state", state)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        with self._conn() as conn:
            rows = conn.execute(f"SELECT * FROM landing_files{where} ORDER BY namespace, zone, file, pipeline",
                                params).fetchall()
        return [LandingFile(**{k: r[k] for k in LandingFile.__dataclass_fields__}) for r in rows]

    def mark_loaded(self, conn: sqlite3.Connection, run_id: str, entries: Iterable[tuple[str, str, str, str]]) -> None:
        """Inside the merge's transaction: these (namespace, zone, pipeline, file) are now loaded."""
        now = now_iso()
        conn.executemany(
            """UPDATE landing_files SET state = 'loaded', run_id = ?, attempts = 0, last_error = NULL, updated_at = ?
               WHERE namespace = ? AND zone = ? AND pipeline = ? AND file = ?""",
            [(run_id, now, *entry) for entry in entries],
        )

    def record_failure(self, entries: Iterable[tuple[str, str, str, str]], error: str) -> list[str]:
        """Count a failed attempt; files at max_attempts become skipped. Returns the names newly skipped."""
        skipped: list[str] = []
        now = now_iso()
        with self._conn() as conn, write_tx(conn):
            for entry in entries:
                conn.execute(
                    """UPDATE landing_files SET attempts = attempts + 1, last_error = ?, updated_at = ?,
                         state = CASE WHEN attempts + 1 >= ? THEN 'skipped' ELSE state END
                       WHERE namespace = ? AND zone = ? AND pipeline = ? AND file = ? AND state = 'unloaded'""",
                    (error[:500], now, self.max_attempts, *entry),
                )
                row = conn.execute(
                    "SELECT state FROM landing_files WHERE namespace = ? AND zone = ? AND pipeline = ? AND file = ?",
                    entry).fetchone()
                if row and row["state"] == "skipped":
                    skipped.append(entry[3])
        return skipped

    def mark_archived(self, entries: Iterable[tuple[str, str, str, str]], archived_to: str) -> None:
        with self._conn() as conn, write_tx(conn):
            conn.executemany(
                """UPDATE landing_files SET archived_to = ? WHERE namespace = ? AND zone = ? AND pipeline = ?
                   AND file = ?""", [(archived_to, *e) for e in entries])

    def reset(self, namespace: str, zone: str, file: str | None = None, pipeline: str | None = None) -> int:
        """Make files loadable again (state unloaded, attempts 0). Returns how many rows changed."""
        clauses, params = ["namespace = ?", "zone = ?"], [namespace, zone]
        if file:
            clauses.append("file = ?")
            params.append(file)
        if pipeline:
            clauses.append("pipeline = ?")
            params.append(pipeline)
        with self._conn() as conn, write_tx(conn):
            cur = conn.execute(
                f"""UPDATE landing_files SET state = 'unloaded', attempts = 0, last_error = NULL, run_id = NULL,
                    updated_at = ? WHERE {' AND '.join(clauses)}""", [now_iso(), *params])
            return cur.rowcount


class _Closing:
    """A connection that closes when its `with` block ends (sqlite3's own context manager only commits)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: Any) -> None:
        self.conn.close()


def archive(zone_folder: Path, run_id: str, names: Iterable[str]) -> Path:
    """Move consumed files to `_processed/{run_id}/` (after a successful merge)."""
    target = zone_folder / "_processed" / run_id
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = zone_folder / name
        if source.exists():
            shutil.move(str(source), str(target / name))
    return target


def zone_digest(files: Iterable[Path]) -> list[list[Any]]:
    """What change detection compares: the active files with their size and modification time."""
    out = []
    for path in files:
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        out.append([path.name, stat.st_size, stat.st_mtime_ns])
    return sorted(out)


def check_zone_name(zone: str) -> None:
    if "/" in zone or zone.startswith((".", "_")):
        raise RatuiError("RAT-LND-001", f"'{zone}' is not a landing zone name")
