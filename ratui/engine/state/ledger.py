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
a cancelled run or a template/config error) and the run that loaded it (a file loaded at the first try shows 1).

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

import json
import sqlite3
from functools import partial
from itertools import compress, repeat
from operator import add, itemgetter, not_
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

from ratui.engine.landing.local import file_digest
from ratui.engine.landing.names import PROCESSED, archived_name, is_archived_name
from ratui.engine.landing.entry import paused_gc
from ratui.engine.landing.zone import ZoneEntry, entry_of
from ratui.engine.state import migrations
from ratui.engine.state.db import open_db, write_tx
from ratui.engine.errors import RatuiError
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


class LandingFile(NamedTuple):
    """A row of landing_files. A named tuple, not a dataclass: a zone of 100,000 files is read back as 100,000 of
    them on every sync, and a tuple is made from a database row in C (a fifth of the time of filling dataclass
    objects); it is immutable, hashable and compared by value all the same. Compare it only with LandingFiles."""
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
    purged_at: str | None = None
    loaded_at: str | None = None

    @property
    def archived(self) -> bool:
        return is_archived_name(self.file)

    @property
    def name(self) -> str:
        """The file's own name, wherever it is now."""
        return self.file.rsplit("/", 1)[-1]

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True)
class LedgerSummary:
    """The ledger's row counts: (namespace, zone, state) -> rows."""
    counts: dict[tuple[str, str, str], int]

    @property
    def files(self) -> int:
        return sum(self.counts.values())

    @property
    def zones(self) -> int:
        return len({(ns, zone) for ns, zone, _ in self.counts})

    def state(self, state: str) -> int:
        return sum(n for (_, _, s), n in self.counts.items() if s == state)

    def zone(self, namespace: str, zone: str) -> int:
        return sum(n for (ns, z, _), n in self.counts.items() if (ns, z) == (namespace, zone))


