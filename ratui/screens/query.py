"""Query: SQL over the tables of a ref (built next)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer, Static

from ratui.screens.base import ConsoleScreen
from ratui.widgets.chrome import NavBar, StatusLine


class QueryScreen(ConsoleScreen):
    MODE = "query"

    def compose(self) -> ComposeResult:
        yield NavBar("query")
        yield Static("", id="query-main")
        yield StatusLine()
        yield Footer()
