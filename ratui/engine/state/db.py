"""The project's state database (`.ratui/ratui.db`): connections, the shared SQLAlchemy engine, write transactions.

Every module that keeps state (catalog, run history, landing ledger, reaper reports) opens the same SQLite file
through here, so they all get the same settings:

- WAL journal mode: readers never block the single writer, and a reader never sees a half-done write.
- busy_timeout 30 s: a writer waits for another writer (thread or process) instead of failing at once.
- foreign keys on.
- `sqlite3` connections are in autocommit mode (`isolation_level=None`): Python's sqlite3 module would otherwise
  open *deferred* transactions implicitly, and a deferred transaction that reads and then writes can fail with
  SQLITE_BUSY without waiting (its read snapshot is stale). Writers use `write_tx`, which starts with
  `BEGIN IMMEDIATE` and so takes the write lock up front, honouring the busy timeout.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # SQLAlchemy is only needed for PyIceberg's catalog: import it when an engine is made
    import sqlalchemy

BUSY_TIMEOUT_MS = 30_000


class _HiddenFromThisThread:
    """A meta-path finder that makes `import NAME` fail (for NAME and its submodules) in one thread only, while it
    is installed; other threads import as usual."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.thread = threading.get_ident()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if threading.get_ident() == self.thread and fullname.split(".", 1)[0] in self.names:
            raise ImportError(f"{fullname} is not imported while sqlite-utils is", name=fullname)
        return None


def _import_sqlite_utils():
    """sqlite-utils, imported without pandas and numpy when nothing has imported them yet: it imports them only to
    map their types, which ratui never hands it, and pandas alone costs about half a second of every command's
    start (pyspark installs it). Only this thread's imports are refused meanwhile (a finder, not a None in
    sys.modules, which every thread would see); whatever imports pandas later gets it as usual."""
    import sys

    hidden = tuple(name for name in ("pandas", "numpy") if name not in sys.modules)
    finder = _HiddenFromThisThread(hidden)
    sys.meta_path.insert(0, finder)
    try:
        import sqlite_utils
    finally:
        sys.meta_path.remove(finder)
    return sqlite_utils


sqlite_utils = _import_sqlite_utils()

_engines: dict[Path, "sqlalchemy.Engine"] = {}
_engines_lock = threading.Lock()


def _configure(conn: Any) -> None:
    """Per-connection settings. busy_timeout first, so switching to WAL waits for a lock if it must."""
    cur = conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA journal_mode = WAL")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


def open_db(path: Path) -> sqlite3.Connection:
    """A new autocommit connection to the state database at `path`, creating its folder if needed.

    Usable from any thread, but one connection holds one transaction at a time: give each thread (or each
    short unit of work) its own connection.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    _configure(conn)
    return conn


@contextmanager
def schema_lock(path: Path) -> Iterator[None]:
    """Held while a process creates or migrates the state database's tables: processes that open a fresh database
    at once take turns (SQLite refuses, without waiting, a connection that read the schema and then writes it while
    another does the same: "database is locked"). An advisory lock on a file beside the database; where that file
    cannot be made (a read-only folder) or locked (a file system without locks) nothing is locked. Not reentrant:
    never taken twice by one thread."""
    import fcntl

    lock = Path(path).with_name(Path(path).name + ".schema-lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without locks (some network ones): as before, unlocked
            pass
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextmanager
def write_tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` if the block raises. Keep the block short."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def sqlalchemy_engine(path: Path) -> "sqlalchemy.Engine":
    """The one SQLAlchemy engine of this process for the database at `path` (cached by absolute path).

    PyIceberg's SqlCatalog works through it; one engine per file keeps a single connection pool and makes sure
    every pooled connection has the busy timeout and WAL mode.
    """
    import sqlalchemy
    from sqlalchemy import event

    key = Path(path).resolve()
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            key.parent.mkdir(parents=True, exist_ok=True)
            engine = sqlalchemy.create_engine(
                f"sqlite:///{key}",
                connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
            )
            event.listen(engine, "connect", lambda dbapi_conn, _record: _configure(dbapi_conn))
            _engines[key] = engine
        return engine
