"""The reaper: cleanup tasks that keep a project's state and files from growing without bound.

Tasks, in the order a pass runs them (each configurable under `reaper:` in ratui.yaml):

    stuck_runs        runs `running` longer than stuck_run_timeout_minutes: marked failed (RAT-RUN-007); a run
                      of this very process is also cancelled. Dead processes are crash recovery's business.
    orphan_branches   `run-*` refs older than orphan_branch_max_age_hours whose run is not pending or running.
                      The branch of a run that is still going is never deleted.
    run_history       finished runs that are neither among the newest run_history_keep_per_pipeline of their
                      pipeline nor younger than run_history_max_age_days, with their quality results and logs.
                      The newest successful run of each pipeline is kept (change detection reads it).
    processed_files   archived landing files (`{ns}/landing/{zone}/_processed/{run_id}/`) older than
                      processed_max_age_days, counted from when they were archived (the later of the file's
                      mtime and its run's end). The newest archived file of each zone is kept: a run that finds
                      nothing new in the zone reads its columns.
    compaction        data files of tables on main whose position deletes (merge-on-read) take out at least
                      compact_deleted_percent of their rows: rewritten without those rows, one file per file, and
                      swapped in with one snapshot per table guarded on main's current snapshot (write/compaction.py).
                      A table a run is writing right now waits for the next pass.
    snapshots         Iceberg snapshots of tables on main older than snapshot_max_age_days, never a table's
                      current snapshot: one metadata commit per table through the catalog's compare-and-swap,
                      guarded on main's current snapshot. A table a run is writing right now waits for the next
                      pass (expiring it would make that run's merge conflict). Expiry deletes no files itself.
    orphan_files      the mark-and-sweep of orphans.py over every live ref, every kept commit inside the
                      snapshot retention window (snapshot_max_age_days) and every branch deleted inside it:
                      unreachable files under `{ns}/warehouse/` older than orphan_file_max_age_hours (a dropped
                      table's, a deleted branch's, plain orphans: each item's `kind`), and the staging folders
                      (`.ratui/staging/{run_id}/`) a dead run left, as old. Nothing of a live run is touched.
                      With an s3:// warehouse the same in its bucket: `{warehouse}/{ns}/warehouse/` of this
                      project's namespaces, and `{warehouse}/_ratui/staging/{run_id}/` of this project's runs.

A dry run lists exactly what a real run would do, removing nothing: later tasks see the planned effects of
earlier ones (a run the dry run would time out no longer protects its branch; files of snapshots it would expire
are not marked; a branch it would delete is deleted inside the retention window, so its files stay marked, as they
do in the real pass). Every pass, dry or real, is stored in `reaper_reports`.
One task failing never stops the others: its error is in the report.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ratui.engine.landing.names import archived_run, is_readable_archive
from ratui.engine.landing.zone import Zone, every_zone
from ratui.engine.ops import orphans
from ratui.engine.events import Event, EventBus, RunFinished
from ratui.engine.state.reaper_reports import ReaperReports
from ratui.engine.storage.warehouse import STAGING
from ratui.engine.vocabulary import (ACTIVE, FINAL, MAIN, REAPER_TASK_TITLES, RUN_PREFIX, iso as _iso,
                                     parse_time)
from ratui.engine.errors import RatuiError

if TYPE_CHECKING:
    from ratui.engine.state.project_state import ProjectState

TASKS = ("stuck_runs", "orphan_branches", "run_history", "processed_files", "compaction", "snapshots", "orphan_files")
TASK_TITLES = REAPER_TASK_TITLES
# what "removed" means for each task
TASK_VERBS = {"stuck_runs": "failed", "snapshots": "expired", "compaction": "compacted"}

STORED_ITEMS = 1000  # items of each of a task's lists a stored report keeps (its counts stay whole)
LIVE = ("pending", "running")

# the orphan sweep's counts in its task's stats -> SweepPlan's fields
SWEEP_STATS = {"scanned": "scanned", "reachable_scanned": "reachable", "young_unreachable": "young",
               "protected_live_run": "protected", "other_projects_staging": "foreign"}


_pass_locks: dict[Path, threading.Lock] = {}
_pass_locks_guard = threading.Lock()


@dataclass
class TaskReport:
    """One task of a pass. `found`: what it would remove (dry run) or set out to remove; `removed`: what it did
    remove (always empty for a dry run); `kept`: what it looked at and deliberately left, with a reason. Every
    item is a dict with at least a `name` unique within the task."""

    name: str
    found: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    bytes_found: int = 0
    bytes_freed: int = 0
    error: dict[str, Any] | None = None
    duration_ms: int = 0
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return TASK_TITLES.get(self.name, self.name)

    @property
    def verb(self) -> str:
        return TASK_VERBS.get(self.name, "removed")

    def fail(self, exc: BaseException) -> None:
        if isinstance(exc, RatuiError):
            self.error = exc.to_dict()
        else:
            err = RatuiError("RAT-RPR-001", f"{TASK_TITLES.get(self.name, self.name)}: {type(exc).__name__}: {exc}")
            self.error = err.to_dict()

    def count(self, which: str) -> int:
        """How many items `which` ("found", "removed", "kept") holds: all of them, also where a stored report
        keeps only the first STORED_ITEMS (stats["listed_of"] has the whole count then)."""
        return int(self.stats.get("listed_of", {}).get(which, len(getattr(self, which))))

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        """`limit`: keep at most that many items of each list (the counts stay whole, in stats["listed_of"])."""
        lists: dict[str, list[dict[str, Any]]] = {}
        cut: dict[str, int] = {}
        for which in ("found", "removed", "kept"):
            items = getattr(self, which)
            if limit is not None and len(items) > limit:
                cut[which] = self.count(which)
                items = items[:limit]
            lists[which] = items
        stats = {**self.stats, "listed_of": {**self.stats.get("listed_of", {}), **cut}} if cut else self.stats
        return {**lists, "bytes_found": self.bytes_found, "bytes_freed": self.bytes_freed, "error": self.error,
                "duration_ms": self.duration_ms, "stats": stats}

    @classmethod
    def from_dict(cls, name: str, data: dict[str, Any]) -> "TaskReport":
        return cls(name, list(data.get("found", [])), list(data.get("removed", [])), list(data.get("kept", [])),
                   int(data.get("bytes_found", 0)), int(data.get("bytes_freed", 0)), data.get("error"),
                   int(data.get("duration_ms", 0)), dict(data.get("stats", {})))


@dataclass
class ReaperReport:
    id: int | None
    started_at: str
    finished_at: str
    dry_run: bool
    tasks: dict[str, TaskReport]
    settings: dict[str, int] = field(default_factory=dict)

    @property
    def found(self) -> int:
        return sum(t.count("found") for t in self.tasks.values())

    @property
    def removed(self) -> int:
        return sum(t.count("removed") for t in self.tasks.values())

    @property
    def bytes_found(self) -> int:
        return sum(t.bytes_found for t in self.tasks.values())

    @property
    def bytes_freed(self) -> int:
        return sum(t.bytes_freed for t in self.tasks.values())

    @property
    def errors(self) -> list[tuple[str, dict[str, Any]]]:
        return [(name, t.error) for name, t in self.tasks.items() if t.error]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        return {
            "id": self.id, "started_at": self.started_at, "finished_at": self.finished_at, "dry_run": self.dry_run,
            "found": self.found, "removed": self.removed, "bytes_found": self.bytes_found,
            "bytes_freed": self.bytes_freed, "errors": len(self.errors), "settings": self.settings,
            "tasks": {name: t.to_dict(limit) for name, t in self.tasks.items()},
        }

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "ReaperReport":
        body = json.loads(row["report"])
        tasks = {name: TaskReport.from_dict(name, data) for name, data in body.get("tasks", {}).items()}
        return cls(row["id"], row["started_at"], row["finished_at"], bool(row["dry_run"]), tasks,
                   body.get("settings", {}))


@dataclass
class _Pass:
    """What a pass has decided so far: later tasks of a dry run act on the planned effects of earlier ones."""

    dry_run: bool
    now: datetime
    timed_out: set[str] = field(default_factory=set)  # runs failed (or, dry, to be failed) by stuck_runs
    branches_removed: set[str] = field(default_factory=set)
    expiry: dict[str, set[int]] = field(default_factory=dict)  # main table key -> snapshot ids (dry run only)


class Reaper:
    """`Reaper(state).run(dry_run=...)` runs one pass and returns (and stores) its report (`Engine.reaper()` makes
    one that can interrupt this process's stuck runs)."""

    def __init__(self, state: ProjectState, *, cancel: Callable[..., str] | None = None,
                 clock: Callable[[], datetime] | None = None, bus: EventBus[Event] | None = None):
        """`cancel(run_id, error=...)`: how a stuck run of this very process is interrupted (the engine's)."""
        self.state = state
        self.settings = state.settings
        self.catalog = state.catalog
        self.history = state.history
        self._cancel = cancel
        self._bus = bus
        self.db_path = Path(self.settings.db_path)
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._reports = ReaperReports(self.db_path)

    def config(self) -> dict[str, int]:
        from ratui.engine.project.settings import REAPER_KEYS

        return {key: getattr(self.settings, f"reaper_{key}") for key in REAPER_KEYS}

    # ------------------------------------------------------------------------------------------- passes

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
            ctx = _Pass(dry_run, self._clock())
            started = ctx.now
            reports: dict[str, TaskReport] = {}
            for name in selected:
                task = TaskReport(name)
                began = time.monotonic()
                try:
                    getattr(self, f"_task_{name}")(ctx, task)
                except Exception as exc:  # one task failing must not stop the others
                    task.fail(exc)
                task.duration_ms = int((time.monotonic() - began) * 1000)
                reports[name] = task
            report = ReaperReport(None, _iso(started), _iso(self._clock()), dry_run, reports, self.config())
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

    # ------------------------------------------------------------------------------------------- helpers

    def _live_runs(self, ctx: _Pass) -> dict[str, dict[str, Any]]:
        """Runs still going (pending or running), less those this pass timed out."""
        return {r["id"]: r for r in self.history.runs_in(ACTIVE) if r["id"] not in ctx.timed_out}

    def _rel(self, path: str | Path) -> str:
        try:
            return str(Path(path).relative_to(Path(os.path.realpath(self.settings.root))))
        except ValueError:
            return str(path)

    # ------------------------------------------------------------------------------------ stuck runs

    def _task_stuck_runs(self, ctx: _Pass, task: TaskReport) -> None:
        timeout = timedelta(minutes=self.settings.reaper_stuck_run_timeout_minutes)
        me, here = os.getpid(), socket.gethostname()
        for run in self.history.runs_in(("running",), oldest_first=True):
            started = parse_time(run["started_at"] or run["queued_at"])
            if started is None or ctx.now - started <= timeout:
                continue
            ours = run["pid"] == me and run["host"] == here
            item = {"name": run["id"], "run_id": run["id"], "pipeline": run["pipeline"],
                    "started_at": run["started_at"] or run["queued_at"], "pid": run["pid"], "host": run["host"],
                    "minutes": round((ctx.now - started).total_seconds() / 60, 1), "this_process": ours}
            task.found.append(item)
            if ctx.dry_run:
                ctx.timed_out.add(run["id"])
                continue
            if ours and self._cancel is not None:
                # interrupt it first: Engine.cancel only accepts a run that is still pending or running
                try:
                    item["cancel"] = self._cancel(run["id"], error=RatuiError(
                        "RAT-RUN-007", f"run {run['id']} of {run['pipeline']} timed out after {item['minutes']:.0f} "
                        "minutes and was interrupted by the reaper"))
                except Exception as exc:  # the run is failed in the history either way
                    item["cancel"] = f"error: {exc}"
            if self._fail_timed_out(run, item, ctx.now):
                ctx.timed_out.add(run["id"])
                task.removed.append(item)
            else:
                task.kept.append({**item, "reason": "finished while the reaper looked"})

    def _fail_timed_out(self, run: dict[str, Any], item: dict[str, Any], now: datetime) -> bool:
        error = RatuiError("RAT-RUN-007", f"run {run['id']} of {run['pipeline']} was still running after "
                           f"{item['minutes']:.0f} minutes (reaper.stuck_run_timeout_minutes is "
                           f"{self.settings.reaper_stuck_run_timeout_minutes})")
        started = parse_time(run["started_at"] or run["queued_at"])
        duration = int((now - started).total_seconds() * 1000) if started else None
        if not self.history.fail_if_running(run["id"], error, _iso(now), duration, f"reaper: {error}"):
            return False
        if self._bus is not None:
            try:
                self._bus.emit(RunFinished(run["id"], run["pipeline"], "failed", 0, duration or 0, error.to_dict()))
            except Exception:  # an observer's failure is not the reaper's
                pass
        return True

    # ------------------------------------------------------------------------------- orphan branches

    def _task_orphan_branches(self, ctx: _Pass, task: TaskReport) -> None:
        max_age = timedelta(hours=self.settings.reaper_orphan_branch_max_age_hours)
        live = self._live_runs(ctx)
        for ref in self.catalog.list_refs():
            if ref.name.startswith("publish-"):  # an atomic publish's branch, kept when it did not land
                self._orphan_publish(ctx, task, ref, max_age)
                continue
            if ref.name == MAIN or not ref.name.startswith(RUN_PREFIX):
                continue
            run_id = ref.run_id or ref.name[len(RUN_PREFIX):]
            created = parse_time(ref.created_at)
            age_h = (ctx.now - created).total_seconds() / 3600 if created else None
            item = {"name": ref.name, "ref": ref.name, "run_id": run_id, "created_at": ref.created_at,
                    "age_hours": round(age_h, 2) if age_h is not None else None}
            if run_id in live:
                if created is None or ctx.now - created > max_age:
                    task.kept.append({**item, "reason": f"its run is still {live[run_id]['status']}"})
                continue
            if created is None or ctx.now - created <= max_age:
                continue
            task.found.append(item)
            if ctx.dry_run:
                ctx.branches_removed.add(ref.name)
                continue
            # the run may have been queued again under this id since we looked: check once more
            if run_id in self._live_runs(ctx):
                task.kept.append({**item, "reason": "its run started while the reaper looked"})
                continue
            try:
                self.catalog.delete_branch(ref.name)
            except RatuiError as exc:
                if exc.code != "RAT-CAT-002":
                    raise
                task.kept.append({**item, "reason": "already deleted"})
                continue
            ctx.branches_removed.add(ref.name)
            task.removed.append(item)

    def _orphan_publish(self, ctx: _Pass, task: TaskReport, ref, max_age: timedelta) -> None:
        created = parse_time(ref.created_at)
        age_h = (ctx.now - created).total_seconds() / 3600 if created else None
        item = {"name": ref.name, "ref": ref.name, "run_id": None, "created_at": ref.created_at,
                "age_hours": round(age_h, 2) if age_h is not None else None}
        if created is not None and ctx.now - created <= max_age:
            return
        if self.state.history.active_on(ref.name):
            task.kept.append({**item, "reason": "runs of its publish are still going"})
            return
        task.found.append(item)
        ctx.branches_removed.add(ref.name)
        if ctx.dry_run:
            return
        try:
            self.catalog.delete_branch(ref.name, in_tx=lambda conn: self.state.ledger.drop_ref(conn, ref.name))
        except RatuiError as exc:
            if exc.code != "RAT-CAT-002":
                raise
            task.kept.append({**item, "reason": "already deleted"})
            ctx.branches_removed.discard(ref.name)
            return
        task.removed.append(item)

    # ----------------------------------------------------------------------------------- run history

    def _task_run_history(self, ctx: _Pass, task: TaskReport) -> None:
        keep = self.settings.reaper_run_history_keep_per_pipeline
        cutoff = ctx.now - timedelta(days=self.settings.reaper_run_history_max_age_days)
        rows, last_success = self.history.beyond_newest(keep, before=_iso(cutoff))
        for row in rows:
            if row["status"] not in FINAL:
                continue  # never a run that is still going
            at = parse_time(row["finished_at"] or row["started_at"] or row["queued_at"])
            if at is None or at >= cutoff:
                continue
            item = {"name": row["id"], "run_id": row["id"], "pipeline": row["pipeline"], "status": row["status"],
                    "finished_at": row["finished_at"] or row["started_at"] or row["queued_at"]}
            if row["id"] in last_success:
                task.kept.append({**item, "reason": "newest successful run of its pipeline (change detection)"})
                continue
            task.found.append(item)
        if ctx.dry_run or not task.found:
            return
        deleted = self.history.delete_finished([i["run_id"] for i in task.found])
        task.removed = [i for i in task.found if i["run_id"] in deleted]

    # ------------------------------------------------------------------------------- processed files

    def _task_processed_files(self, ctx: _Pass, task: TaskReport) -> None:
        max_age = timedelta(days=self.settings.reaper_processed_max_age_days).total_seconds()
        now = ctx.now.timestamp()
        for zone in every_zone(self.settings):
            try:
                self._processed_of(ctx, task, zone, now, max_age)
            except RatuiError as exc:  # an unreachable store: the other zones are done, this one is reported
                task.fail(exc)

    def _processed_of(self, ctx: _Pass, task: TaskReport, zone: Zone, now: float, max_age: float) -> None:
        """One zone's archive (`_processed/{run_id}/`): what is older than the retention goes, but the newest file a
        run could read (its columns are read when nothing new arrives)."""
        runs = {e: run for e in zone.processed() if (run := archived_run(e.name))}
        if not runs:
            return
        ended = self.history.end_times(set(runs.values()))
        # an object store keeps times in whole seconds: among equals, the run that ended last (run ids sort by the
        # second they were made in, then at random)
        newest = max((e for e in runs if is_readable_archive(e.name)), default=None,
                     key=lambda e: (e.mtime_ns, ended.get(runs[e], 0.0), runs[e]))
        doomed = []
        for entry, run_id in runs.items():
            age = now - max(entry.mtime_ns / 1e9, ended.get(run_id, 0.0))
            if age <= max_age:
                continue
            shown = self._rel(zone.where(entry.name))
            item = {"name": shown, "path": shown, "bytes": entry.size, "run_id": run_id,
                    "age_days": round(age / 86400, 2)}
            if entry == newest:
                task.kept.append({**item, "reason": "newest archived file of the zone (its columns are read "
                                                    "when nothing new arrives)"})
                continue
            task.found.append(item)
            task.bytes_found += entry.size
            doomed.append((entry, item))
        if ctx.dry_run or not doomed:
            return
        deleted = zone.purge([e for e, _ in doomed])
        for entry, item in doomed:
            if entry.name in deleted:
                task.removed.append(item)
                task.bytes_freed += entry.size
                self.state.ledger.mark_purged(zone.namespace, zone.name, entry.name)

    # ------------------------------------------------------------------------------------- snapshots

    def _task_compaction(self, ctx: _Pass, task: TaskReport) -> None:
        from pyiceberg.exceptions import CommitFailedException

        from ratui.engine.spark import session as spark_mod
        from ratui.engine.write.compaction import compact, plan_compaction

        share = self.settings.reaper_compact_deleted_percent / 100
        busy = {r["pipeline"] for r in self._live_runs(ctx).values()}
        for key in sorted(self.catalog.table_pointers(MAIN)):
            table = self.catalog.load_table(MAIN, key)
            targets = plan_compaction(table, share)
            if not targets:
                continue
            items = [{"name": f"{key}:{self._rel(t.file.file_path)}", "table": key,
                      "path": self._rel(t.file.file_path), "rows": t.file.record_count, "deleted_rows": t.deleted,
                      "deleted_percent": round(100 * t.share, 1), "delete_files": t.delete_files,
                      "bytes": t.file.file_size_in_bytes} for t in targets]
            if key in busy:
                task.kept.extend({**i, "reason": "a run of this table is in progress: the next pass compacts it"}
                                 for i in items)
                continue
            task.found.extend(items)
            if ctx.dry_run:
                continue
            session = spark_mod.new_session(self.settings)
            message = f"reaper: compacted {len(targets)} file(s) of {key}"
            try:
                done = compact(session, table, targets, f"reaper{int(ctx.now.timestamp())}", message=message)
            except CommitFailedException:
                task.kept.extend({**i, "reason": "main moved while compacting: the next pass compacts it"}
                                 for i in items)
                continue
            finally:
                spark_mod.release(session)
            self.catalog.record_commit(MAIN, message)
            task.removed.extend(items)
            task.stats[key] = {"files_rewritten": done.files_rewritten, "files_added": done.files_added,
                               "delete_files_removed": done.delete_files_removed, "rows": done.rows}

    def _task_snapshots(self, ctx: _Pass, task: TaskReport) -> None:
        cutoff_ms = int((ctx.now - timedelta(days=self.settings.reaper_snapshot_max_age_days)).timestamp() * 1000)
        busy = {r["pipeline"] for r in self._live_runs(ctx).values()}
        failures = []
        for key in sorted(self.catalog.table_pointers(MAIN)):
            try:
                self._expire_table(ctx, task, key, cutoff_ms, busy)
            except Exception as exc:
                failures.append(f"{key}: {type(exc).__name__}: {exc}")
        if failures:
            raise RatuiError("RAT-RPR-001", "snapshot expiry failed for " + "; ".join(failures))

    def _expire_table(self, ctx: _Pass, task: TaskReport, key: str, cutoff_ms: int, busy: set[str]) -> None:
        table = self.catalog.load_table(MAIN, key)
        metadata = table.metadata
        current = metadata.current_snapshot_id
        protected = {ref.snapshot_id for ref in metadata.refs.values()} | ({current} if current is not None else set())
        old = [s for s in metadata.snapshots if s.timestamp_ms < cutoff_ms and s.snapshot_id not in protected]
        if not old:
            return
        items = [{"name": f"{key}@{s.snapshot_id}", "table": key, "snapshot_id": s.snapshot_id,
                  "timestamp": _iso(datetime.fromtimestamp(s.timestamp_ms / 1000, timezone.utc))} for s in old]
        if key in busy:
            task.kept.extend({**i, "reason": "a run of this table is in progress: the next pass expires it"}
                             for i in items)
            return
        task.found.extend(items)
        ids = [s.snapshot_id for s in old]
        if ctx.dry_run:
            ctx.expiry[key] = set(ids)
            return
        from pyiceberg.table import Transaction
        from pyiceberg.table.update import AssertRefSnapshotId
        from pyiceberg.table.update.snapshot import ExpireSnapshots

        # table.maintenance.expire_snapshots(), with one more requirement: main's current snapshot is still the
        # one we looked at. The catalog then swaps main's metadata pointer only if nobody moved it meanwhile.
        expire = ExpireSnapshots(Transaction(table, autocommit=True))
        expire._requirements = (AssertRefSnapshotId(ref="main", snapshot_id=current),)  # type: ignore[call-arg]
        expire.by_ids(ids).commit()
        self.catalog.record_commit(MAIN, f"reaper: expired {len(ids)} snapshot(s) of {key}")
        task.removed.extend(items)

    # ---------------------------------------------------------------------------------- orphan files

    def _task_orphan_files(self, ctx: _Pass, task: TaskReport) -> None:
        hours = self.settings.reaper_orphan_file_max_age_hours
        older_than = ctx.now.timestamp() - hours * 3600
        # every live ref, every kept commit inside the snapshot retention window (and the one in force when it
        # opens), and every branch deleted inside it: a rollback, a time-travel read or undoing the deletion may
        # still need what they point at. A branch this pass deletes (dry or real) is deleted inside the window, so
        # a dry run marks exactly what the real run does.
        pointers = orphans.live_pointers(self.catalog)
        retention = ctx.now - timedelta(days=self.settings.reaper_snapshot_max_age_days)
        history = orphans.commit_pointers(self.catalog, retention.isoformat(timespec="microseconds"))
        pointers = pointers + history
        expire = {(MAIN, key): ids for key, ids in ctx.expiry.items()}
        marker = orphans.Marker(self.catalog.locations, self.catalog.file_io_properties())
        mark = marker.mark(pointers, expire=expire)
        live = self._live_runs(ctx)
        plans = [(area, area.plan(mark.files, older_than=older_than, live_runs=live)) for area in self._sweep_areas()]
        kinds = self._classify(marker, mark, [o for _a, plan in plans for o in plan.orphans])
        task.stats = {"refs": len({p.ref for p in pointers}), "tables": len(pointers),
                      "metadata_files_read": mark.metadata_files, "snapshots": mark.snapshots,
                      "manifests": mark.manifests, "reachable_files": len(mark.files),
                      **{stat: sum(getattr(plan, field) for _a, plan in plans) for stat, field in SWEEP_STATS.items()},
                      "by_kind": {kind: {"files": 0, "bytes": 0} for kind in orphans.KINDS}}
        ordered = sorted(((area, orphan) for area, plan in plans for orphan in plan.orphans),
                         key=lambda pair: (orphans.KINDS.index(kinds[pair[1].path][0]), kinds[pair[1].path][1] or "",
                                           pair[1].path))
        for area, orphan in ordered:
            kind, what = kinds[orphan.path]
            item = {"name": self._rel(orphan.path), "path": self._rel(orphan.path), "bytes": orphan.size,
                    "age_hours": round((ctx.now.timestamp() - orphan.mtime) / 3600, 2), "kind": kind}
            if kind == orphans.DROPPED_TABLE:
                item["table"] = what
            elif kind == orphans.DELETED_BRANCH:
                item["ref"] = what
            task.found.append(item)
            task.bytes_found += orphan.size
            task.stats["by_kind"][kind]["files"] += 1
            task.stats["by_kind"][kind]["bytes"] += orphan.size
            if ctx.dry_run:
                continue
            freed = area.remove(orphan, older_than=older_than, whole_folder=kind == orphans.DROPPED_TABLE)
            if freed is not None:
                task.removed.append(item)
                task.bytes_freed += freed

    def _classify(self, marker: orphans.Marker, mark: orphans.MarkResult,
                  found: list[orphans.OrphanFile]) -> dict[str, tuple[str, str | None]]:
        """What left each unreachable file (orphans.classify): only the heads of deleted branches whose metadata
        file is itself unreachable are read (the others left nothing of their own here). Telling is best effort:
        a head that cannot be read just tells nothing."""
        if not found:
            return {}
        paths = {o.path for o in found}
        deleted: list[tuple[str, set[str]]] = []
        for name, heads in orphans.deleted_heads(self.catalog):
            own = [p for p in heads if marker.name_of(p.location) in paths]
            if not own:
                continue
            try:
                deleted.append((name, marker.mark(own).files))
            except RatuiError:
                continue
        return orphans.classify(found, mark.tables, deleted)

    def _sweep_areas(self) -> list[orphans.SweepArea]:
        """Where the sweep looks. On this disk: every `{ns}/warehouse/` of the tables' folder (only this project's
        namespaces when catalog.warehouse is a folder other projects share) and the staging folders of runs
        (`.ratui/staging/{run_id}/`). With an s3:// warehouse also, in its bucket, this project's namespaces
        (`{warehouse}/{ns}/warehouse/`: never another project's in a shared bucket) and the staging prefixes of this
        project's runs (`{warehouse}/_ratui/staging/{run_id}/`). Tables made before the warehouse moved to S3 keep
        their folders here, so the local area stays."""
        tables_root = Path(self.catalog.warehouse)  # the project folder, or a Nessie catalog's catalog.warehouse
        project_root = Path(os.path.realpath(self.settings.root))
        shared = Path(os.path.realpath(tables_root)) != project_root
        namespaces = sorted(p.name for p in self.settings.root.iterdir() if (p / "pipelines").is_dir())
        roots = [str(r) for r in orphans.warehouse_roots(tables_root, namespaces if shared else None)]
        staging = self.settings.state_dir / "staging"
        run_roots = [os.path.realpath(staging)] if staging.is_dir() and not staging.is_symlink() else []
        areas = [orphans.SweepArea(orphans.LOCAL, tables_root, roots),
                 orphans.SweepArea(orphans.LOCAL, project_root, run_roots=run_roots)]
        storage = self.catalog.storage
        if storage.remote:
            areas.append(orphans.SweepArea(
                orphans.ObjectStore(storage), storage.url, [storage.namespace_root(ns) for ns in namespaces],
                [storage.uri(STAGING)], own_run=lambda run_id: self.history.get_run(run_id) is not None))
        return areas