def _like(text: str) -> str:
    """`text` as itself in a LIKE pattern (ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


ARCHIVED_LIKE = _like(PROCESSED) + "/%"  # every archived name (ESCAPE '\\')


def _like_archived(name: str) -> str:
    """A LIKE pattern (ESCAPE '\\') for every archived version of a file name."""
    return f"{ARCHIVED_LIKE}/{_like(name)}"


class Ledger:
    def __init__(self, db_path: Path, max_attempts: int = MAX_ATTEMPTS):
        self.db_path = db_path
        self.max_attempts = max_attempts
        migrations.migrate(db_path)  # an older ratui's ledger: its missing columns first
        with self._conn() as conn:
            conn.executescript(SCHEMA)

    def _conn(self) -> "_Closing":
        conn = open_db(self.db_path)
        conn.row_factory = sqlite3.Row
        return _Closing(conn)

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
        if _unchanged(items, brief, forget_missing):  # what every later run of an unchanged zone finds
            return _landing_files(map(add, repeat((namespace, zone, pipeline)), map(_BRIEF_HEAD, brief)))
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
        plan = _SyncPlan(items, digests, known, forget_missing, first_only=True)
        if plan.empty:  # nothing to write: the rows as they were read
            return _landing_files(map(_HEAD, rows))
        with self._conn() as conn, write_tx(conn):
            # decided again on the rows as they are now, inside the transaction (another process may have synced)
            known = {r[3]: (r[4], r[5], *r[-3:]) for r in self._read(conn, namespace, zone, pipeline)}
            plan = _SyncPlan(items, digests, known, forget_missing)
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
                        "json_extract(value, '$[5]') FROM json_each(?)", (*key, _json(moved)))
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
                    (*key, now, _json(plan.upserts)))
            if plan.gone:
                conn.execute("DELETE FROM landing_files WHERE namespace = ? AND zone = ? AND pipeline = ? AND file IN "
                             "(SELECT value FROM json_each(?))", (*key, _json(plan.gone)))
        return self.files(namespace, zone, pipeline)

    @staticmethod
    def _read(conn: sqlite3.Connection, namespace: str, zone: str, pipeline: str) -> list[tuple]:
        """A pipeline's rows for a zone as plain tuples, in files()'s order: LandingFile's fields (file, size and
        mtime_ns at 3, 4 and 5), then digest, etag and version (`row[-3:]`)."""
        cur = conn.execute(f"SELECT {_COLUMNS}, digest, etag, version FROM landing_files WHERE "
                           "namespace = ? AND zone = ? AND pipeline = ? ORDER BY namespace, zone, file, pipeline",
                           (namespace, zone, pipeline))
        cur.row_factory = None
        return cur.fetchall()

    @staticmethod
    def _read_brief(conn: sqlite3.Connection, namespace: str, zone: str, pipeline: str) -> list[tuple]:
        """_read()'s rows without the namespace, zone and pipeline (the query's own), and with whether a digest is
        kept rather than the digest: what a sync that finds nothing changed reads (file, size and mtime_ns first;
        digest kept, etag and version last). A zone of 100,000 files is 500,000 fewer strings made."""
        cur = conn.execute(f"SELECT {_BRIEF_COLUMNS}, digest IS NOT NULL, etag, version FROM landing_files WHERE "
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
                return _rows(conn.execute(
                    f"SELECT {_COLUMNS} FROM landing_files WHERE namespace = ? AND pipeline = ? AND zone IN ({marks}) "
                    "AND state = 'unloaded' ORDER BY zone, file", (namespace, pipeline, *zones)))
            entries = self._on(conn, ref, _rows(conn.execute(
                f"SELECT {_COLUMNS} FROM landing_files WHERE namespace = ? AND pipeline = ? AND zone IN ({marks}) "
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
                out.append(_with(e, state="loaded", run_id=row["run_id"], loaded_at=row["loaded_at"]))
            else:
                out.append(_with(e, state="unloaded", run_id=None, loaded_at=None))
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
            return _rows(conn.execute(f"SELECT {_COLUMNS} FROM landing_files{where} ORDER BY namespace, zone, file, "
                                      "pipeline", params))

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
            return _rows(conn.execute(
                f"SELECT {_COLUMNS} FROM landing_files ORDER BY CASE state WHEN 'skipped' THEN 0 WHEN 'unloaded' "
                "THEN 1 ELSE 2 END, namespace, zone, file, pipeline LIMIT ? OFFSET ?", (limit, offset)))

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
                        (ref, *key, run_id, at, _json(loads)))
                continue
            cur = conn.execute("SELECT file FROM landing_files WHERE namespace = ? AND zone = ? AND pipeline = ? AND "
                               "file IN (SELECT value FROM json_each(?))", (*key, _json(files)))
            cur.row_factory = None
            present = [r[0] for r in cur]
            conn.execute(
                """UPDATE landing_files SET state = 'loaded', run_id = ?, attempts = attempts + 1, last_error = NULL,
                   updated_at = ?, loaded_at = ? WHERE namespace = ? AND zone = ? AND pipeline = ?
                   AND file IN (SELECT value FROM json_each(?))""", (run_id, now, at, *key, _json(present)))
            found = set(present)
            for file in files:  # archived by another pipeline's run meanwhile: matched under its archived name
                if file not in found and not is_archived_name(file):
                    conn.execute(
                        """UPDATE landing_files SET state = 'loaded', run_id = ?, attempts = attempts + 1,
                           last_error = NULL, updated_at = ?, loaded_at = ? WHERE namespace = ? AND zone = ?
                           AND pipeline = ? AND state = 'unloaded' AND file LIKE ? ESCAPE '\\'""",
                        (run_id, now, at, *key, _like_archived(file)))

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
                    (run_id, now_iso(), at, namespace, zone, pipeline, size, name, _like_archived(name))).rowcount
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
    def loads_after(conn: sqlite3.Connection, ref: str, pipelines: Iterable[str], after: str) -> dict[str, list]:
        """What `unload_after(conn, ref, pipelines, after)` is about to change, as `put_back` takes it."""
        files: list[list] = []
        loads: list[list] = []
        for pipeline in pipelines:
            if ref == MAIN:
                files += [list(r) for r in conn.execute(
                    f"SELECT {_SAVED} FROM landing_files WHERE pipeline = ? AND state = 'loaded' AND loaded_at > ?",
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
    def put_back(conn: sqlite3.Connection, saved: dict[str, list]) -> int:
        """Main's rows and a ref's loads as `loads_after`, `loads_of` or a reset's capture saved them, where a later
        change has not moved them on (a main row is put back only while it is unloaded). Returns how many."""
        changed = 0
        for row in saved.get("files") or []:
            values = dict(zip(_SAVED_FIELDS, row))
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
    def moved_on(conn: sqlite3.Connection, saved: dict[str, list]) -> list[tuple[str, str | None]]:
        """Main's saved rows that are no longer unloaded (a run loaded or skipped them since): (file, run id)."""
        out = []
        for row in saved.get("files") or []:
            values = dict(zip(_SAVED_FIELDS, row))
            now = conn.execute("SELECT state, run_id FROM landing_files WHERE namespace = ? AND zone = ? AND "
                               "pipeline = ? AND file = ?", (values["namespace"], values["zone"], values["pipeline"],
                                                             values["file"])).fetchone()
            if now is not None and now[0] != "unloaded":
                out.append((values["file"], now[1]))
        return out

    @staticmethod
    def drop_ref(conn: sqlite3.Connection, ref: str) -> None:
        conn.execute("DELETE FROM landing_loads WHERE ref = ?", (ref,))
        conn.execute("DELETE FROM landing_synced WHERE ref = ?", (ref,))

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

    @staticmethod
    def mark_synced(conn: sqlite3.Connection, ref: str, table_key: str, snapshot_ids: Iterable[int]) -> None:
        conn.executemany("INSERT OR IGNORE INTO landing_synced VALUES (?, ?, ?)",
                         [(ref, table_key, i) for i in snapshot_ids])

    def learn(self, ref: str, namespace: str, pipeline: str, table_key: str, walked: list[int],
              facts: list[Any]) -> int:
        """Take in the landing facts of snapshots of `table_key` on `ref` the ledger had not seen (written by
        another installation sharing the catalog, or by a process that died before its own ledger write): each
        file they name is loaded on `ref` for `pipeline`. A file this installation has not listed yet gets its row
        now, with the fact's identity, so listing it later keeps it loaded (a copy with another time is told by its
        digest). Returns how many files became loaded."""
        changed = 0
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
                        changed += 1
                elif row is None:
                    conn.execute(
                        """INSERT INTO landing_files (namespace, zone, pipeline, file, size, mtime_ns, digest, etag,
                           version, state, run_id, attempts, updated_at, loaded_at)
                           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'loaded', ?, 1, ?, ?)""",
                        (*key, fact.size, fact.mtime_ns, fact.digest, fact.etag, fact.version, fact.run_id, now,
                         fact.at))
                    changed += 1
                elif same and row["state"] != "loaded":
                    conn.execute("UPDATE landing_files SET state = 'loaded', run_id = ?, last_error = NULL, "
                                 "updated_at = ?, loaded_at = ? WHERE namespace = ? AND zone = ? AND pipeline = ? "
                                 "AND file = ?", (fact.run_id, now, fact.at, *key))
                    changed += 1
            self.mark_synced(conn, ref, table_key, walked)
        return changed

    def record_failure(self, entries: Iterable[tuple[str, str, str, str]], error: str) -> list[str]:
        """Count a failed attempt; files at max_attempts become skipped. Returns the names newly skipped."""
        skipped: list[str] = []
        now = now_iso()
        groups: dict[tuple[str, str, str], list[str]] = {}
        for namespace, zone, pipeline, file in entries:
            groups.setdefault((namespace, zone, pipeline), []).append(file)
        with self._conn() as conn, write_tx(conn):
            for key, files in groups.items():  # a few statements per zone and pipeline, however many files
                names = _json(list(dict.fromkeys(files)))
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

    def forget(self, namespace: str, zone: str, file: str, pipeline: str | None = None) -> int:
        """Drop a file's rows on purpose (e.g. one that is gone for good, so a rebuild goes on without it)."""
        clauses, params = ["namespace = ?", "zone = ?", "(file = ? OR file LIKE ? ESCAPE '\\')"], \
            [namespace, zone, file, _like_archived(file)]
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
            params.extend([file, _like_archived(file)])
        if pipeline:
            clauses.append("pipeline = ?")
            params.append(pipeline)
        with self._conn() as conn, write_tx(conn):
            saved = [list(r) for r in conn.execute(
                f"SELECT {_SAVED} FROM landing_files WHERE {' AND '.join(clauses)} AND (state <> 'unloaded' OR "
                "attempts <> 0 OR last_error IS NOT NULL OR run_id IS NOT NULL)", params)]
            cur = conn.execute(
                f"""UPDATE landing_files SET state = 'unloaded', attempts = 0, last_error = NULL, run_id = NULL,
                    updated_at = ? WHERE {' AND '.join(clauses)}""", [now_iso(), *params])
            if in_tx is not None:
                in_tx(conn, {"files": saved, "loads": []})
            return cur.rowcount


