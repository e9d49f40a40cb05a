"""The console's one door to the engine: every call that touches SQLite, files, the catalog or Spark.

Every method here may block, so the App calls them from thread workers, never from the event loop. Everything
that happens on other threads (engine events, watch events, Spark's state, a batch ending) is queued on the thread
where it happens and handed over by `drain()`, one burst at a time (pump.py). The Controller is one object made of
its jobs: its life (boot, the engine, close) here; the queue (pump.py); what it changes or starts (operations.py);
what it reads (reads.py); the Query screen's results (queries.py). The values it hands over are in records.py and
pump.py; the names the screens and tests import stay reachable from here. This module imports no Textual.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ratui.console.data import QueryHistory
from ratui.console.follow import Follower
from ratui.console.operations import READ_ONLY_CODE, Operations, Serving, read_only_refusal
from ratui.console.pump import Batch, BatchItem, EngineItem, EventQueue, Item, SparkItem, WatchItem
from ratui.console.queries import QuerySessions
from ratui.console.reads import Reads
from ratui.console.records import RESERVED_PREFIXES, BranchRow, DiffRow, RunFilter, RunsPage, TableState, ref_kind
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import ACTIVE, MAIN

if TYPE_CHECKING:
    from ratui.engine.project.compiler import CompiledProject
    from ratui.engine.facade.engine import Engine

__all__ = [
    "Batch", "BatchItem", "BranchRow", "Controller", "DiffRow", "EngineItem", "Item", "READ_ONLY_CODE",
    "RESERVED_PREFIXES", "RunFilter", "RunsPage", "Serving", "SparkItem", "TableState", "WatchItem",
    "read_only_refusal",
    "ref_kind", "utc_now",
]


Clock = Callable[[], float]
Now = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Controller(EventQueue, Operations, Reads, QuerySessions):
    """The console's controller: one per App (and per test that drives one). Its state lives here; its methods
    live with their jobs in the mixins it is made of."""

    def __init__(self, root: Path, *, clock: Clock = time.monotonic, now: Now = utc_now, read_only: bool = False):
        self.root = Path(root)
        self.read_only = read_only  # refuse everything that changes the project (runs, merges, resets, ...)
        self.clock = clock
        self.now = now
        self.settings = None  # set by boot()
        self.engine: "Engine | None" = None  # set by boot() (light: the catalog opens on first use)
        self._engine_ready = threading.Event()
        self._engine_error: BaseException | None = None
        self._queue: deque[Item] = deque()
        self._lock = threading.Lock()
        self._pending = False
        self._notify: Callable[[], None] = lambda: None
        self._unsubscribe: list[Callable[[], None]] = []
        self._batch_of_run: dict[str, str] = {}
        self.batches: dict[str, Batch] = {}
        self.watcher = None  # the watch toggle's Watcher, made on first use
        self.rest_server = None  # the Iceberg REST catalog served to other engines (start_serving), when on
        self.follower: Follower | None = None  # other processes' commits and the project tree (follow.py)
        self._queries: dict[str, Any] = {}  # query id -> its QueryResult on Spark (the Query screen's)
        self.query_history = QueryHistory(self.root)
        self.ref = MAIN  # the working ref: the console's runs fork from it and merge into it (Branches switches)
        self.shell_serving = None  # the shell's commands served by this console (ratui/warm/hosted.py), once open

    # -------------------------------------------------------------------------------------------- life

    def boot(self, notify: Callable[[], None]) -> "CompiledProject":
        """Open the project: settings, the engine (its history, ledger and event bus; the catalog waits for its
        first use) and the compiled project, which is what the Pipelines screen needs. Blocking."""
        from ratui.engine.facade.engine import Engine
        from ratui.engine.project.settings import load_settings
        from ratui.engine.spark import session as spark_mod

        self._notify = notify
        try:
            if self.settings is None:
                self.settings = load_settings(self.root)
            if self.engine is None:
                engine = Engine.open(self.root, self.settings)
                self._unsubscribe.append(engine.subscribe(self._on_event))
                self._unsubscribe.append(spark_mod.on_state(lambda state: self._post(SparkItem(state))))
                self.engine = engine
        except BaseException as exc:
            self._engine_error = exc
            raise
        finally:
            self._engine_ready.set()
        return self.compile()

    def open_engine(self) -> None:
        """The heavy half, after the first screen has its data: the catalog (PyIceberg, SQLAlchemy), crash
        recovery, and the monitor that notices a dead run of any process within seconds. Blocking."""
        engine = self.require_engine()
        engine.recover()
        engine.start_monitor()
        engine.refs()  # opens the catalog now rather than on the first click
        if self.follower is None:
            catalog = engine.state.catalog  # a shared server is followed too (another client's commits)
            token = catalog.change_token if catalog.change_token() is not None else None
            self.follower = Follower(self.root, engine.settings.db_path, self._post, self.others_active,
                                     token).start()
        if self.shell_serving is None and not self.read_only:  # a read-only console runs nobody's writes
            from ratui.warm.hosted import ShellServing

            self.shell_serving = ShellServing(self.root, self.require_engine).start()

    def others_active(self) -> int:
        """Runs in flight in other processes (a CLI run, watch, another console)."""
        import os

        engine = self.require_engine()
        return sum(1 for r in engine.state.history.runs_in(ACTIVE) if r.get("pid") != os.getpid())

    def require_engine(self, timeout: float = 120.0) -> "Engine":
        """The engine, waiting for boot() if it is still opening (call from a worker thread)."""
        if self.engine is None:
            self._engine_ready.wait(timeout)
            if self.engine is None:
                raise self._engine_error or RatuiError("RAT-RUN-002", "the engine did not open in time")
        return self.engine

    def close(self) -> None:
        for query_id in list(self._queries):
            try:
                self.close_query(query_id)
            except Exception:  # a Spark already gone: nothing to release
                pass
        if self.follower is not None:
            self.follower.stop()
        if self.watcher is not None:  # never wait on the event loop: its threads end on their own
            try:
                self.watcher.stop(timeout=0)
            except Exception:
                pass
        if self.shell_serving is not None:  # no new shell command; those in flight are cancelled (finish_serving)
            self.shell_serving.stop()
        if self.rest_server is not None:  # stopping waits for requests in flight: never on the event loop
            threading.Thread(target=self.stop_serving, name="ratui-serve-stop", daemon=True).start()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        if self.engine is not None:
            self.engine.stop_monitor()

    def shell_commands(self) -> list[str]:
        """The shell's commands this console runs now (`ratui watch`, a `ratui run`): quitting stops them."""
        return self.shell_serving.commands() if self.shell_serving is not None else []

    def stop_for_quit(self, timeout: float = 15.0) -> None:
        """Quitting with work in flight: the shell's commands served here are stopped (as Ctrl-C would in their
        own terminal) and waited for, then the console's runs are cancelled. Blocking."""
        if self.shell_serving is not None:
            self.shell_serving.stop()
            self.shell_serving.wait(timeout)
        self.cancel_all()

    def finish_serving(self) -> None:
        """Once the console's screen is gone: the shell's commands it was serving end (cancelled by close()), their
        last words on their own terminals. Blocking, bounded."""
        if self.shell_serving is not None:
            self.shell_serving.wait()

    def compile(self) -> "CompiledProject":
        return self.require_engine().compile()

    def column_lineage(self, compiled: "CompiledProject", key: str, column: str | None = None) -> tuple[Any, Any]:
        """Column lineage, read from the compiled SQL (and the landing files' headers, a Python pipeline's table):
        (the table's columns with their sources, and with `column` that column's path both ways, else None).
        Computed once per compile (the engine keeps it). Blocking."""
        lineage = self.require_engine().column_lineage(compiled)
        table = lineage.table(key)
        return table, (lineage.column_path(key, column) if column and table.column_level else None)
