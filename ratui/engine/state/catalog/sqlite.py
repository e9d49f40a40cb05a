"""The embedded branch catalog: Nessie's model kept in the project's SQLite database.

How it maps onto PyIceberg's SqlCatalog: every ref is a `catalog_name` in PyIceberg's own `iceberg_tables` and
`iceberg_namespace_properties` tables, in the same database file. A SqlCatalog named "run-abc" therefore loads and
commits tables on branch "run-abc" with no change to PyIceberg, and the `iceberg_tables` rows of a catalog name
ARE that ref's table pointers (table key -> metadata location).

Our own tables, next to PyIceberg's:

    catalog_refs(name PK, head, created_at, fork_hash, run_id)          live refs
    catalog_commits(hash PK, parent, ref, message, created_at, pointers, meta)
                                                                         every commit ever made (kept for audit)
    catalog_fork_pointers(ref, table_key, metadata_location)             the source ref's pointers at branch time
    project_roots(root PK, first_seen)                                   every folder the project has lived at

Iceberg metadata stores absolute paths; a copied or moved project maps paths under an earlier root to its own
files (locations.py), through the FileIO every ref's SqlCatalog is given.

Branching copies rows, never files. Merging is one `BEGIN IMMEDIATE` transaction of compare-and-swaps on the
target's rows. Deleting a branch deletes rows only: data and metadata files are shared between refs.
Concurrency: WAL + busy timeout (db.py) + short write transactions, so several threads and processes can branch,
write and merge on one file.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Literal

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.sql import SqlCatalog, SqlCatalogBaseTable
from pyiceberg.table import Table
from sqlalchemy import Engine
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.schema import CreateTable

from ratui.engine.state import migrations
from ratui.engine.state.db import open_db, sqlalchemy_engine, write_tx
from ratui.engine.errors import RatuiError
from ratui.engine.locations import ProjectLocations, plain_path
from ratui.engine.state.catalog.base import (
    MAIN, BranchCatalog, Commit, LivePointer, MergeResult, Ref, TableChange, split_key, split_spec,
)

BRANCH_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS catalog_refs (
    name        TEXT PRIMARY KEY,
    head        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    fork_hash   TEXT,
    run_id      TEXT
);
CREATE TABLE IF NOT EXISTS catalog_commits (
    hash        TEXT PRIMARY KEY,
    parent      TEXT,
    ref         TEXT NOT NULL,
    message     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    pointers    TEXT NOT NULL,           -- JSON object: table key -> metadata location
    meta        TEXT                     -- JSON object: what made the commit (Commit.meta)
);
CREATE INDEX IF NOT EXISTS catalog_commits_ref ON catalog_commits (ref);
CREATE TABLE IF NOT EXISTS project_roots (
    root        TEXT PRIMARY KEY,        -- every folder the project has lived at (stored paths may name them)
    first_seen  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS catalog_fork_pointers (
    ref                TEXT NOT NULL,
    table_key          TEXT NOT NULL,
    metadata_location  TEXT NOT NULL,
    PRIMARY KEY (ref, table_key)
);
"""

# A table row of PyIceberg's v1 schema; NULL iceberg_type is a table written before views existed.
_TABLE_ROWS = "iceberg_type = 'TABLE' OR iceberg_type IS NULL"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _commit_hash(parent: str | None, ref: str, message: str, created_at: str, pointers_json: str) -> str:
    raw = "\n".join([parent or "", ref, message, created_at, pointers_json])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _iceberg_ddl() -> list[str]:
    """PyIceberg's own DDL (v1 schema) as `CREATE TABLE IF NOT EXISTS`, so it can run inside our transaction.

    SqlCatalog would create these itself with a check-then-create that races between processes.
    """
    dialect = sqlite_dialect.dialect()
    return [
        str(CreateTable(t, if_not_exists=True).compile(dialect=dialect))
        for t in SqlCatalogBaseTable.metadata.sorted_tables
    ]


