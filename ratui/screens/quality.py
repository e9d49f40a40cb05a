"""Quality: the results of one run or across recent runs, failed and warned first, with the sample violating
rows in a table and the test's SQL on demand."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from rich.console import Group
from textual.widgets import DataTable, Footer, Label, Static

from ratui.console.format import fmt_ms, fmt_time, glyph, quality_word, short_key
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.engine.vocabulary import QUALITY_NOT_RUN, not_run_reason
from ratui.messages import QualityLoaded
from ratui.screens.table_screen import TableScreen
from ratui.widgets.code import code_view
from ratui.widgets.panes import Pane, toggle_maximize

ORDER = {"failed": 0, "error": 0, "not_run": 1, "warned": 1, "passed": 2}
RECENT_LIMIT = 500


def sort_results(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The current results first, then the earlier ones (console/current.py); failed (and errored) first, then
    not run and warned, then passed; newest first within each."""
    return sorted(results, key=lambda q: (not q.get("current", True), ORDER.get(q.get("status"), 3),
                                          -(q.get("id") or 0)))


def result_cells(q: dict[str, Any]) -> list[Any]:
    icon, style = glyph(q.get("status"))
    if not q.get("current", True):  # an earlier result: history, not the state
        style = "dim"
    violations = q.get("violations") or 0
    return [Text(f"{icon} {quality_word(q.get('status'))}", style=style), q.get("test"),
            short_key(q.get("pipeline") or "", (q.get("pipeline") or "").split(".")[0]),
            Text(q.get("severity") or "", style="red" if q.get("severity") == "error" else "yellow"),
            Text(f"{violations:,}", justify="right", style="bold" if violations else "dim"),
            Text(fmt_ms(q.get("duration_ms")), justify="right"), q.get("run_id"), fmt_time(q.get("finished_at"))]


