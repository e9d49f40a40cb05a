"""Every Textual message of the console: one inbound channel from the controller, one typed message per result.

Work that blocks (SQLite, files, the catalog, Spark) runs in thread workers; each posts exactly one message when it
ends: its typed result, or a failure naming what failed. Handlers are declared with `@on(Message)`; nothing
dispatches on worker names. (The App's mixins, app_keys.py and app_actions.py, name their handlers
`on_<message>` instead: Textual's `@on` registers on message-pump classes only.)
"""

from __future__ import annotations

from typing import Any

from textual.message import Message


class ControllerEvents(Message):
    """Items (engine, watch, Spark-state and batch events) are waiting in the controller's queue: one message per
    burst, however many items arrived."""


# ------------------------------------------------------------------------------------------- the App's work


class Result(Message):
    """A background task of the App finished: `value` is what it returned."""

    def __init__(self, value: Any = None) -> None:
        super().__init__()
        self.value = value


class ProjectCompiled(Result):
    """The project was opened or reloaded: `value` is the CompiledProject."""

    def __init__(self, value: Any, reloaded: bool = False, automatic: bool = False) -> None:
        super().__init__(value)
        self.reloaded = reloaded
        self.automatic = automatic  # the project tree changed on disk (no toast: the screens just follow)


class ProjectOutlined(Result):
    """The last compile's outline was read at launch: `value` is the Outline, or None (there is none)."""


class EngineOpened(Result):
    """The heavy half of the engine is open (catalog, recovery, dead-run monitor)."""


class RunLaunched(Result):
    """A run was queued from the console: `value` is (run_id, key, full_refresh)."""


class BatchLaunched(Result):
    """A batch was started from the console: `value` is (its Batch, the label it was started with)."""


class ThemeSaved(Result):
    """`value`: the settings file the theme was saved in, or None when it could not be written."""


class RunLookedUp(Result):
    """`:run ID` / `:ID`: `value` is (what was typed, the run's record or None)."""


class CancelOutcomes(Result):
    """`value`: [(run_id, 'requested' | 'finished' | 'unknown'), ...]."""


class SparkWhere(Result):
    """Where Spark runs and with what executors (the status line): `value` is the text."""


class ShellEngineRead(Result):
    """The project's warm engine (the shell's commands') was asked how it is: `value` is its ShellEngine."""


class ShellEngineDetail(Result):
    """The same, asked for the detail notice (the palette's "Engines"): `value` is its ShellEngine."""


class AlertsRead(Result):
    """The palette's "Alerts": `value` is the notice's text (console/alerts_text.py)."""


class WatchToggled(Result):
    """Watch mode was switched: `value` is the watcher's state."""


class ServeToggled(Result):
    """The Iceberg REST catalog was switched: `value` is its Serving (URL and token), or None once stopped."""


class ReaperPassDone(Result):
    """A scheduled reaper pass ended: `value` is its report."""


class QuitReady(Result):
    """The runs in flight were cancelled: the App may exit."""


class Failed(Message):
    """A background task failed: `error`, and `context` says what it was doing (for the error screen)."""

    def __init__(self, error: BaseException, context: str, kind: type[Message] | None = None) -> None:
        super().__init__()
        self.error = error
        self.context = context
        self.kind = kind  # the result message it would have posted


# ---------------------------------------------------------------------------------------- screens' loads


class Loaded(Result):
    """A screen's background load finished (screens/base.py `load`)."""


class RecentRunsLoaded(Loaded):
    """Pipelines: the last runs of every pipeline."""


class FixesLoaded(Loaded):
    """Pipelines: the pipelines fixed back to the version of their last good run (console/current.py)."""


class RunsPageLoaded(Loaded):
    """Runs: one page of the history."""


class RunRecordLoaded(Loaded):
    """Run detail: the run's record (phases, quality, log) from the history."""


class QualityLoaded(Loaded):
    """Quality: results of one run or of recent runs."""


class BranchesLoaded(Loaded):
    """Branches: the refs."""


class DiffLoaded(Loaded):
    """Branches: (ref, diff rows) of one ref against main."""


class BranchDeleted(Loaded):
    """Branches: the ref that was deleted."""


class DeleteChecked(Loaded):
    """Branches: (ref, the live run that owns it or None), before asking to delete it."""