# a main row as undo saves it (Ledger.loads_after, reset) and puts it back (Ledger.put_back)
_SAVED_FIELDS = ("namespace", "zone", "pipeline", "file", "state", "run_id", "attempts", "last_error", "loaded_at",
                 "updated_at")
_SAVED = ", ".join(_SAVED_FIELDS)
_LISTED = itemgetter(slice(0, 5))  # a ZoneEntry's identity: name, size, mtime_ns, etag, version
_KNOWN = itemgetter(0, 1, 2, -2, -1)  # a row of _read_brief(): file, size, mtime_ns, etag, version
_FILE, _DIGESTED = itemgetter(0), itemgetter(-3)


def _unchanged(items: list[ZoneEntry], rows: list[tuple], forget_missing: bool) -> bool:
    """Whether a sync of `items` would write nothing, decided with sets built and compared in C (a zone of 100,000
    unchanged files in a fraction of _SyncPlan's per-file loop): every listed file has a row with its size, time,
    ETag and version, a local one with a digest of its bytes kept (else _SyncPlan decides: it digests); and with
    `forget_missing`, no row of an active file that is no longer listed. `rows`: as _read_brief() gives them."""
    if _same_in_order(items, rows):
        return True
    listed = set(map(_LISTED, items))
    known = set(map(_KNOWN, rows))
    if len(listed) != len(items) or not listed <= known:
        return False
    undigested = set(compress(map(_FILE, rows), map(not_, map(_DIGESTED, rows))))
    if undigested and any(item.is_local and item.name in undigested for item in items):
        return False
    if forget_missing:  # the listed names are active ones: equal counts mean no active row is missing
        archived = sum(map(str.startswith, map(_FILE, rows), repeat(PROCESSED + "/")))
        return len(listed) == len(rows) - archived
    return True


