"""The catalog's own record of Nessie's model: live refs, every commit ever made, each branch's fork point.

Owned here, as every SQLite table is owned by one module of state/ (project_roots is catalog/roots.py's, PyIceberg's
rows are catalog/iceberg_rows.py's):

    catalog_refs(name PK, head, created_at, fork_hash, run_id)          live refs
    catalog_commits(hash PK, parent, ref, message, created_at, pointers, meta)
                                                                         every commit ever made (kept for audit)
    catalog_fork_pointers(ref, table_key, metadata_location)             the source ref's pointers at branch time
    catalog_deleted_refs(name, head, deleted_at, pointers)               each branch deletion: the head it had, when,
                                                                         and its tables then (the reaper keeps what a
                                                                         branch deleted inside the retention window
                                                                         reaches)

Every function works inside the caller's transaction (the catalog's `BEGIN IMMEDIATE` for a write, one read
transaction for a consistent read), through sqlite-utils: a Table call made inside a transaction nests in it as a
savepoint, so it commits or rolls back with the rest. The history walk stays SQL: it follows `parent` links with a
recursive query, which sqlite-utils has no call for.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from ratui.engine.errors import RatuiError
from ratui.engine.state.catalog.base import Commit, Ref
from ratui.engine.state.db import sqlite_utils

REFS = "catalog_refs"
COMMITS = "catalog_commits"
FORK_POINTERS = "catalog_fork_pointers"
DELETED_REFS = "catalog_deleted_refs"


def create_tables(db: sqlite_utils.Database) -> None:
    db.table(REFS).create({"name": str, "head": str, "created_at": str, "fork_hash": str, "run_id": str},
                          pk="name", not_null={"head", "created_at"}, if_not_exists=True)
    # pointers: JSON object, table key -> metadata location; meta: JSON object, what made the commit (Commit.meta)
    db.table(COMMITS).create({"hash": str, "parent": str, "ref": str, "message": str, "created_at": str,
                              "pointers": str, "meta": str},
                             pk="hash", not_null={"ref", "message", "created_at", "pointers"}, if_not_exists=True)
    db.table(COMMITS).create_index(["ref"], index_name="catalog_commits_ref", if_not_exists=True)
    db.table(FORK_POINTERS).create({"ref": str, "table_key": str, "metadata_location": str},
                                   pk=("ref", "table_key"), not_null={"ref", "table_key", "metadata_location"},
                                   if_not_exists=True)
    create_deleted_table(db)


def create_deleted_table(db: sqlite_utils.Database) -> None:
    """The record of branch deletions (a name can be deleted, made again and deleted again: one row each time)."""
    # pointers: JSON object, the ref's table pointers when it was deleted (a write not recorded as a commit too)
    db.table(DELETED_REFS).create({"name": str, "head": str, "deleted_at": str, "pointers": str},
                                  not_null={"name", "head", "deleted_at", "pointers"}, if_not_exists=True)
    db.table(DELETED_REFS).create_index(["deleted_at"], index_name="catalog_deleted_refs_at", if_not_exists=True)


def now() -> str:
    """Now, UTC, as the catalog stores it (microseconds: commits made in one millisecond still sort)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


# ---------------------------------------------------------------------------------------------------- refs

def ref(db: sqlite_utils.Database, name: str) -> Ref:
    """The live ref; RAT-CAT-002 if there is none of that name."""
    try:
        row = db.table(REFS).get(name)
    except sqlite_utils.db.NotFoundError:
        raise RatuiError("RAT-CAT-002", f"branch '{name}' does not exist") from None
    return Ref(row["name"], row["head"], row["created_at"], row["fork_hash"], row["run_id"])


def head(db: sqlite_utils.Database, name: str) -> str | None:
    """The live ref's head; None if there is no ref of that name."""
    return next((r["head"] for r in db.table(REFS).rows_where("name = ?", [name], select="head")), None)


def refs(db: sqlite_utils.Database, main: str) -> list[Ref]:
    """Every live ref, `main` first, then by age."""
    rows = db.table(REFS).rows_where(order_by="created_at, name")
    found = [Ref(r["name"], r["head"], r["created_at"], r["fork_hash"], r["run_id"]) for r in rows]
    return sorted(found, key=lambda r: r.name != main)  # a stable sort: the rest keep their order


def add_ref(db: sqlite_utils.Database, new: Ref) -> None:
    db.table(REFS).insert(asdict(new))


def move_head(db: sqlite_utils.Database, name: str, head: str) -> None:
    db.table(REFS).update(name, {"head": head})


def drop_ref(db: sqlite_utils.Database, name: str, pointers: dict[str, str] | None = None) -> None:
    """The ref's row and its fork point; its commits stay (kept for audit), and the deletion is recorded with the
    head the ref had and its table `pointers` then (its head commit's when not given)."""
    gone = head(db, name)
    drop_fork(db, name)
    db.table(REFS).delete_where("name = ?", [name])
    if gone is not None:
        record_deletion(db, name, gone, commit(db, gone).pointers if pointers is None else pointers)


def record_deletion(db: sqlite_utils.Database, name: str, head_hash: str, pointers: dict[str, str],
                    at: str | None = None) -> None:
    db.table(DELETED_REFS).insert({"name": name, "head": head_hash, "deleted_at": at or now(),
                                   "pointers": json.dumps(pointers, sort_keys=True)})


