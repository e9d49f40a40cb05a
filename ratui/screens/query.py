"""Query: SQL over the tables of a ref, with paged results, history, completion, cancel and export.

The editor takes multi-line SQL (highlighted); ctrl+j (or F5) runs it on the ref the picker shows (main, a branch,
a run's branch while it lives, or a past state: "main@HASH", "main at 2026-03-01 10:00", chosen as "a past
state…" in the picker). The result stays on Spark: the table holds one page (`[` / `]` page through it)
and the row count comes from a job of its own. Escape stops a running query. An error shows its code and line and
puts the cursor there. ctrl+up / ctrl+down recall earlier queries; tab completes table names; ctrl+o opens the
table under the cursor (or chosen in the list) in the table view; ctrl+s exports the whole result to CSV or
Parquet inside the project.

The prompts it opens (export, a past state) are in query_prompts.py.
"""

from __future__ import annotations

import re
import uuid

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, OptionList, Select, Static
from textual.widgets.option_list import Option

from ratui.console.data import PAGE_SIZE, QueryPage, parse_ref_spec
from ratui.console.format import bar, short_key, spark_progress
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN
from ratui.messages import (
    QueryCancelled, QueryCounted, QueryExported, QueryHistoryLoaded, QueryPageLoaded, QueryProgressed,
    QueryRefResolved, QueryRefsLoaded, QueryTablesLoaded,
)
from ratui.screens.base import ConsoleScreen, changes
from ratui.screens.query_prompts import ExportScreen, RefPromptScreen
from ratui.widgets.cells import cell
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.widgets.sql_editor import SqlEditor

PROGRESS_SECONDS = 0.5  # how often a running query's Spark progress is asked for

_DOTTED_NAME = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*){1,2}")

PAST = "@past"  # the picker's "a past state…" entry: asks for ref@HASH or ref at TIME


