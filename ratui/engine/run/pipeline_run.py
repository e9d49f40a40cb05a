"""One run of one pipeline: one branch, six timed phases, events out, cancellation in.

    0 branch   create run-{run_id} from the target ref's head (main, or a dev or publish branch)
    1 config   re-read the pipeline from disk and validate it
    2 build    render the template and plan it on Spark over every source on the branch (landing files are
               read and checked here); nothing is executed yet
    3 write    execute the query once, straight into the merge strategy, on the table on the branch
    4 quality  run the quality tests against the branch
    5 resolve  merge the branch into the target (a conflict re-runs the whole run, up to merge.retries attempts)

The branch is deleted whatever happens, so a run that fails or is cancelled leaves its target exactly as it was.
A run on a dev or publish branch reads and marks landing files in that branch's view of the ledger, never
archives them (main has not loaded them), and never counts its failures against them.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
import traceback
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from ratui.engine.failpoints import failpoint
from ratui.engine.errors import PIPELINE_FAULT_FAMILIES, RatuiError, is_definition_error
from ratui.engine.events import (
    Event, EventBus, LogLine, PhaseFinished, PhaseStarted, QualityResultEvent, RunFinished, RunIsolated, RunStarted,
    StagingProgress,
)
from ratui.engine.iceberg.schema import check_columns
from ratui.engine.ops.changes import definition_hashes, version_of
from ratui.engine.landing.entry import recorded_digest
from ratui.engine.project.compiler import CompiledProject, compile_pipeline
from ratui.engine.landing.names import is_archived_name
from ratui.engine.landing.zone import open_zone
from ratui.engine.project.discovery import Pipeline, discover_pipeline
from ratui.engine.project.templating import line_mapper, render
from ratui.engine.run.control import Cancelled, RunControl
from ratui.engine.isolation.levels import Isolation, decide as decide_isolation
from ratui.engine.isolation.runner import IsolatedRun, sweep_over
from ratui.engine.run import data_diff
from ratui.engine.state import journal
from ratui.engine.run.python_pipeline import PythonContext, run_python_pipeline
from ratui.engine.run.quality import QualityOutcome, run_tests
from ratui.engine.run.results import RunResult
from ratui.engine.run.sql_reach import check_pipeline_sql
from ratui.engine.run.sources import CHANGED_WHILE_READ, RunSources, changed_inputs_error
from ratui.engine.spark import errors as spark_errors
from ratui.engine.spark import jobs as spark_jobs
from ratui.engine.state import processes
from ratui.engine.state.project_state import ProjectState
from ratui.engine.storage.staging import run_staging
from ratui.engine.vocabulary import ACTIVE, MAIN, PUBLISH_PREFIX, now_iso, run_branch
from ratui.engine.write.strategies import WriteOutcome, WriteRequest, write


class PipelineRun:
    """One run of one pipeline (all attempts)."""

    def __init__(self, state: ProjectState, bus: EventBus[Event], run_id: str, key: str, control: RunControl,
                 full_refresh: bool, compile_project: Callable[[], CompiledProject], target: str = MAIN):
        self.state = state
        self.settings = state.settings
        self.catalog = state.catalog
        self.history = state.history
        self.bus = bus
        self.compile_project = compile_project
        self.run_id = run_id
        self.key = key
        self.control = control
        self.full_refresh = full_refresh
        self.branch = run_branch(run_id)
        self.target = target  # the ref the run forks from and merges into
        self.version: str | None = None  # the pipeline definition's hash
        self.phases: dict[str, int] = {}
        self.phase_status: dict[str, str] = {}
        self.quality: list[QualityOutcome] = []
        self.diff: data_diff.DataDiff | None = None  # what the write changed in the table (after quality)
        self.outcome: WriteOutcome | None = None
        self.strategy: str | None = None
        self.staging = self.settings.state_dir / "staging" / run_id
        # a Spark that cannot see this disk reads local landing files from the warehouse's bucket
        self.remote_staging = run_staging(self.settings, run_id)
        self.run_started_at = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        self.session = None
        self.sources: RunSources | None = None  # what the current attempt reads
        self.pipeline: Pipeline | None = None
        self.fork_pointers: dict[str, str] = {}
        self._written: list[int] = []  # the snapshots this run's writes made (landing facts taken in at its merge)
        self.failed_phase: str | None = None
        self.notes: list[str] = []  # warnings worth keeping with the run (coded: "RAT-LND-009 ...")
        self._query: tuple[Pipeline, str] | None = None  # the planned query the write phase executes
        self.isolated: IsolatedRun | None = None  # an isolated Python pipeline's child and folder

    # ---------------------------------------------------------------------------------------- helpers

    def log(self, message: str, level: str = "info") -> None:
        self.history.add_log(self.run_id, level, message)
        self.bus.emit(LogLine(self.run_id, level, message))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.control.check()
        failpoint(f"kill:{name}")
        failpoint(f"kill:{name}:{self.key}")  # one pipeline of several (an atomic publish killed midway)
        self.bus.emit(PhaseStarted(self.run_id, name))
        began = time.monotonic()
        status = "failed"
        try:
            self.control.check()  # a cancel that arrived with the phase's start stops it before any work
            yield
            status = "done"
        except Cancelled:
            status = "cancelled"
            raise
        except Exception as exc:
            if self.control.cancel_requested.is_set() and spark_errors.is_cancellation(exc):
                status = "cancelled"
                raise Cancelled() from exc
            self.failed_phase = name
            raise
        finally:
            ms = int((time.monotonic() - began) * 1000)
            self.phases[name] = self.phases.get(name, 0) + ms
            self.phase_status[name] = status
            self.history.update_run(self.run_id, phases=self.phases, phase_status=self.phase_status)
            self.bus.emit(PhaseFinished(self.run_id, name, status, ms))

    def _inputs_unchanged(self, sources: RunSources) -> None:
        changed = sources.changed_inputs()
        if changed:
            raise changed_inputs_error(changed)

    def _storage_error(self, exc: BaseException) -> RatuiError | None:
        """A failure of this process's own reads and writes of an s3:// warehouse (PyIceberg's metadata through
        pyarrow, boto3), as RAT-S3-00x; None when the tables are local or it is something else."""
        storage = self.catalog.storage
        if storage.s3 is None or not isinstance(exc, OSError) and type(exc).__module__.split(".")[0] not in (
                "botocore", "boto3", "pyarrow"):
            return None
        return storage.s3.error(exc, "read or write the warehouse's tables", storage.url)

    def _branch_exists(self) -> bool:
        try:
            self.catalog.get_ref(self.branch)
            return True
        except RatuiError:
            return False

    def _drop_branch(self) -> None:
        if self._branch_exists():
            self.catalog.delete_branch(self.branch)

    # ---------------------------------------------------------------------------------------- the run

    def go(self) -> RunResult:
        began = time.monotonic()
        self.history.update_run(self.run_id, status="running", started_at=now_iso(), branch=self.branch,
                                pid=os.getpid(), host=socket.gethostname(), pid_started=processes.started_at())
        self.bus.emit(RunStarted(self.run_id, self.key, self.branch))
        status, error = "failed", None
        try:
            self.catalog.storage.check()  # an s3:// warehouse that cannot be reached fails the run here, coded
            self._attempts()
            status = "success"
        except Cancelled:
            status = "failed" if self.control.cancel_error else "cancelled"
            error = self.control.cancel_error or RatuiError("RAT-RUN-001", f"run {self.run_id} of {self.key} was "
                                                            "cancelled")
        except RatuiError as exc:
            error = exc
        except Exception as exc:  # a bug or an unexpected Spark/IO failure: record it, never crash the caller
            if self.control.cancel_requested.is_set() and spark_errors.is_cancellation(exc):
                status = "failed" if self.control.cancel_error else "cancelled"
                error = self.control.cancel_error or RatuiError("RAT-RUN-001", f"run {self.run_id} of {self.key} "
                                                                "was cancelled")
            elif spark_errors.is_unreachable(exc):
                error = RatuiError(spark_errors.UNREACHABLE_CODE, spark_errors.error_message(exc))
            elif (stored := spark_errors.storage_failure(exc) or self._storage_error(exc)) is not None:
                self.log(traceback.format_exc(), "error")
                error = stored
            else:
                self.log(traceback.format_exc(), "error")
                error = RatuiError("RAT-RUN-002", f"{type(exc).__name__}: {_first_line(exc)}")
        finally:
            self._cleanup()
        if status == "failed" and error is not None and self.failed_phase in ("build", "write") \
                and self.sources is not None:
            # a read that failed on a file still being written or replaced: that is the cause to report, and it
            # does not count against the file
            changed = self.sources.changed_inputs(removed=True)
            if changed:
                error = changed_inputs_error(changed, cause=error)
        if error is not None and error.file is None and self.pipeline is not None and \
                error.code.startswith(PIPELINE_FAULT_FAMILIES):
            error.file = str(self.pipeline.file)  # what the pipeline produced is at fault: name its file
        if error is not None:
            self.log(str(error), "error" if status == "failed" else "warning")
        consumed = self.sources.consumed if self.sources else []
        if status == "success" and self.pipeline is not None:
            _file, config = self.pipeline.loaded()
            archived = {e[3] for e in consumed} if config.archive_landing_zones else set()
            zone_inputs = self.sources.zone_inputs if self.sources else {}
            zones = {z: recorded_digest([f for f in digest if f[0] not in archived])
                     for z, digest in zone_inputs.items()}
            tables = {ref: self.fork_pointers.get(ref) for ref in self.pipeline.refs}
            self.history.update_run(self.run_id, fingerprint=definition_hashes(self.pipeline),
                                    inputs={"tables": tables, "zones": zones})
        elif (status == "failed" and error is not None and consumed and self.target == MAIN
              and self.failed_phase in ("build", "write", "quality") and not is_definition_error(error.code)
              and not error.code.startswith(("RAT-S3-", "RAT-SPK-")) and error.code != CHANGED_WHILE_READ):
            # only failures that can be the data's fault count against the files (not an unreachable store or
            # Spark)
            # a read error names its file: only that file is to blame, the others of the batch are not
            named = [e for e in consumed if error.file and error.file.endswith("/" + e[3])]
            skipped = self.state.ledger.record_failure(named or consumed, str(error))
            if skipped:
                self.log(f"landing file(s) skipped after {self.state.ledger.max_attempts} failed attempts: "
                         f"{', '.join(skipped)}", "warning")
        warnings = sum(1 for q in self.quality if q.status == "warned")
        duration = int((time.monotonic() - began) * 1000)
        rows = self.outcome.rows_written if (self.outcome and status == "success") else 0
        notes = self.notes + (list(self.outcome.notes) if self.outcome else [])
        self.history.update_run(
            self.run_id, status=status, finished_at=now_iso(), duration_ms=duration, rows_written=rows,
            warnings=warnings, phases=self.phases, strategy=self.strategy,
            write=self.outcome.to_dict() if self.outcome else None, notes=notes,
            error_code=error.code if error else None, error_message=error.message if error else None,
            error_hint=error.hint if error else None, error_file=error.file if error else None,
            error_line=error.line if error else None,
        )
        result = RunResult(
            self.run_id, self.key, status, self.strategy, rows, duration, dict(self.phases),
            [q.to_dict() for q in self.quality], error.to_dict() if error else None, warnings, self.branch,
            self.outcome.to_dict() if self.outcome else None, notes,
            diff=self.diff.to_dict() if self.diff else None,
        )
        self.bus.emit(RunFinished(self.run_id, self.key, status, rows, duration, result.error, warnings,
                                  dict(self.phases), diff=result.diff))
        return result

    def _cleanup(self) -> None:
        """Branch, staging and views go whatever the outcome; a failure here is logged, never raised."""
        try:
            self._drop_branch()
        except Exception as exc:  # the reaper removes orphan branches later; say so
            self.log(f"could not delete branch {self.branch}: {exc}", "warning")
        shutil.rmtree(self.staging, ignore_errors=True)
        if self.remote_staging is not None:
            try:
                self.remote_staging.remove()
            except RatuiError as exc:  # the reaper sweeps staging prefixes of runs that are over
                self.log(f"could not remove the run's staged files at {self.remote_staging.url}/: {exc.message}",
                         "warning")
        if self.sources is not None:
            self.sources.drop_views()
        if self.isolated is not None:
            self.isolated.remove()

    def _attempts(self) -> None:
        attempts = self.settings.merge_retries
        for attempt in range(1, attempts + 1):
            try:
                self._once()
                return
            except RatuiError as exc:
                if exc.code != "RAT-CAT-003" or attempt == attempts:
                    raise
                delay = self.settings.merge_backoff_ms / 1000 * (2 ** (attempt - 1))
                self.log(f"merge conflict on {', '.join(exc.details.get('tables', []))}: retrying the run in "
                         f"{delay:.1f}s (attempt {attempt + 1} of {attempts})", "warning")
                self._drop_branch()
                self.quality.clear()
                self.notes.clear()
                time.sleep(delay)

    def _once(self) -> None:
        with self.phase("branch"):
            self.catalog.create_branch(self.branch, from_ref=self.target, run_id=self.run_id)
            self.fork_pointers = self.catalog.table_pointers(self.branch)
            self.log(f"branch {self.branch} created from {self.target}")
        with self.phase("config"):
            pipeline, strategy = self._load_pipeline()
            _file, config = pipeline.loaded()
        with self.phase("build"):
            sources, batch = self._build(pipeline, strategy)
        with self.phase("write"):
            self.outcome = self._write(config, strategy, batch)
            self.catalog.record_commit(self.branch, f"{self.strategy} {self.key} ({self.outcome.rows_written} rows)")
            self.log(f"{self.strategy}: {self.outcome.rows_written} rows written, {self.outcome.files_added} files "
                     f"added, {self.outcome.files_removed} removed" +
                     (f"; schema: {', '.join(self.outcome.schema_changes)}" if self.outcome.schema_changes else ""))
            for note in self.outcome.notes:
                self.log(note, "warning")
        self._inputs_unchanged(sources)  # what was written came from the files as they were listed
        with self.phase("quality"):
            try:
                self._quality(pipeline, sources)
            except RatuiError as exc:
                if exc.code == "RAT-RUN-003":  # tests failed: the diff still says what the run would have changed
                    self._diff_of_a_failed_run(pipeline)
                raise
            self._diff(pipeline)
        self.control.check()
        self._written = sources.written_snapshots()
        with self.phase("resolve"):
            # the landing files this run read become `loaded` in the merge's own transaction
            result = self.catalog.merge(
                self.branch, self.target, message=f"run {self.run_id}: {self.key}", in_tx=self._in_merge_tx,
                meta={"kind": "run", "run_id": self.run_id, "pipeline": self.key, "version": self.version,
                      "strategy": self.strategy})
            self.control.merged.set()
            self.log(f"merged {self.branch} into {self.target} ({', '.join(result.tables) or 'no table changes'})")
        if config.archive_landing_zones and sources.consumed:
            if self.target == MAIN:
                self._archive(sources.consumed)
            else:
                self.log(f"landing files not archived: the run merged into {self.target}, and main has not loaded "
                         "them")

    def _in_merge_tx(self, conn, result) -> None:
        """Inside the merge's transaction: the landing files become loaded (on the target), the run is marked
        merged, and the journal records the merge (`ratui undo` / `z` reverses it: ops/undo.py)."""
        at = result.commit.created_at if result.commit is not None else None
        if result.commit is not None and result.tables and not self.target.startswith(PUBLISH_PREFIX):
            # (into an atomic publish's own branch: the publish's merge into main is what is journaled)
            journal.add(conn, "run", self.target, result.commit.message, before=result.commit.parent,
                        after=result.commit.hash, data={"tables": sorted(result.tables), "from": self.branch,
                                                        "run_id": self.run_id, "pipeline": self.key})
        self.state.ledger.mark_loaded(conn, self.run_id, self.sources.consumed if self.sources else [],
                                      ref=self.target, at=at)
        self.state.ledger.mark_synced(conn, self.target, self.key, self._written)
        self.history.mark_merged(conn, self.run_id, at)

    def _staging_progress(self, zone: str, done: int, total: int, size: int, total_bytes: int) -> None:
        self.bus.emit(StagingProgress(self.run_id, zone, done, total, size, total_bytes))

    def _archive(self, consumed: list[tuple[str, str, str, str]]) -> None:
        """Move the consumed landing files to _processed/{run_id}/ (after the merge: main already has them).
        Every pipeline reading the zone keeps the file in its ledger, under the archived name."""
        by_zone: dict[tuple[str, str], list[str]] = {}
        for namespace, zone_name, _pipeline, name in consumed:
            if not is_archived_name(name):
                by_zone.setdefault((namespace, zone_name), []).append(name)
        if not by_zone:
            return
        try:
            compiled = self.compile_project()
        except Exception:  # the merge is done; without the project's other readers only this one is known
            compiled = None
        for (namespace, zone_name), names in by_zone.items():
            consumers = {self.key} | ({p.key for p in compiled.pipelines.values()
                                       if p.namespace == namespace and zone_name in p.zones} if compiled else set())
            try:
                zone = open_zone(self.settings, namespace, zone_name)
                moved = zone.archive(names, self.run_id)
                where = zone.archived_to(self.run_id)
                self.state.ledger.mark_archived(namespace, zone_name, self.run_id, moved, sorted(consumers), where)
                self.log(f"archived {len(moved)} {zone.noun}(s) of zone {zone_name} to {where}/")
            except (OSError, RatuiError) as exc:  # the data is merged; a failed archive only leaves files in place
                why = f"{exc.code} {exc.message}" if isinstance(exc, RatuiError) else str(exc)
                self.log(f"could not archive files of zone {zone_name}: {why}", "warning")

    def _load_pipeline(self) -> tuple[Pipeline, str]:
        namespace, layer, name = self.key.split(".")
        folder = self.settings.root / namespace / "pipelines" / layer / name
        if not folder.is_dir():
            raise RatuiError("RAT-PRJ-004", f"pipeline folder {folder} no longer exists", file=str(folder))
        pipeline = discover_pipeline(namespace, layer, folder, self.settings.locations())
        compile_pipeline(pipeline, self.settings)
        if pipeline.errors:
            raise pipeline.errors[0]
        self.pipeline = pipeline
        _file, config = pipeline.loaded()
        strategy = self.strategy = "full_refresh" if self.full_refresh else config.merge_strategy
        self.version = version_of(definition_hashes(pipeline))
        self.history.update_run(self.run_id, strategy=strategy, version=self.version)
        self.log(f"{pipeline.kind} pipeline, strategy {strategy}" +
                 (" (full refresh requested)" if self.full_refresh else ""))
        return pipeline, strategy

    # ------------------------------------------------------------------------------------------ build

    def _build(self, pipeline: Pipeline, strategy: str):
        file, _config = pipeline.loaded()
        self._query = None
        session = self.session = spark_jobs.new_run_session(self.settings, self.run_id)
        # a retry starts from a fresh session and fresh sources: views of an earlier attempt are gone
        sources = self.sources = RunSources(
            self.state, session, key=self.key, branch=self.branch, target=self.target, pipeline=pipeline,
            strategy=strategy,
            full_refresh=self.full_refresh, run_started_at=self.run_started_at, staging=self.staging, log=self.log,
            notes=self.notes, remote_staging=self.remote_staging)
        sources.on_progress = self._staging_progress
        sources.check = self.control.check
        sources.learn_landing()
        context = sources.context(pipeline, file)
        sql = ""
        if pipeline.kind == "sql":
            sql = render(pipeline.text, file, context)
            self.log("compiled SQL:\n" + sql.strip(), "debug")  # the console shows it with `v`
            check_pipeline_sql(sql, str(file), line_mapper(pipeline.text, sql))
            try:
                df = session.sql(sql)
            except Exception as exc:
                raise self._query_error(exc, pipeline, sql) from None
        else:
            isolation = self._isolation(pipeline)
            if isolation.isolated:
                df = self._run_isolated(pipeline, file, sources, context, isolation)
            else:
                self._isolated_as(isolation.describe())
                ctx = PythonContext(session, context.ref, context.landing_zone,
                                    context.this.strip("`") if self.catalog.table_exists(self.branch, self.key)
                                    else None, context.run_started_at, context.watermark_value,
                                    context.is_incremental, context.is_scd2)
                with self.control.python_code():  # a cancel interrupts the pipeline's own Python code too
                    df = run_python_pipeline(pipeline.text, file, ctx,
                                             on_print=lambda line: self.log(f"print: {line}"))
        check_columns(df.schema)
        # planned, not executed: the write phase runs the query once, straight into its strategy (its errors
        # still name the pipeline's file and line: see _write)
        self._query = (pipeline, sql)
        return sources, df

    # ------------------------------------------------------------------------------- isolated Python

    def _isolation(self, pipeline: Pipeline) -> Isolation:
        """The level this Python pipeline runs at (isolation/levels.py); RAT-ISO-001 when python.isolation_required
        and the machine gives less."""
        _file, config = pipeline.loaded()
        settings = self.settings
        return decide_isolation(config.isolation or settings.python_isolation,
                                spark_is_local=settings.spark_is_local,
                                tables_on_disk=not self.catalog.storage.remote,
                                required=settings.python_isolation_required, file=str(pipeline.file))

    def _isolated_as(self, text: str) -> None:
        self.history.update_run(self.run_id, isolation=text)
        self.bus.emit(RunIsolated(self.run_id, text))
        self.log(f"python isolation: {text}")

    def _run_isolated(self, pipeline: Pipeline, file: Path, sources: RunSources, context, isolation: Isolation):
        """run(ctx) in a child process at `isolation`'s level (isolation/runner.py); its DataFrame comes back as
        Parquet files in the run's folder, read here by the run's session."""
        if self.isolated is not None:
            self.isolated.remove()  # an earlier attempt's
        else:  # what runs of processes killed mid-run left behind
            sweep_over(self.settings.state_dir, lambda run_id: (self.history.get_run(run_id) or {}).get("status")
                       not in ACTIVE)
        run = self.isolated = IsolatedRun(settings=self.settings, isolation=isolation, run_id=self.run_id,
                                          file=file, text=pipeline.text, tables_root=self.catalog.storage.root,
                                          log=self.log)
        tables = {}
        for key in pipeline.refs:
            tables[key] = (self.catalog.load_table(self.branch, key), sources.table(key))
        this = None
        if self.catalog.table_exists(self.branch, self.key):
            tables[self.key] = (self.catalog.load_table(self.branch, self.key), sources.table(self.key))
            this = self.key
        zones = {zone: sources.zone(pipeline.namespace, zone, str(file)) for zone in pipeline.zones}
        run.prepare(self.session, tables=tables, zones=zones, this=this, namespace=pipeline.namespace,
                    run_started_at=context.run_started_at, watermark_value=context.watermark_value,
                    incremental=bool(context.is_incremental), scd2=bool(context.is_scd2))
        outcome = run.run(self.control.check)
        self._isolated_as(outcome.level or isolation.level)
        error = run.outcome_error(outcome)
        if error is not None:
            raise error
        return run.result(self.session)

    def _query_error(self, exc: BaseException, pipeline: Pipeline, sql: str) -> BaseException:
        """A failure while Spark executes the pipeline's query, as the pipeline's coded error."""
        if isinstance(exc, (RatuiError, Cancelled)):
            return exc
        if self.control.cancel_requested.is_set() and spark_errors.is_cancellation(exc):
            return Cancelled()
        if spark_errors.is_unreachable(exc):  # Spark went away (a Connect server gone): not the pipeline's fault
            return RatuiError(spark_errors.UNREACHABLE_CODE, spark_errors.error_message(exc))
        stored = spark_errors.storage_failure(exc)  # the object store, from Spark's side: not the pipeline's fault
        if stored is not None:
            return stored
        file, _config = pipeline.loaded()
        if pipeline.kind == "sql":
            return _spark_error(exc, "RAT-SQL-001", file, pipeline.text, sql)
        return _spark_error(exc, "RAT-PY-004", file)

    def _write(self, config, strategy: str, batch) -> WriteOutcome:
        request = WriteRequest(self.session, self.catalog, self.branch, self.key, self.settings.root, self.run_id,
                               batch, None, config, strategy, run_started_at=self.run_started_at,
                               snapshot_properties=self.sources.landing_summary() if self.sources else {})
        try:
            outcome = write(request)  # the query executes here, once
        except Exception as exc:
            if self._query is None:
                raise
            pipeline, sql = self._query
            error = self._query_error(exc, pipeline, sql)
            if isinstance(error, RatuiError) and error is not exc:
                self.failed_phase = "build"  # the query failed, not the table
            raise error from None
        self.log(f"result: {outcome.rows_written} rows, {len(batch.columns)} columns")
        return outcome

    # ---------------------------------------------------------------------------------------- quality

    def _quality(self, pipeline: Pipeline, sources: RunSources) -> None:
        if not pipeline.tests:
            self.log("no quality tests")
            return
        file, _config = pipeline.loaded()
        # the tests see the branch's new data: re-register this pipeline's table after the write
        sources.forget(self.key)
        context = sources.context(pipeline, file)
        context.this = sources.table(self.key)
        outcomes = run_tests(self.session, pipeline.tests, context, self.settings.quality_sample_rows,
                             check=self.control.check)
        for outcome in outcomes:
            self.quality.append(outcome)
            self.history.add_quality(self.run_id, outcome.to_dict())
            self.bus.emit(QualityResultEvent(self.run_id, outcome.test, outcome.severity, outcome.status,
                                             outcome.violations, outcome.duration_ms))
            self.log(f"quality {outcome.test} [{outcome.severity}]: {outcome.status}"
                     + (f", {outcome.violations} violating rows" if outcome.violations else "")
                     + (f" - {outcome.error}" if outcome.error else ""),
                     "info" if outcome.status == "passed" else "warning")
        blocking = [q for q in self.quality if q.blocks_merge]
        if blocking:
            names = ", ".join(f"{q.test} ({q.violations} rows)" if q.status == "failed" else f"{q.test} (error)"
                              for q in blocking)
            first = blocking[0]
            raise RatuiError("RAT-RUN-003", f"quality gate failed for {self.key}: {names}"
                             + (f"; {first.test}: {first.error}" if first.status == "error" and first.error else ""),
                             file=str(first.file), line=first.line)

    # ------------------------------------------------------------------------------------------- data diff

    def _diff_of_a_failed_run(self, pipeline: Pipeline) -> None:
        """The diff of a run whose quality tests failed, kept with it (no gate: the run fails all the same); whatever
        happens here, the quality failure stays the run's error."""
        try:
            self._diff(pipeline, gate=False)
        except Exception as exc:
            self.log(f"data diff not computed: {type(exc).__name__}: {_first_line(exc)}", "warning")

    def _diff(self, pipeline: Pipeline, *, gate: bool = True) -> None:
        """The run's data diff against the table as the branch forked (data_diff.py), stored with the run; its
        gates fail the run (RAT-RUN-009) before the merge. Without gates, a diff that cannot be computed is a
        warning, never the run's failure."""
        file, config = pipeline.loaded()
        if not self.catalog.table_exists(self.branch, self.key):
            return
        gated = gate and data_diff.gates(config)
        self.control.check()
        try:
            after = self.catalog.load_table(self.branch, self.key)
            fork = self.fork_pointers.get(self.key)
            before = self.catalog.static_table(fork) if fork else None
            diff = data_diff.compute(self.session, self.key, before, after, tuple(config.unique_key),
                                     self.settings.diff_max_rows, self.settings.diff_in_process_rows)
        except Exception as exc:
            if gated or isinstance(exc, Cancelled) or spark_errors.is_cancellation(exc) \
                    or spark_errors.is_unreachable(exc):
                raise
            self.log(f"data diff not computed: {type(exc).__name__}: {_first_line(exc)}", "warning")
            return
        self.diff = diff
        failed: list[str] = []
        where = _gate_lines(pipeline, config)
        try:
            if gated:
                failed = data_diff.check_gates(diff, config, str(file), {k: v[1] for k, v in where.items()})
        finally:
            self.history.update_run(self.run_id, diff=diff.to_dict())
        self.log(f"data diff: {diff.summary}" + (f"; schema: {', '.join(diff.schema_changes)}"
                                                 if diff.schema_changes else ""))
        for verdict in diff.gate.get("passed", []):
            self.log(f"diff gate passed: {verdict}")
        if failed:
            first = next((k for k in ("max_row_change", "max_rows_removed", "max_null_increase")
                          if any(f.startswith(k) for f in failed)), "max_row_change")
            gate_file, line = where.get(first, (str(file), None))
            raise RatuiError("RAT-RUN-009", f"data diff gate failed for {self.key}: {'; '.join(failed)} "
                             f"[{diff.summary}]", file=gate_file, line=line,
                             details={"diff": diff.to_dict()})


