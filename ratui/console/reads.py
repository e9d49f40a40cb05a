"""What the console reads: the run history, quality results, branches and their diffs, a ref's log, the landing
zones, the schedules, the reaper's reports, where Spark runs and the shell's warm engine.

A mixin of Controller: every method blocks (SQLite, files, the catalog), so the screens call them from thread
workers. None of them changes anything, so a read-only console answers them all. Textual-free.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ratui.console.records import BranchRow, DiffRow, RunFilter, RunsPage, TableState, ref_kind
from ratui.engine.errors import RatuiError
from ratui.engine.project import catalog_specs
from ratui.engine.vocabulary import MAIN

if TYPE_CHECKING:
    from ratui.console.shell_engine import ShellEngine


def _state_of(side: Any) -> TableState | None:
    """The engine's TableState of one side of a diff as the console shows it (None: not on that side)."""
    if side is None or side.location is None:
        return None
    return TableState(side.snapshot_id, None, side.rows, side.files)


def with_sources(results: list[dict[str, Any]], root: Path) -> list[dict[str, Any]]:
    """Each result with `source`: its test file's text as written (`{{ this }}`, not the compiled table name the
    run recorded in `sql`), when the file is still in the project; else None (the recorded SQL is all there is)."""
    texts: dict[str, str | None] = {}
    top = root.resolve()
    for q in results:
        file = q.get("file")
        if file and file not in texts:
            path = Path(file).resolve()
            try:
                texts[file] = path.read_text(encoding="utf-8") if path.is_relative_to(top) else None
            except (OSError, UnicodeDecodeError):
                texts[file] = None
        q["source"] = texts.get(file) if file else None
    return results


