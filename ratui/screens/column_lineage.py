"""Column lineage: one table's columns with their sources, and the selected column's path: where it comes from (to
the landing zones) and what it feeds (to the last pipeline). Opened from Lineage (`c`, the selected pipeline) and
from a table's schema (`l`, the selected column). Read from the compiled SQL by the engine (sqlglot) in a worker,
through the controller; a Python pipeline's lineage is table-level only, and the screen says so."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, VerticalScroll
from textual.widgets import DataTable, Footer, Static

from ratui.console.format import short_key
from ratui.messages import ColumnLineageLoaded
from ratui.screens.base import ConsoleScreen
from ratui.widgets.chrome import NavBar, StatusLine

KIND_STYLE = {"copy": "green", "derived": "cyan", "constant": "dim", "unresolved": "yellow",
              "table-level": "magenta", "landing": "blue"}
KIND_WORD = {"landing": "landing zone"}
TABLE_KIND = {"sql": "SQL pipeline", "python": "Python pipeline", "zone": "landing zone",
              "broken": "pipeline that does not compile"}
WIDE = 120  # columns from which the columns and the path stand side by side


def kind_text(kind: str) -> Text:
    return Text(KIND_WORD.get(kind, kind), style=KIND_STYLE.get(kind, ""))


class ColumnLineageScreen(ConsoleScreen):
    AUTO_FOCUS = "#colpath-columns"
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="colpath.back"),
        Binding("u", "follow('up')", "Upstream column", id="colpath.upstream"),
        Binding("d", "follow('down')", "Downstream column", id="colpath.downstream"),
    ]
    DEFAULT_CSS = """
    #colpath-head { height: auto; padding: 0 1; }
    #colpath-body { height: 1fr; layout: vertical; }
    #colpath-body.wide { layout: horizontal; }
    #colpath-columns { height: 45%; }
    #colpath-body.wide #colpath-columns { height: 1fr; width: 1fr; }
    #colpath-scroll { height: 1fr; padding: 0 1; border-top: hkey $panel-lighten-2; }
    #colpath-body.wide #colpath-scroll { width: 1fr; border-top: none; border-left: vkey $panel-lighten-2; }
    """

    def __init__(self, key: str, column: str | None = None, *, origin: str = "lineage") -> None:
        super().__init__()
        self.key = key
        self.column = column.lower() if column else None  # the column asked for, then the one shown
        self.origin = origin
        self.compiled: Any = None
        self.lineage: Any = None  # the TableLineage shown
        self.path: Any = None  # the ColumnPath shown
        self.filling = False

    def compose(self) -> ComposeResult:
        yield NavBar(self.origin)
        yield Static(Text(f"{self.key}: reading its column lineage…", style="dim"), id="colpath-head")
        with Container(id="colpath-body"):
            yield DataTable(id="colpath-columns", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="colpath-scroll"):
                yield Static(id="colpath-path")
        yield StatusLine()
        yield Footer()

    @property
    def namespace(self) -> str | None:
        return self.compiled.settings.namespace if self.compiled is not None else None

    def short(self, key: str) -> str:
        return short_key(key, self.namespace)

    def fit(self, narrow: bool) -> None:
        super().fit(narrow)
        self.query_one("#colpath-body").set_class(self.app.size.width >= WIDE, "wide")

    # ------------------------------------------------------------------------------------------ data

    def project_ready(self, compiled) -> None:
        self.compiled = compiled
        self.lineage = None
        self.load(ColumnLineageLoaded, self.app.controller.column_lineage, compiled, self.key, self.column)

    def load_failed(self, kind, error: BaseException) -> bool:
        from ratui.engine.errors import RatuiError

        if not isinstance(error, RatuiError):
            return False
        text = Text(f"{error.code} {error.message}", style="red")
        if error.hint:
            text.append(f"\nhint: {error.hint}", style="dim")
        self.query_one("#colpath-path" if self.lineage is not None else "#colpath-head", Static).update(text)
        return True

    @on(ColumnLineageLoaded)
    def _loaded(self, message: ColumnLineageLoaded) -> None:
        table, path = message.value
        if self.lineage is None or [c.column for c in self.lineage.columns] != [c.column for c in table.columns]:
            self.lineage = table
            self._fill(table)
        self.lineage = table
        self._head(table)
        if path is not None and path.origin.column == self.column:
            self.path = path
            self._show(path)
        elif path is None:
            self._show_table_note(table)

    def _head(self, table) -> None:
        text = Text()
        text.append(self.short(table.key), style="bold")
        text.append(f"  {TABLE_KIND.get(table.kind, table.kind)}", style="dim")
        if table.reads:
            text.append(" · reads ", style="dim")
            text.append(", ".join(self.short(r) for r in table.reads))
        if table.problem and table.kind != "python":  # a Python pipeline's: the path pane says it
            text.append(f"\n{table.problem}", style="yellow")
        self.query_one("#colpath-head", Static).update(text)

    def _fill(self, table) -> None:
        grid = self.query_one("#colpath-columns", DataTable)
        self.filling = True
        grid.clear(columns=True)
        names_width = max([6, *(len(c.column) for c in table.columns)])
        kinds_width = max([4, *(len(KIND_WORD.get(c.kind, c.kind)) for c in table.columns)])
        room = grid.size.width or (self.app.size.width // (2 if self.app.size.width >= WIDE else 1))
        grid.add_column("COLUMN", width=names_width)
        grid.add_column("KIND", width=kinds_width)
        grid.add_column("FROM", width=max(10, room - names_width - kinds_width - 8))  # cell padding, scrollbar
        for c in table.columns:
            sources = ", ".join(s.label(self.namespace) for s in c.sources) or "-"
            grid.add_row(c.column, kind_text(c.kind), Text(sources, no_wrap=True, overflow="ellipsis"),
                         key=c.column)
        self.filling = False
        names = [c.column for c in table.columns]
        if self.column in names:
            grid.move_cursor(row=names.index(self.column))
        elif names and table.column_level:
            self.column = names[0]
            self.load(ColumnLineageLoaded, self.app.controller.column_lineage, self.compiled, self.key, self.column)

    def _show_table_note(self, table) -> None:
        note = Text()
        if table.kind == "python":
            note.append("A Python pipeline's lineage is table-level only: ", style="magenta")
            note.append("ratui cannot read from Python code which column feeds which. It reads ")
            note.append(", ".join(self.short(r) for r in table.reads) or "no table", style="bold")
            note.append(".")
            if not table.columns:
                note.append("\nIts columns are listed once its table exists (after its first run).", style="dim")
        elif not table.columns:
            note.append("No columns to show.", style="dim")
        self.query_one("#colpath-path", Static).update(note)

    def _show(self, path) -> None:
        origin = path.origin
        text = Text()
        text.append(f"{self.short(origin.table)}.{origin.column}", style="bold")
        text.append("  ")
        text.append_text(kind_text(origin.kind))
        if origin.note:
            text.append(f"  {origin.note}", style="yellow" if origin.kind == "unresolved" else "dim")
        text.append("\n▲ where it comes from\n", style="bold")
        if not path.upstream:
            text.append("  " + ("a landing zone's column: where every path starts" if origin.kind == "landing"
                                else "computed from no column" if origin.kind == "constant"
                                else "no source known") + "\n", style="dim")
        self._tree(text, path.lines(path.upstream))
        text.append("▼ what it feeds\n", style="bold")
        if not path.downstream:
            text.append("  nothing: no pipeline computes a column from it\n", style="dim")
        self._tree(text, path.lines(path.downstream))
        if path.cut:
            text.append("… the path goes on: it is cut here\n", style="yellow")
        self.query_one("#colpath-path", Static).update(text)
        self.query_one("#colpath-scroll", VerticalScroll).scroll_home(animate=False)

    def _tree(self, text: Text, lines) -> None:
        for prefix, node in lines:
            text.append("  " + prefix, style="dim")
            text.append(node.label(self.namespace), style="bold" if node.column is not None else "")
            text.append("  ")
            text.append_text(kind_text(node.kind))
            if node.note and node.kind in ("unresolved", "landing"):
                text.append(f" ({node.note})", style="yellow")
            if node.seen:
                text.append("  (shown above)", style="dim")
            text.append("\n")

    # --------------------------------------------------------------------------------------- actions

    @on(DataTable.RowHighlighted, "#colpath-columns")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.filling or self.lineage is None or event.row_key is None:
            return
        column = event.row_key.value
        if column == self.column and self.path is not None and self.path.origin.column == column:
            return
        self.column = column
        if not self.lineage.column_level:
            return
        self.load(ColumnLineageLoaded, self.app.controller.column_lineage, self.compiled, self.key, column)

    def action_follow(self, direction: str) -> None:
        """Open the column path of the first column upstream (u) or downstream (d) of the one shown."""
        path = self.path
        nodes = (path.upstream if direction == "up" else path.downstream) if path is not None else []
        target = next((n for n in nodes if n.column is not None), None)
        if target is None:
            where = "upstream" if direction == "up" else "downstream"
            self.notify(f"No column {where} of this one.", timeout=3, markup=False)
            return
        self.app.push_screen(ColumnLineageScreen(target.table, target.column, origin=self.origin))

    def action_back(self) -> None:
        self.app.pop_screen()