def _gate_lines(pipeline: Pipeline, config) -> dict[str, tuple[str, int | None]]:
    """Where each diff gate key was written: (file, line)."""
    from ratui.engine.project.config import parse_annotations
    from ratui.engine.project.schema import read_yaml

    file = pipeline.file
    out: dict[str, tuple[str, int | None]] = {}
    keys = ("max_row_change", "max_rows_removed", "max_null_increase")
    if file is not None and any(config.origin.get(k) == "annotation" for k in keys):
        for ann in parse_annotations(pipeline.text, file):
            if ann.key in keys:
                out[ann.key] = (str(file), ann.line)
    yaml_keys = [k for k in keys if config.origin.get(k) == "config.yaml"]
    if yaml_keys:
        path = pipeline.folder / "config.yaml"
        try:
            doc = read_yaml(path, "RAT-CFG-006")
            out.update({k: (str(path), doc.line((k,))) for k in yaml_keys})
        except RatuiError:
            out.update({k: (str(path), None) for k in yaml_keys})
    return out


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "desc", None) or exc).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:500]
    return type(exc).__name__


def _spark_error(exc: BaseException, code: str, file: Path, template: str | None = None,
                 sql: str | None = None) -> RatuiError:
    """A Spark failure as a coded error at the template line it comes from (when Spark names a line)."""
    if isinstance(exc, RatuiError):
        return exc
    line = spark_errors.error_line(exc)
    if line is not None and template is not None and sql is not None:
        line = line_mapper(template, sql)(line)
    elif template is None:
        line = None  # a line of SQL built in Python code, not of the file
    return RatuiError(code, spark_errors.error_message(exc), file=str(file), line=line)
