"""Reading the landing ledger (ledger.py says what it holds, and is the one module that writes its tables): a
pipeline's rows and their state on a ref, the counts and pages a screen shows, and what undo and the landing facts
need to know before a change."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterable

from ratui.engine.state.db import open_db
from ratui.engine.state.ledger_rows import (COLUMNS, BRIEF_COLUMNS, SAVED, SAVED_FIELDS, Closing, LandingFile,
                                            LedgerSummary, landing_rows, with_state)
from ratui.engine.vocabulary import MAIN


class LedgerReads:
    """The ledger's queries: nothing here writes (Ledger, its subclass in ledger.py, does)."""

    def __init__(self, db_path: Path):
        self.db_path = db_path

    def _conn(self) -> Closing:
        conn = open_db(self.db_path)
        conn.row_factory = sqlite3.Row
        return Closing(conn)

    @staticmethod
    def _read(conn: sqlite3.Connection, namespace: str, zone: str, pipeline: str) -> list[tuple]:
        """A pipeline's rows for a zone as plain tuples, in files()'s order: LandingFile's fields (file, size and
        mtime_ns at 3, 4 and 5), then digest, etag and version (`row[-3:]`)."""
        cur = conn.execute(f"SELECT {COLUMNS}, digest, etag, version FROM landing_files WHERE "
                           "namespace = ? AND zone = ? AND pipeline = ? ORDER BY namespace, zone, file, pipeline",
                           (namespace, zone, pipeline))
        cur.row_factory = None
        return cur.fetchall()

    @staticmethod
    def _read_brief(conn: sqlite3.Connection, namespace: str, zone: str, pipeline: str) -> list[tuple]:
        """_read()'s rows without the namespace, zone and pipeline (the query's own), and with whether a digest is
        kept rather than the digest: what a sync that finds nothing changed reads (file, size and mtime_ns first;
        digest kept, etag and version last). A zone of 100,000 files is 500,000 fewer strings made."""
        cur = conn.execute(f"SELECT {BRIEF_COLUMNS}, digest IS NOT NULL, etag, version FROM landing_files WHERE "
                           "namespace = ? AND zone = ? AND pipeline = ? ORDER BY namespace, zone, file, pipeline",
                           (namespace, zone, pipeline))
        cur.row_factory = None
        return cur.fetchall()

    def unloaded(self, namespace: str, zones: Iterable[str], pipeline: str, ref: str = MAIN) -> list[LandingFile]:
        """The files a pipeline still has to load on `ref` (new, failed before, or reset), in every zone it
        reads."""
        zones = list(zones)
        if not zones:
            return []
        marks = ",".join("?" * len(zones))
        with self._conn() as conn:
            if ref == MAIN:
                return landing_rows(conn.execute(
                    f"SELECT {COLUMNS} FROM landing_files WHERE namespace = ? AND pipeline = ? AND zone IN ({marks}) "
                    "AND state = 'unloaded' ORDER BY zone, file", (namespace, pipeline, *zones)))
            entries = self._on(conn, ref, landing_rows(conn.execute(
                f"SELECT {COLUMNS} FROM landing_files WHERE namespace = ? AND pipeline = ? AND zone IN ({marks}) "
                "ORDER BY zone, file", (namespace, pipeline, *zones))))
        return [e for e in entries if e.state == "unloaded"]

    def on_ref(self, ref: str, entries: list[LandingFile]) -> list[LandingFile]:
        """`entries` (rows of landing_files) with their state on `ref`: main's as they are; on another ref a row
        is loaded if the ref loaded that file, skipped if skipped, else unloaded."""
        if ref == MAIN or not entries:
            return entries
        with self._conn() as conn:
            return self._on(conn, ref, entries)

    @staticmethod
    def _on(conn: sqlite3.Connection, ref: str, entries: list[LandingFile]) -> list[LandingFile]:
        loads: dict[tuple, sqlite3.Row] = {}
        for namespace, zone, pipeline in {(e.namespace, e.zone, e.pipeline) for e in entries}:
            for row in conn.execute("SELECT * FROM landing_loads WHERE ref = ? AND namespace = ? AND zone = ? AND "
                                    "pipeline = ?", (ref, namespace, zone, pipeline)):
                loads[(namespace, zone, pipeline, row["name"])] = row
        out = []
        for e in entries:
            row = loads.get((e.namespace, e.zone, e.pipeline, e.name))
            same = row is not None and row["size"] == e.size and (e.archived or row["mtime_ns"] == e.mtime_ns)
            if e.state == "skipped":
                out.append(e)
            elif same and row is not None:
                out.append(with_state(e, state="loaded", run_id=row["run_id"], loaded_at=row["loaded_at"]))
            else:
                out.append(with_state(e, state="unloaded", run_id=None, loaded_at=None))
        return out

    def files(self, namespace: str | None = None, zone: str | None = None, pipeline: str | None = None,
              state: str | None = None) -> list[LandingFile]:
        clauses, params = [], []
        for column, value in (("namespace", namespace), ("zone", zone), ("pipeline", pipeline), ("state", state)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        with self._conn() as conn:
            return landing_rows(conn.execute(f"SELECT {COLUMNS} FROM landing_files{where} ORDER BY namespace, zone, "
                                             "file, pipeline", params))

    def summary(self) -> "LedgerSummary":
        """How many rows the ledger has per zone and state: one grouped query, however many files."""
        with self._conn() as conn:
            cur = conn.execute("SELECT namespace, zone, state, count(*) FROM landing_files "
                               "GROUP BY namespace, zone, state")
            cur.row_factory = None
            return LedgerSummary({(ns, zone, state): n for ns, zone, state, n in cur})

    def page(self, limit: int, offset: int = 0) -> list[LandingFile]:
        """At most `limit` rows of the ledger, the ones that need a look first: skipped, then unloaded, then
        loaded, each by namespace, zone, file and pipeline (what a screen shows of a ledger of 100,000 files)."""
        with self._conn() as conn:
            return landing_rows(conn.execute(
                f"SELECT {COLUMNS} FROM landing_files ORDER BY CASE state WHEN 'skipped' THEN 0 WHEN 'unloaded' "
                "THEN 1 ELSE 2 END, namespace, zone, file, pipeline LIMIT ? OFFSET ?", (limit, offset)))

    def loaded_since(self, ref: str, pipelines: list[str], after: str) -> int:
        """How many landing files these pipelines loaded on `ref` after `after` (an ISO time): what a rollback to
        that time makes loadable again."""
        if not pipelines:
            return 0
        marks = ",".join("?" * len(pipelines))
        with self._conn() as conn:
            if ref == MAIN:
                row = conn.execute(f"SELECT count(*) FROM landing_files WHERE state = 'loaded' AND loaded_at > ? "
                                   f"AND pipeline IN ({marks})", (after, *pipelines)).fetchone()
            else:
                row = conn.execute(f"SELECT count(*) FROM landing_loads WHERE ref = ? AND loaded_at > ? AND "
                                   f"pipeline IN ({marks})", (ref, after, *pipelines)).fetchone()
        return row[0]

    # ------------------------------------------------------------------ undo (ops/undo.py): what a change takes away

    @staticmethod
    def loads_after(conn: sqlite3.Connection, ref: str, pipelines: Iterable[str], after: str) -> dict[str, list]:
        """What `unload_after(conn, ref, pipelines, after)` is about to change, as `put_back` takes it."""
        files: list[list] = []
        loads: list[list] = []
        for pipeline in pipelines:
            if ref == MAIN:
                files += [list(r) for r in conn.execute(
                    f"SELECT {SAVED} FROM landing_files WHERE pipeline = ? AND state = 'loaded' AND loaded_at > ?",
                    (pipeline, after))]
            else:
                loads += [list(r) for r in conn.execute(
                    "SELECT * FROM landing_loads WHERE ref = ? AND pipeline = ? AND loaded_at > ?",
                    (ref, pipeline, after))]
        return {"files": files, "loads": loads}

    @staticmethod
    def loads_of(conn: sqlite3.Connection, ref: str) -> dict[str, list]:
        """A ref's loads (what `drop_ref` is about to delete), as `put_back` takes them."""
        return {"files": [], "loads": [list(r) for r in conn.execute("SELECT * FROM landing_loads WHERE ref = ?",
                                                                      (ref,))]}

    @staticmethod
    def moved_on(conn: sqlite3.Connection, saved: dict[str, list]) -> list[tuple[str, str | None]]:
        """Main's saved rows that are no longer unloaded (a run loaded or skipped them since): (file, run id)."""
        out = []
        for row in saved.get("files") or []:
            values = dict(zip(SAVED_FIELDS, row))
            now = conn.execute("SELECT state, run_id FROM landing_files WHERE namespace = ? AND zone = ? AND "
                               "pipeline = ? AND file = ?", (values["namespace"], values["zone"], values["pipeline"],
                                                             values["file"])).fetchone()
            if now is not None and now[0] != "unloaded":
                out.append((values["file"], now[1]))
        return out

    # ------------------------------------------------------------------ facts carried by the tables (landing_facts.py)

    def identities(self, entries: Iterable[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
        """The identity of each (namespace, zone, pipeline, file) a run read, as landing_facts.summary takes it."""
        entries = list(entries)
        out = []
        with self._conn() as conn:
            rows: dict[tuple[str, str, str], dict[str, tuple]] = {}
            for key in dict.fromkeys(e[:3] for e in entries):  # one query per zone and pipeline, not per file
                cur = conn.execute("SELECT file, size, mtime_ns, digest, etag, version FROM landing_files WHERE "
                                   "namespace = ? AND zone = ? AND pipeline = ?", key)
                cur.row_factory = None
                rows[key] = {r[0]: r[1:] for r in cur}
        for namespace, zone, pipeline, file in entries:
            row = rows[(namespace, zone, pipeline)].get(file)
            if row is not None:
                out.append({"zone": zone, "name": file.rsplit("/", 1)[-1], "size": row[0], "mtime_ns": row[1],
                            "digest": row[2], "etag": row[3], "version": row[4]})
        return out

    def synced(self, ref: str, table_key: str) -> set[int]:
        """The snapshots of `table_key` on `ref` whose landing facts the ledger has taken in."""
        with self._conn() as conn:
            return {r[0] for r in conn.execute("SELECT snapshot_id FROM landing_synced WHERE ref = ? AND "
                                               "table_key = ?", (ref, table_key))}
