"""Runs: the history, newest first, one page at a time (LIMIT/OFFSET), filterable with `/`."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Input, Static

from ratui.console.controller import RunFilter, RunsPage
from ratui.console.format import fmt_count, fmt_ms, fmt_time, glyph, short_key
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.screens.base import ConsoleScreen

PAGE_SIZE = 100
COLUMNS = (("run", "RUN"), ("pipeline", "PIPELINE"), ("status", "STATUS"), ("strategy", "STRATEGY"),
           ("trigger", "TRIGGER"), ("rows", "ROWS"), ("time", "TIME"), ("started", "STARTED (UTC)"),
           ("error", "ERROR"))


def status_cell(row: dict) -> Text:
    status = row.get("status") or "pending"
    if status == "success" and row.get("warnings"):
        icon, style = glyph("warned")
        return Text(f"{icon} success", style=style)
    icon, style = glyph(status)
    return Text(f"{icon} {status}", style=style)


class RunsScreen(ConsoleScreen):
    MODE = "runs"
    AUTO_FOCUS = "#runs-table"
    BINDINGS = [
        Binding("slash", "filter", "Filter", id="runs.filter", key_display="/"),
        Binding("right_square_bracket,n", "page(1)", "Next page", id="runs.next", key_display="]"),
        Binding("left_square_bracket,p", "page(-1)", "Prev page", id="runs.prev", key_display="["),
        Binding("escape", "clear_filter", "Clear filter", id="runs.clear", show=False),
        Binding("ctrl+r", "refresh", "Refresh", id="runs.refresh"),
        Binding("q", "quality", "Quality", id="runs.quality"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.page = 0
        self.filter = RunFilter()
        self.data: RunsPage | None = None
        self.namespace: str | None = None
        self._refresh_timer = None
        self._stale = False

    def compose(self) -> ComposeResult:
        yield NavBar("runs")
        with Vertical(id="runs-main"):
            field = Input(placeholder="filter: text · status:failed · pipeline:orders   (enter applies, esc clears)",
                          id="runs-filter", classes="hidden")
            yield field
            yield Static(Text("loading…", style="dim"), id="runs-info")
            table: DataTable = DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
            for key, label in COLUMNS:
                table.add_column(label, key=key)
            yield table
        yield StatusLine()
        yield Footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#runs-filter", Input).cursor_blink = self.app.cursor_blink

    # ------------------------------------------------------------------------------------------ data

    def project_ready(self, compiled) -> None:
        self.namespace = compiled.settings.namespace
        self.reload()

    def reload(self) -> None:
        self.load("page", self.app.controller.runs_page, self.page, PAGE_SIZE, self.filter)

    def loaded_page(self, data: RunsPage) -> None:
        self.data = data
        self.page = data.page
        table = self.query_one("#runs-table", DataTable)
        selected = None
        if table.row_count and table.cursor_row is not None and table.cursor_row < table.row_count:
            selected = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        table.clear()
        for row in data.rows:
            table.add_row(
                row["id"], short_key(row["pipeline"], self.namespace), status_cell(row), row.get("strategy") or "-", row.get("trigger") or "-",
                Text(fmt_count(row.get("rows_written")), justify="right"),
                Text(fmt_ms(row.get("duration_ms")), justify="right"),
                fmt_time(row.get("started_at") or row.get("queued_at")),
                Text(row.get("error_code") or "", style="red"),
                key=row["id"],
            )
        if selected is not None and selected in table.rows:
            table.move_cursor(row=table.get_row_index(selected), animate=False)
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
        self.query_one("#runs-info", Static).update(info)

    def runs_changed(self, change) -> None:
        # new or finished runs show up on the first page; coalesce bursts into one query, only while in view
        if self.page != 0:
            return
        if not self.is_current:
            self._stale = True
        elif self._refresh_timer is None:
            self._refresh_timer = self.set_timer(0.5 if (change.started or change.ended) else 1.0,
                                                 self._timed_reload)

    def on_screen_resume(self) -> None:
        if self._stale:
            self._stale = False
            self.reload()

    def _timed_reload(self) -> None:
        self._refresh_timer = None
        self.reload()

    # --------------------------------------------------------------------------------------- actions

    def action_filter(self) -> None:
        field = self.query_one("#runs-filter", Input)
        field.remove_class("hidden")
        field.value = self.filter.describe()
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.filter = RunFilter.parse(event.value)
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

    def action_page(self, delta: int) -> None:
        if self.data is None:
            return
        target = max(0, min(self.data.pages - 1, self.page + delta))
        if target != self.page:
            self.page = target
            self.reload()

    def action_refresh(self) -> None:
        self.reload()

    def _cursor_run(self) -> str | None:
        table = self.query_one("#runs-table", DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.app.open_run(event.row_key.value)

    def action_quality(self) -> None:
        run_id = self._cursor_run()
        if run_id:
            self.app.open_quality(run_id)