class _RefCatalog(SqlCatalog):
    """A SqlCatalog for one ref that uses the process's shared engine (db.sqlalchemy_engine).

    SqlCatalog.__init__ always creates a private engine; we skip it so one engine (one pool, every connection
    with WAL and the busy timeout) serves every ref of the file.
    """

    def __init__(self, name: str, engine: Engine, owner: "SqliteBranchCatalog", **properties: str):
        MetastoreCatalog.__init__(self, name, **properties)
        self.engine = engine
        self._owner = owner
        self._init_catalog()  # detects the (already created) v1 schema; creates nothing

    def commit_table(self, table: Table, requirements: Any, updates: Any) -> Any:
        # A writer still holding a table of a deleted branch gets a clear RAT-CAT-002 (PyIceberg alone would
        # raise CommitFailedException "current table metadata is missing").
        self._owner._require_ref(self.name)
        return super().commit_table(table, requirements, updates)

    def create_table(self, identifier: Any, schema: Any, *args: Any, **kwargs: Any) -> Table:
        # Without this, creating a table through a catalog object of a deleted branch would insert a row under
        # the dead catalog name.
        self._owner._require_ref(self.name)
        return super().create_table(identifier, schema, *args, **kwargs)

    def close(self) -> None:
        """The engine is shared with the other refs: never dispose it from here."""