class QualityScreen(TableScreen):
    MODE = "quality"
    COLUMNS = (("status", "RESULT"), ("test", "TEST"), ("pipeline", "PIPELINE"), ("severity", "SEVERITY"),
               ("violations", "VIOLATIONS"), ("time", "TIME"), ("run", "RUN"), ("finished", "FINISHED"))
    AUTO_FOCUS = "#quality-table"
    BINDINGS = [
        Binding("s", "toggle_sql", "SQL", id="quality.sql"),
        Binding("o", "open_run", "Open run", id="quality.open_run"),
        Binding("p", "toggle_passed", "Hide passed", id="quality.passed"),
        Binding("ctrl+r", "refresh", "Refresh", id="quality.refresh"),
        Binding("escape", "back", "Back", id="quality.back", show=False),
        Binding("m", "maximize", "Maximize pane", id="quality.maximize", show=False),
    ]
    HELP_KEYS = (("tab", "The results / the selected one's SQL and sample rows: the one focused scrolls"),)

    def __init__(self, run_id: str | None = None, origin: str = "") -> None:
        super().__init__()
        self.run_id = run_id
        self.origin = origin
        self.results: list[dict[str, Any]] = []
        self.by_id: dict[str, dict[str, Any]] = {}
        self.hide_passed = False
        self.show_sql = False

    def compose(self) -> ComposeResult:
        yield NavBar(self.origin if self.run_id else "quality")
        with Vertical(id="quality-main"):
            yield self.info_widget()
            yield self.table_widget()
            # the selected result: the test's SQL (s) right under its head, then its sample rows; tab gives it the
            # keys (it scrolls), m the whole screen
            with Pane(id="quality-detail"):
                yield Static(id="quality-head")
                yield Static(id="quality-sql", classes="hidden")
                yield Label("Sample violating rows", classes="section", id="sample-label")
                yield DataTable(id="quality-sample", cursor_type="row", zebra_stripes=True)
        yield StatusLine()
        yield Footer()

    # ------------------------------------------------------------------------------------------ data

    def reload(self) -> None:
        self.load(QualityLoaded, self.app.controller.quality, self.run_id, RECENT_LIMIT, self.app.compiled)

    def runs_changed(self, change) -> None:
        if change.ended and (self.run_id is None or self.run_id in change.changed):
            self.reload()

    @on(QualityLoaded)
    def _results_loaded(self, message: QualityLoaded) -> None:
        results = message.value
        self.results = sort_results(results)
        self.by_id = {str(q["id"]): q for q in self.results}
        self.fill()

    def fill(self) -> None:
        shown = [q for q in self.results if not (self.hide_passed and q.get("status") == "passed")]
        self.refill((str(q["id"]), result_cells(q)) for q in shown)
        now = [q for q in self.results if q.get("current", True)]
        failed = sum(1 for q in now if ORDER.get(q.get("status")) == 0)
        warned = sum(1 for q in now if q.get("status") == "warned")
        passed = sum(1 for q in now if q.get("status") == "passed")
        info = Text()
        if self.run_id:
            info.append(f"quality of run {self.run_id}", style="bold")
        else:
            info.append("quality now, each test's latest result", style="bold")
        info.append("   ")
        info.append(f"✘ {failed} failed", style="red" if failed else "dim")
        info.append("  ")
        info.append(f"▲ {warned} warned", style="yellow" if warned else "dim")
        not_run = sum(1 for q in self.results if q.get("status") == QUALITY_NOT_RUN)
        if not_run:
            info.append(f"  ○ {not_run} not run", style="yellow")
        info.append("  ")
        info.append(f"✔ {passed} passed" + (" (hidden)" if self.hide_passed else ""),
                    style="green" if passed else "dim")
        earlier = len(self.results) - len(now)
        if earlier:
            info.append(f"   {earlier:,} earlier result{'s' if earlier != 1 else ''} below, dim", style="dim")
        self.set_info(info)
        if not shown:
            self.show_result(None)
        else:
            self.show_result(self.by_id.get(self.cursor_key() or ""))
        self.app.mark("quality_ready")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "quality-table":
            event.stop()
            self.show_result(self.by_id.get(event.row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "quality-table":
            event.stop()
            self.action_open_run()

    def show_result(self, q: dict[str, Any] | None) -> None:
        head = self.query_one("#quality-head", Static)
        sample = self.query_one("#quality-sample", DataTable)
        sql = self.query_one("#quality-sql", Static)
        sample.clear(columns=True)
        if q is None:
            head.update(Text("No quality results yet." if not self.results else "", style="dim"))
            sql.update("")
            return
        icon, style = glyph(q.get("status"))
        text = Text()
        text.append(f"{icon} {q.get('test')}", style=f"bold {style}")
        text.append(f"  [{q.get('severity')}] on {q.get('pipeline')}  ", style="dim")
        violations = q.get("violations") or 0
        text.append(f"{violations:,} violating row{'s' if violations != 1 else ''}", style="bold" if violations
                    else "dim")
        if q.get("status") == QUALITY_NOT_RUN:  # Spark could not run it: no finding about the data
            text.append(f"\nnot run: {not_run_reason(q.get('error'))}", style="bold yellow")
        if q.get("error"):
            text.append(f"\n{q['error']}", style="yellow" if q.get("status") == QUALITY_NOT_RUN else "red")
        file = str(q.get("file") or "")
        root = str(self.app.root) + "/"
        shown_file = file[len(root):] if file.startswith(root) else file
        if shown_file:
            text.append(f"\n{shown_file}", style="dim")
        text.append("\ns: show the test's SQL" if not self.show_sql else "\ns: hide the SQL (shown below)",
                    style="dim")
        text.append(" · tab: this pane · m: maximize", style="dim")
        head.update(text)
        columns = q.get("columns") or []
        rows = q.get("sample") or []
        for column in columns:
            sample.add_column(str(column))
        for row in rows:
            sample.add_row(*[Text("NULL", style="dim italic") if v is None else str(v) for v in row])
        label = self.query_one("#sample-label", Label)
        label.update(f"Sample violating rows ({len(rows)} of {violations:,})" if rows else
                     "No sample rows" + (" (the test passed)" if q.get("status") == "passed" else ""))
        sql.update(self.sql_view(q, shown_file))

    def sql_view(self, q: dict[str, Any], shown_file: str) -> Group:
        """The test as its file says it (`{{ this }}`); the SQL the run recorded (compiled) when the file is gone."""
        dark = self.app.current_theme.dark
        if q.get("source") is not None:
            title = Text(f"{shown_file.rsplit('/', 1)[-1]}, as the file says now", style="bold")
            return Group(title, code_view(q["source"].rstrip("\n"), "sql", dark=dark))
        title = Text("as the run recorded it (compiled; the test's file is not in the project now)", style="bold")
        return Group(title, code_view(q.get("sql") or "-- no SQL recorded", "sql", dark=dark))

    # --------------------------------------------------------------------------------------- actions

    def action_toggle_sql(self) -> None:
        self.show_sql = not self.show_sql
        self.query_one("#quality-sql", Static).set_class(not self.show_sql, "hidden")
        self.show_result(self.by_id.get(self.cursor_key() or ""))
        if self.show_sql:  # in view: right under the result's head, at the top of its pane
            self.query_one("#quality-detail", Pane).scroll_home(animate=False)

    def action_maximize(self) -> None:
        toggle_maximize(self)

    def action_toggle_passed(self) -> None:
        self.hide_passed = not self.hide_passed
        self.fill()

    def action_open_run(self) -> None:
        q = self.by_id.get(self.cursor_key() or "")
        if q:
            self.app.open_run(q["run_id"])

    def action_back(self) -> None:
        if self.run_id is not None:
            self.dismiss()
