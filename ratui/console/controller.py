"""The console's one door to the engine: every call that touches SQLite, files, the catalog or Spark.

Every method here may block, so the App calls them from thread workers, never from the event loop. Everything
that happens on other threads (engine events, watch events, Spark's state, a batch ending) is queued here as a
typed item on the thread where it happens; the App is told once per burst and `drain()` hands over everything
that arrived since the last call, so a burst of progress becomes one message and one repaint (coalescing). This
module imports no Textual.
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
from ratui.console.data import QueryHistory, QueryPage
from ratui.console.follow import Follower, StateItem
from ratui.engine.vocabulary import ACTIVE, MAIN, PUBLISH_PREFIX, RUN_PREFIX, RUN_STATUSES

if TYPE_CHECKING:
    from ratui.engine.project.compiler import CompiledProject
    from ratui.engine.run.engine import Engine
    from ratui.engine.run.invocation import Invocation


Clock = Callable[[], float]
Now = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _state_of(side: Any) -> "TableState | None":
    """The engine's TableState of one side of a diff as the console shows it (None: not on that side)."""
    if side is None or side.location is None:
        return None
    return TableState(side.snapshot_id, None, side.rows, side.files)


@dataclass(frozen=True)
class RunFilter:
    """What `/` on the Runs screen typed: `status:failed pipeline:orders some text` (bare statuses work too)."""

    pipeline: str | None = None
    status: str | None = None
    text: str | None = None
    problem: str | None = None  # what could not be understood (an unknown status): said, never silently empty

    @classmethod
    def parse(cls, query: str) -> "RunFilter":
        pipeline = status = problem = None
        words: list[str] = []
        for token in query.split():
            key, sep, value = token.partition(":")
            key = key.lower()
            if sep and key in ("status", "s") and value:
                if value.lower() in RUN_STATUSES:
                    status = value.lower()
                else:
                    problem = f"unknown status '{value}': one of {', '.join(RUN_STATUSES)}"
            elif sep and key in ("pipeline", "p") and value:
                pipeline = value
            elif not sep and token.lower() in RUN_STATUSES:
                status = token.lower()
            else:
                words.append(token)
        return cls(pipeline, status, " ".join(words) or None, problem)

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
    """One table on one ref: its current snapshot, row count and (when known) data files."""

    snapshot_id: int | None
    sequence: int | None
    rows: int | None
    files: int | None = None

    def describe(self) -> str:
        if self.snapshot_id is None:
            return "empty"
        rows = f"{self.rows:,} rows" if self.rows is not None else "? rows"
        files = f" · {self.files} file{'s' if self.files != 1 else ''}" if self.files is not None else ""
        seq = f"#{self.sequence} " if self.sequence is not None else ""
        return f"{seq}{str(self.snapshot_id)[:10]} · {rows}{files}"


RESERVED_PREFIXES = (RUN_PREFIX, PUBLISH_PREFIX)  # branches ratui keeps for runs and atomic publishes


def ref_kind(name: str) -> str:
    """main | run | publish | branch (a user's own branch: the console may work on it)."""
    if name == MAIN:
        return "main"
    if name.startswith(RUN_PREFIX):
        return "run"
    if name.startswith("publish-"):
        return "publish"
    return "branch"


@dataclass(frozen=True)
class BranchRow:
    name: str
    head: str
    created_at: str
    run_id: str | None
    tables: int

    @property
    def kind(self) -> str:
        return ref_kind(self.name)


@dataclass(frozen=True)
class DiffRow:
    table: str
    change: str  # added | modified | dropped (from the branch's side) | (main's own listing: "table")
    conflict: bool
    branch: TableState | None
    main: TableState | None
    changed_on: str = ""  # who changed it since the fork: "left" (the branch), "right" (main), "both", "" (unknown)
    schema_changes: tuple[str, ...] = ()  # main's columns -> the branch's: "+ col type", "- col", "~ ..."


@dataclass
class Batch:
    """Several runs started together (`x+`, run all): one engine invocation, one after another in dependency
    order. Its state is the invocation's."""

    id: str
    keys: list[str]
    full_refresh: bool
    invocation: "Invocation | None" = None
    results: list[Any] = field(default_factory=list)  # RunResults as each run ends
    ref: str = MAIN  # the ref its runs merge into
    atomic: bool = False  # all of them land on `ref` in one commit, or none does

    @property
    def publish(self) -> Any:
        """An atomic batch's PublishOutcome (branch, into, merged, tables, reason, commit), once it ended."""
        return getattr(self.invocation, "publish", None) if self.invocation is not None else None

    @property
    def run_ids(self) -> list[str]:
        return self.invocation.run_ids if self.invocation else []

    @property
    def current(self) -> str | None:
        return self.invocation.current if self.invocation else None

    @property
    def cancelled(self) -> bool:
        return bool(self.invocation and self.invocation.cancelled)

    @property
    def done(self) -> bool:
        return bool(self.invocation and self.invocation.done)

    @property
    def error(self) -> BaseException | None:
        return self.invocation.error if self.invocation else None


