"""Lineage: the project's DAG as a graph (built next)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer, Static

from ratui.screens.base import ConsoleScreen
from ratui.widgets.chrome import NavBar, StatusLine


class LineageScreen(ConsoleScreen):
    MODE = "lineage"

    def compose(self) -> ComposeResult:
        yield NavBar("lineage")
        yield Static("", id="lineage-main")
        yield StatusLine()
        yield Footer()
