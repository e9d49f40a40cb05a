"""Runs: the history, newest first, one page at a time (LIMIT/OFFSET), filterable with `/`."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Input

from ratui.console import compare
from ratui.console.controller import RunFilter, RunsPage
from ratui.console.format import fmt_count, fmt_ms, fmt_time, glyph, short_key
from ratui.engine.vocabulary import MAIN
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.messages import PreviousRunFound, RunsPageLoaded
from ratui.screens.base import close_field, open_field
from ratui.screens.table_screen import TableScreen
from ratui.screens.undo import UndoKeys, undo_binding

PAGE_SIZE = 100
# the ref beside the status, then what the run did (its run type); the pipeline's strategy and the trigger after the
# start time (at 120 columns the start time stays whole, "incremental" in TYPE too)
COLUMNS = (("run", "RUN"), ("pipeline", "PIPELINE"), ("status", "STATUS"), ("ref", "REF"), ("type", "TYPE"),
           ("rows", "ROWS"), ("time", "TIME"), ("started", "STARTED (UTC)"), ("strategy", "STRATEGY"),
           ("trigger", "TRIGGER"), ("error", "ERROR"), ("reason", "REASON"))


def status_cell(row: dict) -> Text:
    status = row.get("status") or "pending"
    if status == "success" and row.get("warnings"):
        icon, style = glyph("warned")
        return Text(f"{icon} success", style=style)
    icon, style = glyph(status)
    return Text(f"{icon} {status}", style=style)


def ref_cell(ref: str) -> Text:
    """The ref a run merges into: main plain, any other ref (a dev or publish branch) lit."""
    return Text(ref, style="" if ref == MAIN else "bold cyan")


class RunsScreen(UndoKeys, TableScreen):
    MODE = "runs"
    HELP_KEYS = (("enter", "Open the run"),)
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
        Binding("ctrl+r", "refresh", "Refresh", id="runs.refresh", show=False),  # the list follows runs live; in ?
        Binding("q", "quality", "Quality", id="runs.quality"),
        Binding("R", "rerun", "Re-run", id="runs.rerun", key_display="R"),
        Binding("space", "mark", "Mark for compare", id="runs.mark", show=False),
        Binding("c", "compare", "Compare", id="runs.compare"),
        undo_binding("runs"),
    ]

    MARK_STYLE = "bold reverse magenta"

    def __init__(self) -> None:
        super().__init__()
        self.page = 0
        self.filter = RunFilter()
        self.data: RunsPage | None = None
        self.marks: dict[str, str] = {}  # run id -> its pipeline, the two (at most) marked for comparing

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
            self.run_cell(row["id"]), short_key(row["pipeline"], self.namespace), status_cell(row),
            ref_cell(row.get("ref") or MAIN), row.get("run_type") or "-",
            Text(fmt_count(row.get("rows_written")), justify="right"),
            Text(fmt_ms(row.get("duration_ms")), justify="right"),
            fmt_time(row.get("started_at") or row.get("queued_at")), row.get("strategy") or "-",
            row.get("trigger") or "-",
            Text(row.get("error_code") or "", style="red"),
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
            if not self.marks:
                info.append("   space marks runs, c compares", style="dim")
        if self.marks:
            info.append("   marked: ", style="dim")
            info.append(" · ".join(self.marks), style=self.MARK_STYLE.replace("reverse ", ""))
            info.append("  (c compares" + (" them)" if len(self.marks) == 2 else " with the cursor's run)"),
                        style="dim")
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
        open_field(self.query_one("#runs-filter", Input), self.filter.describe())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        parsed = RunFilter.parse(event.value)
        if parsed.problem:  # keep the field open with what was typed, and say what is wrong with it
            self.notify(parsed.problem, title="Filter", severity="warning", markup=False)
            return
        self.filter = parsed
        self.page = 0
        close_field(self.query_one("#runs-filter", Input), self.query_one("#runs-table", DataTable))
        self.reload()

    def action_clear_filter(self) -> None:
        field = self.query_one("#runs-filter", Input)
        if not field.has_class("hidden"):
            close_field(field, self.query_one("#runs-table", DataTable))
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

    # ----------------------------------------------------------------------------------- comparing

    def run_cell(self, run_id: str) -> Text:
        return Text(run_id, style=self.MARK_STYLE if run_id in self.marks else "")

    def row_of(self, run_id: str | None) -> dict | None:
        return next((r for r in (self.data.rows if self.data else []) if r["id"] == run_id), None)

    def action_mark(self) -> None:
        """Mark the run under the cursor for comparing (again: unmark it); a third mark replaces the oldest."""
        row = self.row_of(self.cursor_key())
        if row is None:
            return
        run_id = row["id"]
        changed = {run_id}
        if run_id in self.marks:
            del self.marks[run_id]
        else:
            self.marks[run_id] = row["pipeline"]
            while len(self.marks) > 2:
                oldest = next(iter(self.marks))
                del self.marks[oldest]
                changed.add(oldest)
        table = self.table
        for key in changed:
            if key in table.rows:
                table.update_cell(key, "run", self.run_cell(key))
        self.show_info()

    def action_compare(self) -> None:
        """Compare the two marked runs; one marked: it with the run under the cursor; none: the cursor's run with
        the run of its pipeline before it."""
        cursor = self.row_of(self.cursor_key())
        marked = list(self.marks.items())
        if len(marked) == 2:
            pair = marked
        elif len(marked) == 1 and cursor is not None and cursor["id"] != marked[0][0]:
            pair = [marked[0], (cursor["id"], cursor["pipeline"])]
        elif marked or cursor is not None:
            run_id, pipeline = marked[0] if marked else (cursor["id"], cursor["pipeline"])
            run = {"id": run_id, "pipeline": pipeline}
            runs_page = self.app.controller.runs_page
            self.load(PreviousRunFound, lambda: (run, compare.previous_run(runs_page, run,
                                                                            lambda p: RunFilter(pipeline=p))))
            return
        else:
            self.notify("No run to compare: mark two runs with space, or put the cursor on one.", title="Compare",
                        severity="warning", markup=False)
            return
        (a, pipeline_a), (b, pipeline_b) = pair
        if pipeline_a != pipeline_b:
            self.notify(f"{a} is a run of {short_key(pipeline_a, self.namespace)} and {b} of "
                        f"{short_key(pipeline_b, self.namespace)}: compare two runs of one pipeline.",
                        title="Cannot compare", severity="warning", timeout=6, markup=False)
            return
        self.open_compare(a, b)

    @on(PreviousRunFound)
    def _previous_found(self, message: PreviousRunFound) -> None:
        run, previous = message.value
        if previous is None:
            self.notify(f"{run['id']} is the first run of {short_key(run['pipeline'], self.namespace)}: nothing "
                        "before it to compare with. Mark two runs with space.", title="Compare",
                        severity="warning", timeout=6, markup=False)
            return
        self.open_compare(previous["id"], run["id"])

    def open_compare(self, a: str, b: str) -> None:
        from ratui.screens.compare import CompareScreen

        self.app.push_screen(CompareScreen(a, b, origin=self.app.current_mode))
