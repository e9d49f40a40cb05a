"""A project's state, opened once: its settings, the branch catalog, the run history and the landing ledger.

All of it lives in the project's one SQLite database (.ratui/ratui.db); the catalog and the ledger share it so a
merge and "these landing files are loaded" commit in one transaction. A project whose ratui.yaml names a Nessie
server (`catalog: {type: nessie, ...}`, catalog/config.py) keeps its catalog there instead; the ledger stays here.
The engine is built on one ProjectState; the reaper, change detection and ad-hoc queries read it. Settings change in
one place (`apply_settings`), so no part keeps using old ones.

The catalog opens on first use: it loads PyIceberg and SQLAlchemy (about a second), which commands that only read
the run history or the ledger (`ratui runs`, `ratui cancel`, `ratui landing`) never pay for.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ratui.engine.project.settings import Settings, load_settings
from ratui.engine.state.history import History
from ratui.engine.state.journal import Journal
from ratui.engine.state.ledger import Ledger

if TYPE_CHECKING:
    from ratui.engine.state.catalog.base import BranchCatalog, Ref


def embedded_pointers(db: Any, ref: str) -> dict[str, str] | None:
    from ratui.engine.state.catalog import iceberg_rows, records
    from ratui.engine.state.catalog.base import split_spec

    if split_spec(ref)[1] is not None:
        return None
    records.ref(db, ref)  # RAT-CAT-002 if the branch is not there: the catalog says so itself
    return iceberg_rows.of(db, ref)


def embedded_ref(db: Any, name: str) -> "Ref | None":
    from ratui.engine.state.catalog import records
    from ratui.engine.state.catalog.base import split_spec

    if split_spec(name)[1] is not None:
        return None
    return records.ref(db, name)


class ProjectState:
    def __init__(self, settings: Settings, *, catalog: "BranchCatalog | None" = None,
                 history: History | None = None, ledger: Ledger | None = None):
        self.settings = settings
        self.history = history or History(settings.db_path)
        self.ledger = ledger or Ledger(settings.db_path, settings.landing_max_attempts)
        self._catalog = catalog
        self._journal: Journal | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(cls, settings: Settings) -> "ProjectState":
        return cls(settings)

    @classmethod
    def at(cls, root: Path) -> "ProjectState":
        return cls(load_settings(root))

    @property
    def root(self) -> Path:
        return self.settings.root

    @property
    def catalog(self) -> "BranchCatalog":
        if self._catalog is None:
            # imported before the lock is taken: a thread holding a lock while it imports can deadlock with a
            # thread that holds an import lock (its own first imports) and then waits for this lock
            from ratui.engine.state.catalog.config import catalog_config, catalog_opener

            opener = catalog_opener(catalog_config(self.settings.catalog or None,
                                                   file=str(self.settings.root / "ratui.yaml")))
            with self._lock:
                if self._catalog is None:
                    self._catalog = opener(self.settings.db_path, self.settings.root, self.settings.allow_outside)
        return self._catalog

    @property
    def journal(self) -> Journal:
        """The operation journal (what `ratui undo` reverses), opened on first use."""
        if self._journal is None:
            self._journal = Journal(self.settings.db_path)
        return self._journal

    def table_pointers(self, ref: str) -> dict[str, str]:
        """The ref's table key -> metadata location map: the catalog's answer. Before the catalog is open, the
        embedded catalog's rows are read directly (PyIceberg and SQLAlchemy are not loaded for it: a no-op
        `ratui run` decides 1,500 pipelines in less time than those imports take)."""
        found = self._embedded_read(lambda db: embedded_pointers(db, ref))
        return found if found is not None else self.catalog.table_pointers(ref)

    def get_ref(self, name: str) -> "Ref":
        """The live ref `name` (RAT-CAT-002 if there is none), read like table_pointers()."""
        found = self._embedded_read(lambda db: embedded_ref(db, name))
        return found if found is not None else self.catalog.get_ref(name)

    def _embedded_read(self, read: Callable[[Any], Any]) -> Any:
        """read(db) in one read transaction of the embedded catalog's own rows, when the catalog is the embedded
        one and not open yet; None when it cannot answer so (a past state "ref@HASH", a database the catalog has
        not set up or migrated yet, a ref that is not there: the catalog itself answers, with its errors)."""
        if self._catalog is not None or self.settings.catalog or not self.settings.db_path.is_file():
            return None
        from ratui.engine.state.db import open_db, sqlite_utils

        try:
            conn = open_db(self.settings.db_path)
            try:
                conn.execute("BEGIN")
                return read(sqlite_utils.Database(conn))
            finally:
                conn.close()
        except Exception:
            return None

    def apply_settings(self, settings: Settings) -> None:
        """ratui.yaml changed (watch reloads it): every part follows."""
        self.settings = settings
        self.ledger.max_attempts = settings.landing_max_attempts
        if self._catalog is not None:
            self._catalog.allow_outside(settings.allow_outside)

    def close(self) -> None:
        self.history.close()
