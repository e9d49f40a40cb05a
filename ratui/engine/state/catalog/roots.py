"""The `project_roots` table: every folder the project has lived at.

Iceberg metadata stores absolute paths, so a project that was copied or moved still names its files under an
earlier root; locations.ProjectLocations maps those paths to its own files, and needs to know which roots were the
project's. Owned here, as every SQLite table is owned by one module of state/; written through sqlite-utils inside
the catalog's opening transaction.
"""

from __future__ import annotations

from ratui.engine.locations import plain_path
from ratui.engine.state.catalog.records import now
from ratui.engine.state.db import sqlite_utils

ROOTS = "project_roots"


def create_table(db: sqlite_utils.Database) -> None:
    db.table(ROOTS).create({"root": str, "first_seen": str}, pk="root", not_null={"first_seen"}, if_not_exists=True)


def record(db: sqlite_utils.Database, root: str) -> list[str]:
    """Add `root` to the project's roots; returns the earlier ones. A database with no roots yet (a new one, or one
    from before project_roots existed) first gets those its tables' metadata locations imply."""
    table = db.table(ROOTS)
    if not any(table.rows_where(select="1", limit=1)):
        table.insert_all(({"root": r, "first_seen": now()} for r in _implied(db)), ignore=True)
    table.insert({"root": root, "first_seen": now()}, ignore=True)
    return [r["root"] for r in table.rows_where("root != ?", [root], select="root")]


def _implied(db: sqlite_utils.Database) -> set[str]:
    """Roots implied by ratui's own layout, {root}/{ns}/warehouse/{layer}/{name}/metadata/..., of the stored
    metadata locations (only where the path matches the row's own table key)."""
    found: set[str] = set()
    for row in db.table("iceberg_tables").rows_where(
            "metadata_location IS NOT NULL", select="table_namespace, table_name, metadata_location"):
        path = plain_path(row["metadata_location"]) or ""
        namespace, _, layer = row["table_namespace"].rpartition(".")
        marker = f"/{namespace}/warehouse/{layer}/{row['table_name']}/metadata/"
        at = path.find(marker)
        if namespace and at > 0:
            found.add(path[:at])
    return found
