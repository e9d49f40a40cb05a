"""History: the commits of a ref, newest first, or only those that changed one table; and rollback.

Each commit: when, what made it (run, merge, publish, rollback, branch, reaper), the run and the pipeline's version
behind it, and the tables it changed with their snapshot and rows. Opened from Branches (`l`, a ref's history) and
Pipelines (`h`, the selected pipeline's table on the working ref). `o` opens the commit's run; `r` rolls back to the
selected commit (the table, in a table's history; every table of the ref otherwise) after a confirmation that lists
what changes. A rollback is a new commit: the history is kept, and rolling forward again is another rollback.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Label, Static

from ratui.console.format import fmt_time, short_key
from ratui.engine.errors import RatuiError
from ratui.messages import HistoryLoaded, RollbackPlanned, RolledBack
from ratui.screens.base import ConsoleScreen, is_narrow, changes
from ratui.screens.dialogs import ConfirmScreen
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.screens.undo import UndoKeys, undo_binding

KIND_STYLE = {"run": "green", "merge": "cyan", "publish": "magenta", "rollback": "yellow", "undo": "yellow",
              "branch": "dim",
              "external": "blue",  # committed by another engine through `ratui serve`
              "reaper": "dim", "init": "dim", "commit": ""}


def _rows(value: Any) -> str:
    return "?" if value is None else f"{value:,}"


def _snap(value: Any) -> str:
    return "-" if value is None else str(value)[:10]


def _error_text(error: RatuiError) -> str:
    return error.text()


class HistoryScreen(UndoKeys, ConsoleScreen):
    UNDO_ON_REF = True
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="history.back"),
        Binding("o", "open_run", "Open run", id="history.open_run"),
        Binding("r", "rollback", "Roll back to here", id="history.rollback"),
        Binding("ctrl+r", "refresh", "Refresh", id="history.refresh", show=False),
        undo_binding("history"),
    ]
    DEFAULT_CSS = """
    #history-main { height: 1fr; }
    #history-head { height: 1; padding: 0 1; }
    #history-table { height: 1fr; }
    #history-detail { height: auto; max-height: 45%; padding: 0 1; border-top: hkey $panel-lighten-2; }
    #history-commit { height: auto; }
    #history-tables { height: auto; max-height: 10; }
    """

    def __init__(self, ref: str, table: str | None = None, *, origin: str = "", limit: int = 200) -> None:
        super().__init__()
        self.ref = ref
        self.table = table
        self.origin = origin
        self.limit = limit
        self.entries: dict[str, Any] = {}  # hash -> LogEntry
        self.namespace: str | None = None

    def compose(self) -> ComposeResult:
        yield NavBar(self.origin)
        with Vertical(id="history-main"):
            yield Static(Text(f"{self.what}: reading its commits…", style="dim"), id="history-head")
            yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
            with Vertical(id="history-detail"):
                yield Label("", id="history-commit")
                yield DataTable(id="history-tables", cursor_type="row", zebra_stripes=False, show_cursor=False)
        yield StatusLine()
        yield Footer()

    @property
    def what(self) -> str:
        return f"History of {self.table} on {self.ref}" if self.table else f"History of {self.ref}"

    # ------------------------------------------------------------------------------------------ data

    def project_ready(self, compiled) -> None:
        self.namespace = compiled.settings.namespace
        self.reload()

    def state_changed(self, item) -> None:
        self.reload()

    def reload(self) -> None:
        self.load(HistoryLoaded, self._read_commits)

    def action_refresh(self) -> None:
        self.reload()

    def _read_commits(self) -> tuple[str, str | None, list]:
        return self.ref, self.table, self.app.controller.log(self.ref, self.table, self.limit)

    def cursor_hash(self) -> str | None:
        table = self.query_one("#history-table", DataTable)
        if not table.row_count or table.cursor_row is None or table.cursor_row >= table.row_count:
            return None
        return table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value

    @on(HistoryLoaded)
    def _loaded(self, message: HistoryLoaded) -> None:
        _ref, _table, entries = message.value
        narrow = is_narrow(self.app.size.width)
        self.entries = {e.hash: e for e in entries}
        table = self.query_one("#history-table", DataTable)
        keep = self.cursor_hash()
        table.clear(columns=True)
        table.add_column("TIME (UTC)", key="time")  # to the minute; the commit line below has the seconds
        table.add_column("KIND", key="kind")
        if not narrow:
            table.add_column("COMMIT", key="commit")
        table.add_column("RUN", key="run")
        table.add_column("PIPELINE @ VERSION" if not narrow else "PIPELINE", key="pipeline")
        table.add_column("SNAPSHOT · ROWS" if self.table else "TABLES", key="tables")
        for entry in entries:
            time = fmt_time(entry.created_at)
            cells: list[Any] = [time[5:16] if narrow else time[:16],
                                Text(entry.kind, style=KIND_STYLE.get(entry.kind, ""))]
            if not narrow:
                cells.append(entry.hash[:8])
            cells.append(self._run_cell(entry, narrow))
            cells.append(self._pipeline(entry, narrow))
            cells.append(self._tables(entry, narrow))
            table.add_row(*cells, key=entry.hash)
        if keep is not None and keep in self.entries:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        head = Text()
        head.append(self.what, style="bold")
        shown = f"{len(entries)} commit(s)" + (" (the newest)" if len(entries) >= self.limit else "")
        head.append(f"   {shown}", style="dim")
        if not narrow:
            head.append("   o opens the run · r rolls back to the selected commit", style="dim")
        self.query_one("#history-head", Static).update(head)
        self.show_commit()
        self.app.mark("history_ready")

    def _run_of(self, entry) -> str | None:
        """The run behind the commit: its own, the table's (in a table's history), or the one a merge carried."""
        if entry.run_id:
            return entry.run_id
        for item in entry.tables:
            if item.get("run_id") and (self.table is None or item["table"] == self.table):
                return item["run_id"]
        return entry.runs[-1] if entry.runs else None

    def _run_cell(self, entry, narrow: bool) -> Text:
        runs = {item["run_id"] for item in entry.tables if item.get("run_id")} if self.table is None else set()
        if len(runs) > 1:
            return Text(f"{len(runs)} runs", style="dim")
        run_id = self._run_of(entry)
        if run_id is None:
            return Text("-", style="dim")
        return Text(run_id[:12] + "…" if narrow and len(run_id) > 13 else run_id)

    def _pipeline(self, entry, narrow: bool) -> Text:
        pipeline, version = entry.pipeline, entry.version
        made = [item for item in entry.tables if item.get("version")]
        if pipeline is None and self.table is None and len(made) > 1:  # a merge or publish of several runs
            return Text(f"{len(made)} pipelines", style="dim")
        if pipeline is None:
            for item in entry.tables:
                if item.get("version") and (self.table is None or item["table"] == self.table):
                    pipeline, version = item["table"], item["version"]
                    break
        if pipeline is None:
            room = 16 if narrow else 28
            message = entry.message
            return Text(message if len(message) <= room else message[:room - 1] + "…", style="dim")
        text = Text(short_key(pipeline, self.namespace).split(".")[-1] if narrow else
                    short_key(pipeline, self.namespace))
        if version and not narrow:
            text.append(f" @ {str(version)[:6]}", style="dim")
        return text

    def _tables(self, entry, narrow: bool) -> Text:
        if self.table:
            for item in entry.tables:
                if item["table"] == self.table:
                    if item["change"] == "dropped":
                        return Text("dropped", style="red")
                    return Text(f"{_snap(item.get('snapshot_id'))} · {_rows(item.get('rows'))}")
            return Text("-", style="dim")
        if not entry.tables:
            return Text("-", style="dim")
        if len(entry.tables) == 1:
            item = entry.tables[0]
            name = item["table"].rsplit(".", 1)[1] if narrow else short_key(item["table"], self.namespace)
            return Text(f"{name} · {_rows(item.get('rows'))}")
        return Text(f"{len(entry.tables)} tables")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "history-table":
            event.stop()
            self.show_commit()

    def show_commit(self) -> None:
        entry = self.entries.get(self.cursor_hash() or "")
        label = self.query_one("#history-commit", Label)
        tables = self.query_one("#history-tables", DataTable)
        tables.clear(columns=True)
        if entry is None:
            label.update(Text("No commits." if not self.entries else "", style="dim"))
            return
        text = Text()
        text.append(f"commit {entry.hash[:12]}", style="bold")
        text.append(f" · {fmt_time(entry.created_at)} · {entry.kind}", style="dim")
        text.append(f"\n{entry.message}")
        if entry.runs:
            text.append(f"\ncarried run(s): {', '.join(entry.runs[-4:])}" + (" …" if len(entry.runs) > 4 else ""),
                        style="dim")
        label.update(text)
        narrow = is_narrow(self.app.size.width)
        tables.add_columns("TABLE", "CHANGE", "SNAPSHOT", "ROWS", "RUN", "VERSION")
        for item in entry.tables:
            run_id = item.get("run_id") or "-"
            tables.add_row(short_key(item["table"], self.namespace), item["change"], _snap(item.get("snapshot_id")),
                           Text(_rows(item.get("rows")), justify="right"),
                           run_id[:12] + "…" if narrow and len(run_id) > 13 else run_id,
                           str(item.get("version") or "-")[:8], key=item["table"])
        if not entry.tables:
            tables.add_row(Text("no table changed in this commit", style="dim"), "", "", "", "", "")

    def load_failed(self, kind, error: BaseException) -> bool:
        if not isinstance(error, RatuiError):
            return False
        if kind is HistoryLoaded:
            text = Text(f"{error.code} {error.message}", style="red")
            if error.hint:
                text.append(f"  hint: {error.hint}", style="dim")
            self.query_one("#history-head", Static).update(text)
            return True
        title = "Cannot roll back"
        self.app.notify(_error_text(error), title=title, severity="error", timeout=12, markup=False)
        if kind is RolledBack:
            self.reload()
        return True

    # --------------------------------------------------------------------------------------- actions

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_open_run(self) -> None:
        entry = self.entries.get(self.cursor_hash() or "")
        run_id = self._run_of(entry) if entry is not None else None
        if run_id:
            self.app.open_run(run_id)
        else:
            self.notify("No run made this commit.", severity="warning", timeout=3)

    @changes("rolling back")
    def action_rollback(self) -> None:
        commit = self.cursor_hash()
        if commit is None:
            return
        self.load(RollbackPlanned, self.app.controller.plan_rollback, self.ref, commit, self.table)

    @on(RollbackPlanned)
    def _planned(self, message: RollbackPlanned) -> None:
        plan = message.value
        what = plan.table or f"every table of {plan.ref}"
        if not plan.changes:
            self.notify(f"{what} already is as commit {plan.to.hash[:12]} left it: nothing to roll back.",
                        title="Rollback", timeout=5, markup=False)
            return
        grid = Table(box=None, padding=(0, 1), show_header=True, header_style="bold dim")
        grid.add_column("table", no_wrap=True)
        grid.add_column("rows now → after", no_wrap=True)
        grid.add_column("snapshot now → after", no_wrap=True)
        for change in plan.changes:
            before, after = change.before, change.after
            rows = (f"{_rows(before.rows) if before.location else 'absent'} → "
                    f"{_rows(after.rows) if after.location else 'absent (dropped)'}")
            snaps = f"{_snap(before.snapshot_id)} → {_snap(after.snapshot_id)}"
            grid.add_row(short_key(change.table, self.namespace), rows, snaps)
        parts: list = [Text(f"Roll {what} back to commit {plan.to.hash[:12]} ({fmt_time(plan.to.created_at)}, "
                            f"{plan.to.message}):"), grid]
        files = plan.reloadable
        parts.append(Text(f"{files} landing file(s) become loadable again (the next run loads them)." if files else
                          "No landing file becomes loadable again.", style="yellow" if files else "dim"))
        parts.append(Text(f"One new commit on {plan.ref}; the history is kept (a later rollback can undo this). "
                          "No data file is deleted.", style="dim"))

        def done(ok: bool | None) -> None:
            if ok:
                self.load(RolledBack, self._apply, plan)

        self.app.push_screen(ConfirmScreen(f"Roll back {what}?", Group(*parts), "Roll back", back="Keep it"), done)

    def _apply(self, plan):
        return plan, self.app.controller.rollback(plan)

    @on(RolledBack)
    def _rolled_back(self, message: RolledBack) -> None:
        plan, commit = message.value
        what = plan.table or f"{len(plan.changes)} table(s) of {plan.ref}"
        if commit is None:
            self.notify("Nothing had to change.", title="Rollback", timeout=4)
        else:
            self.notify(f"Rolled {what} back to {plan.to.hash[:12]} (new commit {commit.hash[:12]}).",
                        title="Rollback", markup=False)
        self.reload()
