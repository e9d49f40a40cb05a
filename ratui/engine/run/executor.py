"""The executor of one run of one pipeline: one branch, six timed phases, events out, cancellation in.

    0 branch   create run-{run_id} from the target ref's head (main, or a dev or publish branch)
    1 config   re-read the pipeline from disk and validate it (a file saved after the run was queued is what
               runs, and a broken one fails the run with its code)
    2 build    render the template and plan it on Spark over every source on the branch (build.py: landing files
               are read and checked here); nothing is executed yet
    3 write    execute the query once, straight into the merge strategy, on the table on the branch
    4 quality  run the quality tests against the branch, then the data diff and its gates (gates.py)
    5 resolve  merge the branch into the target (a conflict re-runs the whole run, up to merge.retries attempts)

The branch is deleted whatever happens, so a run that fails or is cancelled leaves its target exactly as it was.
A run on a dev or publish branch reads and marks landing files in that branch's view of the ledger, never
archives them (main has not loaded them), and never counts its failures against them. Everything the run says is
written by the run record (record.py); the invocation that made the executor hands it the project it compiled.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Iterator

from ratui.engine.errors import PIPELINE_FAULT_FAMILIES, RatuiError, is_definition_error
from ratui.engine.events import Event, EventBus, PhaseFinished, PhaseStarted, RunFinished, RunStarted
from ratui.engine.failpoints import failpoint
from ratui.engine.landing.entry import recorded_digest
from ratui.engine.landing.names import is_archived_name
from ratui.engine.landing.zone import open_zone
from ratui.engine.project import intervals
from ratui.engine.project.compiler import CompiledProject, compile_pipeline
from ratui.engine.project.discovery import Pipeline, discover_pipeline
from ratui.engine.run import data_diff, failure, gates
from ratui.engine.run.build import QueryBuild
from ratui.engine.run.changes import definition_hashes, version_of
from ratui.engine.run.control import Cancelled, RunControl
from ratui.engine.run.quality import QualityOutcome
from ratui.engine.run.record import RunRecord, mark_merged_in_tx
from ratui.engine.run.results import RunResult
from ratui.engine.run.scope import RunScope
from ratui.engine.run.sources import CHANGED_WHILE_READ, changed_inputs_error
from ratui.engine.spark import errors as spark_errors
from ratui.engine.spark import jobs as spark_jobs
from ratui.engine.state import journal, processes
from ratui.engine.state.project_state import ProjectState
from ratui.engine.storage.staging import run_staging
from ratui.engine.vocabulary import MAIN, PUBLISH_PREFIX, now_iso
from ratui.engine.write.strategies import WriteOutcome, WriteRequest, write


class RunExecutor:
    """Executes one run of one pipeline (all its attempts) and records it."""

    def __init__(self, state: ProjectState, bus: EventBus[Event], record: RunRecord, run_id: str, key: str,
                 control: RunControl, full_refresh: bool, compiled: CompiledProject, target: str = MAIN,
                 interval: intervals.Range | None = None):
        """`compiled`: the project as the invocation compiled it (who else reads a zone whose files are archived);
        `interval`: the one interval an incremental_by_time run replaces (a backfill's), else the run finds the
        intervals due."""
        self.scope = RunScope(state, record, bus, control, run_id, key, target, full_refresh,
                              datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f"),
                              state.settings.state_dir / "staging" / run_id,
                              # a Spark that cannot see this disk reads local landing files from the warehouse's bucket
                              run_staging(state.settings, run_id), interval)
        self.state = state
        self.settings = state.settings
        self.catalog = state.catalog
        self.record = record
        self.bus = bus
        self.compiled = compiled
        self.run_id = run_id
        self.key = key
        self.control = control
        self.full_refresh = full_refresh
        self.branch = self.scope.branch
        self.target = target
        self.log = self.scope.log
        self.version: str | None = None  # the pipeline definition's hash
        self.phases: dict[str, int] = {}
        self.phase_status: dict[str, str] = {}
        self.quality: list[QualityOutcome] = []
        self.diff: data_diff.DataDiff | None = None  # what the write changed in the table (after quality)
        self.outcome: WriteOutcome | None = None
        self.strategy: str | None = None
        self.build: QueryBuild | None = None  # the current attempt's build (session, sources, planned query)
        self.pipeline: Pipeline | None = None
        self.fork_pointers: dict[str, str] = {}
        self._written: list[int] = []  # the snapshots this run's writes made (landing facts taken in at its merge)
        self.failed_phase: str | None = None
        self._interval_summary: dict[str, str] = {}  # the intervals done after this run's write (time_range.py)

    # ---------------------------------------------------------------------------------------- the run

    def execute(self) -> RunResult:
        """Every attempt, then the record of how it ended; never raises for the run's own failures."""
        try:
            return self._execute()
        finally:
            spark_jobs.end_run(self.run_id)  # a Spark Connect run's session is released

    def _execute(self) -> RunResult:
        began = time.monotonic()
        self.record.update(self.run_id, status="running", started_at=now_iso(), branch=self.branch,
                           pid=os.getpid(), host=socket.gethostname(), pid_started=processes.started_at())
        self.bus.emit(RunStarted(self.run_id, self.key, self.branch))
        status, error = "failed", None
        try:
            self.catalog.storage.check()  # an s3:// warehouse that cannot be reached fails the run here, coded
            self._attempts()
            status = "success"
        except Exception as exc:  # a bug or an unexpected Spark/IO failure too: recorded, never the caller's
            status, error = failure.ended_by(exc, self.scope)
        finally:
            self._cleanup()
        error = self._explained(status, error)
        if error is not None:
            self.log.line(str(error), "error" if status == "failed" else "warning")
        if status == "success":
            self._remember_inputs()
        elif error is not None:
            self._count_against_files(status, error)
        return self._finished(status, error, int((time.monotonic() - began) * 1000))

    def _explained(self, status: str, error: RatuiError | None) -> RatuiError | None:
        """The error as the user should read it: a read that failed on a file still being written or replaced says
        so (and does not count against the file); what the pipeline produced names its file."""
        sources = self.build.sources if self.build else None
        if status == "failed" and error is not None and self.failed_phase in ("build", "write") \
                and sources is not None:
            changed = sources.changed_inputs(removed=True)
            if changed:
                error = changed_inputs_error(changed, cause=error)
        if error is not None and error.file is None and self.pipeline is not None and \
                error.code.startswith(PIPELINE_FAULT_FAMILIES):
            error.file = str(self.pipeline.file)
        return error

    def _remember_inputs(self) -> None:
        """A success keeps its definition's hashes and what it read: change detection compares them next time."""
        if self.pipeline is None:
            return
        sources = self.build.sources if self.build else None
        consumed = sources.consumed if sources else []
        _file, config = self.pipeline.loaded()
        archived = {e[3] for e in consumed} if config.archive_landing_zones else set()
        zone_inputs = sources.zone_inputs if sources else {}
        zones = {z: recorded_digest([f for f in digest if f[0] not in archived]) for z, digest in zone_inputs.items()}
        tables = {ref: self.fork_pointers.get(ref) for ref in self.pipeline.refs}
        self.record.update(self.run_id, fingerprint=definition_hashes(self.pipeline),
                           inputs={"tables": tables, "zones": zones})

    def _count_against_files(self, status: str, error: RatuiError) -> None:
        """Only failures that can be the data's fault count against the landing files read (not an unreachable
        store or Spark); a read error names its file: only that file is to blame, the others of the batch are not."""
        consumed = self.build.sources.consumed if self.build and self.build.sources else []
        if not (status == "failed" and consumed and self.target == MAIN
                and self.failed_phase in ("build", "write", "quality") and not is_definition_error(error.code)
                and not error.code.startswith(("RAT-S3-", "RAT-SPK-")) and error.code != CHANGED_WHILE_READ):
            return
        named = [e for e in consumed if error.file and error.file.endswith("/" + e[3])]
        ledger = self.state.ledger
        skipped = ledger.record_failure(named or consumed, str(error))
        if skipped:
            self.log.line(f"landing file(s) skipped after {ledger.max_attempts} failed attempts: "
                          f"{', '.join(skipped)}", "warning")

    def _finished(self, status: str, error: RatuiError | None, duration: int) -> RunResult:
        warnings = sum(1 for q in self.quality if q.status == "warned")
        rows = self.outcome.rows_written if (self.outcome and status == "success") else 0
        notes = self.log.notes + (list(self.outcome.notes) if self.outcome else [])
        self.record.update(
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
            self.log.line(f"could not delete branch {self.branch}: {exc}", "warning")
        shutil.rmtree(self.scope.staging, ignore_errors=True)
        remote = self.scope.remote_staging
        if remote is not None:
            try:
                remote.remove()
            except RatuiError as exc:  # the reaper sweeps staging prefixes of runs that are over
                self.log.line(f"could not remove the run's staged files at {remote.url}/: {exc.message}", "warning")
        if self.build is not None:
            self.build.drop()

    def _attempts(self) -> None:
        attempts = self.settings.merge_retries
        for attempt in range(1, attempts + 1):
            try:
                self._attempt()
                return
            except RatuiError as exc:
                if exc.code != "RAT-CAT-003" or attempt == attempts:
                    raise
                delay = self.settings.merge_backoff_ms / 1000 * (2 ** (attempt - 1))
                self.log.line(f"merge conflict on {', '.join(exc.details.get('tables', []))}: retrying the run in "
                              f"{delay:.1f}s (attempt {attempt + 1} of {attempts})", "warning")
                self._drop_branch()
                self.quality.clear()
                self.log.notes.clear()
                time.sleep(delay)

    def _attempt(self) -> None:
        """One attempt: the six phases, then the archive of the landing files it read."""
        with self.phase("branch"):
            self.catalog.create_branch(self.branch, from_ref=self.target, run_id=self.run_id)
            self.fork_pointers = self.catalog.table_pointers(self.branch)
            self.log.line(f"branch {self.branch} created from {self.target}")
        with self.phase("config"):
            pipeline, strategy = self._load_pipeline()
            _file, config = pipeline.loaded()
            if config.merge_strategy == "incremental_by_time" and not self._plan_interval(config):
                self.outcome = WriteOutcome(strategy, 0, notes=["no interval due: nothing to run"])
                return
        with self.phase("build"):
            build = self.build = QueryBuild(self.scope, pipeline, strategy, self.build.isolated if self.build else None)
            batch = build.plan()
        sources = build.sources
        assert sources is not None
        with self.phase("write"):
            self.outcome = self._write(build, config, strategy, batch)
            self.catalog.record_commit(self.branch, f"{self.strategy} {self.key} ({self.outcome.rows_written} rows)")
            self.log.line(f"{self.strategy}: {self.outcome.rows_written} rows written, {self.outcome.files_added} "
                          f"files added, {self.outcome.files_removed} removed" +
                          (f"; schema: {', '.join(self.outcome.schema_changes)}" if self.outcome.schema_changes
                           else ""))
            for note in self.outcome.notes:
                self.log.line(note, "warning")
        changed = sources.changed_inputs()  # what was written came from the files as they were listed
        if changed:
            raise changed_inputs_error(changed)
        with self.phase("quality"):
            self._quality(build, pipeline)
        self.control.check()
        self._written = sources.written_snapshots()
        with self.phase("resolve"):
            # the landing files this run read become `loaded` in the merge's own transaction
            result = self.catalog.merge(
                self.branch, self.target, message=f"run {self.run_id}: {self.key}", in_tx=self._in_merge_tx,
                meta={"kind": "run", "run_id": self.run_id, "pipeline": self.key, "version": self.version,
                      "strategy": self.strategy})
            self.control.merged.set()
            self.log.line(f"merged {self.branch} into {self.target} ({', '.join(result.tables) or 'no table changes'})")
        if config.archive_landing_zones and sources.consumed:
            if self.target == MAIN:
                self._archive(sources.consumed)
            else:
                self.log.line(f"landing files not archived: the run merged into {self.target}, and main has not "
                              "loaded them")

    # ---------------------------------------------------------------------------------------- phases

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
            self.record.update(self.run_id, phases=self.phases, phase_status=self.phase_status)
            self.bus.emit(PhaseFinished(self.run_id, name, status, ms))

    def _load_pipeline(self) -> tuple[Pipeline, str]:
        """The pipeline as it is on disk now (not as the invocation compiled it): its folder read and compiled
        again, alone."""
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
        self.record.update(self.run_id, strategy=strategy, version=self.version)
        self.log.line(f"{pipeline.kind} pipeline, strategy {strategy}" +
                      (" (full refresh requested)" if self.full_refresh else ""))
        return pipeline, strategy

    def _plan_interval(self, config) -> bool:
        """The interval range this incremental_by_time run replaces (a backfill's one, else the intervals due on the
        branch; a full refresh: from `start` up to now) and the record of what is done after it; False: none due."""
        table = self.catalog.load_table(self.branch, self.key) \
            if self.catalog.table_exists(self.branch, self.key) else None
        done = intervals.done_of(table)
        now = intervals.utc_now()
        interval: intervals.Range | None
        if self.full_refresh:
            begin = intervals.first_start(config) or datetime(1970, 1, 1)
            interval = intervals.floor(begin, config.batch), intervals.floor(now, config.batch)
            done = []
        else:
            interval = self.scope.interval or intervals.due(config, done, now)
        if interval is None or interval[0] >= interval[1]:
            self.log.line("no interval due: every interval up to now is done")
            return False
        self.scope.interval = interval
        self._interval_summary = intervals.summary(config.batch, intervals.merged(done + [interval]))
        self.log.line(f"interval [{intervals.iso(interval[0])}, {intervals.iso(interval[1])}) "
                      f"({intervals.count(*interval, config.batch)} {config.batch}(s))")
        return True

    def _write(self, build: QueryBuild, config, strategy: str, batch) -> WriteOutcome:
        sources = build.sources
        request = WriteRequest(build.session, self.catalog, self.branch, self.key, self.settings.root, self.run_id,
                               batch, None, config, strategy, run_started_at=self.scope.run_started_at,
                               snapshot_properties={**(sources.landing_summary() if sources else {}),
                                                    **self._interval_summary},
                               interval=self.scope.interval)
        try:
            outcome = write(request)  # the query executes here, once
        except Exception as exc:
            error = build.query_error(exc)
            if error is None:
                raise
            if isinstance(error, RatuiError) and error is not exc:
                self.failed_phase = "build"  # the query failed, not the table
            raise error from None
        self.log.line(f"result: {outcome.rows_written} rows, {len(batch.columns)} columns")
        return outcome

    def _quality(self, build: QueryBuild, pipeline: Pipeline) -> None:
        """The quality tests, then the data diff and its gates; the diff of a run whose tests failed is kept with it
        (no gate: the run fails all the same, and whatever happens there the quality failure stays its error)."""
        assert build.sources is not None
        try:
            gates.check_quality(self.scope, build.session, build.sources, pipeline, self.quality)
        except RatuiError as exc:
            if exc.code == "RAT-RUN-003":  # tests failed: the diff still says what the run would have changed
                try:
                    self._diff(build, pipeline, gate=False)
                except Exception as diff_exc:
                    self.log.line(f"data diff not computed: {type(diff_exc).__name__}: "
                                  f"{failure.first_line(diff_exc)}", "warning")
            raise
        self._diff(build, pipeline)

    def _diff(self, build: QueryBuild, pipeline: Pipeline, *, gate: bool = True) -> None:
        """The run's data diff against the table as the branch forked, stored with the run; its gates fail the run
        (RAT-RUN-009) before the merge."""
        _file, config = pipeline.loaded()
        gated = gate and data_diff.gates(config)
        diff = gates.diff_of(self.scope, build.session, pipeline, self.fork_pointers, gated=gated)
        if diff is None:
            return
        self.diff = diff
        gates.judge_diff(self.scope, diff, pipeline, gated=gated)

    # ---------------------------------------------------------------------------------------- the merge

    def _in_merge_tx(self, conn, result) -> None:
        """Inside the merge's transaction: the landing files become loaded (on the target), the run is marked
        merged, and the journal records the merge (`ratui undo` / `z` reverses it: ops/undo.py)."""
        at = result.commit.created_at if result.commit is not None else None
        if result.commit is not None and result.tables and not self.target.startswith(PUBLISH_PREFIX):
            # (into an atomic publish's own branch: the publish's merge into main is what is journaled)
            journal.add(conn, "run", self.target, result.commit.message, before=result.commit.parent,
                        after=result.commit.hash, data={"tables": sorted(result.tables), "from": self.branch,
                                                        "run_id": self.run_id, "pipeline": self.key})
        sources = self.build.sources if self.build else None
        self.state.ledger.mark_loaded(conn, self.run_id, sources.consumed if sources else [], ref=self.target, at=at)
        self.state.ledger.mark_synced(conn, self.target, self.key, self._written)
        mark_merged_in_tx(conn, self.run_id, at)

    def _archive(self, consumed: list[tuple[str, str, str, str]]) -> None:
        """Move the consumed landing files to _processed/{run_id}/ (after the merge: main already has them).
        Every pipeline reading the zone (in the project the invocation compiled) keeps the file in its ledger, under
        the archived name."""
        by_zone: dict[tuple[str, str], list[str]] = {}
        for namespace, zone_name, _pipeline, name in consumed:
            if not is_archived_name(name):
                by_zone.setdefault((namespace, zone_name), []).append(name)
        for (namespace, zone_name), names in by_zone.items():
            consumers = {self.key} | {p.key for p in self.compiled.pipelines.values()
                                      if p.namespace == namespace and zone_name in p.zones}
            try:
                zone = open_zone(self.settings, namespace, zone_name)
                moved = zone.archive(names, self.run_id)
                where = zone.archived_to(self.run_id)
                self.state.ledger.mark_archived(namespace, zone_name, self.run_id, moved, sorted(consumers), where)
                self.log.line(f"archived {len(moved)} {zone.noun}(s) of zone {zone_name} to {where}/")
            except (OSError, RatuiError) as exc:  # the data is merged; a failed archive only leaves files in place
                why = f"{exc.code} {exc.message}" if isinstance(exc, RatuiError) else str(exc)
                self.log.line(f"could not archive files of zone {zone_name}: {why}", "warning")

    def _drop_branch(self) -> None:
        try:
            self.catalog.get_ref(self.branch)
        except RatuiError:
            return
        self.catalog.delete_branch(self.branch)
