"""PyIceberg's SqlCatalog for one ref: it loads and commits that ref's tables, unchanged but for two things.

It runs on the process's one engine for the file (db.sqlalchemy_engine), and it refuses to write on a ref that no
longer exists. A ref is a `catalog_name` of PyIceberg's own tables (catalog/iceberg_rows.py), so nothing else of
SqlCatalog needs to change.
"""

from __future__ import annotations

from typing import Any, Callable

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from sqlalchemy import Engine


class RefCatalog(SqlCatalog):
    """A SqlCatalog for ref `name` that uses the shared `engine`; `require_ref(name)` raises RAT-CAT-002 when the
    ref is gone.

    SqlCatalog.__init__ always creates a private engine; we skip it so one engine (one pool, every connection
    with WAL and the busy timeout) serves every ref of the file.
    """

    def __init__(self, name: str, engine: Engine, require_ref: Callable[[str], None], **properties: str):
        MetastoreCatalog.__init__(self, name, **properties)
        self.engine = engine
        self._require_ref = require_ref
        self._init_catalog()  # detects the (already created) v1 schema; creates nothing

    def commit_table(self, table: Table, requirements: Any, updates: Any) -> Any:
        # A writer still holding a table of a deleted branch gets a clear RAT-CAT-002 (PyIceberg alone would
        # raise CommitFailedException "current table metadata is missing").
        self._require_ref(self.name)
        return super().commit_table(table, requirements, updates)

    def create_table(self, identifier: Any, schema: Any, *args: Any, **kwargs: Any) -> Table:
        # Without this, creating a table through a catalog object of a deleted branch would insert a row under
        # the dead catalog name.
        self._require_ref(self.name)
        return super().create_table(identifier, schema, *args, **kwargs)

    def close(self) -> None:
        """The engine is shared with the other refs: never dispose it from here."""
