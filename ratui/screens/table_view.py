"""Table view: one table at one ref, from its Iceberg metadata: schema (field ids), partition spec, snapshot history
(when, which run, what operation, rows and files added and removed), column statistics without a scan, and a
preview of its first rows (read by Spark, deletes applied). Opened from Pipelines (`t`) or the Query screen
(ctrl+o, or enter on a table in its list). `l` shows the lineage of the column selected in the schema (where it
comes from, what it feeds: screens/column_lineage.py)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from ratui.console.format import short_key
from ratui.engine.vocabulary import format_bytes
from ratui.messages import TableDescribed, TablePreviewed
from ratui.screens.base import ConsoleScreen
from ratui.widgets.cells import cell
from ratui.widgets.chrome import NavBar, StatusLine

TABS = ("schema", "history", "stats", "preview")


def count_cell(value: int | None) -> Text:
    """A count right-aligned with thousands separators (`-` when unknown)."""
    return Text("-" if value is None else f"{value:,}", justify="right")


def stat_cell(value: Any) -> Text:
    """A column statistic (a bound) as a cell, `?` when the metadata does not have it."""
    return Text("?", style="dim") if value is None else cell(value)


class TableViewScreen(ConsoleScreen):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="table.back"),
        Binding("s", "tab('schema')", "Schema", id="table.schema"),
        Binding("h", "tab('history')", "History", id="table.history"),
        Binding("c", "tab('stats')", "Columns", id="table.stats"),
        Binding("p", "tab('preview')", "Preview", id="table.preview"),
        Binding("o", "open_run", "Open run", id="table.open_run"),
        Binding("Q", "query", "Query it", id="table.query", key_display="Q"),
        # the schema tab says it (the footer has no room for it at 120 columns)
        Binding("l", "column_lineage", "Lineage of the selected column", id="table.lineage", show=False),
    ]
    DEFAULT_CSS = """
    #table-main { height: 1fr; padding: 0 1; }
    #table-head { height: auto; }
    #table-spec { height: auto; color: $text-muted; }
    TableViewScreen TabbedContent { height: 1fr; }
    TableViewScreen TabPane { padding: 0; }
    TableViewScreen DataTable { height: 1fr; }
    """

    def __init__(self, key: str, ref: str, *, origin: str = "") -> None:
        super().__init__()
        self.key = key
        self.ref = ref
        self.origin = origin
        self.description = None
        self.namespace = key.split(".")[0]

    def compose(self) -> ComposeResult:
        yield NavBar(self.origin)
        with Vertical(id="table-main"):
            yield Static(Text(f"{self.key} @ {self.ref}: reading its metadata…", style="dim"), id="table-head")
            yield Static(id="table-spec")
            with TabbedContent(id="table-tabs"):
                with TabPane("Schema", id="schema"):
                    yield Static(Text("l on a column: its lineage, where it comes from and what it feeds",
                                      style="dim"), id="table-schema-note")
                    yield DataTable(id="table-schema", cursor_type="row", zebra_stripes=True)
                with TabPane("History", id="history"):
                    yield DataTable(id="table-history", cursor_type="row", zebra_stripes=True)
                with TabPane("Columns", id="stats"):
                    yield Static(id="table-stats-note")
                    yield DataTable(id="table-stats", cursor_type="row", zebra_stripes=True)
                with TabPane("Preview", id="preview"):
                    yield Static(Text("the first rows load when this tab opens (Spark reads them)", style="dim"),
                                 id="table-preview-note")
                    yield DataTable(id="table-preview", cursor_type="cell", zebra_stripes=True)
        yield StatusLine()
        yield Footer()

    def project_ready(self, compiled) -> None:
        self.load(TableDescribed, self.app.controller.describe_table, self.ref, self.key)

    def state_changed(self, item) -> None:
        self.load(TableDescribed, self.app.controller.describe_table, self.ref, self.key)

    def load_failed(self, kind, error: BaseException) -> bool:
        from ratui.engine.errors import RatuiError

        if not isinstance(error, RatuiError):
            return False
        where = "#table-head" if kind is TableDescribed else "#table-preview-note"
        text = Text(f"{error.code} {error.message}", style="red")
        if kind is TableDescribed and self.description is None:
            text.append(f"\nhint: {error.hint}" if error.hint else "", style="dim")
        self.query_one(where, Static).update(text)
        return True

    @on(TableDescribed)
    def _described(self, message: TableDescribed) -> None:
        d = self.description = message.value
        name = short_key(self.key, self.namespace)
        head = Text()
        head.append(f"{name}", style="bold")
        head.append(f" @ {self.ref}", style="cyan")
        head.append(f"  {d.rows:,} rows · {d.data_files} data file(s)")
        if d.delete_files:
            head.append(f" + {d.delete_files} delete file(s)")
        head.append(f" · {format_bytes(d.size_bytes)} · Iceberg v{d.format_version}")
        if d.snapshot_id is None:
            head.append(" · no snapshot yet", style="dim")
        self.query_one("#table-head", Static).update(head)
        spec = Text()
        spec.append("partitioned by ", style="dim")
        spec.append(", ".join(f"{p.transform}({p.source})" if p.transform != "identity" else p.source
                              for p in d.partition_spec) or "nothing")
        if d.sort_order:
            spec.append(" · sorted by ", style="dim")
            spec.append(", ".join(d.sort_order))
        spec.append(" · ", style="dim")
        spec.append(d.location, style="dim")
        self.query_one("#table-spec", Static).update(spec)
        self._fill_schema(d)
        self._fill_history(d)
        self._fill_stats(d)

    def _fill_schema(self, d) -> None:
        partitioned = {p.source for p in d.partition_spec}
        table = self.query_one("#table-schema", DataTable)
        table.clear(columns=True)
        for label in ("ID", "COLUMN", "TYPE", "MODE", "NOTE"):
            table.add_column(label)
        for c in d.columns:
            note = "partition source" if c.name in partitioned else (c.doc or "")
            table.add_row(Text(str(c.field_id), justify="right"), c.name, c.type,
                          Text("required", style="bold") if c.required else Text("optional", style="dim"), note)

    def _fill_history(self, d) -> None:
        table = self.query_one("#table-history", DataTable)
        table.clear(columns=True)
        for label in ("COMMITTED (UTC)", "OPERATION", "RUN", "STRATEGY", "+ROWS", "-ROWS", "+FILES", "-FILES",
                      "ROWS", "SNAPSHOT"):
            table.add_column(label)
        for s in d.history:
            table.add_row(s.committed_at.replace("T", " ")[:19], s.operation, s.run_id or "-", s.strategy or "-",
                          count_cell(s.added_rows), count_cell(s.deleted_rows), count_cell(s.added_files),
                          count_cell(s.deleted_files), count_cell(s.total_rows), str(s.snapshot_id),
                          key=str(s.snapshot_id))

    def _fill_stats(self, d) -> None:
        note = Text("from the data files' metadata, no scan", style="dim")
        if d.approximate:
            note.append(" · delete files exist: counts include the rows they remove", style="yellow")
        note.append(" · strings' bounds may be truncated", style="dim")
        self.query_one("#table-stats-note", Static).update(note)
        table = self.query_one("#table-stats", DataTable)
        table.clear(columns=True)
        for label in ("COLUMN", "TYPE", "MIN", "MAX", "NULLS", "VALUES", "SIZE"):
            table.add_column(label)
        for s in d.stats:
            table.add_row(s.name, s.type, stat_cell(s.minimum), stat_cell(s.maximum), count_cell(s.nulls),
                          count_cell(s.values),
                          Text(format_bytes(s.size_bytes) if s.size_bytes is not None else "-", justify="right"))

    # ------------------------------------------------------------------------------------------ preview

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "preview" and not self.query_one("#table-preview", DataTable).columns:
            starting = "" if self.app.controller.spark_started() else " (starting Spark first)"
            self.query_one("#table-preview-note", Static).update(Text(f"reading the first rows…{starting}",
                                                                      style="yellow"))
            self.load(TablePreviewed, self.app.controller.preview_table, self.ref, self.key)

    @on(TablePreviewed)
    def _previewed(self, message: TablePreviewed) -> None:
        columns, rows = message.value
        table = self.query_one("#table-preview", DataTable)
        table.clear(columns=True)
        for name in columns:
            table.add_column(name)
        for row in rows:
            table.add_row(*[cell(v) for v in row])
        self.query_one("#table-preview-note", Static).update(
            Text(f"the first {len(rows)} row(s) at {self.ref} · Q queries the table", style="dim"))

    # ------------------------------------------------------------------------------------------ actions

    def action_tab(self, name: str) -> None:
        self.query_one("#table-tabs", TabbedContent).active = name

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_column_lineage(self) -> None:
        """The column selected in the schema: where it comes from and what it feeds (column lineage)."""
        from ratui.screens.column_lineage import ColumnLineageScreen

        column = None
        table = self.query_one("#table-schema", DataTable)
        if self.query_one("#table-tabs", TabbedContent).active == "schema" and table.row_count:
            column = str(table.get_row_at(table.cursor_row)[1])
        self.app.push_screen(ColumnLineageScreen(self.key, column, origin=self.origin))

    def action_query(self) -> None:
        self.app.show_pipeline(self.key, "query")

    def action_open_run(self) -> None:
        tabs = self.query_one("#table-tabs", TabbedContent)
        if tabs.active != "history" or self.description is None:
            self.action_tab("history")
            return
        table = self.query_one("#table-history", DataTable)
        if not table.row_count:
            return
        snapshot = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        entry = next((s for s in self.description.history if str(s.snapshot_id) == snapshot), None)
        if entry is None or not entry.run_id:
            self.app.notify("No ratui run made this snapshot.", severity="warning", timeout=3)
            return
        self.app.open_run(entry.run_id)
