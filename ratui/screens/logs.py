"""Logs: Spark's log with a level filter (built next)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer, Static

from ratui.screens.base import ConsoleScreen
from ratui.widgets.chrome import NavBar, StatusLine


class SparkLogScreen(ConsoleScreen):
    MODE = "logs"

    def compose(self) -> ComposeResult:
        yield NavBar("logs")
        yield Static("", id="logs-main")
        yield StatusLine()
        yield Footer()