class SqliteBranchCatalog(BranchCatalog):
    """Branch catalog embedded in the SQLite file `db_path`; `warehouse` is the project root (tables are created
    with explicit locations under it, e.g. {project}/{namespace}/warehouse/{layer}/{name})."""

    def __init__(self, db_path: Path, warehouse: Path, allow_outside: tuple[Path, ...] = ()):
        self.db_path = Path(db_path).resolve()
        self.warehouse = Path(warehouse).resolve()
        self._engine = sqlalchemy_engine(self.db_path)
        self._catalogs: dict[str, _RefCatalog] = {}
        self._lock = threading.Lock()
        self._earlier_roots = self._init_schema()
        self.locations = ProjectLocations(self.warehouse, self._earlier_roots, allow_outside)


    def every_pointer(self) -> list[LivePointer]:
        """Every pointer of every catalog name, read in one transaction over PyIceberg's `iceberg_tables` rows (a
        row left under a deleted branch's name by a writer that outlived it is kept too: erring on the side of
        keeping files)."""
        with closing(open_db(self.db_path)) as conn:
            conn.execute("BEGIN")
            try:
                if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'iceberg_tables'"
                                ).fetchone() is None:
                    return []
                rows = conn.execute(
                    "SELECT catalog_name, table_namespace, table_name, metadata_location,"
                    " previous_metadata_location, iceberg_type FROM iceberg_tables"
                    " WHERE metadata_location IS NOT NULL ORDER BY catalog_name, table_namespace, table_name"
                ).fetchall()
            finally:
                conn.execute("COMMIT")
        return [LivePointer(ref, f"{ns}.{name}", loc, prev, view=(kind or "TABLE").upper() == "VIEW")
                for ref, ns, name, loc, prev, kind in rows]

    def allow_outside(self, folders: tuple[Path, ...]) -> None:
        """New allowed folders (ratui.yaml reloaded): tables loaded from now on use them."""
        self.locations = ProjectLocations(self.warehouse, self._earlier_roots, folders)
        with self._lock:
            self._catalogs.clear()

    # ---------------------------------------------------------------- plumbing

    def _connect(self) -> closing[sqlite3.Connection]:
        # One short-lived connection per operation: a sqlite3 connection holds one transaction at a time, so
        # sharing one between threads would interleave their transactions.
        conn = open_db(self.db_path)
        conn.row_factory = sqlite3.Row
        return closing(conn)

    def _init_schema(self) -> list[str]:
        """Create the tables, record this root among the project's roots; returns the earlier roots."""
        migrations.migrate(self.db_path)  # an older ratui's catalog: its missing columns first
        with self._connect() as conn, write_tx(conn):
            # One statement at a time: executescript() would COMMIT our transaction first.
            for stmt in [*_iceberg_ddl(), *_SCHEMA.split(";")]:
                if stmt.strip():
                    conn.execute(stmt)
            if conn.execute("SELECT 1 FROM catalog_refs WHERE name = ?", (MAIN,)).fetchone() is None:
                commit = self._insert_commit(conn, None, MAIN, "init", self._pointers(conn, MAIN))
                conn.execute(
                    "INSERT INTO catalog_refs (name, head, created_at, fork_hash, run_id) VALUES (?, ?, ?, NULL, NULL)",
                    (MAIN, commit.hash, commit.created_at),
                )
            if conn.execute("SELECT 1 FROM project_roots LIMIT 1").fetchone() is None:
                # a new database, or one from before project_roots existed: where its tables say it lived
                for root in self._implied_roots(conn):
                    conn.execute("INSERT OR IGNORE INTO project_roots (root, first_seen) VALUES (?, ?)",
                                 (root, _now()))
            conn.execute("INSERT OR IGNORE INTO project_roots (root, first_seen) VALUES (?, ?)",
                         (str(self.warehouse), _now()))
            return [r[0] for r in conn.execute("SELECT root FROM project_roots WHERE root != ?",
                                               (str(self.warehouse),))]

    @staticmethod
    def _implied_roots(conn: sqlite3.Connection) -> set[str]:
        """Roots implied by ratui's own layout, {root}/{ns}/warehouse/{layer}/{name}/metadata/..., of the stored
        metadata locations (only where the path matches the row's own table key)."""
        roots: set[str] = set()
        for ns, name, location in conn.execute(
                "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables"
                " WHERE metadata_location IS NOT NULL"):
            path = plain_path(location) or ""
            namespace, _, layer = ns.rpartition(".")
            marker = f"/{namespace}/warehouse/{layer}/{name}/metadata/"
            at = path.find(marker)
            if namespace and at > 0:
                roots.add(path[:at])
        return roots

    @staticmethod
    def _pointers(conn: sqlite3.Connection, ref: str) -> dict[str, str]:
        rows = conn.execute(
            "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables "
            f"WHERE catalog_name = ? AND metadata_location IS NOT NULL AND ({_TABLE_ROWS})",
            (ref,),
        )
        return {f"{ns}.{name}": loc for ns, name, loc in rows}

    @staticmethod
    def _ref_row(conn: sqlite3.Connection, name: str) -> Ref:
        row = conn.execute(
            "SELECT name, head, created_at, fork_hash, run_id FROM catalog_refs WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise RatuiError("RAT-CAT-002", f"branch '{name}' does not exist")
        return Ref(*row)

    def _require_ref(self, name: str) -> None:
        with self._connect() as conn:
            self._ref_row(conn, name)

    @staticmethod
    def _insert_commit(
        conn: sqlite3.Connection, parent: str | None, ref: str, message: str, pointers: dict[str, str],
        meta: dict | None = None,
    ) -> Commit:
        created_at = _now()
        pointers_json = json.dumps(pointers, sort_keys=True)
        h = _commit_hash(parent, ref, message, created_at, pointers_json)
        conn.execute(
            "INSERT INTO catalog_commits (hash, parent, ref, message, created_at, pointers, meta)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (h, parent, ref, message, created_at, pointers_json, json.dumps(meta, sort_keys=True) if meta else None),
        )
        return Commit(h, parent, ref, message, created_at, dict(pointers), dict(meta or {}))

    def _advance(self, conn: sqlite3.Connection, ref: Ref, message: str, meta: dict | None = None) -> Commit:
        """Record `ref`'s current pointers as a commit on top of its head and move the head. Inside a write tx."""
        commit = self._insert_commit(conn, ref.head, ref.name, message, self._pointers(conn, ref.name), meta)
        conn.execute("UPDATE catalog_refs SET head = ? WHERE name = ?", (commit.hash, ref.name))
        return commit

    @staticmethod
    def _commit_from_row(row: sqlite3.Row) -> Commit:
        return Commit(
            row["hash"], row["parent"], row["ref"], row["message"], row["created_at"], json.loads(row["pointers"]),
            json.loads(row["meta"]) if row["meta"] else {},
        )

    # ---------------------------------------------------------------- refs

    def create_branch(self, name: str, *, from_ref: str = MAIN, run_id: str | None = None,
                      in_tx: Callable[[sqlite3.Connection], None] | None = None) -> Ref:
        """See BranchCatalog.create_branch; `in_tx` runs inside the transaction (e.g. the ledger's fork)."""
        if not BRANCH_NAME_RE.match(name):
            raise RatuiError("RAT-CAT-006", f"branch name '{name[:40]}' is not valid")
        with self._connect() as conn, write_tx(conn):
            source = self._ref_row(conn, from_ref)
            if conn.execute("SELECT 1 FROM catalog_refs WHERE name = ?", (name,)).fetchone():
                raise RatuiError("RAT-CAT-001", f"branch '{name}' already exists")
            # Rows left under this catalog name by a writer that outlived an earlier branch of the same name.
            conn.execute("DELETE FROM iceberg_tables WHERE catalog_name = ?", (name,))
            conn.execute("DELETE FROM iceberg_namespace_properties WHERE catalog_name = ?", (name,))
            conn.execute("DELETE FROM catalog_fork_pointers WHERE ref = ?", (name,))
            # Pointers only: the new ref points at the very same metadata files.
            conn.execute(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location,"
                " previous_metadata_location, iceberg_type)"
                " SELECT ?, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type"
                " FROM iceberg_tables WHERE catalog_name = ?",
                (name, from_ref),
            )
            conn.execute(
                "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)"
                " SELECT ?, namespace, property_key, property_value"
                " FROM iceberg_namespace_properties WHERE catalog_name = ?",
                (name, from_ref),
            )
            fork = self._pointers(conn, from_ref)
            conn.executemany(
                "INSERT INTO catalog_fork_pointers (ref, table_key, metadata_location) VALUES (?, ?, ?)",
                [(name, key, loc) for key, loc in fork.items()],
            )
            commit = self._insert_commit(conn, source.head, name, f"create branch {name} from {from_ref}", fork,
                                         {"kind": "branch", "from": from_ref})
            ref = Ref(name, commit.hash, commit.created_at, source.head, run_id)
            conn.execute(
                "INSERT INTO catalog_refs (name, head, created_at, fork_hash, run_id) VALUES (?, ?, ?, ?, ?)",
                (ref.name, ref.head, ref.created_at, ref.fork_hash, ref.run_id),
            )
            if in_tx is not None:
                in_tx(conn)
        return ref

    def list_refs(self) -> list[Ref]:
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT name, head, created_at, fork_hash, run_id FROM catalog_refs"
                " ORDER BY name != ?, created_at, name",
                (MAIN,),
            ).fetchall()
        return [Ref(*row) for row in rows]

    def get_ref(self, name: str) -> Ref:
        """The ref; for "ref@HASH" the ref too, once the commit is found in its history (RAT-CAT-010 if not)."""
        base, at = split_spec(name)
        if at is not None:
            self.commit(name)
        with self._connect() as conn:
            return self._ref_row(conn, base)

    def delete_branch(self, name: str, in_tx: Callable[[sqlite3.Connection], None] | None = None) -> None:
        if name == MAIN:
            raise RatuiError("RAT-CAT-004", "main cannot be deleted")
        with self._connect() as conn, write_tx(conn):
            self._ref_row(conn, name)
            # Rows only. Never drop_table/purge_table: the files are shared with main and other branches.
            conn.execute("DELETE FROM iceberg_tables WHERE catalog_name = ?", (name,))
            conn.execute("DELETE FROM iceberg_namespace_properties WHERE catalog_name = ?", (name,))
            conn.execute("DELETE FROM catalog_fork_pointers WHERE ref = ?", (name,))
            conn.execute("DELETE FROM catalog_refs WHERE name = ?", (name,))
            if in_tx is not None:
                in_tx(conn)
        with self._lock:
            self._catalogs.pop(name, None)

    # ---------------------------------------------------------------- commits

    def record_commit(self, ref: str, message: str, meta: dict | None = None) -> Commit:
        with self._connect() as conn, write_tx(conn):
            return self._advance(conn, self._ref_row(conn, ref), message, meta)

    _HISTORY = """
        WITH RECURSIVE chain(hash, depth) AS (
            SELECT ?, 0
            UNION ALL
            SELECT c.parent, chain.depth + 1 FROM catalog_commits c JOIN chain ON c.hash = chain.hash
            WHERE c.parent IS NOT NULL AND chain.depth + 1 < ?
        )
        SELECT c.* FROM chain JOIN catalog_commits c ON c.hash = chain.hash {where} ORDER BY chain.depth {limit}
    """

    def commit(self, spec: str) -> Commit:
        name, at = split_spec(spec)
        with self._connect() as conn:
            head = self._head(conn, name)
            if at is None:
                row = conn.execute("SELECT * FROM catalog_commits WHERE hash = ?", (head,)).fetchone()
                return self._commit_from_row(row)
            if not re.fullmatch(r"[0-9a-fA-F]{6,64}", at):
                raise RatuiError("RAT-CAT-010", f"'{at[:70]}' is not a commit hash (6 to 64 hex digits)",
                                 details={"ref": name})
            rows = conn.execute(self._HISTORY.format(where="WHERE c.hash LIKE ?", limit="LIMIT 2"),
                                (head, 1_000_000, at.lower() + "%")).fetchall()
        if len(rows) != 1:
            raise RatuiError("RAT-CAT-010", f"{'no' if not rows else 'more than one'} commit {at} in the history "
                             f"of {name}", details={"ref": name})
        return self._commit_from_row(rows[0])

    def commit_at(self, ref: str, when: str) -> Commit:
        with self._connect() as conn:
            head = self._head(conn, ref)
            row = conn.execute(self._HISTORY.format(where="WHERE c.created_at <= ?", limit="LIMIT 1"),
                               (head, 1_000_000, when)).fetchone()
        if row is None:
            raise RatuiError("RAT-CAT-010", f"{ref} has no commit at or before {when}", details={"ref": ref})
        return self._commit_from_row(row)

    def _head(self, conn: sqlite3.Connection, ref: str) -> str:
        row = conn.execute("SELECT head FROM catalog_refs WHERE name = ?", (ref,)).fetchone()
        if row is None:
            raise RatuiError("RAT-CAT-002", f"branch '{ref}' does not exist")
        return row[0]

    def restore(self, ref: str, pointers: dict[str, str | None], expected: dict[str, str | None], message: str,
                meta: dict | None = None, in_tx: Callable[[sqlite3.Connection, Commit], None] | None = None) -> Commit:
        with self._connect() as conn, write_tx(conn):
            target = self._ref_row(conn, ref)
            now = self._pointers(conn, ref)
            moved = sorted(k for k in pointers if now.get(k) != expected.get(k))
            if moved:
                raise self._conflict(ref, ref, moved, f"{ref} changed {', '.join(moved)} meanwhile")
            for key, location in sorted(pointers.items()):
                if location == now.get(key):
                    continue
                namespace, name = key.rsplit(".", 1)
                if location is None:
                    conn.execute("DELETE FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND "
                                 "table_name = ?", (ref, namespace, name))
                elif key in now:
                    conn.execute("UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ?"
                                 " WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                                 (location, now[key], ref, namespace, name))
                else:
                    split_key(key)
                    conn.execute(
                        "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key,"
                        " property_value) SELECT ?, ?, 'exists', 'true' WHERE NOT EXISTS (SELECT 1 FROM"
                        " iceberg_namespace_properties WHERE catalog_name = ? AND namespace = ?)",
                        (ref, namespace, ref, namespace))
                    conn.execute(
                        "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location,"
                        " previous_metadata_location, iceberg_type) VALUES (?, ?, ?, ?, NULL, 'TABLE')",
                        (ref, namespace, name, location))
            commit = self._advance(conn, target, message, meta)
            if in_tx is not None:
                in_tx(conn, commit)
        return commit

    def log(self, ref: str, limit: int = 50, *, own: bool = False) -> list[Commit]:
        if split_spec(ref)[1] is not None:  # the history up to a past commit
            start = self.commit(ref)
            with self._connect() as conn:
                rows = conn.execute(self._HISTORY.format(where="", limit=""), (start.hash, limit)).fetchall()
            return [self._commit_from_row(r) for r in rows]
        with self._connect() as conn:
            row = conn.execute("SELECT head FROM catalog_refs WHERE name = ?", (ref,)).fetchone()
            if row is None:
                # A deleted branch: its newest commit is the last one inserted for it.
                row = conn.execute(
                    "SELECT hash FROM catalog_commits WHERE ref = ? ORDER BY rowid DESC LIMIT 1", (ref,)
                ).fetchone()
            if row is None:
                raise RatuiError("RAT-CAT-002", f"branch '{ref}' does not exist and has no history")
            rows = conn.execute(
                """
                WITH RECURSIVE chain(hash, depth) AS (
                    SELECT ?, 0
                    UNION ALL
                    SELECT c.parent, chain.depth + 1 FROM catalog_commits c JOIN chain ON c.hash = chain.hash
                    WHERE c.parent IS NOT NULL AND chain.depth + 1 < ? AND (? = 0 OR c.ref = ?)
                )
                SELECT c.* FROM chain JOIN catalog_commits c ON c.hash = chain.hash ORDER BY chain.depth
                """,
                (row[0], limit, int(own), ref),
            ).fetchall()
        return [self._commit_from_row(r) for r in rows]

    # ---------------------------------------------------------------- diff and merge

    @staticmethod
    def _changes(branch: dict[str, str], base: dict[str, str], target: dict[str, str]) -> list[TableChange]:
        """Nessie's rule over three pointer maps: what the branch changed since `base`, and whether the target
        changed the same key since `base` too (a conflict)."""
        changes = []
        for key in sorted(set(branch) | set(base)):
            b, f, t = branch.get(key), base.get(key), target.get(key)
            if b == f or b == t:
                continue  # untouched on the branch, or the target already holds exactly this state
            kind: Literal["added", "modified", "dropped"] = (
                "added" if f is None else "dropped" if b is None else "modified")
            changes.append(TableChange(key, kind, b, t, f, conflict=t != f))
        return changes

    def _state(self, conn: sqlite3.Connection, ref: str, against: str) -> list[TableChange]:
        branch_ref = self._ref_row(conn, ref)
        self._ref_row(conn, against)
        target = self._pointers(conn, against)
        if branch_ref.fork_hash is None:
            base = target  # main has no fork point: a plain two-way comparison
        else:
            base = {
                k: loc
                for k, loc in conn.execute(
                    "SELECT table_key, metadata_location FROM catalog_fork_pointers WHERE ref = ?", (ref,)
                )
            }
        return self._changes(self._pointers(conn, ref), base, target)

    def diff(self, ref: str, against: str = MAIN) -> list[TableChange]:
        with self._connect() as conn:
            conn.execute("BEGIN")  # one read snapshot for all three maps
            try:
                return self._state(conn, ref, against)
            finally:
                conn.execute("COMMIT")

    def merge(
        self,
        ref: str,
        into: str = MAIN,
        *,
        message: str | None = None,
        dry_run: bool = False,
        in_tx: Callable[[sqlite3.Connection, MergeResult], None] | None = None,
        meta: dict | None = None,
    ) -> MergeResult:
        """See BranchCatalog.merge. The merge base is the source ref's pointers when `ref` was created, so merge
        into the ref it was created from (a different target only ever errs on the side of conflicts).

        `in_tx` (SQLite backend only) runs inside the merge's transaction just before COMMIT, with the
        connection and the result: e.g. marking landing files as loaded commits atomically with the merge. If it
        raises, the merge is rolled back.
        """
        if ref == into or ref == MAIN:
            raise RatuiError("RAT-CAT-007", f"cannot merge '{ref}' into '{into}'")
        with self._connect() as conn, write_tx(conn):
            if self._ref_row(conn, ref).fork_hash is None:
                raise RatuiError("RAT-CAT-007", f"'{ref}' has no fork point to merge from")
            changes = self._state(conn, ref, into)
            tables = [c.table for c in changes]
            conflicts = [c.table for c in changes if c.conflict]
            if dry_run:
                return MergeResult(ref, into, tables, None, True, conflicts)
            if conflicts:
                raise self._conflict(ref, into, conflicts)
            if not changes:
                return MergeResult(ref, into, [], None, False, [])
            for change in changes:
                self._apply(conn, ref, into, change)
            target = self._ref_row(conn, into)
            commit = self._advance(conn, target, message or f"merge {ref} into {into}: {', '.join(tables)}",
                                   meta or {"kind": "merge", "from": ref})
            result = MergeResult(ref, into, tables, commit, False, [])
            if in_tx is not None:
                in_tx(conn, result)
        return result

    @staticmethod
    def _conflict(ref: str, into: str, tables: list[str], message: str | None = None) -> RatuiError:
        return RatuiError(
            "RAT-CAT-003",
            message or f"cannot merge '{ref}' into '{into}': {into} changed {', '.join(tables)} since the branch "
                       "was created",
            details={"tables": tables},
        )

    def _apply(self, conn: sqlite3.Connection, ref: str, into: str, change: TableChange) -> None:
        """One table's change on the target, each guarded by the fork-point location (compare-and-swap): a
        plain overwrite would silently discard a commit the target made in the meantime."""
        namespace, name = change.table.rsplit(".", 1)
        where = "catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?"
        if change.change == "modified":
            cur = conn.execute(
                f"UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? WHERE {where}",
                (change.branch_location, change.fork_location, into, namespace, name, change.fork_location),
            )
            swapped = cur.rowcount == 1
        elif change.change == "dropped":
            cur = conn.execute(
                f"DELETE FROM iceberg_tables WHERE {where}", (into, namespace, name, change.fork_location)
            )
            swapped = cur.rowcount == 1
        else:  # added: the namespace may be new on the target too (namespaces are per catalog name)
            conn.execute(
                "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)"
                " SELECT ?, namespace, property_key, property_value FROM iceberg_namespace_properties"
                " WHERE catalog_name = ? AND namespace = ? AND NOT EXISTS (SELECT 1 FROM iceberg_namespace_properties"
                " WHERE catalog_name = ? AND namespace = ?)",
                (into, ref, namespace, into, namespace),
            )
            try:
                conn.execute(
                    "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location,"
                    " previous_metadata_location, iceberg_type) VALUES (?, ?, ?, ?, NULL, 'TABLE')",
                    (into, namespace, name, change.branch_location),
                )
                swapped = True
            except sqlite3.IntegrityError:
                swapped = False
        if not swapped:
            raise self._conflict(ref, into, [change.table])

    # ---------------------------------------------------------------- tables

    def iceberg(self, ref: str) -> SqlCatalog:
        if split_spec(ref)[1] is not None:
            raise RatuiError("RAT-CAT-007", f"{ref} is a past state of a branch: it can be read, not written")
        with self._lock:
            catalog = self._catalogs.get(ref)
        if catalog is not None:
            return catalog
        self._require_ref(ref)
        with self._lock:
            if ref not in self._catalogs:
                self._catalogs[ref] = _RefCatalog(
                    ref,
                    self._engine,
                    self,
                    uri=f"sqlite:///{self.db_path}",
                    warehouse=self.warehouse.as_uri(),
                    **self.locations.file_io_properties(),
                )
            return self._catalogs[ref]

    def static_table(self, location: str) -> Table:
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(location, properties=self.locations.file_io_properties())

    def table_pointers(self, ref: str) -> dict[str, str]:
        if split_spec(ref)[1] is not None:
            return dict(self.commit(ref).pointers)
        with self._connect() as conn:
            conn.execute("BEGIN")
            try:
                self._ref_row(conn, ref)
                return self._pointers(conn, ref)
            finally:
                conn.execute("COMMIT")

    def _ensure_namespace(self, catalog: Any, namespace: tuple[str, ...]) -> None:
        try:
            super()._ensure_namespace(catalog, namespace)
        except IntegrityError:
            pass  # another thread or process inserted the same namespace row first