def deletions(db: sqlite_utils.Database, since: str | None = None) -> list[tuple[str, str, str, dict[str, str]]]:
    """(name, head, deleted_at, its pointers then) of every branch deletion recorded at or after `since` (all
    when None), newest first."""
    if not db.table(DELETED_REFS).exists():
        return []
    where = "" if since is None else "WHERE d.deleted_at >= ?"
    rows = db.query(f"SELECT d.name, d.head, d.deleted_at, d.pointers FROM {DELETED_REFS} d {where}"
                    " ORDER BY d.deleted_at DESC, d.rowid DESC", [] if since is None else [since])
    return [(r["name"], r["head"], r["deleted_at"], json.loads(r["pointers"] or "{}")) for r in rows]


def unrecorded_deleted(db: sqlite_utils.Database) -> list[tuple[str, str, str, dict[str, str]]]:
    """Branches deleted before ratui recorded deletions: refs with commits, not live, with no deletion row;
    (name, newest commit, its time, its pointers)."""
    return [(r["ref"], r["hash"], r["created_at"], json.loads(r["pointers"])) for r in db.query(
        f"SELECT c.ref, c.hash, c.created_at, c.pointers FROM {COMMITS} c JOIN (SELECT ref, max(rowid) AS last"
        f" FROM {COMMITS} WHERE ref NOT IN (SELECT name FROM {REFS}) AND ref NOT IN (SELECT name FROM"
        f" {DELETED_REFS}) GROUP BY ref) n ON c.rowid = n.last ORDER BY c.created_at DESC")]


# ---------------------------------------------------------------------------------------------------- fork points

def record_fork(db: sqlite_utils.Database, name: str, pointers: dict[str, str]) -> None:
    """The source ref's pointers when branch `name` was made: the base of its merges."""
    db.table(FORK_POINTERS).insert_all(
        {"ref": name, "table_key": key, "metadata_location": location} for key, location in pointers.items())


def fork(db: sqlite_utils.Database, name: str) -> dict[str, str]:
    rows = db.table(FORK_POINTERS).rows_where("ref = ?", [name], select="table_key, metadata_location")
    return {r["table_key"]: r["metadata_location"] for r in rows}


def drop_fork(db: sqlite_utils.Database, name: str) -> None:
    db.table(FORK_POINTERS).delete_where("ref = ?", [name])


# ---------------------------------------------------------------------------------------------------- commits

def _commit_hash(parent: str | None, ref: str, message: str, created_at: str, pointers_json: str) -> str:
    raw = "\n".join([parent or "", ref, message, created_at, pointers_json])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def add_commit(db: sqlite_utils.Database, parent: str | None, ref: str, message: str, pointers: dict[str, str],
               meta: dict | None = None) -> Commit:
    created_at = now()
    pointers_json = json.dumps(pointers, sort_keys=True)
    h = _commit_hash(parent, ref, message, created_at, pointers_json)
    db.table(COMMITS).insert({"hash": h, "parent": parent, "ref": ref, "message": message, "created_at": created_at,
                              "pointers": pointers_json, "meta": json.dumps(meta, sort_keys=True) if meta else None})
    return Commit(h, parent, ref, message, created_at, dict(pointers), dict(meta or {}))


def _commit(row: Mapping[str, Any]) -> Commit:
    return Commit(row["hash"], row["parent"], row["ref"], row["message"], row["created_at"],
                  json.loads(row["pointers"]), json.loads(row["meta"]) if row["meta"] else {})


def commit(db: sqlite_utils.Database, hash: str) -> Commit:
    return _commit(db.table(COMMITS).get(hash))


def newest_of(db: sqlite_utils.Database, ref: str) -> str | None:
    """The hash of the last commit made on `ref` (for a deleted branch, its head when it was deleted)."""
    rows = db.table(COMMITS).rows_where("ref = ?", [ref], select="hash", order_by="rowid desc", limit=1)
    return next((r["hash"] for r in rows), None)


# From `start` back through the parents, at most `depth` commits; with `own` set, the walk goes on only while the
# commit it stands on is one of that ref's (so it ends with the first commit that is not).
_HISTORY = """
    WITH RECURSIVE chain(hash, depth) AS (
        SELECT ?, 0
        UNION ALL
        SELECT c.parent, chain.depth + 1 FROM catalog_commits c JOIN chain ON c.hash = chain.hash
        WHERE c.parent IS NOT NULL AND chain.depth + 1 < ? AND (? IS NULL OR c.ref = ?)
    )
    SELECT c.* FROM chain JOIN catalog_commits c ON c.hash = chain.hash {where} ORDER BY chain.depth {limit}
"""


def history(db: sqlite_utils.Database, start: str, depth: int = 1_000_000, *, own: str | None = None,
            where: str = "", args: Sequence[Any] = (), limit: int | None = None) -> list[Commit]:
    """Commits from `start` back through its parents, newest first; `where` (on `c`, the commit) filters them."""
    sql = _HISTORY.format(where=f"WHERE {where}" if where else "", limit=f"LIMIT {int(limit)}" if limit else "")
    return [_commit(row) for row in db.query(sql, [start, depth, own, own, *args])]
