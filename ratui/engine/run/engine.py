"""The phased run: one pipeline, one branch, six timed phases, events out, cancellation in.

    0 branch   create run-{run_id} from main's head
    1 config   re-read the pipeline from disk and validate it
    2 build    render the template, execute on Spark reading every source on the branch, stage the result
    3 write    apply the merge strategy to the table on the branch
    4 quality  run the quality tests against the branch
    5 resolve  merge the branch into main (a conflict re-runs the whole run, up to merge.retries attempts)

The branch is deleted whatever happens, so a run that fails or is cancelled leaves main exactly as it was.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
import time
import traceback
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from ratui.engine.run import processes
from ratui.engine.spark import session as spark_mod
from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog
from ratui.engine.ops.changes import Decision, decide, definition_hashes
from ratui.engine.project.compiler import CompiledProject, compile_pipeline, compile_project
from ratui.engine.errors import RatuiError
from ratui.engine.events import (
    EventBus, LogLine, PhaseFinished, PhaseStarted, QualityResultEvent, RunFinished, RunQueued, RunStarted,
)
from ratui.engine.state.history import History, now_iso
from ratui.engine.state.ledger import Ledger, archive, is_archived_name, zone_digest
from ratui.engine.run.landing_reader import ZoneFile, ZoneReader
from ratui.engine.project.names import sql_ident
from ratui.engine.project.discovery import Pipeline, discover_pipeline, landing_zone
from ratui.engine.run.python_pipeline import PythonContext, run_python_pipeline
from ratui.engine.run.quality import QualityOutcome, run_test
from ratui.engine.project.settings import Settings, load_settings
from ratui.engine.write.strategies import WriteOutcome, WriteRequest, write
from ratui.engine.iceberg.tables import column_max_from_stats, read_table
from ratui.engine.project.templating import TemplateContext, line_mapper, parse_ref, render

log = logging.getLogger("ratui.runner")


def new_run_id() -> str:
    # time-ordered prefix (sorts like the run history) + randomness (unique across processes)
    return datetime.now(timezone.utc).strftime("%y%m%d%H%M%S") + uuid.uuid4().hex[:6]


@dataclass
class RunResult:
    run_id: str
    pipeline: str
    status: str
    strategy: str | None = None
    rows_written: int = 0
    duration_ms: int = 0
    phases: dict[str, int] = field(default_factory=dict)
    quality: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    warnings: int = 0
    branch: str | None = None
    write: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    reason: str | None = None
    run_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Cancelled(Exception):
    pass


class RunControl:
    """What other threads may do to a running run: cancel it."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.cancel_requested = threading.Event()
        self.cancel_error: RatuiError | None = None  # why, when it is not a user's cancel (e.g. the reaper's timeout)
        self.merged = threading.Event()
        self.done = threading.Event()

    def check(self) -> None:
        if self.cancel_requested.is_set():
            raise Cancelled()


def _timestamp_text(value: Any) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    return str(value)


def _bound_to_python(itype, value):
    """Iceberg bounds decode to micros/days ints for temporal types: turn them into readable values."""
    from datetime import date, timedelta

    from pyiceberg import types as it

    if value is None:
        return None
    if isinstance(itype, (it.TimestampType, it.TimestamptzType)):
        return datetime(1970, 1, 1) + timedelta(microseconds=value)
    if isinstance(itype, it.DateType):
        return date(1970, 1, 1) + timedelta(days=value)
    return value


