"""What the list screens share (Runs, Quality, Branches, Landing): one main table of records under a line of
information, refilled from a background load without losing the cursor, and reloaded when the screen comes back
if something changed while it was hidden."""

from __future__ import annotations

from typing import Any, Iterable

from rich.text import Text
from textual.widgets import DataTable, Static

from ratui.screens.base import ConsoleScreen


class TableScreen(ConsoleScreen):
    # (key, header) of the main table's columns
    COLUMNS: tuple[tuple[str, str], ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.namespace: str | None = None
        self._stale = False
        self._refresh_timer = None

    # -------------------------------------------------------------------------------------- structure

    def info_widget(self) -> Static:
        return Static(Text("loading…", style="dim"), id=f"{self.MODE}-info")

    def table_widget(self) -> DataTable:
        table: DataTable = DataTable(id=f"{self.MODE}-table", cursor_type="row", zebra_stripes=True)
        for key, label in self.COLUMNS:
            table.add_column(label, key=key)
        return table

    @property
    def table(self) -> DataTable:
        return self.query_one(f"#{self.MODE}-table", DataTable)

    def set_info(self, text: Text) -> None:
        self.query_one(f"#{self.MODE}-info", Static).update(text)

    # ------------------------------------------------------------------------------------------- rows

    def cursor_key(self) -> str | None:
        """The key of the row under the cursor (None for an empty table)."""
        table = self.table
        if not table.row_count or table.cursor_row is None or table.cursor_row >= table.row_count:
            return None
        return table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value

    def refill(self, rows: Iterable[tuple[str, list[Any]]]) -> None:
        """Replace the rows ((key, cells) each); the cursor stays on the same record if it is still there."""
        table = self.table
        keep = self.cursor_key()
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep), animate=False)

    # ---------------------------------------------------------------------------------------- loading

    def project_ready(self, compiled) -> None:
        self.namespace = compiled.settings.namespace
        self.reload()

    def reload(self) -> None:
        """Start the screen's background load."""

    def reload_now_or_later(self) -> None:
        """A change worth showing: reload now while in view, or when the screen comes back."""
        if self.is_current:
            self.reload()
        else:
            self._stale = True

    def reload_soon(self, delay: float = 1.0) -> None:
        """A change worth showing: reload (bursts coalesced into one load per `delay`) while in view, or when the
        screen comes back."""
        if not self.is_current:
            self._stale = True
        elif self._refresh_timer is None:
            self._refresh_timer = self.set_timer(delay, self._timed_reload)

    def _timed_reload(self) -> None:
        self._refresh_timer = None
        self.reload()

    def on_screen_resume(self) -> None:
        if self._stale:
            self._stale = False
            self.reload()

    def action_refresh(self) -> None:
        self.reload()

    def state_changed(self, item) -> None:
        self.reload_soon(0.3)