class Reads:
    """The controller's read queries (Controller's __init__ sets the state they use: engine, settings)."""

    # ----------------------------------------------------------------------------------------- project

    def outline(self) -> Any:
        """The last compile's outline of the project (engine/project/outline.py: the tree drawn before this
        launch's compile), or None. Reads one small file; imports nothing of the engine's heavy parts."""
        from ratui.engine.project import outline

        return outline.read(self.root)

    # ----------------------------------------------------------------------------------------- history

    def recent(self, per_pipeline: int = 12) -> dict[str, list[dict[str, Any]]]:
        return self.require_engine().recent_runs(per_pipeline)

    def recent_states(self, compiled: Any, per_pipeline: int = 1) -> dict[str, list[dict[str, Any]]]:
        """The last runs that tell each pipeline's state (console/current.py): a failure a fix superseded is left
        out. The pipelines whose newest run failed are read deeper (their last good run is further back)."""
        from ratui.console import current

        recent = self.recent(per_pipeline)
        failing = [key for key, runs in recent.items() if runs and runs[0].get("status") in current.FAILED]
        if failing and compiled is not None:
            deeper = self.require_engine().recent_runs(12, failing)
            for key, fix in self.fixes(compiled, deeper).items():
                recent[key] = current.state_runs(deeper[key], fix)[:per_pipeline]
        return recent

    def fixes(self, compiled: Any, recent: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        """pipeline -> its Fix (console/current.py), for each pipeline fixed back to the version of its last good
        run on the working ref since it failed. Hashes the definitions of the pipelines that last failed only."""
        from ratui.console import current

        keys = current.candidates(recent, self.ref)
        if not keys or compiled is None:
            return {}
        return current.fixes(recent, self.require_engine().definition_versions(compiled, keys), self.ref)

    def runs_page(self, page: int, size: int, flt: RunFilter) -> RunsPage:
        engine = self.require_engine()
        total = engine.count_runs(pipeline=flt.pipeline, status=flt.status, text=flt.text)
        pages = max(1, -(-total // size))
        page = max(0, min(page, pages - 1))
        rows = engine.runs(size, page * size, pipeline=flt.pipeline, status=flt.status, text=flt.text)
        return RunsPage(rows, total, page, size)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        return self.require_engine().get_run(run_id)

    def quality(self, run_id: str | None = None, limit: int = 500, compiled: Any = None) -> list[dict[str, Any]]:
        """Quality results of one run, or across recent runs; each with its pipeline, its test file's text
        (`source`) and whether it is `current`: across runs, the newest result of its test, unless its run's failure
        was superseded by a fix back to the last good run's version (`compiled`: the definitions now)."""
        from ratui.console import current

        engine = self.require_engine()
        if run_id:
            run = engine.get_run(run_id)
            if not run:
                raise RatuiError("RAT-RUN-004", f"no run '{run_id}'")
            results = [dict(q, pipeline=run["pipeline"], current=True) for q in run["quality"]]
        else:
            results = engine.quality_results(limit)
            gone = current.superseded_runs(self.fixes(compiled, self.recent())) if results else set()
            current.mark_current(results, gone)
        return with_sources(results, self.root)

    # ---------------------------------------------------------------------------------------- branches

    def branches(self) -> list[BranchRow]:
        engine = self.require_engine()
        return [BranchRow(r.name, r.head, r.created_at, r.run_id, len(engine.table_pointers(r.name)))
                for r in engine.refs()]

    def workable_refs(self) -> list[str]:
        """main and the user's own branches (the refs the console may work on and merge), by name: the palette's."""
        return [r.name for r in self.require_engine().refs() if ref_kind(r.name) in ("main", "branch")]

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
        changes = engine.diff_refs(ref, against)
        appends: set[str] = set()
        if any(c.changed_on == "both" for c in changes):
            try:  # which of those both sides only appended to: the merge's own dry run judges them
                appends = set(engine.merge(ref, into=against, dry_run=True).by_append or ())
            except RatuiError:
                appends = set()
        for change in changes:
            both = change.changed_on == "both"
            rows.append(DiffRow(change.table, change.change, both and change.table not in appends,
                                _state_of(change.left), _state_of(change.right), change.changed_on,
                                tuple(change.schema_changes), by_append=both and change.table in appends))
        return rows

    def catalog_server(self) -> str | None:
        """The catalog server's URI (Nessie's) when the project's catalog is a server; None for the embedded
        catalog. No I/O."""
        section = getattr(self.settings, "catalog", None) or {}
        return section.get("uri") if section.get("type") in catalog_specs.SERVERS else None

    def merge_target(self, ref: str) -> str:
        """The ref `ref` was created from (where its merge goes), when that ref is still there; else main."""
        return self.require_engine().branch_origin(ref)

    def merge_preview(self, ref: str):
        """A dry-run merge of `ref` into the ref it came from (the result's `into`): nothing changes."""
        return self.require_engine().merge(ref, into=self.merge_target(ref), dry_run=True)

    # ------------------------------------------------------------------------------- history, rollback

    def log(self, ref: str = MAIN, table: str | None = None, limit: int = 200) -> list:
        """The ref's commits, newest first (LogEntry: time, kind, run, pipeline, version, tables changed)."""
        return self.require_engine().log(ref, table=table, limit=limit)

    def plan_rollback(self, ref: str, to: str, table: str | None = None):
        """What rolling `ref` (or one table of it) back to commit `to` would change; nothing is changed."""
        return self.require_engine().plan_rollback(ref, to, table)

    def resolve_ref(self, ref: str, at: str | None = None) -> str:
        """A ref or past state "ref@HASH" checked; with `at` (a time), the ref's state then as "ref@HASH"."""
        return self.require_engine().resolve_ref(ref, at)

    def live_run_of(self, ref: str) -> dict[str, Any] | None:
        """The run still going (in any process) whose branch `ref` is."""
        return self.require_engine().live_run_of(ref)

    # -------------------------------------------------------------------------- landing, reaper, Spark

    def landing_files(self) -> list:
        """Every landing file of the project's namespace, per zone and consuming pipeline (LandingFile)."""
        return self.require_engine().landing_files()

    def landing_page(self, limit: int) -> tuple[list, Any]:
        """A bounded page of the ledger (skipped and unloaded files first) and its counts per zone and state (one
        grouped query): what the Landing screen shows of a ledger of any size."""
        ledger = self.require_engine().state.ledger
        return ledger.page(limit), ledger.summary()

    def schedules(self, compiled: Any = None) -> Any:
        """The project's schedules (console/schedules.py Schedules): next and last fires, paused, the runner's
        lease, judged at the console's now. `compiled`: the project as compiled (else it is compiled)."""
        from ratui.console import schedules

        return schedules.read(self.require_engine(), compiled, self.now())

    def schedule_fires(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        """The newest fires the runner decided for schedule `name` (fire_at, action, reason, invocation)."""
        return self.require_engine().schedule_fires(name, limit)

    def reaper_settings(self) -> dict[str, int]:
        from ratui.engine.project.settings import REAPER_KEYS

        return {key: getattr(self.settings, f"reaper_{key}") for key in REAPER_KEYS}

    def reaper_reports(self, limit: int = 20) -> list:
        return self.require_engine().reaper().reports(limit)

    def spark_where(self) -> str:
        """Where Spark runs and with what (the status line): "local[2], 2 cores", "cluster spark://..., 1 executor,
        2 cores", "Spark Connect sc://..." once it started; ratui.yaml's word for it before. Asks the driver (never a
        job): call it from a worker thread. Never raises."""
        from ratui.engine.spark import addresses, session as spark_mod

        try:
            described = spark_mod.describe()
        except Exception:  # a driver going down: say what ratui.yaml says
            described = None
        settings = self.settings
        tables = self.tables_where()
        if described:
            return described + tables
        if settings is None:
            return ""
        if settings.spark_remote:
            return f"Spark Connect {addresses.display_url(settings.spark_remote)}" + tables
        return settings.spark_where + tables

    def shell_engine(self) -> "ShellEngine":
        """The project's warm engine, which runs the shell's `ratui run`, `query`, `diff` and `merge` (the status
        line): up (pid, since, commands, memory, its Spark), off, or unreachable. A connect to its socket, bounded:
        call it from a worker thread. Never raises; starts nothing."""
        from ratui.console import shell_engine

        return shell_engine.read(self.root)

    def alerts_notice(self) -> str:
        """The palette's "Alerts": the rules and channels, and the newest attempts (sent, failed, suppressed, with
        why). Reads the state database: call it from a worker thread."""
        from ratui.console.alerts_text import SHOWN, alerts_notice

        engine = self.require_engine()  # type: ignore[attr-defined]
        alerts = engine.settings.alerts
        attempts = engine.alert_attempts(SHOWN) if alerts.rules else []
        return alerts_notice(attempts, len(alerts.rules), len(alerts.channels))

    def tables_where(self) -> str:
        """' · tables s3://bucket/prefix' when the tables are in an object store (never a key: a URL of ratui.yaml's
        has none); '' when they are in the project's folders. No I/O."""
        section = getattr(self.settings, "catalog", None) or {}
        url = section.get("warehouse")
        return f" · tables {url}" if isinstance(url, str) and "://" in url else ""
