"""The operation journal: every undoable thing done to the project, with what it takes to reverse it. Written here
alone (`add`, `Journal.record`; every table has one writer: tests/engine/test_record_owners.py): the actions call it
inside their own transaction where the catalog allows it (a run's merge in run/executor.py, a branch merge or delete
in ops/branches.py, a landing reset in the facade, an undo in ops/undo.py), and ops/undo.py reads the entries back.

    undo_journal(id, done_at, kind, ref, summary, before, after, data, undone_by, undoes)

`kind`: run | merge | publish | rollback | delete | landing_reset | undo (run: a pipeline run's own merge into its
target, written in that merge's transaction). For a change to a ref (run, merge, publish, rollback),
`before` and `after` are the ref's head before and after it: the catalog's commits hold the table pointers of both,
so the journal keeps hashes, not pointers. A branch delete keeps the deleted branch's head (`after`) and its ledger
loads (`data`); a landing reset keeps the ledger rows as they were before it (`data`). An undo is an entry of its
own (`undoes` names the entry it reversed, whose `undone_by` it becomes)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ratui.engine.state import migrations
from ratui.engine.state.db import open_db, write_tx
from ratui.engine.vocabulary import now_iso

TABLE = "undo_journal"
SCHEMA = """
CREATE TABLE IF NOT EXISTS undo_journal (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    done_at   TEXT NOT NULL,
    kind      TEXT NOT NULL,       -- run | merge | publish | rollback | delete | landing_reset | undo
    ref       TEXT NOT NULL,       -- the ref changed or deleted; namespace.zone for a landing reset
    summary   TEXT NOT NULL,       -- one line: what was done
    before    TEXT,                -- the ref's head before (a change to a ref)
    after     TEXT,                -- the ref's head after it (a deleted branch: its last head)
    data      TEXT NOT NULL,       -- JSON: what else the reversal needs (tables, ledger rows)
    undone_by INTEGER,             -- the undo entry that reversed it
    undoes    INTEGER              -- for an undo: the entry it reversed
);
"""


@dataclass(frozen=True)
class Entry:
    id: int
    done_at: str
    kind: str
    ref: str
    summary: str
    before: str | None
    after: str | None
    data: dict[str, Any] = field(default_factory=dict)
    undone_by: int | None = None
    undoes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def create_table(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)


def _entry(row: tuple) -> Entry:
    id_, done_at, kind, ref, summary, before, after, data, undone_by, undoes = row
    return Entry(id_, done_at, kind, ref, summary, before, after, json.loads(data or "{}"), undone_by, undoes)


def add(conn: sqlite3.Connection, kind: str, ref: str, summary: str, *, before: str | None = None,
        after: str | None = None, data: dict[str, Any] | None = None, undoes: int | None = None) -> int:
    """One entry, inside the caller's transaction; its id. An undo marks the entry it reversed."""
    cur = conn.execute(f"INSERT INTO {TABLE} (done_at, kind, ref, summary, before, after, data, undoes) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (now_iso(), kind, ref, summary, before, after, json.dumps(data or {}, sort_keys=True), undoes))
    new = int(cur.lastrowid or 0)
    if undoes is not None:
        conn.execute(f"UPDATE {TABLE} SET undone_by = ? WHERE id = ? AND undone_by IS NULL", (new, undoes))
    return new


class Journal:
    def __init__(self, db_path: Path):
        self.db_path = Path(db_path)
        migrations.migrate(self.db_path)
        with self._connect() as conn:
            create_table(conn)

    def _connect(self) -> closing[sqlite3.Connection]:
        return closing(open_db(self.db_path))

    def newest(self, limit: int = 20) -> list[Entry]:
        """The newest entries, undos included, newest first."""
        with self._connect() as conn:
            rows = conn.execute(f"SELECT * FROM {TABLE} ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [_entry(tuple(r)) for r in rows]

    def last_undoable(self, ref: str | None = None) -> Entry | None:
        """The newest action not undone yet (undos themselves are not undone: see ops/undo.py); with `ref`, the
        newest one on that ref."""
        on_ref, params = ("AND ref = ? ", (ref,)) if ref is not None else ("", ())
        with self._connect() as conn:
            row = conn.execute(f"SELECT * FROM {TABLE} WHERE kind <> 'undo' AND undone_by IS NULL {on_ref}"
                               "ORDER BY id DESC LIMIT 1", params).fetchone()
        return _entry(tuple(row)) if row else None

    def get(self, entry_id: int) -> Entry | None:
        with self._connect() as conn:
            row = conn.execute(f"SELECT * FROM {TABLE} WHERE id = ?", (entry_id,)).fetchone()
        return _entry(tuple(row)) if row else None

    def record(self, kind: str, ref: str, summary: str, **kw: Any) -> int:
        """An entry in a transaction of its own (an action whose change is already done, e.g. on a Nessie server)."""
        with self._connect() as conn, write_tx(conn):
            return add(conn, kind, ref, summary, **kw)