class Engine:
    """A project's engine: compile, run, cancel. Thread-safe; one per project per process."""

    def __init__(self, root: Path, settings: Settings | None = None):
        self.settings = settings or load_settings(root)
        self.catalog = SqliteBranchCatalog(self.settings.db_path, self.settings.root, self.settings.allow_outside)
        self.history = History(self.settings.db_path)
        self.ledger = Ledger(self.settings.db_path, self.settings.landing_max_attempts)
        self.bus = EventBus()
        self._controls: dict[str, RunControl] = {}
        self._lock = threading.Lock()
        self._poller: threading.Thread | None = None
        self._monitor: threading.Thread | None = None
        self._monitor_stop = threading.Event()
        self.recovered = self.recover()

    # ------------------------------------------------------------------------------ crash recovery

    def recover(self) -> list[str]:
        """Runs left `pending`/`running` by a process of this host that is gone: fail them, drop their branches.

        A process is the pid plus its start time (processes.py), so a pid the system gave to another process is
        not taken for the run's. Runs of other hosts are left to the reaper's stuck-run timeout (their process
        cannot be checked here). Safe to call from several processes at once: one of them records each run.
        """
        host = socket.gethostname()
        recovered = []
        for run in self.history.unfinished_runs():
            if run.get("host") != host or not run.get("pid") or processes.alive(run["pid"], run.get("pid_started")):
                continue
            if run["id"] in self._controls:
                continue  # ours and still going (a pid check of our own process cannot fail, but be sure)
            branch = f"run-{run['id']}"
            if run.get("merged_at"):
                # it died after its merge committed: its data is on main, so it did succeed
                if not self.history.claim_unfinished(run["id"], status="success", finished_at=now_iso()):
                    continue
                note = self._drop_dead_branch(run["id"], branch)
                self.history.add_log(run["id"], "warning", f"process {run['pid']} died after the merge committed"
                                     f"{note}")
                recovered.append(run["id"])
                continue
            error = RatuiError("RAT-RUN-006", f"process {run['pid']} running {run['pipeline']} died before the run "
                               "finished")
            if not self.history.claim_unfinished(run["id"], status="failed", finished_at=now_iso(),
                                                 error_code=error.code, error_message=error.message,
                                                 error_hint=error.hint):
                continue
            note = self._drop_dead_branch(run["id"], branch)
            self.history.add_log(run["id"], "error", f"{error}{note} (found by process {os.getpid()})")
            self.bus.emit(RunFinished(run["id"], run["pipeline"], "failed", 0, 0, error.to_dict()))
            recovered.append(run["id"])
        return recovered

    def _drop_dead_branch(self, run_id: str, branch: str) -> str:
        shutil.rmtree(self.settings.state_dir / "staging" / run_id, ignore_errors=True)
        try:
            self.catalog.delete_branch(branch)
            return f"; branch {branch} deleted"
        except RatuiError:
            return ""

    def start_monitor(self, interval: float = 2.0) -> None:
        """Long-lived processes (console, watch): notice a run whose process died within `interval` seconds,
        whichever ratui process started it, and record it as failed (its branch deleted, main untouched)."""
        with self._lock:
            if self._monitor is not None:
                return
            self._monitor_stop = threading.Event()
            self._monitor = threading.Thread(target=self._watch_for_dead_runs, args=(interval, self._monitor_stop),
                                             name="ratui-dead-run-monitor", daemon=True)
            self._monitor.start()

    def _watch_for_dead_runs(self, interval: float, stop: threading.Event) -> None:
        while not stop.wait(interval):
            try:
                self.recover()
            except Exception:  # a busy or closed database must not end the monitor; the next pass retries
                log.debug("dead-run check failed", exc_info=True)

    def stop_monitor(self) -> None:
        with self._lock:
            monitor, self._monitor = self._monitor, None
        if monitor is not None:
            self._monitor_stop.set()
            monitor.join(timeout=5)

    def _ensure_cancel_poller(self) -> None:
        """Honour cancel requests written by other processes (`ratui cancel`) for runs of this process."""
        with self._lock:
            if self._poller is not None and self._poller.is_alive():
                return
            self._poller = threading.Thread(target=self._poll_cancels, name="ratui-cancel-poller", daemon=True)
            self._poller.start()

    def _poll_cancels(self) -> None:
        while True:
            active = self.active_runs()
            if not active:
                with self._lock:
                    if not any(not c.done.is_set() for c in self._controls.values()):
                        self._poller = None
                        return
            try:
                for run_id in self.history.cancel_requested(active):
                    self._cancel_local(run_id)
            except Exception:  # a busy database must not kill the poller
                log.debug("cancel poll failed", exc_info=True)
            time.sleep(0.25)

    @property
    def root(self) -> Path:
        return self.settings.root

    def compile(self) -> CompiledProject:
        return compile_project(self.root, self.settings)

    def spark(self):
        return spark_mod.get_spark(self.settings)

    # ------------------------------------------------------------------------------------ running

    def run(self, keys: list[str], *, trigger: str = "cli", full_refresh: bool = False, force: bool = False,
            on_result=None) -> list[RunResult]:
        """Run pipelines one after another in the given (topological) order.

        Each pipeline first gets a run type and a reason (change detection): an unchanged one is skipped
        without a branch. A pipeline whose upstream failed in this invocation is skipped ("upstream
        failed"); independent pipelines still run. `force` and `full_refresh` run regardless.
        """
        compiled = self.compile()
        invocation = uuid.uuid4().hex[:12]
        failed: set[str] = set()
        results: list[RunResult] = []
        for key in keys:
            upstream_failed = [u for u in compiled.graph.ancestors(key) if u in failed]
            if upstream_failed:
                reason = f"upstream failed: {', '.join(sorted(upstream_failed))}"
                error = RatuiError("RAT-RUN-005", f"{key} was not run because {', '.join(sorted(upstream_failed))} "
                                   "failed")
                result = self._record_skip(key, compiled, trigger, invocation, reason, error)
                failed.add(key)
            else:
                decision = self.decide(compiled.pipelines[key], force=force, full_refresh=full_refresh)
                if not decision.runs:
                    result = self._record_skip(key, compiled, trigger, invocation, decision.reason, None)
                else:
                    run_id = self.queue(key, trigger=trigger, invocation=invocation, compiled=compiled,
                                        decision=decision)
                    result = self.execute(run_id, key, full_refresh=full_refresh)
                    result.run_type, result.reason = decision.run_type, decision.reason
                    if result.status not in ("success",):
                        failed.add(key)
            results.append(result)
            if on_result:
                on_result(result)
        return results

    def decide(self, pipeline: Pipeline, *, force: bool = False, full_refresh: bool = False) -> Decision:
        if full_refresh:
            return Decision(pipeline.key, "full", "--full-refresh: rebuild from scratch")
        if not pipeline.ok:
            return Decision(pipeline.key, "backfill", "definition has errors")  # the run reports them
        return decide(self, pipeline, force=force)

    def _record_skip(self, key: str, compiled: CompiledProject, trigger: str, invocation: str | None, reason: str,
                     error: RatuiError | None, run_id: str | None = None) -> RunResult:
        pipeline = compiled.pipelines.get(key)
        strategy = pipeline.config.merge_strategy if pipeline and pipeline.config else None
        if run_id is None:
            run_id = new_run_id()
            self.history.create_run(run_id, key, trigger, strategy, invocation, run_type="skip", reason=reason)
        stamp = now_iso()
        self.history.update_run(run_id, status="skipped", run_type="skip", reason=reason, started_at=stamp,
                                finished_at=stamp, duration_ms=0,
                                error_code=error.code if error else None, error_message=error.message if error else None,
                                error_hint=error.hint if error else None)
        self.history.add_log(run_id, "info", f"skipped: {reason}")
        self.bus.emit(RunFinished(run_id, key, "skipped", 0, 0, error.to_dict() if error else None))
        return RunResult(run_id, key, "skipped", strategy, error=error.to_dict() if error else None,
                         reason=reason, run_type="skip")

    def queue(self, key: str, *, trigger: str = "cli", invocation: str | None = None,
              compiled: CompiledProject | None = None, decision: Decision | None = None) -> str:
        """Record a pending run and return its id (execute() or start() runs it)."""
        run_id = new_run_id()
        strategy = None
        if compiled and key in compiled.pipelines and compiled.pipelines[key].config:
            strategy = compiled.pipelines[key].config.merge_strategy
        self.history.create_run(run_id, key, trigger, strategy, invocation,
                                run_type=decision.run_type if decision else None,
                                reason=decision.reason if decision else None)
        with self._lock:
            self._controls[run_id] = RunControl(run_id)
        self.bus.emit(RunQueued(run_id, key, trigger))
        return run_id

    def start(self, key: str, *, trigger: str = "console", full_refresh: bool = False, force: bool = False) -> str:
        """Run in a background thread; returns the run id at once. Change detection applies unless forced."""
        compiled = self.compile()
        run_id = self.queue(key, trigger=trigger, compiled=compiled)

        def work() -> None:
            try:
                decision = self.decide(compiled.pipelines[key], force=force, full_refresh=full_refresh)
            except Exception as exc:  # deciding reads files and SQLite: never lose the run over it
                decision = Decision(key, "backfill", f"change detection failed ({exc}); running")
            self.history.update_run(run_id, run_type=decision.run_type, reason=decision.reason)
            if not decision.runs:
                with self._lock:
                    control = self._controls.pop(run_id, None)
                self._record_skip(key, compiled, trigger, None, decision.reason, None, run_id=run_id)
                if control:
                    control.done.set()
                return
            self.execute(run_id, key, full_refresh=full_refresh)

        thread = threading.Thread(target=work, name=f"ratui-run-{run_id}", daemon=True)
        thread.start()
        return run_id

    def cancel(self, run_id: str, error: RatuiError | None = None) -> str:
        """Ask a run to stop, from any thread or process.

        Returns 'requested', 'finished' (too late: it already ended, or its merge has committed) or 'unknown'.
        The request is written to the database, so the process running the run honours it at its next
        checkpoint; a run of this process is also interrupted at once (its Spark jobs are cancelled).
        """
        run = self.history.get_run(run_id)
        if run is None:
            return "unknown"
        run_id = run["id"]
        if run["status"] not in ("pending", "running") or run.get("merged_at"):
            return "finished"
        self.history.request_cancel(run_id, os.getpid(), socket.gethostname())
        return self._cancel_local(run_id, error) or "requested"

    def _cancel_local(self, run_id: str, error: RatuiError | None = None) -> str | None:
        with self._lock:
            control = self._controls.get(run_id)
        if control is None:
            return None
        if control.merged.is_set() or control.done.is_set():
            return "finished"
        control.cancel_error = control.cancel_error or error
        control.cancel_requested.set()
        spark_mod.cancel_run(run_id)
        return "requested"

    def active_runs(self) -> list[str]:
        with self._lock:
            return [r for r, c in self._controls.items() if not c.done.is_set()]

    def wait(self, run_id: str, timeout: float | None = None) -> bool:
        with self._lock:
            control = self._controls.get(run_id)
        return True if control is None else control.done.wait(timeout)

    def execute(self, run_id: str, key: str, *, full_refresh: bool = False) -> RunResult:
        with self._lock:
            control = self._controls.setdefault(run_id, RunControl(run_id))
        self._ensure_cancel_poller()
        try:
            return _Run(self, run_id, key, control, full_refresh).go()
        finally:
            control.done.set()
            with self._lock:
                self._controls.pop(run_id, None)

    def close(self) -> None:
        self.stop_monitor()
        self.history.close()


