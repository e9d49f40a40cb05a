"""Phase 2 of a run (build): the pipeline's query, planned on Spark over its sources on the run's branch.

A SQL pipeline's template is rendered and planned; a Python pipeline's `run(ctx)` runs in this process or, at the
level isolation/levels.py decides, in a confined child whose DataFrame comes back as Parquet files. Landing files
are read and checked here; nothing is executed yet: the write phase runs the query once, straight into its
strategy, and a failure there is still reported at the pipeline's file and line (`query_error`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ratui.engine.iceberg.schema import check_columns
from ratui.engine.isolation.levels import Isolation, decide as decide_isolation
from ratui.engine.isolation.runner import IsolatedRun, sweep_over
from ratui.engine.events import RunIsolated
from ratui.engine.project.discovery import Pipeline
from ratui.engine.project.templating import line_mapper, render
from ratui.engine.run import failure
from ratui.engine.run.python_pipeline import PythonContext, run_python_pipeline
from ratui.engine.run.scope import RunScope
from ratui.engine.run.sources import RunSources
from ratui.engine.run.sql_reach import check_pipeline_sql
from ratui.engine.spark import jobs as spark_jobs
from ratui.engine.vocabulary import ACTIVE


class QueryBuild:
    """The build of one attempt: what it made (the session, the sources, an isolated run's child folder, the
    planned query) stays here for the write and quality phases and for the executor's cleanup. A retry starts a new
    build from a fresh session and fresh sources, handed the earlier attempt's isolated run to remove."""

    def __init__(self, scope: RunScope, pipeline: Pipeline, strategy: str, isolated: IsolatedRun | None = None):
        self.scope = scope
        self.pipeline = pipeline
        self.strategy = strategy
        self.session: Any = None
        self.sources: RunSources | None = None
        self.isolated = isolated  # an isolated Python pipeline's child and folder
        self.query: tuple[Pipeline, str] | None = None  # the planned query the write phase executes

    def plan(self) -> Any:
        """The pipeline's DataFrame, planned, not executed."""
        scope, pipeline = self.scope, self.pipeline
        file, _config = pipeline.loaded()
        session = self.session = spark_jobs.new_run_session(scope.settings, scope.run_id)
        sources = self.sources = RunSources(
            scope.state, session, key=scope.key, branch=scope.branch, target=scope.target, pipeline=pipeline,
            strategy=self.strategy, full_refresh=scope.full_refresh, run_started_at=scope.run_started_at,
            staging=scope.staging, log=scope.log, control=scope.control, remote_staging=scope.remote_staging)
        sources.interval = scope.interval
        sources.learn_landing()
        context = sources.context(pipeline, file)
        sql = ""
        if pipeline.kind == "sql":
            sql = render(pipeline.text, file, context)
            scope.log.line("compiled SQL:\n" + sql.strip(), "debug")  # the console shows it with `v`
            check_pipeline_sql(sql, str(file), line_mapper(pipeline.text, sql))
            try:
                df = session.sql(sql)
            except Exception as exc:
                raise failure.query_error(exc, scope.control, pipeline, sql) from None
        else:
            isolation = self._isolation()
            if isolation.isolated:
                df = self._run_isolated(file, sources, context, isolation)
            else:
                self._isolated_as(isolation.describe())
                ctx = PythonContext(session, context.ref, context.landing_zone,
                                    context.this.strip("`") if scope.catalog.table_exists(scope.branch, scope.key)
                                    else None, context.run_started_at, context.watermark_value,
                                    context.is_incremental, context.is_scd2)
                with scope.control.python_code():  # a cancel interrupts the pipeline's own Python code too
                    df = run_python_pipeline(pipeline.text, file, ctx,
                                             on_print=lambda line: scope.log.line(f"print: {line}"))
        check_columns(df.schema)
        self.query = (pipeline, sql)
        return df

    def query_error(self, exc: BaseException) -> BaseException | None:
        """A failure while Spark executes this build's planned query, as the pipeline's coded error (None before
        the query was planned)."""
        if self.query is None:
            return None
        pipeline, sql = self.query
        return failure.query_error(exc, self.scope.control, pipeline, sql)

    def drop(self) -> None:
        """The temporary views and the isolated run's folder go (a stopped session's views are gone anyway)."""
        if self.sources is not None:
            self.sources.drop_views()
        if self.isolated is not None:
            self.isolated.remove()

    # ------------------------------------------------------------------------------- isolated Python

    def _isolation(self) -> Isolation:
        """The level this Python pipeline runs at (isolation/levels.py); RAT-ISO-001 when python.isolation_required
        and the machine gives less."""
        _file, config = self.pipeline.loaded()
        settings = self.scope.settings
        return decide_isolation(config.isolation or settings.python_isolation,
                                spark_is_local=settings.spark_is_local,
                                tables_on_disk=not self.scope.catalog.storage.remote,
                                required=settings.python_isolation_required, file=str(self.pipeline.file))

    def _isolated_as(self, text: str) -> None:
        scope = self.scope
        scope.record.update(scope.run_id, isolation=text)
        scope.bus.emit(RunIsolated(scope.run_id, text))
        scope.log.line(f"python isolation: {text}")

    def _run_isolated(self, file: Path, sources: RunSources, context, isolation: Isolation):
        """run(ctx) in a child process at `isolation`'s level (isolation/runner.py); its DataFrame comes back as
        Parquet files in the run's folder, read here by the run's session."""
        scope, pipeline = self.scope, self.pipeline
        catalog, history = scope.catalog, scope.state.history
        if self.isolated is not None:
            self.isolated.remove()  # an earlier attempt's
        else:  # what runs of processes killed mid-run left behind
            sweep_over(scope.settings.state_dir, lambda run_id: (history.get_run(run_id) or {}).get("status")
                       not in ACTIVE)
        run = self.isolated = IsolatedRun(settings=scope.settings, isolation=isolation, run_id=scope.run_id,
                                          file=file, text=pipeline.text, tables_root=catalog.storage.root,
                                          log=scope.log.line)
        tables = {}
        for key in pipeline.refs:
            tables[key] = (catalog.load_table(scope.branch, key), sources.table(key))
        this = None
        if catalog.table_exists(scope.branch, scope.key):
            tables[scope.key] = (catalog.load_table(scope.branch, scope.key), sources.table(scope.key))
            this = scope.key
        zones = {zone: sources.zone(pipeline.namespace, zone, str(file)) for zone in pipeline.zones}
        run.prepare(self.session, tables=tables, zones=zones, this=this, namespace=pipeline.namespace,
                    run_started_at=context.run_started_at, watermark_value=context.watermark_value,
                    incremental=bool(context.is_incremental), scd2=bool(context.is_scd2))
        outcome = run.run(scope.control.check)
        self._isolated_as(outcome.level or isolation.level)
        error = run.outcome_error(outcome)
        if error is not None:
            raise error
        return run.result(self.session)