def _same_in_order(items: list[ZoneEntry], rows: list[tuple]) -> bool:
    """The common case of _unchanged (a local zone nobody touched) decided without a set: the active rows and the
    listing hold the same identities in the same order (a listing is sorted by name; Python's order of strings is
    SQLite's BINARY order of their UTF-8, the rows' order), and every row keeps a digest. False whenever anything
    differs, the order included: then the sets decide."""
    files = list(map(_FILE, rows))
    archived = list(map(str.startswith, files, repeat(PROCESSED + "/")))
    if any(archived):
        rows = list(compress(rows, map(not_, archived)))
    return (len(rows) == len(items) and all(map(_DIGESTED, rows))
            and list(map(_LISTED, items)) == list(map(_KNOWN, rows)))


class _SyncPlan:
    """What a sync writes, from the listed items and the rows the ledger has (file -> (size, mtime_ns, digest,
    etag, version)): sets and dictionaries, one pass over each.

        retimed   [name, new mtime_ns, size, old mtime_ns]: a local file whose time alone changed (same digest):
                  its row keeps its state and takes the new time (an upsert too), so do its landing_loads rows
        upserts   [name, size, mtime_ns, digest, etag, version]: new files, changed ones, retimed ones, and rows
                  whose digest is to be updated; the upsert itself says which become unloaded (_CHANGED)
        gone      names no longer listed (forget_missing), archived ones kept
    """

    def __init__(self, items: list[ZoneEntry], digests: dict[str, str | None], known: dict[str, tuple],
                 forget_missing: bool, first_only: bool = False):
        """`first_only`: stop at the first thing to write (whether there is anything: the write transaction decides
        again on the rows as they are then)."""
        self.retimed: list[list[Any]] = []
        self.upserts: list[list[Any]] = []
        self.gone: list[str] = []
        for item in items:
            if first_only and self.upserts:
                return
            name, size, mtime_ns, etag, version, at = item  # a ZoneEntry's fields (`at`: None for an object)
            digest = digests.get(name)
            row = known.get(name)
            if row is None:
                self.upserts.append([name, size, mtime_ns, digest, etag, version])
                continue
            old_size, old_mtime, old_digest, old_etag, old_version = row
            if (at is not None and old_size == size and old_mtime != mtime_ns and old_digest
                    and digest == old_digest):
                self.retimed.append([name, mtime_ns, size, old_mtime])
                self.upserts.append([name, size, mtime_ns, digest, etag, version])  # _CHANGED keeps its state
                continue
            if (old_size, old_mtime, old_digest, old_etag, old_version) != (size, mtime_ns, digest, etag, version):
                self.upserts.append([name, size, mtime_ns, digest, etag, version])
        if forget_missing:
            listed = {item.name for item in items}
            self.gone = [name for name in known if name not in listed and not is_archived_name(name)]

    @property
    def empty(self) -> bool:
        return not (self.retimed or self.upserts or self.gone)


