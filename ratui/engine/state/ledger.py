"""The landing-file ledger: every landing file, per zone and consuming pipeline, with its state.

States follow SingleStore's pipeline file states:
    unloaded   seen, not yet loaded by this pipeline (or made loadable again by a reset)
    loaded     loaded by a run whose branch merged into main (set in the merge's own SQLite transaction)
    skipped    failed `max_attempts` runs in a row: left out so the other files can load

A file whose bytes change is a new version and becomes `unloaded` again: told by its size and modification time,
and for a local file of at most DIGEST_MAX_BYTES by a SHA-256 of its bytes, so a file copied without its time (`cp
-r`), touched or synced unchanged stays what it was (its rows keep their state and take the new time). An object is
told by its size, time, ETag and version.
Attempts count the runs that tried to load a file: failures that concern the data (build, write, quality; never
a cancelled run or a template/config error) and the run that loaded it (a file loaded at the first try shows 1). A
run that reads a loaded file again (a full refresh rebuilds from every file) is no new try, nor is a file another
installation loaded (taken in from the table's facts: 1, its own loading run).

`file` is the path relative to the zone folder: `orders_1.csv` while the file is in the zone, then
`_processed/{run_id}/orders_1.csv` once a run archived it. An archived file keeps its row (for every pipeline
reading the zone), so a full refresh can rebuild from it and a new file of the same name is a new row. In
`landing_mode: all` the zone folder is the truth: a file the user removed from it is forgotten; archived files
are not (archiving is bookkeeping, and a table never shrinks because of bookkeeping).

The states above are main's. A dev or publish branch has tables of its own, so it has its own idea of what is
loaded: `landing_loads` holds, per ref other than main, the files loaded on that ref (copied from the ref it was
created from, added by the runs that merge into it). A file is loaded on such a ref when a row of the same name and
size (and modification time, unless archived since) is there; `skipped` stays shared (a file that cannot be read
cannot be read on any branch). Merging a branch hands its loads on with the tables it merges; a rollback makes
the files loaded after the restored commit loadable again (`loaded_at` is the loading merge's commit time).
"""

from __future__ import annotations

import sqlite3
from itertools import repeat
from operator import add
from pathlib import Path
from typing import Any, Callable, Iterable

from ratui.engine.landing.entry import paused_gc
from ratui.engine.landing.local import file_digest
from ratui.engine.landing.names import archived_name, is_archived_name
from ratui.engine.landing.zone import ZoneEntry, entry_of
from ratui.engine.state import migrations
from ratui.engine.state.db import write_tx
from ratui.engine.state.ledger_reads import LedgerReads
from ratui.engine.state.ledger_rows import (BRIEF_HEAD, ROW_HEAD, SAVED, SAVED_FIELDS, LandingFile, json_param,
                                            landing_files, like_archived)
from ratui.engine.state.ledger_sync_plan import SyncPlan, unchanged
from ratui.engine.vocabulary import MAIN, now_iso