class _Run:
    """One run of one pipeline (all attempts)."""

    def __init__(self, engine: Engine, run_id: str, key: str, control: RunControl, full_refresh: bool):
        self.engine = engine
        self.settings = engine.settings
        self.catalog = engine.catalog
        self.history = engine.history
        self.bus = engine.bus
        self.run_id = run_id
        self.key = key
        self.control = control
        self.full_refresh = full_refresh
        self.branch = f"run-{run_id}"
        self.phases: dict[str, int] = {}
        self.phase_status: dict[str, str] = {}
        self.quality: list[QualityOutcome] = []
        self.outcome: WriteOutcome | None = None
        self.strategy: str | None = None
        self.staging = self.settings.state_dir / "staging" / run_id
        self.run_started_at = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        self.session = None
        self.views: dict[str, str] = {}
        self.pipeline: Pipeline | None = None
        self.consumed: list[tuple[str, str, str, str]] = []  # landing files read: (namespace, zone, pipeline, file)
        self.zone_inputs: dict[str, list] = {}
        self.fork_pointers: dict[str, str] = {}
        self.failed_phase: str | None = None
        self.notes: list[str] = []  # warnings worth keeping with the run (coded: "RAT-LND-009 ...")

    # ---------------------------------------------------------------------------------------- helpers

    def log(self, message: str, level: str = "info") -> None:
        self.history.add_log(self.run_id, level, message)
        self.bus.emit(LogLine(self.run_id, level, message))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.control.check()
        _failpoint(f"kill:{name}")
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
            if self.control.cancel_requested.is_set() and spark_mod.is_cancellation(exc):
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
            self._attempts()
            status = "success"
        except Cancelled:
            status = "failed" if self.control.cancel_error else "cancelled"
            error = self.control.cancel_error or RatuiError("RAT-RUN-001", f"run {self.run_id} of {self.key} was "
                                                            "cancelled")
        except RatuiError as exc:
            error = exc
        except Exception as exc:  # a bug or an unexpected Spark/IO failure: record it, never crash the caller
            if self.control.cancel_requested.is_set() and spark_mod.is_cancellation(exc):
                status = "failed" if self.control.cancel_error else "cancelled"
                error = self.control.cancel_error or RatuiError("RAT-RUN-001", f"run {self.run_id} of {self.key} "
                                                                "was cancelled")
            else:
                self.log(traceback.format_exc(), "error")
                error = RatuiError("RAT-RUN-002", f"{type(exc).__name__}: {_first_line(exc)}")
        finally:
            self._cleanup()
        if error is not None and error.file is None and self.pipeline is not None and \
                error.code.startswith(("RAT-WRT", "RAT-SQL", "RAT-PY", "RAT-CFG", "RAT-TPL")):
            error.file = str(self.pipeline.file)  # what the pipeline produced is at fault: name its file
        if error is not None:
            self.log(str(error), "error" if status == "failed" else "warning")
        if status == "success" and self.pipeline is not None:
            archived = {e[3] for e in self.consumed} if self.pipeline.config.archive_landing_zones else set()
            zones = {z: [f for f in digest if f[0] not in archived] for z, digest in self.zone_inputs.items()}
            tables = {ref: self.fork_pointers.get(ref) for ref in self.pipeline.refs}
            self.history.update_run(self.run_id, fingerprint=definition_hashes(self.pipeline),
                                    inputs={"tables": tables, "zones": zones})
        elif (status == "failed" and self.consumed and self.failed_phase in ("build", "write", "quality")
              and not error.code.startswith(("RAT-TPL", "RAT-CFG", "RAT-PRJ", "RAT-DAG"))):
            # only failures that can be the data's fault count against the files
            skipped = self.engine.ledger.record_failure(self.consumed, str(error))
            if skipped:
                self.log(f"landing file(s) skipped after {self.engine.ledger.max_attempts} failed attempts: "
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
        )
        self.bus.emit(RunFinished(self.run_id, self.key, status, rows, duration, result.error, warnings,
                                  dict(self.phases)))
        return result

    def _cleanup(self) -> None:
        """Branch, staging and views go whatever the outcome; a failure here is logged, never raised."""
        try:
            self._drop_branch()
        except Exception as exc:  # the reaper removes orphan branches later; say so
            self.log(f"could not delete branch {self.branch}: {exc}", "warning")
        shutil.rmtree(self.staging, ignore_errors=True)
        if self.session is not None:
            for view in self.views.values():
                try:
                    self.session.catalog.dropTempView(view.strip("`"))
                except Exception:
                    pass

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
            self.catalog.create_branch(self.branch, run_id=self.run_id)
            self.fork_pointers = self.catalog.table_pointers(self.branch)
            self.log(f"branch {self.branch} created from main")
        with self.phase("config"):
            pipeline = self._load_pipeline()
        with self.phase("build"):
            batch, rows = self._build(pipeline)
        with self.phase("write"):
            self.outcome = write(WriteRequest(
                self.session, self.catalog, self.branch, self.key, self.settings.root, self.run_id, batch, rows,
                pipeline.config, self.strategy, run_started_at=self.run_started_at))
            self.catalog.record_commit(self.branch, f"{self.strategy} {self.key} ({self.outcome.rows_written} rows)")
            self.log(f"{self.strategy}: {self.outcome.rows_written} rows written, {self.outcome.files_added} files "
                     f"added, {self.outcome.files_removed} removed" +
                     (f"; schema: {', '.join(self.outcome.schema_changes)}" if self.outcome.schema_changes else ""))
            for note in self.outcome.notes:
                self.log(note, "warning")
        with self.phase("quality"):
            self._quality(pipeline)
        self.control.check()
        with self.phase("resolve"):
            # the landing files this run read become `loaded` in the merge's own transaction
            result = self.catalog.merge(
                self.branch, message=f"run {self.run_id}: {self.key}",
                in_tx=self._in_merge_tx)
            self.control.merged.set()
            self.log(f"merged {self.branch} into main ({', '.join(result.tables) or 'no table changes'})")
        if pipeline.config.archive_landing_zones and self.consumed:
            self._archive()

    def _in_merge_tx(self, conn, _result) -> None:
        """Inside the merge's transaction: the landing files become loaded, the run is marked merged."""
        self.engine.ledger.mark_loaded(conn, self.run_id, self.consumed)
        conn.execute("UPDATE runs SET merged_at = ? WHERE id = ?", (now_iso(), self.run_id))

    def _archive(self) -> None:
        """Move the consumed landing files to _processed/{run_id}/ (after the merge: main already has them).
        Every pipeline reading the zone keeps the file in its ledger, under the archived name."""
        by_zone: dict[tuple[str, str], list[str]] = {}
        for namespace, zone, _pipeline, name in self.consumed:
            if not is_archived_name(name):
                by_zone.setdefault((namespace, zone), []).append(name)
        if not by_zone:
            return
        try:
            compiled = self.engine.compile()
        except Exception:  # the merge is done; without the project's other readers only this one is known
            compiled = None
        for (namespace, zone), names in by_zone.items():
            folder = self.settings.root / namespace / "landing" / zone
            consumers = {self.key} | ({p.key for p in compiled.pipelines.values()
                                       if p.namespace == namespace and zone in p.zones} if compiled else set())
            try:
                moved = archive(folder, self.run_id, names)
                target = folder / "_processed" / self.run_id
                self.engine.ledger.mark_archived(namespace, zone, self.run_id, moved, sorted(consumers),
                                                 str(target.relative_to(self.settings.root)))
                self.log(f"archived {len(moved)} file(s) of zone {zone} to {target.relative_to(folder)}")
            except OSError as exc:  # the data is merged; a failed move only leaves files in place
                self.log(f"could not archive files of zone {zone}: {exc}", "warning")

    def _load_pipeline(self) -> Pipeline:
        namespace, layer, name = self.key.split(".")
        folder = self.settings.root / namespace / "pipelines" / layer / name
        if not folder.is_dir():
            raise RatuiError("RAT-PRJ-004", f"pipeline folder {folder} no longer exists", file=str(folder))
        pipeline = discover_pipeline(namespace, layer, folder, self.settings.locations())
        compile_pipeline(pipeline, self.settings)
        if pipeline.errors:
            raise pipeline.errors[0]
        self.pipeline = pipeline
        self.strategy = "full_refresh" if self.full_refresh else pipeline.config.merge_strategy
        self.history.update_run(self.run_id, strategy=self.strategy)
        self.log(f"{pipeline.kind} pipeline, strategy {self.strategy}" +
                 (" (forced by --full-refresh)" if self.full_refresh else ""))
        return pipeline

    # ------------------------------------------------------------------------------------------ build

    def _register_table(self, key: str) -> str:
        view = sql_ident(*key.split("."))
        if key in self.views:
            return self.views[key]
        if not self.catalog.table_exists(self.branch, key):
            name = key.split(".", 1)[1]
            raise RatuiError("RAT-CAT-005", f"table {key} does not exist yet",
                             hint=f"Run its pipeline first: `ratui run +{name}` runs it with its ancestors.")
        table = self.catalog.load_table(self.branch, key)
        read_table(self.session, table).createOrReplaceTempView(view.strip("`"))
        self.views[key] = view
        return view

    def _register_zone(self, namespace: str, zone_name: str, file: str) -> str:
        """The zone's files for this run as a temp view. Which files comes from the ledger:

            a rebuild (full_refresh)   every file the ledger knows but skipped ones, archived ones included
            landing_mode new_files     the files this pipeline has not loaded (new, failed before, or reset)
            landing_mode all           the files in the zone folder, and archived ones a reset made loadable

        A file the ledger needs that is gone is an error naming it (RAT-LND-005): never a smaller table.
        """
        key = f"landing:{namespace}.{zone_name}"
        if key in self.views:
            return self.views[key]
        zone = landing_zone(self.settings.root, namespace, zone_name, file=file, locations=self.settings.locations())
        active = zone.active_files()
        config = self.pipeline.config if self.pipeline else None
        mode = config.landing_mode if config else "all"
        entries = self.engine.ledger.sync(namespace, zone_name, self.key, active, forget_missing=mode == "all")
        rebuild = self.strategy == "full_refresh"
        wanted = [e for e in entries if e.state != "skipped" and (
            rebuild or e.state == "unloaded" or (mode == "all" and not e.archived))]
        self.zone_inputs[zone_name] = zone_digest(active)
        missing = [e for e in wanted if not (zone.folder / e.file).is_file()]
        if missing:
            purged = [e for e in missing if e.purged_at]
            names = ", ".join(e.file for e in missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10
                                                                 else "")
            raise RatuiError(
                "RAT-LND-005",
                f"{'rebuilding ' + self.key if rebuild else self.key} needs {len(missing)} landing file(s) of zone "
                f"'{zone_name}' that are gone: {names}"
                + (f" ({len(purged)} removed by the reaper's processed-file retention)" if purged else ""),
                file=str(zone.folder / missing[0].file))
        skipped = sum(1 for e in entries if e.state == "skipped")
        if not active and not entries and mode != "new_files":
            raise RatuiError("RAT-LND-002", f"landing zone '{zone_name}' has no active files", file=str(zone.folder))
        files = [ZoneFile(zone.folder / e.file, e.file) for e in wanted]
        df = self._read_zone(zone, files) if files else None
        if df is None:
            # nothing to read (or only empty files): an empty batch with the zone's columns, taken from the
            # newest non-empty file the ledger knows
            known = sorted((zone.folder / e.file for e in entries if e.state != "skipped"
                            and (zone.folder / e.file).is_file() and (zone.folder / e.file).stat().st_size),
                           key=lambda p: p.stat().st_mtime_ns)
            if not known:
                raise RatuiError("RAT-LND-002", f"landing zone '{zone_name}' has no file with data to read",
                                 file=str(zone.folder))
            sample = known[-1]
            df = self._read_zone(zone, [ZoneFile(sample, sample.relative_to(zone.folder).as_posix())],
                                 check_rows=False).limit(0)
        view = sql_ident(namespace, "landing", zone_name)
        df.createOrReplaceTempView(view.strip("`"))
        self.views[key] = view
        self.consumed.extend((namespace, zone_name, self.key, e.file) for e in wanted)
        archived = sum(1 for e in wanted if e.archived)
        how = (" (rebuild: every file the ledger knows)" if rebuild and (mode == "new_files" or archived)
               else " (new files only)" if mode == "new_files" else "")
        self.log(f"landing zone {zone_name}: {len(wanted)} file(s) read{how}"
                 + (f", {archived} of them from _processed/" if archived else "")
                 + (f", {skipped} skipped file(s) left out" if skipped else ""))
        return view

    def _read_zone(self, zone, files: list[ZoneFile], check_rows: bool = True):
        """A DataFrame over landing files (see landing_reader.py); the reader's warnings become run notes."""
        fmt = zone.file_format([f.path for f in files])
        config = self.pipeline.config if self.pipeline else None
        bad_rows = (config.landing_bad_rows if config and config.landing_bad_rows else self.settings.landing_bad_rows)
        columns = (config.landing_columns if config and config.landing_columns else self.settings.landing_columns)
        reader = ZoneReader(self.session, zone.name, fmt, bad_rows=bad_rows, columns=columns, staging=self.staging,
                            check_rows=check_rows)
        df = reader.read(files)
        for note in reader.report.notes:
            self.notes.append(note)
            self.log(note, "warning")
        return df

    def _context(self, pipeline: Pipeline, file: Path) -> TemplateContext:
        exists = self.catalog.table_exists(self.branch, self.key)
        this = sql_ident(*self.key.split("."))
        if exists:
            this = self._register_table(self.key)
        watermark = None
        config = pipeline.config
        if config.watermark_column and exists and not self.full_refresh:
            watermark = self._watermark(config.watermark_column)
        return TemplateContext(
            ref=lambda name: self._register_table(parse_ref(name, pipeline.namespace, str(file))),
            landing_zone=lambda zone: self._register_zone(pipeline.namespace, zone, str(file)),
            this=this,
            run_started_at=self.run_started_at,
            watermark_value=watermark,
            is_incremental=self.strategy == "incremental" and exists,
            is_scd2=self.strategy == "scd2",
        )

    def _watermark(self, column: str) -> str | None:
        table = self.catalog.load_table(self.branch, self.key)
        try:
            field = table.schema().find_field(column, case_sensitive=False)
        except ValueError:
            return None
        exact, value = column_max_from_stats(table, field.name)
        if exact:
            value = _bound_to_python(field.field_type, value)
        else:
            from pyspark.sql import functions as F

            value = read_table(self.session, table).agg(F.max(F.col(f"`{field.name}`"))).first()[0]
        if value is None:
            return None
        text = _timestamp_text(value)
        self.log(f"watermark {column} = {text}" + (" (from file statistics)" if exact else " (scanned)"))
        return text

    def _build(self, pipeline: Pipeline):
        self.session = spark_mod.new_run_session(self.settings, self.run_id)
        self.views = {}  # a retry starts from a fresh session: views of an earlier attempt are gone
        self.consumed, self.zone_inputs = [], {}
        context = self._context(pipeline, pipeline.file)
        if pipeline.kind == "sql":
            sql = render(pipeline.text, pipeline.file, context)
            self.history.add_log(self.run_id, "debug", "compiled SQL:\n" + sql.strip())
            try:
                df = self.session.sql(sql)
            except Exception as exc:
                raise _spark_error(exc, "RAT-SQL-001", pipeline.file, pipeline.text, sql) from None
        else:
            ctx = PythonContext(self.session, context.ref, context.landing_zone,
                                context.this.strip("`") if self.catalog.table_exists(self.branch, self.key) else None,
                                context.run_started_at, context.watermark_value, context.is_incremental,
                                context.is_scd2)
            df = run_python_pipeline(pipeline.text, pipeline.file, ctx,
                                     on_print=lambda line: self.log(f"print: {line}"))
        from ratui.engine.iceberg.tables import check_columns

        check_columns(df.schema)
        out = self.staging / "result"
        try:
            df.write.mode("overwrite").parquet(str(out))
        except Exception as exc:
            if self.control.cancel_requested.is_set() and spark_mod.is_cancellation(exc):
                raise Cancelled() from exc
            if pipeline.kind == "sql":
                raise _spark_error(exc, "RAT-SQL-001", pipeline.file, pipeline.text, sql) from None
            raise _spark_error(exc, "RAT-PY-004", pipeline.file) from None
        rows = _parquet_rows(out)
        self.log(f"result: {rows} rows, {len(df.columns)} columns")
        batch = self.session.read.parquet(str(out)) if rows or any(out.glob("*.parquet")) else df
        return batch, rows

    # ---------------------------------------------------------------------------------------- quality

    def _quality(self, pipeline: Pipeline) -> None:
        if not pipeline.tests:
            self.log("no quality tests")
            return
        # the tests see the branch's new data: re-register this pipeline's table after the write
        self.views.pop(self.key, None)
        context = self._context(pipeline, pipeline.file)
        context.this = self._register_table(self.key)
        for test in pipeline.tests:
            self.control.check()
            outcome = run_test(self.session, test, context, self.settings.quality_sample_rows)
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


FAILPOINT_ENV = "RATUI_FAILPOINT"


def _failpoint(name: str) -> None:
    """Fault injection for the reliability suite: RATUI_FAILPOINT=kill:write SIGKILLs this process as phase
    `write` starts. Unset in normal use; it exists so tests can prove a killed run leaves main untouched."""
    if os.environ.get(FAILPOINT_ENV) == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def _parquet_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(p).num_rows for p in folder.glob("*.parquet"))


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
    line = spark_mod.error_line(exc)
    if line is not None and template is not None and sql is not None:
        line = line_mapper(template, sql)(line)
    elif template is None:
        line = None  # a line of SQL built in Python code, not of the file
    return RatuiError(code, spark_mod.error_message(exc), file=str(file), line=line)
