"""The reaper: cleanup tasks that keep a project's state and files from growing without bound.

Tasks, in the order a pass runs them (each configurable under `reaper:` in ratui.yaml):

    stuck_runs        runs `running` longer than stuck_run_timeout_minutes: marked failed (RAT-RUN-007); a run
                      of this very process is also cancelled. Dead processes are crash recovery's business.
                      (this and the next two: reaper_runs.py)
    orphan_branches   `run-*` refs older than orphan_branch_max_age_hours whose run is not pending or running.
                      The branch of a run that is still going is never deleted.
    run_history       finished runs that are neither among the newest run_history_keep_per_pipeline of their
                      pipeline nor younger than run_history_max_age_days, with their quality results and logs.
                      The newest successful run of each pipeline is kept (change detection reads it).
    processed_files   archived landing files (`{ns}/landing/{zone}/_processed/{run_id}/`) older than
                      processed_max_age_days, counted from when they were archived (the later of the file's
                      mtime and its run's end). The newest archived file of each zone is kept: a run that finds
                      nothing new in the zone reads its columns. (reaper_files.py)
    compaction        data files of tables on main whose position deletes (merge-on-read) take out at least
                      compact_deleted_percent of their rows: rewritten without those rows, one file per file, and
                      swapped in with one snapshot per table guarded on main's current snapshot (write/compaction.py).
                      A table a run is writing right now waits for the next pass. (reaper_tables.py)
    snapshots         Iceberg snapshots of tables on main older than snapshot_max_age_days, never a table's
                      current snapshot: one metadata commit per table through the catalog's compare-and-swap,
                      guarded on main's current snapshot. A table a run is writing right now waits for the next
                      pass (expiring it would make that run's merge conflict). Expiry deletes no files itself.
                      (reaper_tables.py)
    orphan_files      the mark-and-sweep of orphans.py over every live ref, every kept commit inside the
                      snapshot retention window (snapshot_max_age_days) and every branch deleted inside it:
                      unreachable files under `{ns}/warehouse/` older than orphan_file_max_age_hours (a dropped
                      table's, a deleted branch's, plain orphans: each item's `kind`), and the staging folders
                      (`.ratui/staging/{run_id}/`) a dead run left, as old. Nothing of a live run is touched.
                      With an s3:// warehouse the same in its bucket: `{warehouse}/{ns}/warehouse/` of this
                      project's namespaces, and `{warehouse}/_ratui/staging/{run_id}/` of this project's runs.
                      (reaper_files.py)

A dry run lists exactly what a real run would do, removing nothing: later tasks see the planned effects of
earlier ones (a run the dry run would time out no longer protects its branch; files of snapshots it would expire
are not marked; a branch it would delete is deleted inside the retention window, so its files stay marked, as they
do in the real pass: reaper_pass.py). Every pass, dry or real, is stored in `reaper_reports` (reaper_report.py).
One task failing never stops the others: its error is in the report.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from ratui.engine.events import Event, EventBus
from ratui.engine.ops import reaper_files, reaper_runs, reaper_tables
from ratui.engine.ops.reaper_pass import ReaperPass
from ratui.engine.ops.reaper_report import STORED_ITEMS, ReaperReport, TaskReport
from ratui.engine.run.in_flight import RunsInFlight
from ratui.engine.run.record import RunRecord
from ratui.engine.state.reaper_reports import ReaperReports
from ratui.engine.vocabulary import iso as _iso

if TYPE_CHECKING:
    from ratui.engine.state.project_state import ProjectState

Task = Callable[[ReaperPass, TaskReport], None]
# every task, in the order a pass runs them
TASK_STEPS: dict[str, Task] = {
    "stuck_runs": reaper_runs.stuck_runs,
    "orphan_branches": reaper_runs.orphan_branches,
    "run_history": reaper_runs.run_history,
    "processed_files": reaper_files.processed_files,
    "compaction": reaper_tables.compaction,
    "snapshots": reaper_tables.snapshots,
    "orphan_files": reaper_files.orphan_files,
}
TASKS = tuple(TASK_STEPS)

_pass_locks: dict[Path, threading.Lock] = {}
_pass_locks_guard = threading.Lock()


class Reaper:
    """`Reaper(state).run(dry_run=...)` runs one pass and returns (and stores) its report (`Engine.reaper()` makes
    one that can interrupt this process's stuck runs)."""

    def __init__(self, state: ProjectState, *, record: RunRecord | None = None,
                 in_flight: RunsInFlight | None = None, clock: Callable[[], datetime] | None = None,
                 bus: EventBus[Event] | None = None):
        """`record`: where runs are failed and deleted (the engine's; else one on the state's history);
        `in_flight`: this process's runs, so that a stuck one of them is interrupted too (the engine's)."""
        self.state = state
        self.settings = state.settings
        self.catalog = state.catalog
        self._record = record or RunRecord(state.history)
        self._in_flight = in_flight
        self._bus = bus
        self.db_path = Path(self.settings.db_path)
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._reports = ReaperReports(self.db_path)

    def config(self) -> dict[str, int]:
        from ratui.engine.project.settings import REAPER_KEYS

        return {key: getattr(self.settings, f"reaper_{key}") for key in REAPER_KEYS}

    def run(self, dry_run: bool = False, tasks: Iterable[str] | None = None) -> ReaperReport:
        """One pass of every task (or of `tasks`, in the standard order). Passes of one project never overlap
        within a process; across processes every step is safe to race (guarded updates, compare-and-swap)."""
        wanted = set(TASKS) if tasks is None else set(tasks)
        selected = [t for t in TASKS if t in wanted]
        unknown = wanted - set(TASKS)
        if unknown:
            raise ValueError(f"unknown reaper task(s): {', '.join(sorted(unknown))}")
        with _pass_locks_guard:
            lock = _pass_locks.setdefault(self.db_path.resolve(), threading.Lock())
        with lock:
            this_pass = ReaperPass(self.state, self.catalog, self._record, dry_run, self._clock(),
                                   in_flight=self._in_flight, bus=self._bus)
            reports: dict[str, TaskReport] = {}
            for name in selected:
                task = TaskReport(name)
                began = time.monotonic()
                try:
                    TASK_STEPS[name](this_pass, task)
                except Exception as exc:  # one task failing must not stop the others
                    task.fail(exc)
                task.duration_ms = int((time.monotonic() - began) * 1000)
                reports[name] = task
            report = ReaperReport(None, _iso(this_pass.now), _iso(self._clock()), dry_run, reports, self.config())
            report.id = self._store(report)
        return report

    def _store(self, report: ReaperReport) -> int:
        body = report.to_dict(STORED_ITEMS)  # the counts whole, the lists cut: a first pass over a long history
        body = {"settings": body["settings"], "tasks": body["tasks"]}  # found 851,500 old runs (a 150 MB report)
        return self._reports.add(started_at=report.started_at, finished_at=report.finished_at,
                                 dry_run=report.dry_run, found=report.found, removed=report.removed,
                                 bytes_freed=report.bytes_freed, errors=len(report.errors),
                                 report=json.dumps(body, default=str))

    def reports(self, limit: int = 20) -> list[ReaperReport]:
        """The newest stored reports, newest first."""
        return [ReaperReport.from_row(r) for r in self._reports.newest(limit)]

    def report(self, report_id: int) -> ReaperReport | None:
        row = self._reports.get(report_id)
        return ReaperReport.from_row(row) if row else None
