"""PyIceberg's own tables, read and written as the refs' table pointers.

Every ref is a `catalog_name` in PyIceberg's `iceberg_tables` and `iceberg_namespace_properties` (SqlCatalog's v1
schema, created here inside our transaction), and a ref's `iceberg_tables` rows ARE its pointers: table key ->
metadata location. PyIceberg's SqlCatalog moves a pointer when it commits a table; this module does what it has no
call for: copying a ref's rows to a new branch, dropping them, setting a pointer back (a rollback) and applying a
merge's changes.

A merge's changes stay hand-written SQL: each is an UPDATE or DELETE guarded by the location the change was
computed from (compare-and-swap) and judged by how many rows it touched, and a branch's copy is one
INSERT ... SELECT; sqlite-utils addresses a row by its primary key alone, with no guard to swap on. Plain reads,
deletes and inserts go through its Table API, inside the caller's transaction (as savepoints).
"""

from __future__ import annotations

import sqlite3

from ratui.engine.state.catalog.base import Pointer, TableChange, split_key
from ratui.engine.state.db import sqlite_utils

TABLES = "iceberg_tables"
NAMESPACES = "iceberg_namespace_properties"

# A table row of PyIceberg's v1 schema; NULL iceberg_type is a table written before views existed.
_TABLE_ROWS = "iceberg_type = 'TABLE' OR iceberg_type IS NULL"


def create_tables(db: sqlite_utils.Database) -> None:
    """PyIceberg's own DDL (v1 schema) as `CREATE TABLE IF NOT EXISTS`, so it can run inside our transaction.

    SqlCatalog would create these itself with a check-then-create that races between processes.
    """
    from pyiceberg.catalog.sql import SqlCatalogBaseTable  # only here: a plain read needs neither (project_state)
    from sqlalchemy.dialects import sqlite as sqlite_dialect
    from sqlalchemy.schema import CreateTable

    dialect = sqlite_dialect.dialect()
    for table in SqlCatalogBaseTable.metadata.sorted_tables:
        db.execute(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))


def of(db: sqlite_utils.Database, ref: str) -> dict[str, str]:
    """The ref's table pointers (views left out)."""
    rows = db.table(TABLES).rows_where(
        f"catalog_name = ? AND metadata_location IS NOT NULL AND ({_TABLE_ROWS})", [ref],
        select="table_namespace, table_name, metadata_location")
    return {f"{r['table_namespace']}.{r['table_name']}": r["metadata_location"] for r in rows}


def every(db: sqlite_utils.Database) -> list[Pointer]:
    """Every pointer of every catalog name, views included (a row left under a deleted branch's name by a writer
    that outlived it too: erring on the side of keeping files)."""
    table = db.table(TABLES)
    if not table.exists():
        return []
    rows = table.rows_where("metadata_location IS NOT NULL", order_by="catalog_name, table_namespace, table_name")
    return [Pointer(r["catalog_name"], f"{r['table_namespace']}.{r['table_name']}", r["metadata_location"],
                    r["previous_metadata_location"], view=(r["iceberg_type"] or "TABLE").upper() == "VIEW")
            for r in rows]


def drop(db: sqlite_utils.Database, ref: str) -> None:
    """The ref's rows, never its files: they are shared with main and other branches."""
    db.table(TABLES).delete_where("catalog_name = ?", [ref])
    db.table(NAMESPACES).delete_where("catalog_name = ?", [ref])


def copy(db: sqlite_utils.Database, ref: str, source: str) -> None:
    """`ref` gets exactly `source`'s tables and namespaces: the very same metadata files (rows left under its name by
    a writer that outlived an earlier branch of the same name are dropped first)."""
    drop(db, ref)
    db.execute(
        f"INSERT INTO {TABLES} (catalog_name, table_namespace, table_name, metadata_location,"
        " previous_metadata_location, iceberg_type)"
        " SELECT ?, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type"
        f" FROM {TABLES} WHERE catalog_name = ?",
        (ref, source),
    )
    db.execute(
        f"INSERT INTO {NAMESPACES} (catalog_name, namespace, property_key, property_value)"
        f" SELECT ?, namespace, property_key, property_value FROM {NAMESPACES} WHERE catalog_name = ?",
        (ref, source),
    )


def _add_table(db: sqlite_utils.Database, ref: str, namespace: str, name: str, location: str | None) -> None:
    """A new table row; sqlite3.IntegrityError if the ref has that table already."""
    db.table(TABLES).insert({"catalog_name": ref, "table_namespace": namespace, "table_name": name,
                             "metadata_location": location, "previous_metadata_location": None,
                             "iceberg_type": "TABLE"})


def put(db: sqlite_utils.Database, ref: str, key: str, location: str | None, current: str | None) -> None:
    """Set table `key` on `ref` to `location` (None: drop it from the ref), `current` being its pointer now."""
    namespace, name = key.rsplit(".", 1)
    if location is None:
        db.table(TABLES).delete_where("catalog_name = ? AND table_namespace = ? AND table_name = ?",
                                      [ref, namespace, name])
    elif current is not None:
        db.table(TABLES).update((ref, namespace, name), {"metadata_location": location,
                                                         "previous_metadata_location": current})
    else:
        split_key(key)
        if not any(db.table(NAMESPACES).rows_where("catalog_name = ? AND namespace = ?", [ref, namespace],
                                                   select="1", limit=1)):
            db.table(NAMESPACES).insert({"catalog_name": ref, "namespace": namespace, "property_key": "exists",
                                         "property_value": "true"})
        _add_table(db, ref, namespace, name, location)


def swap(db: sqlite_utils.Database, ref: str, into: str, change: TableChange) -> bool:
    """Apply one table's change from `ref` on `into`, guarded by the fork-point location (compare-and-swap): a plain
    overwrite would silently discard a commit the target made in the meantime. False if the guard failed."""
    namespace, name = change.table.rsplit(".", 1)
    where = "catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?"
    if change.change == "modified":
        cur = db.execute(
            f"UPDATE {TABLES} SET metadata_location = ?, previous_metadata_location = ? WHERE {where}",
            (change.branch_location, change.fork_location, into, namespace, name, change.fork_location),
        )
        return cur.rowcount == 1
    if change.change == "dropped":
        cur = db.execute(f"DELETE FROM {TABLES} WHERE {where}", (into, namespace, name, change.fork_location))
        return cur.rowcount == 1
    # added: the namespace may be new on the target too (namespaces are per catalog name)
    db.execute(
        f"INSERT INTO {NAMESPACES} (catalog_name, namespace, property_key, property_value)"
        f" SELECT ?, namespace, property_key, property_value FROM {NAMESPACES}"
        f" WHERE catalog_name = ? AND namespace = ? AND NOT EXISTS (SELECT 1 FROM {NAMESPACES}"
        " WHERE catalog_name = ? AND namespace = ?)",
        (into, ref, namespace, into, namespace),
    )
    try:
        _add_table(db, into, namespace, name, change.branch_location)
    except sqlite3.IntegrityError:
        return False
    return True
