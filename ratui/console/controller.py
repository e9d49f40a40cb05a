"""The console's view of the engine: every call that touches SQLite, files, the catalog or Spark.

Every method here may block, so the App calls them from thread workers (or they start their own daemon thread),
never from the event loop. Engine events are queued here on the emitting thread and handed to the App in
batches: `drain()` returns everything that arrived since the last call, so a burst of progress becomes one
message and one repaint (coalescing).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ratui.engine.errors import RatuiError
from ratui.engine.events import Event, RunQueued

if TYPE_CHECKING:
    from ratui.engine.project.compiler import CompiledProject

# The console imports no heavy engine module (PyIceberg, SQLAlchemy, PySpark) before its first paint: those load
# in the boot worker. Hence these two copies: importing ratui.engine.catalog loads PyIceberg.
MAIN = "main"  # ratui.engine.catalog.base.MAIN
RUN_STATUSES = ("pending", "running", "success", "failed", "cancelled", "skipped")  # ratui.engine.history

Clock = Callable[[], float]
Now = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class RunFilter:
    """What `/` on the Runs screen typed: `status:failed pipeline:orders some text` (bare statuses work too)."""

    pipeline: str | None = None
    status: str | None = None
    text: str | None = None

    @classmethod
    def parse(cls, query: str) -> "RunFilter":
        pipeline = status = None
        words: list[str] = []
        for token in query.split():
            key, sep, value = token.partition(":")
            key = key.lower()
            if sep and key in ("status", "s") and value:
                status = value.lower()
            elif sep and key in ("pipeline", "p") and value:
                pipeline = value
            elif not sep and token.lower() in RUN_STATUSES:
                status = token.lower()
            else:
                words.append(token)
        return cls(pipeline, status, " ".join(words) or None)

    @property
    def active(self) -> bool:
        return bool(self.pipeline or self.status or self.text)

    def describe(self) -> str:
        parts = []
        if self.status:
            parts.append(f"status:{self.status}")
        if self.pipeline:
            parts.append(f"pipeline:{self.pipeline}")
        if self.text:
            parts.append(self.text)
        return " ".join(parts)


@dataclass(frozen=True)
class RunsPage:
    rows: list[dict[str, Any]]
    total: int
    page: int
    size: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))


@dataclass(frozen=True)
class TableState:
    """One table on one ref: its current snapshot and row count."""

    snapshot_id: int | None
    sequence: int | None
    rows: int | None

    def describe(self) -> str:
        if self.snapshot_id is None:
            return "empty"
        rows = f"{self.rows:,} rows" if self.rows is not None else "? rows"
        return f"#{self.sequence} {str(self.snapshot_id)[:10]} · {rows}"


@dataclass(frozen=True)
class BranchRow:
    name: str
    head: str
    created_at: str
    run_id: str | None
    tables: int


@dataclass(frozen=True)
class DiffRow:
    table: str
    change: str  # added | modified | dropped | (main's own listing: "table")
    conflict: bool
    branch: TableState | None
    main: TableState | None


@dataclass
class Batch:
    """Several runs started together (`x+`, run all): one after another, in dependency order."""

    id: str
    keys: list[str]
    full_refresh: bool
    cancelled: threading.Event = field(default_factory=threading.Event)
    current: str | None = None  # run id in flight
    run_ids: list[str] = field(default_factory=list)  # every run it queued, in order
    results: list[Any] = field(default_factory=list)
    done: bool = False


class _StopBatch(Exception):
    pass


class Controller:
    def __init__(self, root: Path, *, clock: Clock = time.monotonic, now: Now = utc_now):
        self.root = Path(root)
        self.clock = clock
        self.now = now
        self.settings = None  # set by boot()
        self.history = None  # set by boot(): the run history, readable before the engine is open
        self.engine = None  # set by open_engine()
        self._engine_ready = threading.Event()
        self._engine_error: BaseException | None = None
        self._queue: deque[tuple[Event, str | None, float, str]] = deque()
        self._lock = threading.Lock()
        self._pending = False
        self._notify: Callable[[], None] = lambda: None
        self._on_batch_done: Callable[[Batch], None] = lambda batch: None
        self._unsubscribe: Callable[[], None] | None = None
        self._local = threading.local()
        self.batches: dict[str, Batch] = {}
        self.watcher = None  # the watch toggle's Watcher, made on first use

    # ------------------------------------------------------------------------------------------- life

    def boot(self, notify: Callable[[], None], on_batch_done: Callable[[Batch], None]) -> "CompiledProject":
        """The light half of opening a project: settings, run history and the compiled project (what the
        Pipelines screen needs). Blocking; `open_engine()` does the rest."""
        from ratui.engine.project.compiler import compile_project
        from ratui.engine.state.history import History
        from ratui.engine.project.settings import load_settings

        self._notify = notify
        self._on_batch_done = on_batch_done
        if self.settings is None:
            self.settings = load_settings(self.root)
        if self.history is None:
            self.history = History(self.settings.db_path)
        return compile_project(self.root, self.settings)

    def open_engine(self) -> None:
        """The heavy half: the engine with its branch catalog (PyIceberg, SQLAlchemy) and event bus. Blocking."""
        try:
            if self.engine is None:
                from ratui.engine.run.engine import Engine

                engine = Engine(self.root, settings=self.settings)
                self._unsubscribe = engine.bus.subscribe(self._on_event)
                engine.start_monitor()  # a run whose process died shows as failed within seconds
                self.engine = engine
        except BaseException as exc:
            self._engine_error = exc
            raise
        finally:
            self._engine_ready.set()

    def require_engine(self, timeout: float = 120.0):
        """The engine, waiting for open_engine() if it is still opening (call from a worker thread)."""
        if self.engine is None:
            self._engine_ready.wait(timeout)
            if self.engine is None:
                raise self._engine_error or RatuiError("RAT-RUN-002", "the engine did not open in time")
        return self.engine

    def close(self) -> None:
        if self.watcher is not None:  # never wait on the event loop: its threads end on their own
            try:
                self.watcher.stop(timeout=0)
            except Exception:
                pass
        if self._unsubscribe:
            self._unsubscribe()
            self._unsubscribe = None

    # ----------------------------------------------------------------------------------------- events

    def _on_event(self, event: Event) -> None:
        """Called on the engine's threads: queue and, if the App has not been told yet, tell it once."""
        batch = getattr(self._local, "batch", None)
        if batch is not None and isinstance(event, RunQueued) and batch in self.batches:
            self.batches[batch].current = event.run_id
            self.batches[batch].run_ids.append(event.run_id)
        item = (event, batch, self.clock(), self.now().strftime("%H:%M:%S"))
        with self._lock:
            self._queue.append(item)
            if self._pending:
                return
            self._pending = True
        self._notify()

    def drain(self) -> list[tuple[Event, str | None, float, str]]:
        with self._lock:
            items = list(self._queue)
            self._queue.clear()
            self._pending = False
        return items

    # ------------------------------------------------------------------------------------------- runs

    def compile(self) -> "CompiledProject":
        from ratui.engine.project.compiler import compile_project

        return compile_project(self.root, self.settings)

    def start(self, key: str, *, full_refresh: bool = False) -> str:
        return self.require_engine().start(key, trigger="console", full_refresh=full_refresh)

    def start_batch(self, keys: list[str], *, full_refresh: bool = False) -> Batch:
        """Run `keys` in order in a daemon thread (a pipeline whose upstream failed is skipped). Returns at once."""
        batch = Batch(uuid.uuid4().hex[:8], list(keys), full_refresh)
        self.batches[batch.id] = batch
        thread = threading.Thread(target=self._run_batch, args=(batch,), name=f"ratui-batch-{batch.id}",
                                  daemon=True)
        thread.start()
        return batch

    def _run_batch(self, batch: Batch) -> None:
        self._local.batch = batch.id

        def on_result(result) -> None:
            batch.results.append(result)
            batch.current = None
            if batch.cancelled.is_set():
                raise _StopBatch()

        try:
            self.require_engine().run(batch.keys, trigger="console", full_refresh=batch.full_refresh, on_result=on_result)
        except _StopBatch:
            pass
        except Exception as exc:  # recorded for the App; never raised on a daemon thread
            batch.results.append(exc)
        finally:
            batch.current = None
            batch.done = True
            self._local.batch = None
            self._on_batch_done(batch)

    def batch_of(self, run_id: str) -> Batch | None:
        """The unfinished batch this run belongs to."""
        for batch in self.batches.values():
            if not batch.done and run_id in batch.run_ids:
                return batch
        return None

    def cancel(self, run_id: str, *, whole_batch: bool = True) -> str:
        """Cancel the run; a run of a batch stops the batch too (its run in flight now, and the rest unstarted)."""
        batch = self.batch_of(run_id) if whole_batch else None
        outcome = self.require_engine().cancel(run_id)
        if batch is not None:
            batch.cancelled.set()
            current = batch.current
            if current and current != run_id:
                self.engine.cancel(current)
                outcome = "requested"
        return outcome

    def cancel_all(self, timeout: float = 10.0) -> None:
        for batch in self.batches.values():
            batch.cancelled.set()
        active = self.engine.active_runs() if self.engine else []
        for run_id in active:
            self.engine.cancel(run_id)
        deadline = time.monotonic() + timeout
        for run_id in active:
            self.engine.wait(run_id, max(0.0, deadline - time.monotonic()))

    def prewarm_spark(self) -> None:
        from ratui.engine.spark import session as spark_mod

        self.require_engine()
        spark_mod.get_spark(self.settings)

    # ---------------------------------------------------------------------------------------- history

    def recent(self, per_pipeline: int = 12) -> dict[str, list[dict[str, Any]]]:
        return self.history.recent_by_pipeline(per_pipeline)

    def runs_page(self, page: int, size: int, flt: RunFilter) -> RunsPage:
        history = self.history
        total = history.count_runs(pipeline=flt.pipeline, status=flt.status, text=flt.text)
        pages = max(1, -(-total // size))
        page = max(0, min(page, pages - 1))
        rows = history.list_runs(size, page * size, pipeline=flt.pipeline, status=flt.status, text=flt.text)
        return RunsPage(rows, total, page, size)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        return self.history.get_run(run_id)

    def quality(self, run_id: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
        """Quality results of one run, or across recent runs; each with its pipeline."""
        if run_id:
            run = self.history.get_run(run_id)
            if not run:
                raise RatuiError("RAT-RUN-004", f"no run '{run_id}'")
            return [dict(q, pipeline=run["pipeline"]) for q in run["quality"]]
        return self.history.quality_results(limit)

    # --------------------------------------------------------------------------------------- branches

    def branches(self) -> list[BranchRow]:
        catalog = self.require_engine().catalog
        return [BranchRow(r.name, r.head, r.created_at, r.run_id, len(catalog.table_pointers(r.name)))
                for r in catalog.list_refs()]

    def _table_state(self, ref: str, key: str) -> TableState:
        try:
            table = self.require_engine().catalog.load_table(ref, key)
        except RatuiError:
            return TableState(None, None, None)
        snap = table.current_snapshot()
        if snap is None:
            return TableState(None, None, 0)
        total = None
        summary = snap.summary
        if summary is not None:
            value = summary.additional_properties.get("total-records") if hasattr(summary, "additional_properties") \
                else None
            if value is None:
                try:
                    value = summary["total-records"]
                except (KeyError, TypeError):
                    value = None
            total = int(value) if value is not None else None
        return TableState(snap.snapshot_id, snap.sequence_number, total)

    def diff(self, ref: str) -> list[DiffRow]:
        """What `ref` changed since it forked from main, with snapshot and rows on each side. For main itself:
        its tables."""
        catalog = self.require_engine().catalog
        if ref == MAIN:
            return [DiffRow(key, "table", False, None, self._table_state(MAIN, key))
                    for key in sorted(catalog.table_pointers(MAIN))]
        rows = []
        for change in catalog.diff(ref):
            branch = self._table_state(ref, change.table) if change.branch_location else None
            main = self._table_state(MAIN, change.table) if change.main_location else None
            rows.append(DiffRow(change.table, change.change, change.conflict, branch, main))
        return rows

    def merge_preview(self, ref: str):
        return self.require_engine().catalog.merge(ref, dry_run=True)

    def merge(self, ref: str):
        return self.require_engine().catalog.merge(ref, message=f"console: merge {ref} into main")

    def delete_branch(self, ref: str) -> None:
        self.require_engine().catalog.delete_branch(ref)

    # ---------------------------------------------------------------------------------------- landing

    def _ledger(self):
        if self.engine is not None:
            return self.engine.ledger
        from ratui.engine.state.ledger import Ledger

        ledger = getattr(self, "_own_ledger", None)
        if ledger is None:  # the ledger is plain SQLite: no need to wait for the engine (catalog) to open
            ledger = self._own_ledger = Ledger(self.settings.db_path, self.settings.landing_max_attempts)
        return ledger

    def landing_files(self) -> list:
        """Every landing file of the project's namespace, per zone and consuming pipeline (LandingFile)."""
        return self._ledger().files(self.settings.namespace)

    def landing_reset(self, zone: str, file: str | None = None, pipeline: str | None = None) -> int:
        return self._ledger().reset(self.settings.namespace, zone, file=file, pipeline=pipeline)

    # ----------------------------------------------------------------------------------------- reaper

    def reaper_settings(self) -> dict[str, int]:
        from ratui.engine.project.settings import REAPER_KEYS

        return {key: getattr(self.settings, f"reaper_{key}") for key in REAPER_KEYS}

    def _reaper(self):
        from ratui.engine.ops.reaper import Reaper

        return Reaper(self.require_engine())

    def reaper_reports(self, limit: int = 20) -> list:
        return self._reaper().reports(limit)

    def reaper_run(self, dry_run: bool) -> Any:
        return self._reaper().run(dry_run=dry_run)

    # ------------------------------------------------------------------------------------------ watch

    def make_watcher(self, on_event: Callable[[Any], None]):
        """A Watcher on the console's engine: its runs go through the engine's bus like any other run."""
        from ratui.engine.ops.watch import Watcher

        return Watcher(engine=self.require_engine(), on_event=on_event)

    def start_watch(self, on_event: Callable[[Any], None], timeout: float = 10.0) -> str:
        if self.watcher is None:
            self.watcher = self.make_watcher(on_event)
        self.watcher.start(timeout=timeout)
        return self.watcher.state

    def stop_watch(self, timeout: float = 30.0) -> str:
        if self.watcher is not None:
            self.watcher.stop(timeout=timeout)
        return "off"