class QueryScreen(ConsoleScreen):
    MODE = "query"
    AUTO_FOCUS = "#query-editor"
    BINDINGS = [
        Binding("ctrl+j,f5", "run", "Run", id="query.run", key_display="ctrl+j"),
        Binding("escape", "stop", "Stop", id="query.stop"),
        Binding("left_square_bracket", "page(-1)", "Prev page", id="query.prev", key_display="["),
        Binding("right_square_bracket", "page(1)", "Next page", id="query.next", key_display="]"),
        Binding("ctrl+o", "table", "Table", id="query.table"),
        Binding("ctrl+s", "export", "Export", id="query.export"),
        Binding("ctrl+g", "pick_ref", "Ref", id="query.ref"),
        Binding("ctrl+up", "history(-1)", "Older query", id="query.older", show=False),
        Binding("ctrl+down", "history(1)", "Newer query", id="query.newer", show=False),
    ]
    DEFAULT_CSS = """
    #query-main { height: 1fr; }
    #query-top { height: 9; }
    #query-editor { width: 1fr; height: 100%; }
    #query-side { width: 34; height: 100%; padding: 0 0 0 1; }
    #query-ref { width: 100%; }
    #query-tables { height: 1fr; border: none; text-wrap: nowrap; text-overflow: ellipsis; }
    #query-info { height: 1; padding: 0 1; }
    #query-error { height: auto; max-height: 4; padding: 0 1; color: $error; }
    #query-results { height: 1fr; }
    QueryScreen.-narrow #query-top { height: 6; }
    QueryScreen.-narrow #query-side { width: 22; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.ref = MAIN  # the console's working ref until one is picked (ctrl+g): then that one stays
        self.picked = False
        self.query_id: str | None = None  # the result shown (or being fetched)
        self._busy = False
        self._progress_timer = None
        self._shown_page: QueryPage | None = None
        self.history: list[str] = []
        self.history_at: int | None = None  # index into history while recalling
        self.tables: list[str] = []
        self._draft = ""  # what was typed before recalling the history
        self.namespace: str | None = None
        self.refs: list[str] = [MAIN]
        self.past: list[str] = []  # past states read in this screen ("main@HASH"), offered in the picker

    def compose(self) -> ComposeResult:
        yield NavBar("query")
        with Vertical(id="query-main"):
            with Horizontal(id="query-top"):
                yield SqlEditor("", id="query-editor")
                with Vertical(id="query-side"):
                    self.ref = self.app.controller.ref
                    yield Select([(self.ref, self.ref)], value=self.ref, allow_blank=False, id="query-ref")
                    yield OptionList(id="query-tables")
            yield Static(Text("ctrl+j runs the query · tab completes a table name · esc leaves the editor",
                              style="dim"), id="query-info")
            yield Static(id="query-error")
            yield DataTable(id="query-results", zebra_stripes=True, cursor_type="cell")
        yield StatusLine()
        yield Footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#query-editor", SqlEditor).cursor_blink = self.app.cursor_blink

    @property
    def running(self) -> bool:
        return self._busy

    @running.setter
    def running(self, value: bool) -> None:
        self._busy = value
        self.refresh_bindings()  # Stop shows only while a query runs
        if value and self._progress_timer is None:  # Spark's progress of the query's jobs, while it runs
            self._progress_timer = self.set_interval(PROGRESS_SECONDS, self._ask_progress, name="query-progress")
        elif not value and self._progress_timer is not None:
            self._progress_timer.stop()
            self._progress_timer = None

    def _ask_progress(self) -> None:
        if self.running and self.query_id is not None:
            self.load(QueryProgressed, self.app.controller.query_progress, self.query_id)

    @on(QueryProgressed)
    def _progressed(self, message: QueryProgressed) -> None:
        query_id, progress = message.value
        if not self.running or query_id != self.query_id or progress is None or not progress.jobs_running:
            return
        text = Text(f"running on {self.ref}… ", style="yellow")
        if progress.fraction is not None:
            done = bar(progress.fraction, 16)
            text.append(done, style="cyan")
            text.append("░" * (16 - len(done)), style="dim")
        text.append(f" {spark_progress(progress)} · escape stops it", style="yellow")
        self.set_info(text)

    @property
    def page(self) -> QueryPage | None:
        return self._shown_page

    @page.setter
    def page(self, value: QueryPage | None) -> None:
        self._shown_page = value
        self.refresh_bindings()

    # ------------------------------------------------------------------------------------------ data

    def on_screen_resume(self) -> None:
        if not self.picked and self.ref != self.app.controller.ref:  # switched on Branches meanwhile
            self.use_ref(self.app.controller.ref)
            self._fill_picker()

    def project_ready(self, compiled) -> None:
        self.namespace = compiled.settings.namespace
        self.ref = self.ref if self.picked else self.app.controller.ref
        self.load(QueryRefsLoaded, self.app.controller.query_refs)
        self.load(QueryTablesLoaded, self._tables_at, self.ref)
        if not self.history:
            self.load(QueryHistoryLoaded, self.app.controller.query_history.load)

    def state_changed(self, item) -> None:
        """Another process committed (a run merged, a branch came or went): the refs and tables follow."""
        self.load(QueryRefsLoaded, self.app.controller.query_refs)
        self.load(QueryTablesLoaded, self._tables_at, self.ref)

    def _tables_at(self, ref: str) -> tuple[str, list[str]]:
        return ref, self.app.controller.table_names(ref)

    @on(QueryRefsLoaded)
    def _refs(self, message: QueryRefsLoaded) -> None:
        self.refs = list(message.value)
        self._fill_picker()

    def _fill_picker(self) -> None:
        refs = list(self.refs) + [p for p in self.past if p not in self.refs]
        if self.ref not in refs:
            refs.append(self.ref)  # a run's branch that has gone: still what the result was read from
        picker = self.query_one("#query-ref", Select)
        with self.prevent(Select.Changed):
            picker.set_options([(r, r) for r in refs] + [("a past state…", PAST)])
            picker.value = self.ref

    @on(QueryTablesLoaded)
    def _tables(self, message: QueryTablesLoaded) -> None:
        ref, keys = message.value
        if ref != self.ref:
            return
        names = [short_key(k, self.namespace) for k in keys]
        self.tables = keys
        self.query_one("#query-editor", SqlEditor).complete_from = names
        tables = self.query_one("#query-tables", OptionList)
        highlighted = tables.highlighted
        tables.clear_options()
        tables.add_options([Option(Text(name, no_wrap=True, overflow="ellipsis"), id=key)
                            for name, key in zip(names, keys)])
        if not keys:
            tables.add_option(Option(Text(f"no tables at {ref} yet", style="dim"), disabled=True))
        elif highlighted is not None and highlighted < len(keys):
            tables.highlighted = highlighted

    @on(QueryHistoryLoaded)
    def _history(self, message: QueryHistoryLoaded) -> None:
        self.history = list(message.value)

    @on(Select.Changed, "#query-ref")
    def _ref_changed(self, event: Select.Changed) -> None:
        if event.value == PAST:
            with self.prevent(Select.Changed):
                event.select.value = self.ref
            self.app.push_screen(RefPromptScreen(self.ref), self._ref_typed)
        elif isinstance(event.value, str) and event.value != self.ref:
            self.picked = event.value != self.app.controller.ref
            self.use_ref(event.value)

    def use_ref(self, ref: str, note: str = "") -> None:
        self.ref = ref
        self.load(QueryTablesLoaded, self._tables_at, self.ref)
        self.set_info(Text(f"reading {self.ref}{note}: ctrl+j runs the query there", style="dim"))

    def _ref_typed(self, text: str | None) -> None:
        spec = parse_ref_spec(text or "", self.ref)
        if spec is not None:
            self.load(QueryRefResolved, self._resolve, *spec)

    def _resolve(self, ref: str, at: str | None) -> tuple[str, str | None]:
        return self.app.controller.resolve_ref(ref, at), at

    @on(QueryRefResolved)
    def _ref_resolved(self, message: QueryRefResolved) -> None:
        ref, at = message.value
        self.picked = True
        if "@" in ref and ref not in self.past:
            self.past.append(ref)
        self.query_one("#query-error", Static).update("")
        self.use_ref(ref, f" (its state at {at})" if at else "")
        self._fill_picker()

    @on(OptionList.OptionSelected, "#query-tables")
    def _table_chosen(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.open_table(event.option.id)

    @on(SqlEditor.Leave)
    def _leave_editor(self) -> None:
        self.query_one("#query-results", DataTable).focus()

    @on(SqlEditor.Completions)
    def _completions(self, message: SqlEditor.Completions) -> None:
        shown = ", ".join(message.names[:8]) + (" …" if len(message.names) > 8 else "")
        self.set_info(Text(f"tables: {shown}", style="dim"))

    def select_key(self, key: str) -> None:
        """Query a pipeline's table (from `:` or another screen): its first rows, ready to run."""
        name = short_key(key, self.namespace)
        editor = self.query_one("#query-editor", SqlEditor)
        editor.text = f"SELECT *\nFROM {name}\nLIMIT 100"
        editor.focus()

    # -------------------------------------------------------------------------------------- running

    def action_run(self) -> None:
        sql = self.query_one("#query-editor", SqlEditor).text.strip()
        if not sql:
            self.app.notify("Type a query first, e.g. SELECT * FROM silver.clean_orders", title="Query",
                            severity="warning", markup=False)
            return
        if self.running:
            self.app.notify("A query is running: escape stops it.", title="Query", severity="warning")
            return
        self._close_result()
        self.query_one("#query-results", DataTable).clear(columns=True)  # never an old result under a new query
        self.query_id = f"query-{uuid.uuid4().hex[:12]}"
        self.running = True
        self.history = [q for q in self.history if q != sql] + [sql]
        self.history_at = None
        self.query_one("#query-error", Static).update("")
        starting = "" if self.app.controller.spark_started() else " (starting Spark first)"
        self.set_info(Text(f"running on {self.ref}…{starting} escape stops it", style="yellow"))
        self.load(QueryPageLoaded, self.app.controller.open_query, sql, self.ref, self.query_id)

    def action_stop(self) -> None:
        if not self.running or self.query_id is None:
            return
        query_id = self.query_id
        self.set_info(Text("stopping…", style="yellow"))
        self.load(QueryCancelled, self._cancel, query_id)

    def _cancel(self, query_id: str) -> str:
        self.app.controller.cancel_query(query_id)
        return query_id

    @on(QueryCancelled)
    def _cancelled(self, message: QueryCancelled) -> None:
        pass  # the query's own worker ends with RAT-QRY-004 and says so

    def action_page(self, step: int) -> None:
        page = self.page
        if page is None or self.running:
            return
        if step > 0 and not page.more:
            self.app.notify("This is the last page.", timeout=2)
            return
        offset = page.offset + step * PAGE_SIZE
        if offset < 0:
            return
        self.running = True
        self.set_info(Text(f"fetching rows {offset + 1:,}-{offset + PAGE_SIZE:,}…", style="yellow"))
        self.load(QueryPageLoaded, self.app.controller.query_page, page.query_id, offset)

    @on(QueryPageLoaded)
    def _page_loaded(self, message: QueryPageLoaded) -> None:
        page: QueryPage = message.value
        if page.query_id != self.query_id:
            return
        self.running = False
        self.page = page
        table = self.query_one("#query-results", DataTable)
        table.clear(columns=True)
        for name in page.columns:
            table.add_column(name, key=name) if page.columns.count(name) == 1 else table.add_column(name)
        for row in page.rows:
            table.add_row(*[cell(v) for v in row])
        self._describe()
        if page.more and page.count is None and page.offset == 0:
            self.load(QueryCounted, self._count, page.query_id)

    def _count(self, query_id: str) -> tuple[str, int]:
        return query_id, self.app.controller.query_count(query_id)

    @on(QueryCounted)
    def _counted(self, message: QueryCounted) -> None:
        query_id, count = message.value
        if self.page is not None and query_id == self.page.query_id:
            from dataclasses import replace

            self.page = replace(self.page, count=count)
            self._describe()

    def _describe(self) -> None:
        page = self.page
        if page is None:
            return
        text = Text()
        text.append(page.describe(), style="bold")
        text.append(f" · {page.seconds:.2f} s · {page.ref}", style="dim")
        if page.more or page.offset:
            text.append(f" · page {page.page + 1}", style="dim")
            text.append(" · [ ] page", style="dim")
        if page.count is None and page.more:
            text.append(" · counting…", style="dim")
        self.set_info(text)

    def load_failed(self, kind, error: BaseException) -> bool:
        if kind in (QueryPageLoaded, QueryCounted):
            if kind is QueryPageLoaded:
                self.running = False
            self.show_query_error(error)
            return True
        if kind in (QueryExported, QueryRefResolved):
            self.show_query_error(error)
            return True
        return False

    def show_query_error(self, error: BaseException) -> None:
        if not isinstance(error, RatuiError):
            self.app.show_error(error, "running the query")
            self.set_info(Text("the query failed (see the error)", style="red"))
            return
        text = Text()
        text.append(f"{error.code} ", style="bold")
        text.append(error.message)
        if error.hint:
            text.append(f"\nhint: {error.hint}", style="dim")
        self.query_one("#query-error", Static).update(text)
        self.set_info(Text(error.title, style="red"))
        if error.line:
            editor = self.query_one("#query-editor", SqlEditor)
            row = max(0, min(error.line - 1, editor.document.line_count - 1))
            column = (error.details or {}).get("column") or 0
            editor.move_cursor((row, min(column, len(editor.document.get_line(row)))))
            editor.focus()

    # ---------------------------------------------------------------------------------------- history

    def action_history(self, step: int) -> None:
        if not self.history:
            self.app.notify("No earlier queries in this project.", timeout=2)
            return
        editor = self.query_one("#query-editor", SqlEditor)
        if self.history_at is None:
            if step > 0:
                return
            self._draft = editor.text
            at = len(self.history) - 1
        else:
            at = self.history_at + step
        if at >= len(self.history):
            self.history_at = None
            editor.text = self._draft
            return
        at = max(0, at)
        self.history_at = at
        editor.text = self.history[at]
        self.set_info(Text(f"query {at + 1} of {len(self.history)} in the history · ctrl+up/down", style="dim"))

    # ------------------------------------------------------------------------------------ table, export

    def action_table(self) -> None:
        key = self._table_under_cursor()
        if key is None:
            tables = self.query_one("#query-tables", OptionList)
            if tables.highlighted is not None and tables.option_count:
                key = tables.get_option_at_index(tables.highlighted).id
        if key is None:
            self.app.notify("Put the cursor on a table's name (or pick one in the list) first.", title="Table",
                            severity="warning", markup=False)
            return
        self.open_table(key)

    def _table_under_cursor(self) -> str | None:
        editor = self.query_one("#query-editor", SqlEditor)
        row, column = editor.cursor_location
        line = editor.document.get_line(row)
        for match in _DOTTED_NAME.finditer(line):
            if match.start() <= column <= match.end():
                name = match.group(0)
                for key in self.tables:
                    if name in (key, short_key(key, self.namespace)):
                        return key
        return None

    def open_table(self, key: str) -> None:
        from ratui.screens.table_view import TableViewScreen

        self.app.push_screen(TableViewScreen(key, self.ref, origin="query"))

    @changes("exporting a result to a file")
    def action_export(self) -> None:
        if self.page is None or self.running:
            self.app.notify("Run a query first: the export writes its whole result.", title="Export",
                            severity="warning", markup=False)
            return
        query_id = self.page.query_id
        default = f".ratui/exports/{query_id}.csv"

        def chosen(path: str | None) -> None:
            if path:
                self.set_info(Text(f"exporting to {path}…", style="yellow"))
                self.load(QueryExported, self.app.controller.export_query, query_id, path)

        self.app.push_screen(ExportScreen(default), chosen)

    @on(QueryExported)
    def _exported(self, message: QueryExported) -> None:
        path = message.value
        try:
            shown = path.relative_to(self.app.root.resolve())
        except ValueError:
            shown = path
        self.app.notify(f"Exported the result to {shown}.", title="Export", markup=False)
        self._describe()

    def action_pick_ref(self) -> None:
        picker = self.query_one("#query-ref", Select)
        picker.focus()
        picker.action_show_overlay()

    # ------------------------------------------------------------------------------------------ misc

    def set_info(self, text: Text) -> None:
        self.query_one("#query-info", Static).update(text)

    def _close_result(self) -> None:
        if self.query_id is not None:
            old = self.query_id
            self.page = None
            self.app.background(lambda: self.app.controller.close_query(old), QueryCancelled,
                                "releasing the previous query", group="query-close")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop":
            return self.running
        if action == "page":
            return self.page is not None and (self.page.more or self.page.offset > 0)
        if action == "export":
            return self.page is not None
        return True
