"""The embedded branch catalog: Nessie's model kept in the project's SQLite database.

How it maps onto PyIceberg's SqlCatalog: every ref is a `catalog_name` in PyIceberg's own `iceberg_tables` and
`iceberg_namespace_properties` tables, in the same database file. A SqlCatalog named "run-abc" therefore loads and
commits tables on branch "run-abc" with no change to PyIceberg (ref_catalog.py), and the `iceberg_tables` rows of a
catalog name ARE that ref's table pointers (table key -> metadata location; iceberg_rows.py).

Our own tables, next to PyIceberg's: refs, commits and fork points (records.py), and the folders the project has
lived at (roots.py). Iceberg metadata stores absolute paths; a copied or moved project maps paths under an earlier
root to its own files (locations.py), through the FileIO every ref's SqlCatalog is given.

This module holds the transactions: each operation is one short transaction over those modules' calls, so it
happens whole or not at all. Branching copies rows, never files. Merging is one `BEGIN IMMEDIATE` transaction of
compare-and-swaps on the target's rows (merge_rule.py says which). Deleting a branch deletes rows only: data and
metadata files are shared between refs. Concurrency: WAL + busy timeout (db.py) + short write transactions, so
several threads and processes can branch, write and merge on one file.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Collection, Iterator

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from sqlalchemy.exc import IntegrityError

from ratui.engine.errors import RatuiError
from ratui.engine.locations import ProjectLocations
from ratui.engine.state import migrations
from ratui.engine.state.catalog import iceberg_rows, merge_rule, records, roots
from ratui.engine.state.catalog.base import (
    MAIN, BranchCatalog, Commit, DeletedRef, MergeResult, Pointer, Ref, TableChange, split_spec,
)
from ratui.engine.state.catalog.ref_catalog import RefCatalog
from ratui.engine.storage.warehouse import Warehouse
from ratui.engine.state.db import open_db, sqlalchemy_engine, sqlite_utils, write_tx

BRANCH_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class SqliteBranchCatalog(BranchCatalog):
    """Branch catalog embedded in the SQLite file `db_path`; `warehouse` is the project root (tables are created
    with explicit locations under it, e.g. {project}/{namespace}/warehouse/{layer}/{name})."""

    def __init__(self, db_path: Path, warehouse: Path, allow_outside: tuple[Path, ...] = (), *,
                 storage: Warehouse | None = None):
        from ratui.engine.storage.warehouse import Warehouse

        self.db_path = Path(db_path).resolve()
        self.warehouse = Path(warehouse).resolve()
        self.storage = storage if storage is not None else Warehouse(self.warehouse)
        self._engine = sqlalchemy_engine(self.db_path)
        self._catalogs: dict[str, RefCatalog] = {}
        self._lock = threading.Lock()
        self._earlier_roots = self._init_schema()
        self.locations = ProjectLocations(self.warehouse, self._earlier_roots, allow_outside)

    @classmethod
    def opened(cls, *, db_path: Path, root: Path, warehouse: Warehouse, allow_outside: tuple[Path, ...],
               uri: str | None, token: str | None) -> SqliteBranchCatalog:
        return cls(db_path, root, allow_outside, storage=warehouse)

    def every_pointer(self) -> list[Pointer]:
        """Every pointer of every catalog name, read in one transaction over PyIceberg's `iceberg_tables` rows (a
        row left under a deleted branch's name by a writer that outlived it is kept too: erring on the side of
        keeping files)."""
        with self._reading() as db:
            return iceberg_rows.every(db)

    def allow_outside(self, folders: tuple[Path, ...]) -> None:
        """New allowed folders (ratui.yaml reloaded): tables loaded from now on use them."""
        self.locations = ProjectLocations(self.warehouse, self._earlier_roots, folders)
        with self._lock:
            self._catalogs.clear()

    # ---------------------------------------------------------------- plumbing

    @contextmanager
    def _open(self) -> Iterator[sqlite_utils.Database]:
        # One short-lived connection per operation: a sqlite3 connection holds one transaction at a time, so
        # sharing one between threads would interleave their transactions.
        conn = open_db(self.db_path)
        try:
            yield sqlite_utils.Database(conn)
        finally:
            conn.close()

    @contextmanager
    def _reading(self) -> Iterator[sqlite_utils.Database]:
        """One read transaction: every query in the block sees the database at one instant."""
        with self._open() as db:
            db.conn.execute("BEGIN")
            try:
                yield db
            finally:
                db.conn.execute("COMMIT")

    @contextmanager
    def _writing(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction (`BEGIN IMMEDIATE`): all of the block, or nothing of it if it raises."""
        with self._open() as db, write_tx(db.conn):
            yield db

    def _init_schema(self) -> list[str]:
        """Create the tables, record this root among the project's roots; returns the earlier roots."""
        migrations.migrate(self.db_path)  # an older ratui's catalog: its missing columns first
        with self._writing() as db:
            iceberg_rows.create_tables(db)
            records.create_tables(db)
            roots.create_table(db)
            if records.head(db, MAIN) is None:
                commit = records.add_commit(db, None, MAIN, "init", iceberg_rows.of(db, MAIN))
                records.add_ref(db, Ref(MAIN, commit.hash, commit.created_at, None, None))
            return roots.record(db, str(self.warehouse))

    def _require_ref(self, name: str) -> None:
        with self._open() as db:
            records.ref(db, name)

    def _advance(self, db: sqlite_utils.Database, ref: Ref, message: str, meta: dict | None = None) -> Commit:
        """Record `ref`'s current pointers as a commit on top of its head and move the head. Inside a write tx."""
        commit = records.add_commit(db, ref.head, ref.name, message, iceberg_rows.of(db, ref.name), meta)
        records.move_head(db, ref.name, commit.hash)
        return commit

    # ---------------------------------------------------------------- refs

    def create_branch(self, name: str, *, from_ref: str = MAIN, run_id: str | None = None,
                      in_tx: Callable[[sqlite3.Connection], None] | None = None) -> Ref:
        """See BranchCatalog.create_branch; `in_tx` runs inside the transaction (e.g. the ledger's fork)."""
        if not BRANCH_NAME_RE.match(name):
            raise RatuiError("RAT-CAT-006", f"branch name '{name[:40]}' is not valid")
        with self._writing() as db:
            source = records.ref(db, from_ref)
            if records.head(db, name) is not None:
                raise RatuiError("RAT-CAT-001", f"branch '{name}' already exists")
            # Pointers only: the new ref points at the very same metadata files.
            iceberg_rows.copy(db, name, from_ref)
            fork = iceberg_rows.of(db, from_ref)
            records.drop_fork(db, name)  # left by an earlier branch of the same name
            records.record_fork(db, name, fork)
            commit = records.add_commit(db, source.head, name, f"create branch {name} from {from_ref}", fork,
                                        {"kind": "branch", "from": from_ref})
            ref = Ref(name, commit.hash, commit.created_at, source.head, run_id)
            records.add_ref(db, ref)
            if in_tx is not None:
                in_tx(db.conn)
        return ref

    def list_refs(self) -> list[Ref]:
        with self._open() as db:
            return records.refs(db, MAIN)

    def get_ref(self, name: str) -> Ref:
        """The ref; for "ref@HASH" the ref too, once the commit is found in its history (RAT-CAT-010 if not)."""
        base, at = split_spec(name)
        if at is not None:
            self.commit(name)
        with self._open() as db:
            return records.ref(db, base)

    def delete_branch(self, name: str, in_tx: Callable[[sqlite3.Connection], None] | None = None) -> None:
        if name == MAIN:
            raise RatuiError("RAT-CAT-004", "main cannot be deleted")
        with self._writing() as db:
            records.ref(db, name)
            last = iceberg_rows.of(db, name)
            # Rows only. Never drop_table/purge_table: the files are shared with main and other branches.
            iceberg_rows.drop(db, name)
            records.drop_ref(db, name, last)
            if in_tx is not None:
                in_tx(db.conn)
        with self._lock:
            self._catalogs.pop(name, None)

    def deleted_refs(self, since: str | None = None) -> list[DeletedRef]:
        """Recorded deletions (records.deletions), and, with no `since`, also the branches deleted before ratui
        recorded them (their deletion time unknown). Within a window (`since`) those count by their last commit's
        time: deleted no earlier than that."""
        with self._reading() as db:
            found = [DeletedRef(*row) for row in records.deletions(db, since)]
            old = records.unrecorded_deleted(db)
        found += [DeletedRef(name, head, None, pointers) for name, head, at, pointers in old
                  if since is None or at >= since]
        return found

    def history_from(self, hash: str, ref: str) -> list[Commit]:
        with self._open() as db:
            return records.history(db, hash)

    def revive_branch(self, name: str, head: str, pointers: dict[str, str],
                      in_tx: Callable[[sqlite3.Connection], None] | None = None) -> Ref:
        """See BranchCatalog.revive_branch: the ref's row at its old head, its tables' rows, and its fork point (the
        pointers of its own "create branch" commit), in one transaction; no commit is added, no file touched."""
        with self._writing() as db:
            if records.head(db, name) is not None:
                raise RatuiError("RAT-CAT-001", f"branch '{name}' exists again: it cannot be brought back")
            try:
                records.commit(db, head)
            except sqlite_utils.db.NotFoundError:
                raise RatuiError("RAT-UNDO-003", f"commit {head[:12]} of branch '{name}' is not in the catalog "
                                 "any more") from None
            origin = next((c for c in records.history(db, head, own=name)
                           if c.ref == name and c.meta.get("kind") == "branch"), None)
            iceberg_rows.drop(db, name)  # rows a writer that outlived the branch left under its name
            for key, location in sorted(pointers.items()):
                iceberg_rows.put(db, name, key, location, None)
            records.drop_fork(db, name)
            records.record_fork(db, name, origin.pointers if origin else {})
            ref = Ref(name, head, origin.created_at if origin else records.now(), origin.parent if origin else None,
                      None)
            records.add_ref(db, ref)
            if in_tx is not None:
                in_tx(db.conn)
        return ref

    # ---------------------------------------------------------------- commits

    def record_commit(self, ref: str, message: str, meta: dict | None = None) -> Commit:
        with self._writing() as db:
            return self._advance(db, records.ref(db, ref), message, meta)

    def commit(self, spec: str) -> Commit:
        name, at = split_spec(spec)
        with self._open() as db:
            head = records.ref(db, name).head
            if at is None:
                return records.commit(db, head)
            if not re.fullmatch(r"[0-9a-fA-F]{6,64}", at):
                raise RatuiError("RAT-CAT-010", f"'{at[:70]}' is not a commit hash (6 to 64 hex digits)",
                                 details={"ref": name})
            found = records.history(db, head, where="c.hash LIKE ?", args=[at.lower() + "%"], limit=2)
        if len(found) != 1:
            raise RatuiError("RAT-CAT-010", f"{'no' if not found else 'more than one'} commit {at} in the history "
                             f"of {name}", details={"ref": name})
        return found[0]

    def commit_at(self, ref: str, when: str) -> Commit:
        with self._open() as db:
            head = records.ref(db, ref).head
            found = records.history(db, head, where="c.created_at <= ?", args=[when], limit=1)
        if not found:
            raise RatuiError("RAT-CAT-010", f"{ref} has no commit at or before {when}", details={"ref": ref})
        return found[0]

    def restore(self, ref: str, pointers: dict[str, str | None], expected: dict[str, str | None], message: str,
                meta: dict | None = None, in_tx: Callable[[sqlite3.Connection, Commit], None] | None = None) -> Commit:
        with self._writing() as db:
            target = records.ref(db, ref)
            now = iceberg_rows.of(db, ref)
            moved = sorted(k for k in pointers if now.get(k) != expected.get(k))
            if moved:
                raise merge_rule.conflict(ref, ref, moved, f"{ref} changed {', '.join(moved)} meanwhile")
            for key, location in sorted(pointers.items()):
                if location != now.get(key):
                    iceberg_rows.put(db, ref, key, location, now.get(key))
            commit = self._advance(db, target, message, meta)
            if in_tx is not None:
                in_tx(db.conn, commit)
        return commit

    def log(self, ref: str, limit: int = 50, *, own: bool = False) -> list[Commit]:
        if split_spec(ref)[1] is not None:  # the history up to a past commit
            start = self.commit(ref)
            with self._open() as db:
                return records.history(db, start.hash, limit)
        with self._open() as db:
            # a deleted branch: its newest commit is the last one made on it
            head = records.head(db, ref) or records.newest_of(db, ref)
            if head is None:
                raise RatuiError("RAT-CAT-002", f"branch '{ref}' does not exist and has no history")
            return records.history(db, head, limit, own=ref if own else None)

    # ---------------------------------------------------------------- diff and merge

    @staticmethod
    def _state(db: sqlite_utils.Database, ref: str, against: str) -> list[TableChange]:
        branch_ref = records.ref(db, ref)
        records.ref(db, against)
        target = iceberg_rows.of(db, against)
        # main has no fork point: a plain two-way comparison
        base = target if branch_ref.fork_hash is None else records.fork(db, ref)
        return merge_rule.changes(iceberg_rows.of(db, ref), base, target)

    def diff(self, ref: str, against: str = MAIN) -> list[TableChange]:
        with self._reading() as db:  # one read snapshot for all three maps
            return self._state(db, ref, against)

    def merge(
        self,
        ref: str,
        into: str = MAIN,
        *,
        message: str | None = None,
        dry_run: bool = False,
        in_tx: Callable[[sqlite3.Connection, MergeResult], None] | None = None,
        meta: dict | None = None,
        skip: Collection[str] = (),
    ) -> MergeResult:
        """See BranchCatalog.merge. The merge base is the source ref's pointers when `ref` was created, so merge
        into the ref it was created from (a different target only ever errs on the side of conflicts).

        `in_tx` (SQLite backend only) runs inside the merge's transaction just before COMMIT, with the
        connection and the result: e.g. marking landing files as loaded commits atomically with the merge. If it
        raises, the merge is rolled back.
        """
        if ref == into or ref == MAIN:
            raise RatuiError("RAT-CAT-007", f"cannot merge '{ref}' into '{into}'")
        with self._writing() as db:
            if records.ref(db, ref).fork_hash is None:
                raise RatuiError("RAT-CAT-007", f"'{ref}' has no fork point to merge from")
            changes = [c for c in self._state(db, ref, into) if c.table not in skip]
            tables = [c.table for c in changes]
            conflicts = [c.table for c in changes if c.conflict]
            if dry_run:
                return MergeResult(ref, into, tables, None, True, conflicts)
            if conflicts:
                raise merge_rule.conflict(ref, into, conflicts)
            if not changes:
                return MergeResult(ref, into, [], None, False, [])
            for change in changes:
                self._apply(db, ref, into, change)
            target = records.ref(db, into)
            commit = self._advance(db, target, message or f"merge {ref} into {into}: {', '.join(tables)}",
                                   meta or {"kind": "merge", "from": ref})
            result = MergeResult(ref, into, tables, commit, False, [])
            if in_tx is not None:
                in_tx(db.conn, result)
        return result

    @staticmethod
    def _apply(db: sqlite_utils.Database | sqlite3.Connection, ref: str, into: str, change: TableChange) -> None:
        """One table's change on the target, as a compare-and-swap (iceberg_rows.swap); RAT-CAT-003 if the target
        moved meanwhile. Inside the merge's write transaction."""
        if isinstance(db, sqlite3.Connection):
            db = sqlite_utils.Database(db)
        if not iceberg_rows.swap(db, ref, into, change):
            raise merge_rule.conflict(ref, into, [change.table])

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
                self._catalogs[ref] = RefCatalog(
                    ref,
                    self._engine,
                    self._require_ref,
                    uri=f"sqlite:///{self.db_path}",
                    warehouse=self.warehouse.as_uri(),
                    **self.file_io_properties(),
                )
            return self._catalogs[ref]

    def static_table(self, location: str) -> Table:
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(location, properties=self.file_io_properties())

    def table_pointers(self, ref: str) -> dict[str, str]:
        if split_spec(ref)[1] is not None:
            return dict(self.commit(ref).pointers)
        with self._reading() as db:
            records.ref(db, ref)
            return iceberg_rows.of(db, ref)

    def _ensure_namespace(self, catalog: Any, namespace: tuple[str, ...]) -> None:
        try:
            super()._ensure_namespace(catalog, namespace)
        except IntegrityError:
            pass  # another thread or process inserted the same namespace row first