# ------------------------------------------------------------------------------ what the queue carries


@dataclass(frozen=True)
class EngineItem:
    """An engine event, with the batch its run belongs to and when it arrived (monotonic and wall clock)."""

    event: Event
    batch: str | None
    at: float
    clock_text: str


@dataclass(frozen=True)
class WatchItem:
    event: Any  # a WatchEvent of the watch toggle's Watcher


@dataclass(frozen=True)
class SparkItem:
    state: str  # starting | ready | failed


@dataclass(frozen=True)
class BatchItem:
    batch: Batch  # it ended (all its runs did, or it was cancelled)


Item = EngineItem | WatchItem | SparkItem | BatchItem | StateItem


READ_ONLY_CODE = "RAT-ACC-001"


def read_only_refusal(what: str) -> RatuiError:
    """The refusal of a read-only console (ratui tui --read-only, ratui web --read-only), naming what it refused."""
    return RatuiError(READ_ONLY_CODE, f"this console is read-only: {what} is refused",
                      hint="It was started with --read-only (ratui tui --read-only, or a ratui web server started "
                           "so): it shows the project and runs queries that read, nothing else.")


class Controller:
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
        self.follower: Follower | None = None  # other processes' commits and the project tree (follow.py)
        self._queries: dict[str, Any] = {}  # query id -> its QueryResult on Spark (the Query screen's)
        self.query_history = QueryHistory(self.root)
        self.ref = MAIN  # the working ref: the console's runs fork from it and merge into it (Branches switches)

    # ------------------------------------------------------------------------------------------- life

    def boot(self, notify: Callable[[], None]) -> "CompiledProject":
        """Open the project: settings, the engine (its history, ledger and event bus; the catalog waits for its
        first use) and the compiled project, which is what the Pipelines screen needs. Blocking."""
        from ratui.engine.run.engine import Engine
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
        return self.engine.compile()

    def open_engine(self) -> None:
        """The heavy half, after the first screen has its data: the catalog (PyIceberg, SQLAlchemy), crash
        recovery, and the monitor that notices a dead run of any process within seconds. Blocking."""
        engine = self.require_engine()
        engine.recover()
        engine.start_monitor()
        engine.refs()  # opens the catalog now rather than on the first click
        if self.follower is None:
            self.follower = Follower(self.root, engine.settings.db_path, self._post, self.others_active).start()

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
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        if self.engine is not None:
            self.engine.stop_monitor()

    # ------------------------------------------------------------------------------------------ inbound

    def _post(self, item: Item) -> None:
        """On any thread: queue the item and, if the App has not been told yet, tell it once."""
        with self._lock:
            self._queue.append(item)
            if self._pending:
                return
            self._pending = True
        self._notify()

    def _on_event(self, event: Event) -> None:
        if isinstance(event, RunQueued) and event.invocation in self.batches:
            self._batch_of_run[event.run_id] = event.invocation
        batch = self._batch_of_run.get(event.run_id)
        self._post(EngineItem(event, batch, self.clock(), self.now().strftime("%H:%M:%S")))

    def drain(self) -> list[Item]:
        with self._lock:
            items = list(self._queue)
            self._queue.clear()
            self._pending = False
        return items

    def _writable(self, what: str) -> None:
        if self.read_only:
            raise read_only_refusal(what)

    # ------------------------------------------------------------------------------------------- runs

    def compile(self) -> "CompiledProject":
        return self.require_engine().compile()

    def start(self, key: str, *, full_refresh: bool = False, force: bool = False) -> str:
        """Run one pipeline on the working ref in the background (`force`: even when nothing changed); returns its
        run id at once. A working ref that is gone raises RAT-CAT-002 before anything runs."""
        self._writable("running a pipeline")
        return self.require_engine().start([key], trigger="console", full_refresh=full_refresh,
                                           force=force, ref=self.ref).run_ids[0]

    def start_batch(self, keys: list[str], *, full_refresh: bool = False, force: bool = False,
                    atomic: bool = False) -> Batch:
        """Run `keys` in order on the working ref in the background (a pipeline whose upstream failed is skipped).
        `atomic`: on a publish branch, merged into the working ref in one commit only if every run passed (the
        batch's `publish` says what happened). Returns at once."""
        self._writable("running pipelines")
        batch = Batch(uuid.uuid4().hex[:12], list(keys), full_refresh, ref=self.ref, atomic=atomic)
        self.batches[batch.id] = batch  # before its runs are queued: their RunQueued events name it
        try:
            batch.invocation = self.require_engine().start(
                batch.keys, trigger="console", full_refresh=full_refresh, force=force, invocation_id=batch.id,
                on_result=batch.results.append, on_done=lambda inv: self._batch_ended(batch, inv), ref=batch.ref,
                atomic=atomic)
        except BaseException:  # a bad working ref (RAT-CAT-002/-012): nothing was queued
            self.batches.pop(batch.id, None)
            raise
        return batch

    def _batch_ended(self, batch: Batch, invocation: "Invocation") -> None:
        batch.invocation = invocation  # (an invocation may end before start() has returned it)
        self._post(BatchItem(batch))

    def batch_of(self, run_id: str) -> Batch | None:
        """The unfinished batch this run belongs to."""
        batch = self.batches.get(self._batch_of_run.get(run_id, ""))
        return batch if batch is not None and not batch.done else None

    def cancel(self, run_id: str, *, whole_batch: bool = True) -> str:
        """Cancel the run; a run of a batch stops the batch too (its run in flight now, and the rest unstarted)."""
        self._writable("cancelling a run")
        batch = self.batch_of(run_id) if whole_batch else None
        outcome = self.require_engine().cancel(run_id)
        if batch is not None and batch.invocation is not None:
            current = batch.current
            batch.invocation.cancel()
            if current and current != run_id:
                outcome = "requested"
        return outcome

    def cancel_all(self, timeout: float = 10.0) -> None:
        engine = self.engine
        for batch in self.batches.values():
            if batch.invocation is not None and not batch.done:
                batch.invocation.cancel()
        active = engine.active_runs() if engine else []
        for run_id in active:
            engine.cancel(run_id)
        deadline = time.monotonic() + timeout
        for run_id in active:
            engine.wait(run_id, max(0.0, deadline - time.monotonic()))

    def spark_started(self) -> bool:
        from ratui.engine.spark import session as spark_mod

        return spark_mod.is_started()

    def prewarm_spark(self) -> None:
        self.require_engine().start_spark()

    def spark_where(self) -> str:
        """Where Spark runs and with what (the status line): "local[2], 2 cores", "cluster spark://..., 1 executor,
        2 cores", "Spark Connect sc://..." once it started; ratui.yaml's word for it before. Asks the driver (never a
        job): call it from a worker thread. Never raises."""
        from ratui.engine.spark import addresses, session as spark_mod

        try:
            described = spark_mod.describe()
        except Exception:  # a driver going down: say what ratui.yaml says
            described = None
        if described:
            return described
        settings = self.settings
        if settings is None:
            return ""
        if settings.spark_remote:
            return f"Spark Connect {addresses.display_url(settings.spark_remote)}"
        return settings.spark_where

    # ---------------------------------------------------------------------------------------- history

    def recent(self, per_pipeline: int = 12) -> dict[str, list[dict[str, Any]]]:
        return self.require_engine().recent_runs(per_pipeline)

    def runs_page(self, page: int, size: int, flt: RunFilter) -> RunsPage:
        engine = self.require_engine()
        total = engine.count_runs(pipeline=flt.pipeline, status=flt.status, text=flt.text)
        pages = max(1, -(-total // size))
        page = max(0, min(page, pages - 1))
        rows = engine.runs(size, page * size, pipeline=flt.pipeline, status=flt.status, text=flt.text)
        return RunsPage(rows, total, page, size)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        return self.require_engine().get_run(run_id)

    def quality(self, run_id: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
        """Quality results of one run, or across recent runs; each with its pipeline."""
        engine = self.require_engine()
        if run_id:
            run = engine.get_run(run_id)
            if not run:
                raise RatuiError("RAT-RUN-004", f"no run '{run_id}'")
            return [dict(q, pipeline=run["pipeline"]) for q in run["quality"]]
        return engine.quality_results(limit)

    # --------------------------------------------------------------------------------------- branches

    def branches(self) -> list[BranchRow]:
        engine = self.require_engine()
        return [BranchRow(r.name, r.head, r.created_at, r.run_id, len(engine.table_pointers(r.name)))
                for r in engine.refs()]

    def _table_state(self, ref: str, key: str) -> TableState:
        try:
            table = self.require_engine().load_table(ref, key)
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

    def diff(self, ref: str, against: str = MAIN) -> list[DiffRow]:
        """Per table, what differs between `ref` and `against` (main): the change from the branch's side, which side
        changed it since the fork, snapshot, rows and files on each side, and the schema changes. For main itself:
        its tables."""
        engine = self.require_engine()
        if ref == MAIN and against == MAIN:
            return [DiffRow(key, "table", False, None, self._table_state(MAIN, key))
                    for key in sorted(engine.table_pointers(MAIN))]
        rows = []
        for change in engine.diff_refs(ref, against):
            rows.append(DiffRow(change.table, change.change, change.changed_on == "both",
                                _state_of(change.left), _state_of(change.right), change.changed_on,
                                tuple(change.schema_changes)))
        return rows

    def merge_target(self, ref: str) -> str:
        """The ref `ref` was created from (where its merge goes), when that ref is still there; else main."""
        return self.require_engine().branch_origin(ref)

    def merge_preview(self, ref: str):
        """A dry-run merge of `ref` into the ref it came from (the result's `into`): nothing changes."""
        return self.require_engine().merge(ref, into=self.merge_target(ref), dry_run=True)

    def merge(self, ref: str, into: str = MAIN):
        self._writable("merging a branch")
        return self.require_engine().merge(ref, into=into, message=f"console: merge {ref} into {into}")

    def create_branch(self, name: str, from_ref: str = MAIN):
        """A branch of the user's (RAT-CAT-001 exists, -006 bad name, -012 reserved, -010 unknown past state)."""
        self._writable("creating a branch")
        return self.require_engine().create_branch(name.strip(), from_ref=from_ref.strip() or MAIN)

    def delete_branch(self, ref: str) -> bool:
        """Delete a branch (a user's, or a dead run's). Returns True when it was the working ref, which is then
        main again."""
        self._writable("deleting a branch")
        self.require_engine().delete_branch(ref)
        if self.ref == ref:
            self.ref = MAIN
            return True
        return False

    def switch_ref(self, ref: str) -> str:
        """Make `ref` the working ref (main or a user's branch that exists); returns it. Raises RAT-CAT-012 for a
        run's or a publish's branch, RAT-CAT-007 for a past state, RAT-CAT-002 for a ref that is not there."""
        ref = ref.strip()
        if "@" in ref:
            raise RatuiError("RAT-CAT-007", f"{ref} is a past state: runs write to a branch's head",
                             hint=f"Create a branch from it (n on Branches, from {ref}) and work on that.")
        if ref_kind(ref) in ("run", "publish"):
            raise RatuiError("RAT-CAT-012", f"'{ref}' is a branch ratui keeps for a run or a publish",
                             hint="Work on main or on a branch of your own (n on Branches creates one).")
        self.require_engine().resolve_ref(ref)
        self.ref = ref
        return ref

    # ---------------------------------------------------------------------------------- history, rollback

    def log(self, ref: str = MAIN, table: str | None = None, limit: int = 200) -> list:
        """The ref's commits, newest first (LogEntry: time, kind, run, pipeline, version, tables changed)."""
        return self.require_engine().log(ref, table=table, limit=limit)

    def plan_rollback(self, ref: str, to: str, table: str | None = None):
        """What rolling `ref` (or one table of it) back to commit `to` would change; nothing is changed."""
        return self.require_engine().plan_rollback(ref, to, table)

    def rollback(self, plan):
        self._writable("rolling back")
        return self.require_engine().rollback(plan)

    def resolve_ref(self, ref: str, at: str | None = None) -> str:
        """A ref or past state "ref@HASH" checked; with `at` (a time), the ref's state then as "ref@HASH"."""
        return self.require_engine().resolve_ref(ref, at)

    def live_run_of(self, ref: str) -> dict[str, Any] | None:
        """The run still going (in any process) whose branch `ref` is."""
        return self.require_engine().live_run_of(ref)

    # ------------------------------------------------------------------------------------- data (Query)

    def table_names(self, ref: str = MAIN) -> list[str]:
        """The tables at a ref (keys), for the Query screen's completion and table list."""
        return sorted(self.require_engine().table_pointers(ref))

    def query_refs(self) -> list[str]:
        """What a query can read: main first, then every other ref (dev branches, run branches while they live)."""
        names = [r.name for r in self.require_engine().refs()]
        return [MAIN] + sorted(n for n in names if n != MAIN)

    def open_query(self, sql: str, ref: str, query_id: str) -> "QueryPage":
        """Run a query and fetch its first page; the result stays on Spark until close_query. The query goes into
        the history whether it works or not (a failed one is the one to fix)."""
        engine = self.require_engine()
        if not self.read_only:  # a read-only console leaves no trace in the project, its query history included
            self.query_history.add(sql)
        started = time.perf_counter()
        result = engine.open_query(sql, ref=ref, query_id=query_id, read_only=self.read_only)
        with self._lock:
            self._queries[query_id] = result
        try:
            return self._page(result, 0, started)
        except BaseException:
            self.close_query(query_id)
            raise

    def query_page(self, query_id: str, offset: int) -> "QueryPage":
        return self._page(self._query(query_id), max(0, offset), time.perf_counter())

    def query_count(self, query_id: str) -> int:
        return self._query(query_id).count()

    def export_query(self, query_id: str, target: str) -> Path:
        self._writable("exporting a result to a file")
        return self._query(query_id).export(target)

    def query_progress(self, query_id: str) -> tuple[str, Any]:
        """(query id, its running Spark jobs' progress as a SparkProgress, or None)."""
        from ratui.engine.events import SparkProgress

        fields = self.require_engine().query_progress(query_id)
        return query_id, SparkProgress(query_id, **fields) if fields else None

    def cancel_query(self, query_id: str) -> None:
        self.require_engine().cancel_query(query_id)

    def close_query(self, query_id: str) -> None:
        with self._lock:
            result = self._queries.pop(query_id, None)
        if result is not None:
            result.close()

    def _query(self, query_id: str):
        with self._lock:
            result = self._queries.get(query_id)
        if result is None:
            raise RatuiError("RAT-QRY-004", "that query's result is gone (a newer query replaced it)")
        return result

    @staticmethod
    def _page(result, offset: int, started: float) -> "QueryPage":
        from ratui.console.data import PAGE_SIZE, QueryPage

        rows, more = result.page(offset, PAGE_SIZE)
        return QueryPage(result.query_id, result.ref, result.columns, result.types, rows, offset, more,
                         result.known_count, time.perf_counter() - started)

    def describe_table(self, ref: str, key: str):
        """A table's schema, partition spec, snapshot history and column statistics (metadata only)."""
        return self.require_engine().describe_table(ref, key)

    def preview_table(self, ref: str, key: str, limit: int = 20) -> tuple[list[str], list[list[Any]]]:
        """The first rows of a table (starts Spark if it is not up)."""
        return self.require_engine().preview_table(ref, key, limit)

    # ---------------------------------------------------------------------------------------- landing

    def landing_files(self) -> list:
        """Every landing file of the project's namespace, per zone and consuming pipeline (LandingFile)."""
        return self.require_engine().landing_files()

    def landing_reset(self, zone: str, file: str | None = None, pipeline: str | None = None) -> int:
        self._writable("resetting landing files")
        return self.require_engine().landing_reset(zone, file=file, pipeline=pipeline)

    # ----------------------------------------------------------------------------------------- reaper

    def reaper_settings(self) -> dict[str, int]:
        from ratui.engine.project.settings import REAPER_KEYS

        return {key: getattr(self.settings, f"reaper_{key}") for key in REAPER_KEYS}

    def reaper_reports(self, limit: int = 20) -> list:
        return self.require_engine().reaper().reports(limit)

    def reaper_run(self, dry_run: bool) -> Any:
        if not dry_run:
            self._writable("a reaper pass")
        return self.require_engine().reap(dry_run=dry_run)

    # ------------------------------------------------------------------------------------------ watch

    def make_watcher(self, on_event: Callable[[Any], None]):
        """A Watcher on the console's engine: its runs go through the engine's bus like any other run."""
        from ratui.engine.ops.watch import Watcher

        return Watcher(engine=self.require_engine(), on_event=on_event, ref=lambda: self.ref)

    def start_watch(self, timeout: float = 10.0) -> str:
        """Watch mode on: its events reach the App through this controller's queue."""
        self._writable("watch mode (it runs pipelines)")
        if self.watcher is None:
            self.watcher = self.make_watcher(lambda event: self._post(WatchItem(event)))
        self.watcher.start(timeout=timeout)
        return self.watcher.state

    def stop_watch(self, timeout: float = 30.0) -> str:
        if self.watcher is not None:
            self.watcher.stop(timeout=timeout)
        return "off"