class MergePreviewed(Loaded):
    """Branches: a dry-run merge result."""


class BranchMerged(Loaded):
    """Branches: a merge result."""


class LandingLoaded(Loaded):
    """Landing: the ledger."""


class LandingReset(Loaded):
    """Landing: how many ledger entries a reset made loadable."""


class SchedulesLoaded(Loaded):
    """Schedules: the project's schedules and the runner's lease (console/schedules.py Schedules)."""


class ScheduleFiresLoaded(Loaded):
    """Schedules: (schedule name, its time zone, its newest fires)."""


class SchedulePaused(Loaded):
    """Schedules: (schedule name, whether it is now paused)."""


class ReaperSettingsLoaded(Loaded):
    """Reaper: its settings."""


class ReaperReportsLoaded(Loaded):
    """Reaper: stored reports."""


class ReaperPreviewed(Loaded):
    """Reaper: a dry-run report."""


class ReaperRan(Loaded):
    """Reaper: a real pass's report."""


# ------------------------------------------------------------------------------------- Query and table view


class QueryRefsLoaded(Loaded):
    """Query: the refs a query can read (main first)."""


class QueryTablesLoaded(Loaded):
    """Query: (ref, the table keys at it)."""


class QueryHistoryLoaded(Loaded):
    """Query: the project's earlier queries, oldest first."""


class QueryPageLoaded(Loaded):
    """Query: one page of a result (QueryPage)."""


class QueryCounted(Loaded):
    """Query: (query id, rows in the whole result)."""


class QueryCancelled(Loaded):
    """Query: a query was asked to stop, or a result was released."""


class QueryExported(Loaded):
    """Query: the file the whole result was written to."""


class TableDescribed(Loaded):
    """Table view: the table's description from its metadata (TableDescription)."""


class TablePreviewed(Loaded):
    """Table view: (columns, the first rows)."""


class LogRead(Loaded):
    """Logs: the log files there are, and the newest part of the one shown ((files, LogFile, LogChunk))."""


class LogPolled(Loaded):
    """Logs, following: (LogFile, what the file gained since the last read, or None)."""


class PreviousRunFound(Loaded):
    """Runs: (run, the run of its pipeline just before it, or None), for `c` (compare)."""


class CompareLoaded(Loaded):
    """Compare: two runs side by side (a console.compare.Comparison)."""


class LineageRunsLoaded(Loaded):
    """Lineage: the last run of every pipeline (its node's icon and colour)."""


class LineageLaidOut(Loaded):
    """Lineage: (the request's serial number, the View laid out and drawn, the pipeline to select or None)."""


class ColumnLineageLoaded(Loaded):
    """Column lineage: (the table's TableLineage, the selected column's ColumnPath or None)."""


class CloseNames(Loaded):
    """Find a pipeline: (what was typed, the pipelines whose names are closest to it: a typo's likely meaning)."""


class QueryProgressed(Loaded):
    """Query: (query id, what its Spark jobs are doing: SparkProgress's fields, or None)."""


# ------------------------------------------------------------------------------ branch workflow (issue 15)


class BranchCreated(Loaded):
    """Branches, new-branch dialog: the Ref created."""


class RefSwitched(Loaded):
    """Branches: the console's new working ref (runs from Pipelines fork from and merge into it)."""


class MergeDryRun(Loaded):
    """Branches: (ref, the dry-run MergeResult into the ref it came from, its diff rows against that ref, the live
    run owning the branch or None)."""


class HistoryLoaded(Loaded):
    """History: (ref, table or None, the commits newest first as LogEntry)."""


class RollbackPlanned(Loaded):
    """History: a RollbackPlan (what a rollback would change; nothing changed yet)."""


class RolledBack(Loaded):
    """History: (the plan applied, the new Commit or None when nothing had to change)."""


class UndoPlanned(Loaded):
    """Branches, History, Runs (`z`): an UndoPlan, or the RatuiError that refused it."""


class Undone(Loaded):
    """Branches, History, Runs: (the UndoPlan applied, what was done as a dict), or the RatuiError that refused it."""


class PublishLaunched(Loaded):
    """Pipelines: the Batch of an atomic publish that started (its runs are queued)."""


class QueryRefResolved(Loaded):
    """Query: a ref, past state "ref@HASH" or "ref at TIME" resolved to what the query reads."""