MAX_ATTEMPTS = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS landing_files (
    namespace TEXT NOT NULL,
    zone TEXT NOT NULL,
    pipeline TEXT NOT NULL,
    file TEXT NOT NULL,            -- name at the zone's root
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    digest TEXT,                   -- local files: SHA-256 of the bytes (files up to DIGEST_MAX_BYTES)
    etag TEXT,                     -- for object stores (S3): kept empty for local files
    version TEXT,
    state TEXT NOT NULL DEFAULT 'unloaded',
    run_id TEXT,                   -- the run that loaded it
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    archived_to TEXT,
    purged_at TEXT,                -- when the reaper removed the archived file (it cannot be read again)
    updated_at TEXT NOT NULL,
    loaded_at TEXT,                -- the commit time of the merge that loaded it on main
    PRIMARY KEY (namespace, zone, pipeline, file)
);
CREATE INDEX IF NOT EXISTS landing_files_state ON landing_files (namespace, zone, state);
CREATE TABLE IF NOT EXISTS landing_loads (
    ref TEXT NOT NULL,             -- a ref other than main
    namespace TEXT NOT NULL,
    zone TEXT NOT NULL,
    pipeline TEXT NOT NULL,
    name TEXT NOT NULL,            -- the file's own name (wherever it is now)
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    run_id TEXT,
    loaded_at TEXT NOT NULL,
    PRIMARY KEY (ref, namespace, zone, pipeline, name)
);
CREATE TABLE IF NOT EXISTS landing_synced (
    ref TEXT NOT NULL,
    table_key TEXT NOT NULL,       -- namespace.layer.name
    snapshot_id INTEGER NOT NULL,  -- a snapshot of the table on ref whose landing facts the ledger has taken in
    PRIMARY KEY (ref, table_key, snapshot_id)
);
"""


# a row's file is a new version when any part of its identity differs (NULL-safe: IS NOT)
# (a local file whose time alone changed, with the digest of the same bytes, is the same file: retimed)
_CHANGED = ("size <> excluded.size OR etag IS NOT excluded.etag OR version IS NOT excluded.version "
            "OR (mtime_ns <> excluded.mtime_ns AND NOT (excluded.digest IS NOT NULL AND digest IS excluded.digest))")


class Ledger(LedgerReads):
    """The landing ledger, and the one writer of its tables (landing_files, landing_loads, landing_synced): every
    statement that changes them is here. Its reads are LedgerReads'."""

    def __init__(self, db_path: Path, max_attempts: int = MAX_ATTEMPTS):
        super().__init__(db_path)
        self.max_attempts = max_attempts
        migrations.migrate(db_path)  # an older ratui's ledger: its missing columns first
        with self._conn() as conn:
            conn.executescript(SCHEMA)

    def sync(self, namespace: str, zone: str, pipeline: str, files: Iterable[Any], *,
             forget_missing: bool = False) -> list[LandingFile]:
        """Record the zone's active files for a pipeline: the entries of its `Zone.list()` (or local Paths). A
        changed file (size, modification time, ETag or version) becomes unloaded again: for the
        ledger a rewritten file or object is a new file. A local file whose time alone changed, with the same
        digest of its bytes, is not (the digest is taken when a file is new or changed, up to DIGEST_MAX_BYTES).

        `forget_missing` (landing_mode all): rows of files no longer in the zone are dropped; rows of archived
        files stay. Returns every row of the pipeline for the zone, archived ones included.

        Linear in the number of files, whatever their number: one read of the zone's rows, the comparison in
        memory, and, when something changed, one write transaction of a few statements, each taking every row it
        writes as one JSON parameter. A sync that finds nothing changed writes nothing (no write transaction).
        """
        with paused_gc():
            return self._sync(namespace, zone, pipeline, files, forget_missing)

    def _sync(self, namespace: str, zone: str, pipeline: str, files: Iterable[Any],
              forget_missing: bool) -> list[LandingFile]:
        now = now_iso()
        items = [e if isinstance(e, ZoneEntry) else entry_of(e) for e in files]
        with self._conn() as conn:
            brief = self._read_brief(conn, namespace, zone, pipeline)
        if unchanged(items, brief, forget_missing):  # what every later run of an unchanged zone finds
            return landing_files(map(add, repeat((namespace, zone, pipeline)), map(BRIEF_HEAD, brief)))
        del brief
        with self._conn() as conn:
            rows = self._read(conn, namespace, zone, pipeline)
        known = {r[3]: (r[4], r[5], *r[-3:]) for r in rows}
        # local files: the digest of their bytes, taken before the write transaction (a big file takes a while).
        # A file whose time changed but whose bytes did not (copied with `cp -r`, touched, synced) is the same
        # file: its row keeps its state, with the new time
        digests: dict[str, str | None] = {}
        for item in items:
            if not item.is_local:  # an object: told apart by its ETag and version
                continue
            name = item.name
            row = known.get(name)
            if row is not None and row[0] == item.size and row[1] == item.mtime_ns and row[2]:
                digests[name] = row[2]
            else:
                path = item.path
                assert path is not None  # a local file
                digests[name] = file_digest(path, item.size, item.mtime_ns)
        plan = SyncPlan(items, digests, known, forget_missing, first_only=True)
        if plan.empty:  # nothing to write: the rows as they were read
            return landing_files(map(ROW_HEAD, rows))
        with self._conn() as conn, write_tx(conn):
            # decided again on the rows as they are now, inside the transaction (another process may have synced)
            known = {r[3]: (r[4], r[5], *r[-3:]) for r in self._read(conn, namespace, zone, pipeline)}
            plan = SyncPlan(items, digests, known, forget_missing)
            key = (namespace, zone, pipeline)
            if plan.retimed:  # the loads of other refs keep up with the new times (a `cp -r` of the zone)
                retimed = {name: (mtime, size, old) for name, mtime, size, old in plan.retimed}
                cur = conn.execute("SELECT ref, name, size, mtime_ns, run_id, loaded_at FROM landing_loads WHERE "
                                   "namespace = ? AND zone = ? AND pipeline = ?", key)
                cur.row_factory = None
                moved = [[ref, name, size, retimed[name][0], run_id, loaded_at]
                         for ref, name, size, mtime, run_id, loaded_at in cur
                         if name in retimed and retimed[name][1:] == (size, mtime)]
                if moved:
                    conn.execute(
                        "INSERT OR REPLACE INTO landing_loads (ref, namespace, zone, pipeline, name, size, mtime_ns, "
                        "run_id, loaded_at) SELECT json_extract(value, '$[0]'), ?, ?, ?, json_extract(value, '$[1]'), "
                        "json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'), "
                        "json_extract(value, '$[5]') FROM json_each(?)", (*key, json_param(moved)))
            if plan.upserts:
                conn.execute(
                    """INSERT INTO landing_files (namespace, zone, pipeline, file, size, mtime_ns, digest, etag,
                                                  version, updated_at)
                       SELECT ?, ?, ?, json_extract(value, '$[0]'), json_extract(value, '$[1]'),
                              json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'),
                              json_extract(value, '$[5]'), ? FROM json_each(?) WHERE true
                       ON CONFLICT (namespace, zone, pipeline, file) DO UPDATE SET
                         state = CASE WHEN {changed} THEN 'unloaded' ELSE state END,
                         attempts = CASE WHEN {changed} THEN 0 ELSE attempts END,
                         updated_at = CASE WHEN {changed} THEN excluded.updated_at ELSE updated_at END,
                         size = excluded.size, mtime_ns = excluded.mtime_ns, digest = excluded.digest,
                         etag = excluded.etag, version = excluded.version""".format(changed=_CHANGED),
                    (*key, now, json_param(plan.upserts)))
            if plan.gone:
                conn.execute("DELETE FROM landing_files WHERE namespace = ? AND zone = ? AND pipeline = ? AND file IN "
                             "(SELECT value FROM json_each(?))", (*key, json_param(plan.gone)))
        return self.files(namespace, zone, pipeline)
    def mark_loaded(self, conn: sqlite3.Connection, run_id: str, entries: Iterable[tuple[str, str, str, str]], *,
                    ref: str = MAIN, at: str | None = None) -> None:
        """Inside the merge's transaction: these (namespace, zone, pipeline, file) are now loaded on `ref`, at
        `at` (the merge commit's time).

        A file another pipeline's run archived while this run was reading it is matched under its archived name.
        """
        now = now_iso()
        at = at or now
        groups: dict[tuple[str, str, str], list[str]] = {}
        for namespace, zone, pipeline, file in entries:
            groups.setdefault((namespace, zone, pipeline), []).append(file)
        # per zone and pipeline, a few statements whatever the number of files (a run of 100,000 files)
        for key, files in groups.items():
            if ref != MAIN:
                cur = conn.execute("SELECT file, size, mtime_ns FROM landing_files WHERE namespace = ? AND zone = ? "
                                   "AND pipeline = ?", key)
                cur.row_factory = None
                rows = {r[0]: (r[1], r[2]) for r in cur}
                archived: dict[str, tuple[int, int]] = {}  # a name -> its first archived version's row
                for name in sorted(n for n in rows if is_archived_name(n)):
                    archived.setdefault(name.rsplit("/", 1)[-1], rows[name])
                loads = []
                for file in files:
                    name = file.rsplit("/", 1)[-1]
                    row = rows.get(file) or archived.get(name)
                    if row is not None:
                        loads.append([name, row[0], row[1]])
                if loads:
                    conn.execute(
                        "INSERT OR REPLACE INTO landing_loads (ref, namespace, zone, pipeline, name, size, mtime_ns, "
                        "run_id, loaded_at) SELECT ?, ?, ?, ?, json_extract(value, '$[0]'), json_extract(value, "
                        "'$[1]'), json_extract(value, '$[2]'), ?, ? FROM json_each(?)",
                        (ref, *key, run_id, at, json_param(loads)))
                continue
            cur = conn.execute("SELECT file FROM landing_files WHERE namespace = ? AND zone = ? AND pipeline = ? AND "
                               "file IN (SELECT value FROM json_each(?))", (*key, json_param(files)))
            cur.row_factory = None
            present = [r[0] for r in cur]
            conn.execute(
                """UPDATE landing_files SET state = 'loaded', run_id = ?, last_error = NULL,
                   attempts = CASE WHEN state = 'loaded' THEN attempts ELSE attempts + 1 END,
                   updated_at = ?, loaded_at = ? WHERE namespace = ? AND zone = ? AND pipeline = ?
                   AND file IN (SELECT value FROM json_each(?))""", (run_id, now, at, *key, json_param(present)))
            found = set(present)
            for file in files:  # archived by another pipeline's run meanwhile: matched under its archived name
                if file not in found and not is_archived_name(file):
                    conn.execute(
                        """UPDATE landing_files SET state = 'loaded', run_id = ?, attempts = attempts + 1,
                           last_error = NULL, updated_at = ?, loaded_at = ? WHERE namespace = ? AND zone = ?
                           AND pipeline = ? AND state = 'unloaded' AND file LIKE ? ESCAPE '\\'""",
                        (run_id, now, at, *key, like_archived(file)))

    # ------------------------------------------------------------------ branches (inside catalog transactions)

    @staticmethod
    def fork(conn: sqlite3.Connection, source: str, ref: str) -> None:
        """A new ref starts with what `source` had loaded."""
        conn.execute("DELETE FROM landing_loads WHERE ref = ?", (ref,))
        if source == MAIN:  # main's loaded rows, under the file's own name (an archived one's too)
            rows = conn.execute("SELECT namespace, zone, pipeline, file, size, mtime_ns, run_id, "
                                "COALESCE(loaded_at, updated_at) FROM landing_files WHERE state = 'loaded'").fetchall()
            conn.executemany("INSERT OR REPLACE INTO landing_loads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             [(ref, ns, zone, pipeline, file.rsplit("/", 1)[-1], size, mtime, run_id, at)
                              for ns, zone, pipeline, file, size, mtime, run_id, at in rows])
        else:
            conn.execute("INSERT OR REPLACE INTO landing_loads SELECT ?, namespace, zone, pipeline, name, size, "
                         "mtime_ns, run_id, loaded_at FROM landing_loads WHERE ref = ?", (ref, source))

    def hand_on(self, conn: sqlite3.Connection, source: str, into: str, pipelines: Iterable[str], at: str) -> int:
        """A merge of `source` into `into` carried these pipelines' tables: the files they had loaded on `source`
        are loaded on `into` now (at the merge's commit time). Returns how many files changed state."""
        changed = 0
        for pipeline in pipelines:
            # plain tuples: the caller's connection may have any row factory
            rows = conn.execute("SELECT namespace, zone, name, size, mtime_ns, run_id FROM landing_loads "
                                "WHERE ref = ? AND pipeline = ?", (source, pipeline)).fetchall()
            for namespace, zone, name, size, mtime_ns, run_id in rows:
                if into != MAIN:
                    conn.execute("INSERT OR REPLACE INTO landing_loads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                 (into, namespace, zone, pipeline, name, size, mtime_ns, run_id, at))
                    changed += 1
                    continue
                changed += conn.execute(
                    """UPDATE landing_files SET state = 'loaded', run_id = ?, attempts = attempts + 1,
                       last_error = NULL, updated_at = ?, loaded_at = ? WHERE namespace = ? AND zone = ?
                       AND pipeline = ? AND state = 'unloaded' AND size = ? AND (file = ? OR file LIKE ? ESCAPE
                       '\\')""",
                    (run_id, now_iso(), at, namespace, zone, pipeline, size, name, like_archived(name))).rowcount
        return changed

    @staticmethod
    def unload_after(conn: sqlite3.Connection, ref: str, pipelines: Iterable[str], after: str) -> int:
        """A rollback on `ref` to a commit made at `after`: the files these pipelines loaded there since are
        loadable again. Returns how many."""
        changed = 0
        for pipeline in pipelines:
            if ref == MAIN:
                changed += conn.execute(
                    "UPDATE landing_files SET state = 'unloaded', attempts = 0, run_id = NULL, loaded_at = NULL, "
                    "updated_at = ? WHERE pipeline = ? AND state = 'loaded' AND loaded_at > ?",
                    (now_iso(), pipeline, after)).rowcount
            else:
                changed += conn.execute("DELETE FROM landing_loads WHERE ref = ? AND pipeline = ? AND loaded_at > ?",
                                        (ref, pipeline, after)).rowcount
        return changed

    # ------------------------------------------------------------------ undo (ops/undo.py): what a change took away

    @staticmethod
    def put_back(conn: sqlite3.Connection, saved: dict[str, list]) -> int:
        """Main's rows and a ref's loads as `loads_after`, `loads_of` or a reset's capture saved them, where a later
        change has not moved them on (a main row is put back only while it is unloaded). Returns how many."""
        changed = 0
        for row in saved.get("files") or []:
            values = dict(zip(SAVED_FIELDS, row))
            changed += conn.execute(
                "UPDATE landing_files SET state = ?, run_id = ?, attempts = ?, last_error = ?, loaded_at = ?, "
                "updated_at = ? WHERE namespace = ? AND zone = ? AND pipeline = ? AND file = ? AND state = 'unloaded'",
                (values["state"], values["run_id"], values["attempts"], values["last_error"], values["loaded_at"],
                 values["updated_at"], values["namespace"], values["zone"], values["pipeline"], values["file"]),
            ).rowcount
        for row in saved.get("loads") or []:
            changed += conn.execute("INSERT OR REPLACE INTO landing_loads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                    tuple(row)).rowcount
        return changed

    @staticmethod
    def drop_ref(conn: sqlite3.Connection, ref: str) -> None:
        conn.execute("DELETE FROM landing_loads WHERE ref = ?", (ref,))
        conn.execute("DELETE FROM landing_synced WHERE ref = ?", (ref,))

    # ------------------------------------------------------------------ facts carried by the tables (landing_facts.py)

    @staticmethod
    def mark_synced(conn: sqlite3.Connection, ref: str, table_key: str, snapshot_ids: Iterable[int]) -> None:
        conn.executemany("INSERT OR IGNORE INTO landing_synced VALUES (?, ?, ?)",
                         [(ref, table_key, i) for i in snapshot_ids])

    def learn(self, ref: str, namespace: str, pipeline: str, table_key: str, walked: list[int],
              facts: list[Any]) -> list[Any]:
        """Take in the landing facts of snapshots of `table_key` on `ref` the ledger had not seen (written by
        another installation sharing the catalog, or by a process that died before its own ledger write): each
        file they name is loaded on `ref` for `pipeline`. A file this installation has not listed yet gets its row
        now, with the fact's identity, so listing it later keeps it loaded (a copy with another time is told by its
        digest), and one try (the run that loaded it). Returns the facts of the files that became loaded (each
        names its file, zone, loading run and time)."""
        learned: list[Any] = []
        now = now_iso()
        with self._conn() as conn, write_tx(conn):
            for fact in facts:
                key = (namespace, fact.zone, pipeline, fact.name)
                row = conn.execute("SELECT size, mtime_ns, digest, etag, version, state FROM landing_files WHERE "
                                   "namespace = ? AND zone = ? AND pipeline = ? AND file = ?", key).fetchone()
                same = row is not None and fact.same_file(row["size"], row["mtime_ns"], row["digest"], row["etag"],
                                                          row["version"])
                if ref != MAIN:
                    if row is None or same:
                        mtime = row["mtime_ns"] if row is not None else fact.mtime_ns
                        conn.execute("INSERT OR REPLACE INTO landing_loads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                     (ref, *key, fact.size, mtime, fact.run_id, fact.at))
                        learned.append(fact)
                elif row is None:
                    conn.execute(
                        """INSERT INTO landing_files (namespace, zone, pipeline, file, size, mtime_ns, digest, etag,
                           version, state, run_id, attempts, updated_at, loaded_at)
                           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'loaded', ?, 1, ?, ?)""",
                        (*key, fact.size, fact.mtime_ns, fact.digest, fact.etag, fact.version, fact.run_id, now,
                         fact.at))
                    learned.append(fact)
                elif same and row["state"] != "loaded":
                    conn.execute("UPDATE landing_files SET state = 'loaded', run_id = ?, last_error = NULL, "
                                 "attempts = attempts + 1, updated_at = ?, loaded_at = ? WHERE namespace = ? AND "
                                 "zone = ? AND pipeline = ? AND file = ?", (fact.run_id, now, fact.at, *key))
                    learned.append(fact)
            self.mark_synced(conn, ref, table_key, walked)
        return learned

    def record_failure(self, entries: Iterable[tuple[str, str, str, str]], error: str) -> list[str]:
        """Count a failed attempt; files at max_attempts become skipped. Returns the names newly skipped."""
        skipped: list[str] = []
        now = now_iso()
        groups: dict[tuple[str, str, str], list[str]] = {}
        for namespace, zone, pipeline, file in entries:
            groups.setdefault((namespace, zone, pipeline), []).append(file)
        with self._conn() as conn, write_tx(conn):
            for key, files in groups.items():  # a few statements per zone and pipeline, however many files
                names = json_param(list(dict.fromkeys(files)))
                conn.execute(
                    """UPDATE landing_files SET attempts = attempts + 1, last_error = ?, updated_at = ?,
                         state = CASE WHEN attempts + 1 >= ? THEN 'skipped' ELSE state END
                       WHERE namespace = ? AND zone = ? AND pipeline = ? AND state = 'unloaded'
                       AND file IN (SELECT value FROM json_each(?))""",
                    (error[:500], now, self.max_attempts, *key, names))
                cur = conn.execute("SELECT file FROM landing_files WHERE namespace = ? AND zone = ? AND pipeline = ? "
                                   "AND state = 'skipped' AND file IN (SELECT value FROM json_each(?))", (*key, names))
                cur.row_factory = None
                done = {r[0] for r in cur}
                skipped.extend(f for f in dict.fromkeys(files) if f in done)
        return skipped

    def mark_archived(self, namespace: str, zone: str, run_id: str, moved: dict[str, Any],
                      consumers: Iterable[str], archived_to: str) -> None:
        """Files of a zone moved to `_processed/{run_id}/` (name -> the archived ZoneEntry, or its Path): every
        pipeline reading the zone keeps its row under the archived name (an object's copy has an ETag and time
        of its own, recorded too), and one that never saw the file gets an unloaded row for it."""
        now = now_iso()
        with self._conn() as conn, write_tx(conn):
            for name, new in moved.items():
                moved_to = entry_of(new)
                size, mtime_ns, etag, version = moved_to.size, moved_to.mtime_ns, moved_to.etag, moved_to.version
                target = archived_name(run_id, name)
                for pipeline in consumers:
                    conn.execute(
                        """INSERT OR IGNORE INTO landing_files (namespace, zone, pipeline, file, size, mtime_ns,
                           updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)""",
                        (namespace, zone, pipeline, name, size, mtime_ns, now))
                conn.execute(
                    """UPDATE OR REPLACE landing_files SET file = ?, archived_to = ?, updated_at = ?,
                       etag = COALESCE(?, etag), version = COALESCE(?, version)
                       WHERE namespace = ? AND zone = ? AND file = ?""",
                    (target, archived_to, now, etag, version, namespace, zone, name))

    def mark_purged(self, namespace: str, zone: str, file: str) -> None:
        """The reaper removed an archived file: its rows stay (a rebuild must know it is gone, and why)."""
        with self._conn() as conn, write_tx(conn):
            conn.execute("UPDATE landing_files SET purged_at = ? WHERE namespace = ? AND zone = ? AND file = ?",
                         (now_iso(), namespace, zone, file))
    def forget(self, namespace: str, zone: str, file: str, pipeline: str | None = None) -> int:
        """Drop a file's rows on purpose (e.g. one that is gone for good, so a rebuild goes on without it)."""
        clauses, params = ["namespace = ?", "zone = ?", "(file = ? OR file LIKE ? ESCAPE '\\')"], \
            [namespace, zone, file, like_archived(file)]
        if pipeline:
            clauses.append("pipeline = ?")
            params.append(pipeline)
        with self._conn() as conn, write_tx(conn):
            return conn.execute(f"DELETE FROM landing_files WHERE {' AND '.join(clauses)}", params).rowcount

    def reset(self, namespace: str, zone: str, file: str | None = None, pipeline: str | None = None, *,
              in_tx: Callable[[sqlite3.Connection, dict[str, list]], None] | None = None) -> int:
        """Make files loadable again (state unloaded, attempts 0). Returns how many rows changed. `in_tx(conn,
        saved)` runs in the same transaction with the rows the reset changed as they were (`put_back` takes them)."""
        clauses, params = ["namespace = ?", "zone = ?"], [namespace, zone]
        if file:  # the file in the zone, or any archived version of it
            clauses.append("(file = ? OR file LIKE ? ESCAPE '\\')")
            params.extend([file, like_archived(file)])
        if pipeline:
            clauses.append("pipeline = ?")
            params.append(pipeline)
        with self._conn() as conn, write_tx(conn):
            saved = [list(r) for r in conn.execute(
                f"SELECT {SAVED} FROM landing_files WHERE {' AND '.join(clauses)} AND (state <> 'unloaded' OR "
                "attempts <> 0 OR last_error IS NOT NULL OR run_id IS NOT NULL)", params)]
            cur = conn.execute(
                f"""UPDATE landing_files SET state = 'unloaded', attempts = 0, last_error = NULL, run_id = NULL,
                    updated_at = ? WHERE {' AND '.join(clauses)}""", [now_iso(), *params])
            if in_tx is not None:
                in_tx(conn, {"files": saved, "loads": []})
            return cur.rowcount
