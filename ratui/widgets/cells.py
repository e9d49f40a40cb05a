"""How a value of a query result or a table preview reads in a DataTable cell (the Query screen and the table
view share it)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

CELL_WIDTH = 60  # characters of a value shown in a cell (the table view and an export have the rest)


def cell(value: Any) -> Text:
    if value is None:
        return Text("NULL", style="dim italic")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Text(f"{value}", justify="right")
    text = str(value).replace("\n", "⏎")
    return Text(text if len(text) <= CELL_WIDTH else text[:CELL_WIDTH - 1] + "…")
