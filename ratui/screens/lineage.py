"""Lineage: the project's DAG as a graph (layers left to right), each pipeline coloured by its last run; the
selected one's ancestors and descendants lit. Arrows move, enter opens the pipeline, r runs it, c shows its columns'
lineage (screens/column_lineage.py: each column's sources, and a column's path to the landing zones and onwards).

At scale the graph is focused: one pipeline with its upstream and downstream to a depth (`+` / `-`), at most a
screenful of neighbours per pipeline (the rest grouped as "… and N more"); the whole graph is drawn only when it fits
the view. `/` finds a pipeline by name and focuses on it, `f` focuses on the selection, `a` shows the whole graph.
The layout and drawing are made in a worker (console/lineage/view.py `view`), never on the event loop; the lines
that say what is shown and selected are lineage_detail.py's."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Footer, Static

from ratui.console.format import glyph, short_key
from ratui.console.lineage.focus import BUDGET, is_more, more_label
from ratui.console.lineage.layout import Layout
from ratui.console.lineage.navigation import move
from ratui.console.lineage.view import View, view
from ratui.engine.errors import RatuiError
from ratui.messages import LineageLaidOut, LineageRunsLoaded
from ratui.screens.base import ConsoleScreen
from ratui.screens.find_pipeline import FindPipelineScreen
from ratui.screens.lineage_detail import group_detail, pipeline_detail, view_line
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.widgets.lineage_graph import LineageGraph

STATE_DELAY = 0.3  # seconds: other processes' commits come in bursts
RESIZE_DELAY = 0.2  # seconds: a terminal being resized sends many sizes
CHROME = 8  # rows that are not the graph's: tabs, the view line, the detail (3), status, footer, the graph's padding
WIDE = 120  # columns from which a focused view starts at depth 2 (parents and grandparents, children and
# grandchildren: five layers side by side); below it at depth 1


def lay_out(serial: int, graph, namespace: str | None, key: str | None, depth: int, width: int, height: int,
            whole: bool | None, select: str | None) -> tuple[int, View, str | None]:
    """In a worker: the view laid out and drawn (labels drawn at their widths; the screen gives their icons)."""
    return serial, view(graph, key=key, depth=depth, width=width, height=height, namespace=namespace,
                        whole=whole), select


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
        Binding("plus,equals_sign", "depth(1)", "Deeper", id="lineage.deeper", key_display="+", show=False),
        Binding("minus", "depth(-1)", "Shallower", id="lineage.shallower", key_display="-", show=False),
        Binding("slash", "find", "Find", id="lineage.find", key_display="/"),
        # the line above the graph says these (and +/- with the focus's depth): the footer has no room for them
        Binding("f", "focus_selected", "Focus on the selection", id="lineage.focus", show=False),
        Binding("a", "whole", "The whole graph (when it fits)", id="lineage.whole", show=False),
        Binding("c", "columns", "Columns", id="lineage.columns"),  # each column's sources and path
    ]

    DEFAULT_CSS = """
    #lineage-view {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    #lineage-detail {
        padding: 0 1;
        border-top: hkey $panel-lighten-2;
        height: 3;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.compiled: Any = None  # the CompiledProject
        self.view: View | None = None  # what is shown (laid out and drawn)
        self.graph_layout: Layout | None = None  # the view's layout
        self.recent: dict[str, list[dict[str, Any]]] = {}
        self.loaded = False  # the last runs (colours) are in
        self.pending: str | None = None  # to select once the project, the layout and the runs are in
        self.focus_key: str | None = None
        self.depth = 0  # 0: not chosen yet (the first layout chooses by the view's width)
        self.want_whole: bool | None = None  # None: the whole graph when it fits; True: asked (a); False: focused
        self.serial = 0  # the latest layout asked for (an older one that arrives later is dropped)
        self._state_timer: Timer | None = None
        self._resize_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield NavBar("lineage")
        yield Static(id="lineage-view")
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

    @property
    def namespace(self) -> str | None:
        return self.compiled.settings.namespace if self.compiled is not None else None

    def short(self, key: str) -> str:
        return short_key(key, self.namespace)

    def known(self, key: str | None) -> bool:
        return key is not None and self.compiled is not None and key in self.compiled.graph.upstream

    # ------------------------------------------------------------------------------------------ data

    def project_ready(self, compiled) -> None:
        self.compiled = compiled
        self.graph.empty_text = "No pipelines in this project yet."
        nodes = compiled.graph.nodes
        if self.known(self.pending):
            self.focus_key = self.pending
        if not self.known(self.focus_key):  # the first open, or the focused pipeline is gone after a reload
            self.focus_key = nodes[0] if nodes else None
        self.relayout(select=self.pending or self.selected)
        self.load(LineageRunsLoaded, self.app.controller.recent_states, self.compiled)

    def view_size(self) -> tuple[int, int]:
        """The graph's room in cells (its content, scrollbars included: a view that scrolls still reads)."""
        region = self.graph.content_region
        if region.width > 0 and region.height > 0:
            return region.width, region.height
        width, height = self.app.size  # not laid out yet: the terminal less the screen's other lines (CHROME)
        return max(20, width - 1), max(4, height - CHROME)

    def relayout(self, select: str | None = None) -> None:
        """Lay out and draw what the view shows now, in a worker; LineageLaidOut brings it back."""
        if self.compiled is None:
            return
        if self.view is not None and self.view.whole and self.known(self.selected):
            self.focus_key = self.selected  # the whole graph's selection is what a focused view centres on
        self.serial += 1
        width, height = self.view_size()
        if not self.depth:
            self.depth = 2 if width >= WIDE else 1
        self.load(LineageLaidOut, lay_out, self.serial, self.compiled.graph, self.namespace, self.focus_key,
                  self.depth, width, height, self.want_whole, select)

    @on(LineageLaidOut)
    def _laid_out(self, message: LineageLaidOut) -> None:
        serial, laid, select = message.value
        if serial != self.serial:
            return  # a newer one is on its way
        self.view = laid
        self.graph_layout = laid.layout
        if laid.focus is not None:
            self.focus_key = laid.focus.key
            self.depth = laid.focus.depth
        if self.loaded:
            self.redraw(select=select)
            self._ready()
        else:
            self.pending = select
        self.call_after_refresh(self._resized)  # laid out for an estimated size: the real one may differ

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
        if self.view is None:
            return  # the layout comes next: it draws then
        if first:
            self.redraw(select=self.pending)
            self.pending = None
            self._ready()
        else:
            self.restyle()

    def _ready(self) -> None:
        self.graph.loading = False
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
        self.load(LineageRunsLoaded, self.app.controller.recent_states, self.compiled)

    def runs_changed(self, change) -> None:
        if self.compiled is None or not self.loaded or self.view is None:
            return
        self.restyle()
        if change.ended:
            self.load(LineageRunsLoaded, self.app.controller.recent_states, self.compiled)

    def on_resize(self, event) -> None:
        super().on_resize(event)
        if self.view is not None:
            if self._resize_timer is not None:
                self._resize_timer.stop()
            self._resize_timer = self.set_timer(RESIZE_DELAY, self._resized)

    def _resized(self) -> None:
        """Another size: what fits (the whole graph, the neighbours per pipeline) may differ."""
        self._resize_timer = None
        if self.view is not None and self.view_size() != self.view.size:
            self.relayout(select=self.selected)

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
        """Labels and colours of the nodes in the view (never the whole project's when focused)."""
        labels, styles = {}, {}
        if self.view is None:
            return labels, styles
        hidden = self.view.focus.hidden if self.view.focus is not None else {}
        for key in self.view.layout.nodes:
            if is_more(key):
                labels[key] = more_label(len(hidden.get(key, ())))
                styles[key] = "italic"
                continue
            icon, style = glyph(self.status(key))
            labels[key] = f"{icon} {short_key(key, self.view.namespace)}"  # as the worker drew it
            styles[key] = style
        return labels, styles

    def redraw(self, select: str | None = None) -> None:
        if self.compiled is None or self.view is None:
            return
        lay = self.view.layout
        focus = self.view.focus.key if self.view.focus is not None else None
        pick = next((k for k in (select, self.selected, focus) if k is not None and k in lay.column), lay.first())
        labels, styles = self._labels()
        self.graph.set_graph(lay, labels, styles, pick, drawing=self.view.drawing)
        self.show_view_line()
        self.show_detail()

    def restyle(self) -> None:
        if self.compiled is None or self.view is None:
            return
        labels, styles = self._labels()
        self.graph.restyle(labels, styles)
        self.show_detail()

    def show_view_line(self) -> None:
        """The line above the graph: what it shows (the whole graph, or the focus, its depth and how much)."""
        if self.view is not None:
            self.query_one("#lineage-view", Static).update(view_line(self.view))

    def show_detail(self) -> None:
        detail = self.query_one("#lineage-detail", Static)
        key = self.selected
        if self.compiled is None:
            return
        if key is None:
            namespace = self.compiled.settings.namespace
            detail.update(Text(f"A pipeline is a folder {namespace}/pipelines/<layer>/<name>/ holding a pipeline.sql "
                               "or pipeline.py.", style="dim"))
        elif is_more(key):
            near = self.view.focus if self.view is not None else None
            detail.update(group_detail(near, key, self.short, self.view.fan) if near is not None else Text())
        else:
            detail.update(pipeline_detail(key, self.compiled, self.status(key), self.app.store.active_for(key),
                                          self.recent.get(key), self.app.now()))

    # --------------------------------------------------------------------------------------- actions

    def select_key(self, key: str) -> None:
        """Select a pipeline (the App's show_pipeline(key, "lineage"), the find dialog): in the whole graph it is
        selected; a focused view focuses on it."""
        if self.compiled is None:
            self.pending = key
            return
        if not self.known(key):
            self.notify(f"No pipeline {key} in this project.", severity="warning", markup=False)
            return
        shown = self.view
        if shown is not None and key in shown.layout.column and (shown.whole or shown.focus is None
                                                                  or shown.focus.key == key):
            if self.loaded:
                self.graph.select_node(key)
                self.show_detail()
            else:
                self.pending = key
            return
        self.focus_key = key
        self.pending = key
        self.relayout(select=key)

    @on(LineageGraph.NodeClicked)
    def _clicked(self, message: LineageGraph.NodeClicked) -> None:
        if self.graph_layout is not None and message.key in self.graph_layout.column:
            self.graph.select_node(message.key)
            self.show_detail()

    def action_move(self, direction: str) -> None:
        key = self.selected
        if key is None or self.graph_layout is None:
            return
        target = move(self.graph_layout, key, direction)
        if target is None:
            if direction in ("upstream", "downstream") and not is_more(key):
                name = self.short(key)
                graph = self.compiled.graph
                near = graph.upstream.get(key) if direction == "upstream" else graph.downstream.get(key)
                if near:
                    where = f"its {'parents are' if direction == 'upstream' else 'children are'} beyond this " \
                            "view (f focuses on it, + goes deeper)"
                elif direction == "upstream":
                    where = "nothing upstream (it reads only landing files)"
                else:
                    where = "nothing downstream (no pipeline reads it)"
                self.notify(f"{name}: {where}.", timeout=3, markup=False)
            return
        self.graph.select_node(target)
        self.show_detail()

    def action_depth(self, delta: int) -> None:
        """`+` / `-`: a focused view one level deeper or shallower (both ways at once)."""
        shown = self.view
        if shown is None or self.compiled is None:
            return
        if shown.whole or shown.focus is None:
            if delta > 0:
                self.notify("The whole graph is shown: - focuses on the selection.", timeout=3, markup=False)
                return
            self.want_whole = False
            self.relayout(select=self.selected)
            return
        near = shown.focus
        if delta > 0:
            if near.beyond:
                self.notify(f"The view is full: it draws at most {BUDGET} pipelines, {near.beyond:,} more within "
                            f"depth {near.depth} are left out. f focuses on the selection, / finds a pipeline.",
                            timeout=5, markup=False)
                return
            if not near.deeper:
                self.notify(f"{self.short(near.key)}: its whole lineage is shown (depth {near.depth} reaches both "
                            "ends).", timeout=3, markup=False)
                return
        elif self.depth <= 1:
            self.notify("Depth 1 is the least: the pipeline with its parents and children.", timeout=3,
                        markup=False)
            return
        self.depth = max(1, self.depth + delta)
        self.relayout(select=self.selected)

    def action_focus_selected(self) -> None:
        key = self.selected
        if key is None or is_more(key):
            self.notify("Select a pipeline to focus on.", timeout=3, markup=False)
            return
        self.want_whole = False
        self.focus_key = key
        self.relayout(select=key)

    def action_whole(self) -> None:
        shown = self.view
        if shown is None:
            return
        if shown.whole:
            self.notify("The whole graph is shown.", timeout=2, markup=False)
            return
        if not shown.fits:
            width, height = shown.size
            self.notify(f"The whole graph ({shown.total:,} pipelines) does not fit a {width}x{height} view: it stays "
                        "focused. / finds a pipeline to focus on.", timeout=5, markup=False)
            return
        self.want_whole = True
        self.relayout(select=self.selected)

    def action_find(self) -> None:
        if self.compiled is None:
            return
        self.app.push_screen(FindPipelineScreen(list(self.compiled.graph.nodes), self.namespace,
                                                "Find a pipeline: the graph focuses on it"), self._found)

    def _found(self, key: str | None) -> None:
        if key:
            self.select_key(key)

    def action_open(self) -> None:
        key = self.selected
        if key is None:
            return
        if is_more(key):
            near = self.view.focus if self.view is not None else None
            if near is not None and key in near.hidden:
                direction, owner = near.group_of(key)
                kin = "parents" if direction == "up" else "children"
                members = near.hidden[key]
                self.app.push_screen(FindPipelineScreen(members, self.namespace,
                                                        f"{len(members):,} more {kin} of {self.short(owner)}"),
                                     self._found)
            return
        self.app.show_pipeline(key)

    def action_columns(self) -> None:
        """The selected pipeline's columns with their sources, and each column's path (column lineage)."""
        key = self.selected
        if key is None or is_more(key):
            self.notify("Select a pipeline to see its columns' lineage.", timeout=3, markup=False)
            return
        from ratui.screens.column_lineage import ColumnLineageScreen

        self.app.push_screen(ColumnLineageScreen(key))

    def action_run(self) -> None:
        if self.selected is None or is_more(self.selected):
            self.notify("Select a pipeline to run.", severity="warning")
            return
        self.app.run_pipeline(self.selected)
