"""Runs: the history, newest first, one page at a time (LIMIT/OFFSET), filterable with `/`."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Input

from ratui.console.controller import RunFilter, RunsPage
from ratui.console.format import fmt_count, fmt_ms, fmt_time, glyph, short_key
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.messages import RunsPageLoaded
from ratui.screens.table_screen import TableScreen

PAGE_SIZE = 100
COLUMNS = (("run", "RUN"), ("pipeline", "PIPELINE"), ("status", "STATUS"), ("type", "TYPE"),
           ("strategy", "STRATEGY"), ("trigger", "TRIGGER"), ("rows", "ROWS"), ("time", "TIME"),
           ("started", "STARTED (UTC)"), ("error", "ERROR"), ("reason", "REASON"))


def status_cell(row: dict) -> Text:
    status = row.get("status") or "pending"
    if status == "success" and row.get("warnings"):
        icon, style = glyph("warned")
        return Text(f"{icon} success", style=style)
    icon, style = glyph(status)
    return Text(f"{icon} {status}", style=style)


class RunsScreen(TableScreen):
    MODE = "runs"
    COLUMNS = COLUMNS
    AUTO_FOCUS = "#runs-table"
    BINDINGS = [
        Binding("slash", "filter", "Filter", id="runs.filter", key_display="/"),
        Binding("right_square_bracket,n", "page(1)", "Next page", id="runs.next", key_display="]"),
        Binding("left_square_bracket,p", "page(-1)", "Prev page", id="runs.prev", key_display="["),
        Binding("escape", "clear_filter", "Clear filter", id="runs.clear", show=False),
        # priority: the table's own home/end only scroll the current page
        Binding("home", "first_page", "First page", id="runs.first", show=False, priority=True),
        Binding("end", "last_page", "Last page", id="runs.last", show=False, priority=True),
        Binding("ctrl+r", "refresh", "Refresh", id="runs.refresh"),
        Binding("q", "quality", "Quality", id="runs.quality"),
        Binding("R", "rerun", "Re-run", id="runs.rerun", key_display="R"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.page = 0
        self.filter = RunFilter()
        self.data: RunsPage | None = None

    def compose(self) -> ComposeResult:
        yield NavBar("runs")
        with Vertical(id="runs-main"):
            field = Input(placeholder="filter: text · status:failed · pipeline:orders   (enter applies, esc clears)",
                          id="runs-filter", classes="hidden")
            yield field
            yield self.info_widget()
            yield self.table_widget()
        yield StatusLine()
        yield Footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#runs-filter", Input).cursor_blink = self.app.cursor_blink

    # ------------------------------------------------------------------------------------------ data

    def reload(self) -> None:
        self.load(RunsPageLoaded, self.app.controller.runs_page, self.page, PAGE_SIZE, self.filter)

    @on(RunsPageLoaded)
    def _page_loaded(self, message: RunsPageLoaded) -> None:
        data = message.value
        self.data = data
        self.page = data.page
        self.refill((row["id"], [
            row["id"], short_key(row["pipeline"], self.namespace), status_cell(row), row.get("run_type") or "-",
            row.get("strategy") or "-",
            row.get("trigger") or "-", Text(fmt_count(row.get("rows_written")), justify="right"),
            Text(fmt_ms(row.get("duration_ms")), justify="right"),
            fmt_time(row.get("started_at") or row.get("queued_at")), Text(row.get("error_code") or "", style="red"),
            Text(row.get("reason") or "", style="dim"),
        ]) for row in data.rows)
        self.show_info()
        self.app.mark("runs_ready")

    def show_info(self) -> None:
        data = self.data
        info = Text()
        if data is None:
            return
        if data.total == 0:
            info.append("no runs" + (" match the filter" if self.filter.active else " yet — run a pipeline from "
                                     "Pipelines (1)"), style="dim")
        else:
            first = data.page * data.size + 1
            last = data.page * data.size + len(data.rows)
            info.append(f"runs {first:,}–{last:,} of {data.total:,}", style="bold")
            info.append(f"   page {data.page + 1:,}/{data.pages:,}", style="dim")
        if self.filter.active:
            info.append("   filter: ", style="dim")
            info.append(self.filter.describe(), style="bold yellow")
            info.append("  (esc clears)", style="dim")
        self.set_info(info)

    def runs_changed(self, change) -> None:
        # new or finished runs show up on the first page; coalesce bursts into one query, only while in view
        if self.page == 0:
            self.reload_soon(0.5 if (change.started or change.ended) else 1.0)

    # --------------------------------------------------------------------------------------- actions

    def action_filter(self) -> None:
        field = self.query_one("#runs-filter", Input)
        field.remove_class("hidden")
        field.value = self.filter.describe()
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        parsed = RunFilter.parse(event.value)
        if parsed.problem:  # keep the field open with what was typed, and say what is wrong with it
            self.notify(parsed.problem, title="Filter", severity="warning", markup=False)
            return
        self.filter = parsed
        self.page = 0
        field = self.query_one("#runs-filter", Input)
        field.add_class("hidden")
        self.query_one("#runs-table", DataTable).focus()
        self.reload()

    def action_clear_filter(self) -> None:
        field = self.query_one("#runs-filter", Input)
        if not field.has_class("hidden"):
            field.add_class("hidden")
            self.query_one("#runs-table", DataTable).focus()
        elif self.filter.active:
            self.filter = RunFilter()
            self.page = 0
            self.reload()

    def action_first_page(self) -> None:
        """Home: the newest runs, the cursor on the first (in the filter field: its start)."""
        field = self.query_one("#runs-filter", Input)
        if field.has_focus:
            field.action_home()
            return
        table = self.query_one("#runs-table", DataTable)
        if self.page != 0:
            self.page = 0
            self.reload()
        table.move_cursor(row=0)

    def action_last_page(self) -> None:
        """End: the oldest runs (in the filter field: its end)."""
        field = self.query_one("#runs-filter", Input)
        if field.has_focus:
            field.action_end()
            return
        if self.data is not None and self.page != self.data.pages - 1:
            self.page = self.data.pages - 1
            self.reload()
        else:
            table = self.query_one("#runs-table", DataTable)
            table.move_cursor(row=max(0, table.row_count - 1))

    def action_page(self, delta: int) -> None:
        if self.data is None:
            return
        target = max(0, min(self.data.pages - 1, self.page + delta))
        if target != self.page:
            self.page = target
            self.reload()


    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.app.open_run(event.row_key.value)

    def action_rerun(self) -> None:
        """Run the selected run's pipeline again, even when nothing changed since."""
        run_id = self.cursor_key()
        row = next((r for r in (self.data.rows if self.data else []) if r["id"] == run_id), None)
        if row is None:
            self.notify("Select a run to run again.", severity="warning")
            return
        self.app.run_pipeline(row["pipeline"], force=True)

    def action_quality(self) -> None:
        run_id = self.cursor_key()
        if run_id:
            self.app.open_quality(run_id)
