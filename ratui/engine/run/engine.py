"""The engine of one project, and the only door to it: compile, run, cancel, wait, read, query, reap.

    engine = Engine.open(root)                      # settings from ratui.yaml, state from .ratui/ratui.db
    engine.recover()                                # commands that act on runs call it (crash recovery)
    results = engine.run(keys, trigger="cli")       # an invocation in this thread
    invocation = engine.start(keys, trigger="console")   # ... or in the background: run ids, cancel(), wait()
    engine.cancel(run_id)                           # from any thread; `ratui cancel` from another process

Everything the CLI, the console and watch mode need is a method here; they never reach into the engine's parts.
The parts are explicit: a ProjectState (settings, catalog, history, ledger) and an EventBus, given to the
constructor; `Engine.open()` makes them. Thread-safe; one engine per project per process.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable

from ratui.engine.errors import RatuiError
from ratui.engine.events import Event, EventBus, LogLine, RunFinished, RunQueued
from ratui.engine.ops.changes import Decision, DecisionInputs, decide
from ratui.engine.project.compiler import CompiledProject, compile_project
from ratui.engine.project.discovery import Pipeline
from ratui.engine.run.control import CancelPoller, RunControl, request_cancel
from ratui.engine.run.invocation import Invocation, OnResult
from ratui.engine.run.progress import ProgressReporter
from ratui.engine.run.recovery import Recovery
from ratui.engine.run.results import RunResult, new_run_id
from ratui.engine.project.settings import Settings, load_settings
from ratui.engine.spark import jobs as spark_jobs
from ratui.engine.spark import session as spark_mod
from ratui.engine.state.project_state import ProjectState
from ratui.engine.vocabulary import ACTIVE, MAIN, RUN_PREFIX, now_iso

log = logging.getLogger("ratui.engine")


class Engine:
    def __init__(self, state: ProjectState, *, bus: EventBus[Event] | None = None):
        self._state = state
        self._bus: EventBus[Event] = bus or EventBus()
        self._controls: dict[str, RunControl] = {}
        self._lock = threading.Lock()
        self._poller = CancelPoller(state.history, self.active_runs, self.cancel_local)
        self._progress = ProgressReporter(self._bus, self.active_runs)
        self._recovery = Recovery(state, self._bus, self._is_ours)
        self._lineage: Any = None  # the column lineage of the last compile asked about (column_lineage)

    @classmethod
    def open(cls, root: Path, settings: Settings | None = None, *, bus: EventBus[Event] | None = None) -> "Engine":
        """The engine of the project at `root` (its ratui.yaml, or `settings`). Runs nothing, recovers nothing."""
        return cls(ProjectState.open(settings or load_settings(root)), bus=bus)

    # ------------------------------------------------------------------------------------------ project

    @property
    def settings(self) -> Settings:
        return self._state.settings

    @property
    def root(self) -> Path:
        return self._state.settings.root

    @property
    def state(self) -> ProjectState:
        """The project's state (catalog, history, ledger): for tests and tools. Commands and the console use the
        methods of the engine instead."""
        return self._state

    def apply_settings(self, settings: Settings) -> None:
        """ratui.yaml was reloaded (watch mode): the engine and every part of its state use the new settings."""
        self._state.apply_settings(settings)

    def compile(self) -> CompiledProject:
        return compile_project(self.root, self.settings)

    def column_lineage(self, compiled: CompiledProject | None = None):
        """The project's column lineage (project/column_lineage.py ProjectLineage), computed lazily and kept for
        the compile it was made from (the same compile asks again: the same object); a Python pipeline's columns,
        and any table whose own lineage cannot say, are read from its table on main."""
        from ratui.engine.project.column_lineage import ProjectLineage

        compiled = compiled or self.compile()
        with self._lock:
            kept = self._lineage
            if kept is not None and kept.compiled is compiled:
                return kept
            self._lineage = ProjectLineage(compiled, table_columns=self._main_columns)
            return self._lineage

    def _main_columns(self, key: str) -> list[str] | None:
        """The top-level columns of a table on main, or None when it does not exist there."""
        try:
            table = self._state.catalog.load_table(MAIN, key)
        except RatuiError as exc:
            if exc.code == "RAT-CAT-005":
                return None
            raise
        return [f.name for f in table.schema().fields]

    def subscribe(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Engine events (run queued/started/finished, phases, quality results, log lines), delivered on the
        thread that emits them. Returns the unsubscribe."""
        return self._bus.subscribe(listener)

    def expect_one_shot(self, keys: list[str], compiled: CompiledProject, *, force: bool = False,
                        full_refresh: bool = False, ref: str = MAIN) -> None:
        """This process runs these pipelines and exits (`ratui run`). When their inputs are small, the JVM it
        starts compiles with Java's quick compiler only (ratui.yaml `spark.jit: auto`, spark/jit.py). When the
        first of them is to run (not unchanged), Spark starts booting now, while the invocation opens the catalog
        and prepares that run."""
        from ratui.engine.run.work_size import input_bytes
        from ratui.engine.spark import jit

        if self.settings.spark_jit == "auto":
            size = input_bytes(compiled, keys, limit=jit.SMALL_INPUT_BYTES)
            small = size is not None and size < jit.SMALL_INPUT_BYTES
            jit.expect_small_work(f"{len(keys)} pipeline(s) reading at most {size:,} bytes" if small else None)
        chosen = set(keys)
        first = next((k for k in keys if not compiled.graph.ancestors(k) & chosen), None)
        if first is None or self.settings.spark_remote:
            return
        try:
            runs = self.decide(compiled.pipelines[first], force=force, full_refresh=full_refresh, ref=ref).runs
        except Exception:  # the invocation decides again, and reports what went wrong
            return
        if runs:
            spark_mod.start_soon(self.settings)

    def expect_one_shot_query(self) -> None:
        """This process runs one query and exits (`ratui query`): when the project's tables are small, the JVM it
        starts compiles with Java's quick compiler only (spark.jit auto)."""
        from ratui.engine.run.work_size import tables_bytes
        from ratui.engine.spark import jit

        if self.settings.spark_jit == "auto":
            size = tables_bytes(self.root, limit=jit.SMALL_INPUT_BYTES)
            small = size < jit.SMALL_INPUT_BYTES
            jit.expect_small_work(f"a query over tables of at most {size:,} bytes" if small else None)

    def start_spark(self) -> None:
        """Start Spark now (the console warms it up after its first paint)."""
        spark_mod.get_spark(self.settings)

    # ------------------------------------------------------------------------------------------ running

    def start(self, keys: list[str], *, trigger: str = "console", full_refresh: bool = False, force: bool = False,
              on_result: OnResult | None = None, on_done: Callable[[Invocation], None] | None = None,
              invocation_id: str | None = None, threads: int | None = None, ref: str = MAIN,
              atomic: bool = False) -> Invocation:
        """Queue the pipelines and run them in a background thread; returns the invocation at once (its run ids
        are known already). `invocation_id` names it (its RunQueued events carry it). `threads`: how many
        independent pipelines run at once (default: ratui.yaml's run.threads). `ref`: the branch the runs merge
        into; `atomic`: all of them land on `ref` in one commit or none does (run/publish.py)."""
        return self.invocation(keys, trigger=trigger, full_refresh=full_refresh, force=force, on_result=on_result,
                               on_done=on_done, invocation_id=invocation_id, threads=threads, ref=ref,
                               atomic=atomic).start()

    def run(self, keys: list[str], *, trigger: str = "cli", full_refresh: bool = False, force: bool = False,
            on_result: OnResult | None = None, threads: int | None = None, ref: str = MAIN,
            atomic: bool = False) -> list[RunResult]:
        """Run the pipelines in dependency order from the calling thread (up to `threads` at once, default
        ratui.yaml's run.threads); returns when every one has ended."""
        return self.invocation(keys, trigger=trigger, full_refresh=full_refresh, force=force, on_result=on_result,
                               threads=threads, ref=ref, atomic=atomic).run()

    def invocation(self, keys: list[str], *, trigger: str, full_refresh: bool = False, force: bool = False,
                   on_result: OnResult | None = None, on_done: Callable[[Invocation], None] | None = None,
                   invocation_id: str | None = None, threads: int | None = None, ref: str = MAIN,
                   atomic: bool = False, compiled: CompiledProject | None = None) -> Invocation:
        """An invocation not started yet (start() or run() it). The ref is checked first (RAT-CAT-002/-007/-012);
        an atomic one creates its publish branch here. `compiled`: the compile the caller just made and selected
        from (else the project is compiled now)."""
        from ratui.engine.ops.branches import check_writable
        from ratui.engine.run.publish import start_publish

        check_writable(self._state, ref)
        compiled = compiled or self.compile()
        invocation = Invocation(self, compiled, keys, trigger=trigger, full_refresh=full_refresh, force=force,
                                on_result=on_result, on_done=on_done, invocation_id=invocation_id,
                                threads=threads or self.settings.run_threads, ref=ref)
        if atomic:
            invocation.ref = start_publish(self._state, invocation.id, ref)
            invocation.publish_into = ref
        return invocation

    def cancel(self, run_id: str, error: RatuiError | None = None) -> str:
        """Ask a run to stop, from any thread or process.

        Returns 'requested', 'finished' (too late: it already ended, or its merge has committed) or 'unknown'.
        The request is written to the database, so the process running the run honours it at its next
        checkpoint; a run of this process is also interrupted at once (its Spark jobs are cancelled).
        """
        outcome, run = request_cancel(self._state.history, run_id)
        if outcome != "requested" or run is None:
            return outcome
        return self.cancel_local(run["id"], error) or "requested"

    def active_runs(self) -> list[str]:
        """Runs of this process that have not ended (queued ones included)."""
        with self._lock:
            return [r for r, c in self._controls.items() if not c.done.is_set()]

    def wait(self, run_id: str, timeout: float | None = None) -> bool:
        with self._lock:
            control = self._controls.get(run_id)
        return True if control is None else control.done.wait(timeout)

    # ------------------------------------------------------------------------------------ crash recovery

    def recover(self) -> list[str]:
        """Record the runs whose process died as failed (branches deleted, main untouched); returns their ids."""
        return self._recovery.recover()

    def start_monitor(self, interval: float = 2.0) -> None:
        """Long-lived processes: recover dead runs every `interval` seconds."""
        self._recovery.start_monitor(interval)

    def stop_monitor(self) -> None:
        self._recovery.stop_monitor()

    # ---------------------------------------------------------------------------------------- reading

    def runs(self, limit: int = 50, offset: int = 0, *, pipeline: str | None = None, status: str | None = None,
             text: str | None = None, ref: str | None = None) -> list[dict[str, Any]]:
        """Run history, newest first; `ref`: only runs that merge (or merged) into that branch."""
        return self._state.history.list_runs(limit, offset, pipeline=pipeline, status=status, text=text, ref=ref)

    def count_runs(self, *, pipeline: str | None = None, status: str | None = None, text: str | None = None) -> int:
        return self._state.history.count_runs(pipeline=pipeline, status=status, text=text)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """One run with its quality results and log (a unique prefix of the id is enough)."""
        return self._state.history.get_run(run_id)

    def recent_runs(self, per_pipeline: int = 10, pipelines: list[str] | None = None) -> dict[str, list[dict]]:
        return self._state.history.recent_by_pipeline(per_pipeline, pipelines)

    def quality_results(self, limit: int = 200) -> list[dict[str, Any]]:
        return self._state.history.quality_results(limit)

    # --------------------------------------------------------------------------------------- branches

    def refs(self) -> list:
        return self._state.catalog.list_refs()

    def table_pointers(self, ref: str = MAIN) -> dict[str, str]:
        return self._state.catalog.table_pointers(ref)

    def load_table(self, ref: str, key: str):
        return self._state.catalog.load_table(ref, key)

    def diff(self, ref: str, against: str = MAIN) -> list:
        return self._state.catalog.diff(ref, against)

    def merge(self, ref: str, *, into: str = MAIN, message: str | None = None, dry_run: bool = False):
        """Merge a branch into `into` by hand, with the landing files its merged pipelines loaded. A live run's
        branch is refused (RAT-CAT-009). Tables both sides only appended to merge by append, after their quality
        tests passed on the combined rows (run/merge_gate.py: RAT-CAT-013 if not; the other tables' tests are each
        run's own resolve phase)."""
        from ratui.engine.ops import branches
        from ratui.engine.run.merge_gate import quality_gate

        if not dry_run:
            self._refuse_live_branch(ref, "merge")
            active = self._state.history.active_on(ref)
            if active:  # e.g. a publish branch whose invocation has not ended: its runs still merge into it
                raise RatuiError("RAT-CAT-011", f"cannot merge {ref}: run {active[0]['id']} of "
                                 f"{active[0]['pipeline']} is still {active[0]['status']} on it")
        return branches.merge(self._state, ref, into=into, message=message, dry_run=dry_run,
                              verify=quality_gate(self._state, self.compile, into, ref))

    def branch_origin(self, ref: str) -> str:
        """The ref a branch was created from (where its merge goes by default); main for main, run branches,
        branches from before ratui recorded it, or when that ref is gone."""
        from ratui.engine.ops.changes import branch_origin

        origin = branch_origin(self._state, ref) if ref != MAIN else None
        if origin is None:
            return MAIN
        name = origin[0].partition("@")[0]
        return name if name in {r.name for r in self.refs()} else MAIN

    def create_branch(self, name: str, *, from_ref: str = MAIN):
        """A dev branch (RAT-CAT-001 exists, -006 bad name, -012 reserved name, -010 unknown past state)."""
        from ratui.engine.ops import branches

        return branches.create(self._state, name, from_ref=from_ref)

    def delete_branch(self, ref: str) -> None:
        from ratui.engine.ops import branches

        self._refuse_live_branch(ref, "delete")
        if ref.startswith(branches.RUN_PREFIX):
            self._state.catalog.delete_branch(ref)  # a dead run's branch (the reaper's job too)
        else:
            branches.delete(self._state, ref)

    def diff_refs(self, left: str, right: str = MAIN) -> list:
        """Per table, what differs between two refs (or past states "ref@HASH"): see ops/branches.py."""
        from ratui.engine.ops import branches

        return branches.diff(self._state, left, right)

    def log(self, ref: str = MAIN, *, table: str | None = None, limit: int = 50, details: bool = True) -> list:
        """The ref's commits, newest first, with the tables each changed, the run, pipeline and version."""
        from ratui.engine.ops import branches

        if table is not None:
            table = self.resolve_table(table, ref)
        return branches.log(self._state, ref, table=table, limit=limit, details=details)

    def plan_rollback(self, ref: str, to: str, table: str | None = None):
        from ratui.engine.ops import branches

        if table is not None:
            table = self.resolve_table(table, ref)
        return branches.plan_rollback(self._state, ref, to, table)

    def rollback(self, plan):
        from ratui.engine.ops import branches

        return branches.rollback(self._state, plan)

    def resolve_ref(self, ref: str, at: str | None = None) -> str:
        """`ref` checked (a branch or "ref@HASH", returned with the whole hash); with `at` (a time) the ref's past
        state then, as "ref@HASH"."""
        from ratui.engine.ops.branches import parse_when
        from ratui.engine.state.catalog.base import split_spec

        catalog = self._state.catalog
        if at is None:
            catalog.get_ref(ref)
            name, commit = split_spec(ref)
            return ref if commit is None else f"{name}@{catalog.commit(ref).hash}"  # a prefix made whole
        name, _ = split_spec(ref)
        return f"{name}@{catalog.commit_at(name, parse_when(at)).hash}"

    def resolve_table(self, name: str, ref: str = MAIN) -> str:
        """"clean_orders", "silver.clean_orders" or the full key -> the table key (RAT-CAT-005 if none)."""
        keys = set(self._state.catalog.table_pointers(ref))
        if name in keys:
            return name
        matches = sorted(k for k in keys if k.endswith("." + name))
        if not matches:
            compiled = {k for k in self.compile().pipelines}
            matches = sorted(k for k in compiled if k == name or k.endswith("." + name))
        if len(matches) == 1:
            return matches[0]
        raise RatuiError("RAT-CAT-005", f"no table '{name}' at {ref}" if not matches else
                         f"'{name}' names {len(matches)} tables: {', '.join(matches)}")

    def live_run_of(self, ref: str) -> dict | None:
        """The run still going (in any process) that owns branch `ref`, if any."""
        if not ref.startswith(RUN_PREFIX):
            return None
        run = self._state.history.get_run(ref[len(RUN_PREFIX):])
        if run is None or run.get("id") != ref[len(RUN_PREFIX):] or run["status"] not in ACTIVE or run.get("merged_at"):
            return None
        return run

    def _refuse_live_branch(self, ref: str, what: str) -> None:
        run = self.live_run_of(ref)
        if run is not None:
            raise RatuiError("RAT-CAT-009", f"cannot {what} {ref}: run {run['id']} of {run['pipeline']} is still "
                             f"{run['status']} on it")

    def query(self, sql: str, *, ref: str = MAIN, limit: int = 1000) -> tuple[list[str], list[list[Any]], bool]:
        """Ad-hoc SQL over the tables at a ref: (columns, rows, truncated)."""
        from ratui.engine.run.query import run_query

        self._state.catalog.get_ref(ref)  # RAT-CAT-002 for a mistyped ref, before any JVM starts
        session = spark_mod.new_session(self.settings)
        try:
            return run_query(self._state, session, sql, ref=ref, limit=limit)
        finally:
            spark_mod.release(session)

    def open_query(self, sql: str, *, ref: str = MAIN, query_id: str | None = None, read_only: bool = False):
        """A QueryResult kept on Spark (pages, count, export); close() it when done. Cancel with cancel_query.
        `read_only`: a query that does anything but read the project's tables is refused (RAT-ACC-002)."""
        from ratui.engine.run.query import QueryResult

        self._state.catalog.get_ref(ref)  # RAT-CAT-002 before Spark starts
        if read_only:  # and a query that is not a read, before Spark starts
            from ratui.engine.run.read_only_sql import check_read_only

            check_read_only(sql, set(self._state.catalog.table_pointers(ref)), self.settings.namespace)
        session = spark_mod.new_session(self.settings)
        try:
            return QueryResult(self._state, session, sql, ref=ref, query_id=query_id, read_only=read_only)
        except BaseException:
            spark_mod.release(session)
            raise

    def query_progress(self, query_id: str) -> dict | None:
        """What a running query's Spark jobs are doing (SparkProgress's fields), or None."""
        return spark_jobs.progress(query_id)

    def cancel_query(self, query_id: str) -> None:
        from ratui.engine.run.query import cancel

        cancel(query_id)

    def describe_table(self, ref: str, key: str):
        """A table's schema, partition spec, snapshot history and column statistics from its metadata (no scan)."""
        from ratui.engine.iceberg.describe import describe

        return describe(self._state.catalog.load_table(ref, key), key)

    def preview_table(self, ref: str, key: str, limit: int = 20) -> tuple[list[str], list[list[Any]]]:
        """The first rows of a table at a ref (Spark reads them, deletes applied)."""
        from ratui.engine.iceberg.read import read_table

        session = spark_mod.new_session(self.settings)
        try:
            df = read_table(session, self._state.catalog.load_table(ref, key))
            return list(df.columns), [list(r) for r in df.limit(limit).collect()]
        finally:
            spark_mod.release(session)

    # ---------------------------------------------------------------------------------------- landing

    def landing_files(self, zone: str | None = None, pipeline: str | None = None) -> list:
        """The ledger: every landing file per zone and consuming pipeline, with its state (of every namespace, or
        of one zone: `namespace.zone`, or `zone` when one namespace has it)."""
        if zone is None:
            return self._state.ledger.files(None, None, pipeline)
        namespace, name = self.resolve_zone(zone, pipeline)
        return self._state.ledger.files(namespace, name, pipeline)

    def landing_reset(self, zone: str, file: str | None = None, pipeline: str | None = None) -> int:
        """Make a zone's files (or one file) loadable again; the journal keeps the rows as they were, for undo."""
        from ratui.engine.state import journal

        namespace, name = self.resolve_zone(zone, pipeline)
        what = f"landing reset {namespace}.{name}" + (f" {file}" if file else "") + (f" for {pipeline}" if pipeline
                                                                                       else "")

        def keep(conn: Any, saved: dict[str, list]) -> None:
            if saved["files"]:
                journal.add(conn, "landing_reset", f"{namespace}.{name}", what, data={"ledger": saved})

        return self._state.ledger.reset(namespace, name, file, pipeline, in_tx=keep)

    def plan_undo(self):
        """What `undo` would reverse, and how (ops/undo.py); nothing is changed."""
        from ratui.engine.ops import undo

        return undo.plan(self._state)

    def undo(self, plan):
        from ratui.engine.ops import undo

        return undo.apply(self._state, plan)

    def landing_forget(self, zone: str, file: str, pipeline: str | None = None) -> int:
        return self._state.ledger.forget(*self.resolve_zone(zone, pipeline), file, pipeline)

    def resolve_zone(self, zone: str, pipeline: str | None = None) -> tuple[str, str]:
        """(namespace, zone) of a zone as a user names it: `namespace.zone`; `zone` alone when the pipeline's
        namespace, or the only namespace whose ledger or project has such a zone, says which; RAT-LND-011 listing
        the candidates when several do."""
        zone = zone.strip()
        if "." in zone:
            namespace, _, name = zone.partition(".")
            return namespace, name
        if pipeline and pipeline.count(".") == 2:
            return pipeline.split(".", 1)[0], zone
        known = {(f.namespace, f.zone) for f in self._state.ledger.files(None, zone, None)}
        try:
            known |= {(key.split(".", 1)[0], zone) for key, p in self.compile().pipelines.items()
                      if zone in (p.zones or ())}
        except Exception:  # noqa: BLE001 - a project that does not compile still has its ledger
            pass
        namespaces = sorted({namespace for namespace, _ in known})
        if len(namespaces) > 1:
            raise RatuiError("RAT-LND-011", f"zone '{zone}' is in several namespaces: "
                             + ", ".join(f"{n}.{zone}" for n in namespaces),
                             hint=f"Name it with its namespace, e.g. {namespaces[0]}.{zone}.")
        return (namespaces[0] if namespaces else self.settings.namespace), zone

    # ----------------------------------------------------------------------------------------- reaper

    def reaper(self, *, clock=None):
        """The reaper of this project (ops/reaper.py): it cancels this process's stuck runs through the engine."""
        from ratui.engine.ops.reaper import Reaper

        return Reaper(self._state, cancel=self.cancel, clock=clock, bus=self._bus)

    def reap(self, *, dry_run: bool = False, tasks=None):
        return self.reaper().run(dry_run=dry_run, tasks=tasks)

    def close(self) -> None:
        self.stop_monitor()
        self._state.close()

    # -------------------------------------------------------------------- for invocations (run package)

    def queue_run(self, key: str, *, trigger: str, invocation: str | None, compiled: CompiledProject,
               ref: str = MAIN) -> str:
        """Record a pending run, ready to be cancelled before it starts."""
        run_id = new_run_id()
        pipeline = compiled.pipelines.get(key)
        strategy = pipeline.config.merge_strategy if pipeline is not None and pipeline.config else None
        self._state.history.create_run(run_id, key, trigger, strategy, invocation, ref=ref)
        with self._lock:
            self._controls[run_id] = RunControl(run_id)
        self._poller.ensure_running()
        self._bus.emit(RunQueued(run_id, key, trigger, invocation, ref))
        return run_id

    def new_skipped(self, key: str, *, trigger: str, invocation: str | None, compiled: CompiledProject,
                     ref: str = MAIN) -> str:
        """The record of a run that is skipped without being queued (it never gets a branch)."""
        run_id = new_run_id()
        pipeline = compiled.pipelines.get(key)
        strategy = pipeline.config.merge_strategy if pipeline is not None and pipeline.config else None
        self._state.history.create_run(run_id, key, trigger, strategy, invocation, run_type="skip", ref=ref)
        self._bus.emit(RunQueued(run_id, key, trigger, invocation, ref))  # observers learn its trigger and batch
        return run_id

    def decide(self, pipeline: Pipeline, *, force: bool = False, full_refresh: bool = False,
                ref: str = MAIN) -> Decision:
        if full_refresh:
            return Decision(pipeline.key, "full", "--full-refresh: rebuild from scratch")
        if not pipeline.ok:
            return Decision(pipeline.key, "backfill", "definition has errors")  # the run reports them
        return decide(self._state, pipeline, force=force, ref=ref)  # reads the ref for this one decision

    def decide_unchanged(self, compiled: CompiledProject, keys: list[str], *, ref: str = MAIN) -> dict[str, Decision]:
        """key -> its skip decision, for the pipelines of `keys` that are unchanged and whose upstream pipelines in
        `keys` are unchanged too (in dependency order; one read of the ref's pointers and zones for all)."""
        inputs = DecisionInputs(self._state, ref)
        ours = set(keys)
        out: dict[str, Decision] = {}
        for key in compiled.graph.order():
            pipeline = compiled.pipelines.get(key)
            if key not in ours or pipeline is None or not pipeline.ok:
                continue
            if any(up in ours and up not in out for up in compiled.graph.upstream.get(key, ())):
                continue  # an upstream may run first: this one is decided after it, as always
            decision = decide(self._state, pipeline, ref=ref, inputs=inputs)
            if not decision.runs:
                out[key] = decision
        return out

    def record_skips(self, items: list[tuple[str, str, str | None]], compiled: CompiledProject, *, trigger: str,
                     invocation: str | None, ref: str = MAIN) -> list[RunResult]:
        """Record (key, reason, queued run id or None) as skipped runs in one transaction; their events follow."""
        rows: list[dict[str, Any]] = []
        for key, reason, queued in items:
            pipeline = compiled.pipelines.get(key)
            strategy = pipeline.config.merge_strategy if pipeline is not None and pipeline.config else None
            rows.append({"id": queued or new_run_id(), "pipeline": key, "trigger": trigger, "strategy": strategy,
                         "invocation": invocation, "ref": ref, "reason": reason, "queued": queued is not None})
        self._state.history.record_skipped(rows)
        results = []
        for (key, reason, queued), row in zip(items, rows):
            run_id = str(row["id"])
            if queued is None:
                self._bus.emit(RunQueued(run_id, key, trigger, invocation, ref))
            self._bus.emit(LogLine(run_id, "info", f"skipped: {reason}"))
            self._release(run_id)
            self._bus.emit(RunFinished(run_id, key, "skipped", 0, 0, None, reason=reason))
            results.append(RunResult(run_id, key, "skipped", row["strategy"], reason=reason, run_type="skip"))
        return results

    def note_decision(self, run_id: str, decision: Decision) -> None:
        self._state.history.update_run(run_id, run_type=decision.run_type, reason=decision.reason)

    def execute_run(self, run_id: str, key: str, *, full_refresh: bool = False, ref: str = MAIN) -> RunResult:
        with self._lock:
            control = self._controls.setdefault(run_id, RunControl(run_id))
        self._poller.ensure_running()
        self._progress.ensure_running()
        from ratui.engine.run.pipeline_run import PipelineRun  # Spark, PyIceberg: loaded when a run needs them

        try:
            return PipelineRun(self._state, self._bus, run_id, key, control, full_refresh, self.compile,
                               target=ref).go()
        finally:
            spark_jobs.end_run(run_id)  # a Spark Connect run's session is released
            self._release(run_id)

    def record_skip(self, run_id: str, key: str, compiled: CompiledProject, reason: str,
                     error: RatuiError | None) -> RunResult:
        pipeline = compiled.pipelines.get(key)
        strategy = pipeline.config.merge_strategy if pipeline and pipeline.config else None
        stamp = now_iso()
        history = self._state.history
        history.update_run(run_id, status="skipped", run_type="skip", reason=reason, started_at=stamp,
                           finished_at=stamp, duration_ms=0, error_code=error.code if error else None,
                           error_message=error.message if error else None, error_hint=error.hint if error else None)
        history.add_log(run_id, "info", f"skipped: {reason}")
        self._bus.emit(LogLine(run_id, "info", f"skipped: {reason}"))
        self._release(run_id)
        self._bus.emit(RunFinished(run_id, key, "skipped", 0, 0, error.to_dict() if error else None, reason=reason))
        return RunResult(run_id, key, "skipped", strategy, error=error.to_dict() if error else None,
                         reason=reason, run_type="skip")

    def record_not_started(self, run_id: str, reason: str) -> None:
        """A queued run its invocation never started: cancelled, with the reason."""
        error = RatuiError("RAT-RUN-001", f"run {run_id} was not started: {reason}")
        history = self._state.history
        if history.claim_unfinished(run_id, status="cancelled", finished_at=now_iso(), reason=reason,
                                    error_code=error.code, error_message=error.message, error_hint=error.hint):
            run = history.get_run(run_id)
            history.add_log(run_id, "warning", f"not started: {reason}")
            self._bus.emit(RunFinished(run_id, run["pipeline"] if run else "", "cancelled", 0, 0, error.to_dict()))
        self._release(run_id)

    def _release(self, run_id: str) -> None:
        with self._lock:
            control = self._controls.pop(run_id, None)
        if control is not None:
            control.done.set()

    def cancel_local(self, run_id: str, error: RatuiError | None = None) -> str | None:
        with self._lock:
            control = self._controls.get(run_id)
        if control is None:
            return None
        if control.merged.is_set() or control.done.is_set():
            return "finished"
        control.cancel(error)  # a Python pipeline's own code is interrupted too
        spark_jobs.cancel_run(run_id)
        return "requested"

    def _is_ours(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._controls
