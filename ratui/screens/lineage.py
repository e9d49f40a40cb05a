"""Lineage: the project's DAG as a graph (layers left to right), each pipeline coloured by its last run; the
selected one's ancestors and descendants lit. Arrows move, enter opens the pipeline, r runs it."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Footer, Static

from ratui.console.format import fmt_age, fmt_time, glyph, short_key
from ratui.console.lineage import Layout, layout, move
from ratui.engine.errors import RatuiError
from ratui.messages import LineageRunsLoaded
from ratui.screens.base import ConsoleScreen
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.widgets.lineage_graph import LineageGraph

STATE_DELAY = 0.3  # seconds: other processes' commits come in bursts


class LineageScreen(ConsoleScreen):
    MODE = "lineage"
    AUTO_FOCUS = "#lineage-graph"
    BINDINGS = [
        Binding("left", "move('left')", "Layer to the left (nearest connected)", id="lineage.left", show=False),
        Binding("right", "move('right')", "Layer to the right (nearest connected)", id="lineage.right",
                show=False),
        Binding("up", "move('up')", "Up in the layer", id="lineage.up", show=False),
        Binding("down", "move('down')", "Down in the layer", id="lineage.down", show=False),
        Binding("enter", "open", "Pipelines", id="lineage.open"),
        Binding("r", "run", "Run", id="lineage.run"),
        Binding("u", "move('upstream')", "Upstream", id="lineage.upstream"),
        Binding("d", "move('downstream')", "Downstream", id="lineage.downstream"),
    ]

    DEFAULT_CSS = """
    #lineage-detail {
        padding: 0 1;
        border-top: hkey $panel-lighten-2;
        height: 3;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.compiled: Any = None  # the CompiledProject
        self.graph_layout: Layout | None = None
        self.recent: dict[str, list[dict[str, Any]]] = {}
        self.loaded = False
        self.pending: str | None = None  # select_key before the project arrived
        self._state_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield NavBar("lineage")
        graph = LineageGraph(id="lineage-graph")
        graph.loading = True
        yield graph
        yield Static(id="lineage-detail")
        yield StatusLine()
        yield Footer()

    @property
    def graph(self) -> LineageGraph:
        return self.query_one(LineageGraph)

    @property
    def selected(self) -> str | None:
        return self.graph.selected

    # ------------------------------------------------------------------------------------------ data

    def project_ready(self, compiled) -> None:
        self.compiled = compiled
        graph = compiled.graph
        self.graph_layout = layout(graph.nodes, graph.upstream)
        self.graph.empty_text = "No pipelines in this project yet."
        self.load(LineageRunsLoaded, self.app.controller.recent, 1)
        if self.loaded:
            self.redraw()

    def project_error(self, error: BaseException) -> None:
        super().project_error(error)
        text = Text("The project could not be opened", style="bold red")
        if isinstance(error, RatuiError):
            text.append(f": {error.code} {error.message}", style="red")
        text.append("\nFix it, then press ctrl+r on Pipelines to reload.", style="dim")
        self.query_one("#lineage-detail", Static).update(text)

    @on(LineageRunsLoaded)
    def _runs_loaded(self, message: LineageRunsLoaded) -> None:
        self.recent = message.value
        first = not self.loaded
        self.loaded = True
        self.graph.loading = False
        if first:
            self.redraw(select=self.pending)
            self.pending = None
        else:
            self.restyle()
        self.app.mark("lineage_ready")

    def load_failed(self, kind, error: BaseException) -> bool:
        if kind is LineageRunsLoaded and not self.loaded:  # the graph still draws (no colours); the error says why
            self._runs_loaded(LineageRunsLoaded({}))
        return False

    def state_changed(self, item) -> None:
        # a run of another process started or ended: its node's colour follows
        if self.compiled is not None and self._state_timer is None:
            self._state_timer = self.set_timer(STATE_DELAY, self._reload_runs)

    def _reload_runs(self) -> None:
        self._state_timer = None
        self.load(LineageRunsLoaded, self.app.controller.recent, 1)

    def runs_changed(self, change) -> None:
        if self.compiled is None or not self.loaded:
            return
        self.restyle()
        if change.ended:
            self.load(LineageRunsLoaded, self.app.controller.recent, 1)

    # --------------------------------------------------------------------------------------- drawing

    def status(self, key: str) -> str | None:
        """What a node's colour says: error (broken), running, the last run's status, or None (never run)."""
        pipeline = self.compiled.pipelines.get(key) if self.compiled else None
        if pipeline is not None and pipeline.errors:
            return "error"
        if self.app.store.active_for(key):
            return "running"
        runs = self.recent.get(key)
        return runs[0]["status"] if runs else None

    def _labels(self) -> tuple[dict[str, str], dict[str, str]]:
        namespace = self.compiled.settings.namespace
        labels, styles = {}, {}
        for key in self.compiled.graph.nodes:
            icon, style = glyph(self.status(key))
            labels[key] = f"{icon} {short_key(key, namespace)}"
            styles[key] = style
        return labels, styles

    def redraw(self, select: str | None = None) -> None:
        if self.compiled is None:
            return
        labels, styles = self._labels()
        self.graph.set_graph(self.graph_layout, labels, styles, select)
        self.show_detail()

    def restyle(self) -> None:
        if self.compiled is None:
            return
        labels, styles = self._labels()
        self.graph.restyle(labels, styles)
        self.show_detail()

    def show_detail(self) -> None:
        detail = self.query_one("#lineage-detail", Static)
        key = self.selected
        if self.compiled is None:
            return
        if key is None:
            namespace = self.compiled.settings.namespace
            detail.update(Text(f"A pipeline is a folder {namespace}/pipelines/<layer>/<name>/ holding a pipeline.sql "
                               "or pipeline.py.", style="dim"))
            return
        pipeline = self.compiled.pipelines.get(key)
        text = Text()
        text.append(key, style="bold")
        strategy = pipeline.config.merge_strategy if pipeline is not None and pipeline.config else None
        if strategy:
            text.append(f"  {strategy}", style="dim")
        ancestors, descendants = self.graph.lit_ancestors, self.graph.lit_descendants
        text.append(f"  ↑ {len(ancestors)} upstream · ↓ {len(descendants)} downstream", style="dim")
        text.append("\n")
        status = self.status(key)
        icon, style = glyph(status)
        active = self.app.store.active_for(key)
        runs = self.recent.get(key)
        if status == "error" and pipeline is not None:
            error = pipeline.errors[0]
            text.append(f"{icon} {error.code} {error.message}", style=style)
        elif active:
            run = active[-1]
            text.append(f"{icon} {run.status}", style=style)
            text.append(f" · {run.current_phase or 'queued'} · run {run.run_id}", style="dim")
        elif runs:
            run = runs[0]
            text.append("last run ", style="dim")
            text.append(f"{icon} {run['status']}", style=style)
            when = run.get("started_at") or run.get("queued_at")
            text.append(f" {fmt_time(when)} ({fmt_age(when, self.app.now())} ago) · run {run['id']}")
        else:
            text.append(f"{icon} never run", style=style)
            text.append(" · r runs it", style="dim")
        detail.update(text)

    # --------------------------------------------------------------------------------------- actions

    def select_key(self, key: str) -> None:
        """Select a pipeline (the App's show_pipeline(key, "lineage"))."""
        if not self.loaded or self.graph_layout is None:
            self.pending = key
            return
        if key in self.graph_layout.column:
            self.graph.select_node(key)
            self.show_detail()

    @on(LineageGraph.NodeClicked)
    def _clicked(self, message: LineageGraph.NodeClicked) -> None:
        self.select_key(message.key)

    def action_move(self, direction: str) -> None:
        key = self.selected
        if key is None or self.graph_layout is None:
            return
        target = move(self.graph_layout, key, direction)
        if target is None:
            if direction in ("upstream", "downstream"):
                name = short_key(key, self.compiled.settings.namespace)
                where = "nothing upstream (it reads only landing files)" if direction == "upstream" \
                    else "nothing downstream (no pipeline reads it)"
                self.notify(f"{name}: {where}.", timeout=3, markup=False)
            return
        self.graph.select_node(target)
        self.show_detail()

    def action_open(self) -> None:
        if self.selected is not None:
            self.app.show_pipeline(self.selected)

    def action_run(self) -> None:
        if self.selected is None:
            self.notify("Select a pipeline to run.", severity="warning")
            return
        self.app.run_pipeline(self.selected)