def _with(entry: LandingFile, **changes: Any) -> LandingFile:
    return entry._replace(**changes)


def _json(rows: list) -> str:
    return json.dumps(rows, separators=(",", ":"))


_FIELDS = LandingFile._fields
_COLUMNS = ", ".join(_FIELDS)  # a query's columns in the order of LandingFile's fields


def _row(r: sqlite3.Row) -> LandingFile:
    return LandingFile(**{k: r[k] for k in _FIELDS if k in r.keys()})


def _rows(cur: sqlite3.Cursor) -> list[LandingFile]:
    """The LandingFiles of a query's rows (`SELECT *` or `SELECT {_COLUMNS}, ...`): the columns matched to the
    fields once, not per row."""
    cur.row_factory = None
    names = [d[0] for d in cur.description]
    index = {n: i for i, n in enumerate(names)}
    return _landing_files(cur, tuple(index.get(f, -1) for f in _FIELDS))


def _landing_files(rows: Iterable[tuple], picks: tuple[int, ...] | None = None) -> list[LandingFile]:
    """LandingFiles of rows whose first columns are its fields in order (`picks` None), or of rows whose columns
    `picks` names per field (-1: not there, None)."""
    if picks is None or picks == tuple(range(len(_FIELDS))):
        return list(map(_MAKE, rows))
    return [_MAKE(r[i] if i >= 0 else None for i in picks) for r in rows]


_MAKE = partial(tuple.__new__, LandingFile)  # LandingFile._make without its per-row length check in Python: every
# row given here has exactly its fields (a query's columns in _FIELDS's order, or _HEAD of _read()'s rows)
_HEAD = itemgetter(slice(0, len(_FIELDS)))
_BRIEF_COLUMNS = ", ".join(_FIELDS[3:])  # _read_brief(): the fields after namespace, zone and pipeline
_BRIEF_HEAD = itemgetter(slice(0, len(_FIELDS) - 3))


class _Closing:
    """A connection that closes when its `with` block ends (sqlite3's own context manager only commits)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: Any) -> None:
        self.conn.close()


# a row's file is a new version when any part of its identity differs (NULL-safe: IS NOT)
# (a local file whose time alone changed, with the digest of the same bytes, is the same file: retimed)
_CHANGED = ("size <> excluded.size OR etag IS NOT excluded.etag OR version IS NOT excluded.version "
            "OR (mtime_ns <> excluded.mtime_ns AND NOT (excluded.digest IS NOT NULL AND digest IS excluded.digest))")


def check_zone_name(zone: str) -> None:
    if "/" in zone or zone.startswith((".", "_")):
        raise RatuiError("RAT-LND-001", f"'{zone}' is not a landing zone name")
