"""The DAG as a graph: layers left to right, one line per pipeline (its status icon and name), box-drawn edges.

The layout (columns, order, rows, routing) and the drawing are ratui.console.lineage's; this widget styles and
scrolls them. The selected pipeline is lit, its ancestors, descendants and the edges between them stand out, the
rest is dimmed. It scrolls both ways (Line API), and keeps the selection in view when it moves.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ratui.console.lineage.drawing import Drawing, draw
from ratui.console.lineage.layout import Edge, Layout
from ratui.console.lineage.navigation import lineage


ARROW_ROOM = 5  # cells left of a label kept in view with it (the edge coming in)


class LineageGraph(ScrollView, can_focus=True):
    """Shows a Layout; `set_graph(...)` gives it the layout, labels and styles, `select_node(key)` lights a node."""

    # the screen owns the keys (lineage.*): none of the container's scrolling keys here
    inherit_bindings = False

    COMPONENT_CLASSES = {"lineage-graph--line", "lineage-graph--lit", "lineage-graph--dim"}

    DEFAULT_CSS = """
    LineageGraph {
        height: 1fr;
        width: 1fr;
        scrollbar-size: 1 1;
        padding: 1 0 0 1;
        background: $surface;
    }
    LineageGraph > .lineage-graph--line {
        color: $text-muted;
    }
    LineageGraph > .lineage-graph--lit {
        color: $accent;
        text-style: bold;
    }
    LineageGraph > .lineage-graph--dim {
        color: $text-disabled;
    }
    """

    class NodeClicked(Message):
        """A pipeline's box was clicked."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.graph_layout: Layout | None = None
        self.drawing: Drawing | None = None
        self.labels: dict[str, str] = {}
        self.node_styles: dict[str, str] = {}
        self.selected: str | None = None
        self.lit_ancestors: set[str] = set()
        self.lit_descendants: set[str] = set()
        self.lit_edges: set[Edge] = set()
        self.empty_text = ""
        self._strips: list[Strip] = []

    # --------------------------------------------------------------------------------------------- data

    def set_graph(self, lay: Layout | None, labels: dict[str, str], styles: dict[str, str],
                  selected: str | None = None, drawing: Drawing | None = None) -> None:
        """A (new) graph: `labels` per node (icon and name, one line), `styles` per node (its status colour).
        `drawing`: the layout already drawn (in a worker) with labels of the same widths; else it is drawn here."""
        self.graph_layout = lay
        self.labels = labels
        self.node_styles = styles
        if drawing is None and lay is not None and lay.nodes:
            drawing = draw(lay, labels)
        self.drawing = drawing if lay is not None and lay.nodes else None
        if self.drawing is None:
            self.virtual_size = Size(len(self.empty_text) + 2, 1)
        else:
            self.virtual_size = Size(self.drawing.width + 1, self.drawing.height)
        keep = selected if selected is not None else self.selected
        if lay is None or keep not in lay.column:
            keep = lay.first() if lay is not None else None
        self.select_node(keep, scroll=selected is not None, center=True)

    def restyle(self, labels: dict[str, str], styles: dict[str, str]) -> None:
        """New statuses (icons and colours) for the same graph: labels of the same widths keep the drawing."""
        same = labels.keys() == self.labels.keys() and all(len(labels[k]) == len(self.labels[k]) for k in labels)
        if not same or self.drawing is None:
            self.set_graph(self.graph_layout, labels, styles)
            return
        self.labels = labels
        self.node_styles = styles
        self._build()
        self.refresh()

    def select_node(self, key: str | None, scroll: bool = True, center: bool = False) -> None:
        """Light `key` and its lineage; `scroll` brings it into view (`center`: in the middle of it, for a new
        graph, else as little as needed)."""
        self.selected = key
        if key is not None and self.graph_layout is not None:
            self.lit_ancestors, self.lit_descendants, self.lit_edges = lineage(self.graph_layout, key)
        else:
            self.lit_ancestors, self.lit_descendants, self.lit_edges = set(), set(), set()
        self._build()
        self.refresh()
        if scroll and key is not None:
            self.call_after_refresh(self.scroll_to_node, key, center)

    @property
    def lit(self) -> set[str]:
        """The selection's ancestors and descendants (what stands out besides the selection itself)."""
        return self.lit_ancestors | self.lit_descendants

    def scroll_to_node(self, key: str, center: bool = False) -> None:
        """Bring a node into view. Sideways, a scroll that must happen starts where a column's labels end if it
        can, so the labels on the left are not cut mid-name (the view may then run past the graph's right end)."""
        if self.drawing is None or key not in self.drawing.boxes:
            return
        x, y, width = self.drawing.boxes[key]
        view = self.scrollable_content_region.width
        left = max(0, x - ARROW_ROOM)  # the arrow coming in
        if not (self.scroll_x <= left and x + width <= self.scroll_x + view):
            least = max(0, x + width - view)
            edges = sorted({0, *self.drawing.column_end})
            fits = [e for e in edges if least <= e <= left]
            target = fits[0] if fits else min(left, max(least, x - 1))
            if target + view > self.virtual_size.width:  # room on the right for that (blank)
                self.virtual_size = Size(target + view, self.virtual_size.height)
            self.scroll_to(x=target, animate=False, immediate=True)
        self.scroll_to_region(Region(0, max(0, y - 1), 1, 3), animate=False, force=True, immediate=True,
                              x_axis=False, center=center)

    # ------------------------------------------------------------------------------------------ drawing

    def _node_style(self, key: str) -> Style:
        base = Style.parse(self.node_styles.get(key, "") or "none")
        if key == self.selected:
            return base + Style(bold=True, reverse=True, dim=False)
        if self.selected is None:
            return base
        if key in self.lit_ancestors or key in self.lit_descendants:
            return base + Style(bold=True, dim=False)
        return base + Style(dim=True)

    def _build(self) -> None:
        drawing = self.drawing
        if drawing is None:
            empty = Segment(f" {self.empty_text}", self.get_component_rich_style("lineage-graph--dim"))
            self._strips = [Strip([empty])]
            return
        line = self.get_component_rich_style("lineage-graph--line")
        lit = self.get_component_rich_style("lineage-graph--lit")
        dim = self.get_component_rich_style("lineage-graph--dim")
        cache: dict[str, Style] = {}
        strips = []
        for runs in drawing.lines:
            segments = []
            for text, owner in runs:
                style: Style | None
                if owner is None:
                    style = None
                elif isinstance(owner, str):
                    text = f" {self.labels.get(owner, owner)} "  # its current icon (the drawing's may be older)
                    if owner not in cache:
                        cache[owner] = self._node_style(owner)
                    style = cache[owner]
                elif self.selected is None:
                    style = line
                else:
                    style = lit if owner & self.lit_edges else dim
                segments.append(Segment(text, style))
            strips.append(Strip(segments, drawing.width))
        self._strips = strips

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self._build()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        index = scroll_y + y
        base = self.rich_style
        if index >= len(self._strips):
            return Strip.blank(width, base)
        return self._strips[index].crop_extend(scroll_x, scroll_x + width, None).apply_style(base)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or self.drawing is None:
            return
        key = self.drawing.node_at(offset.x + int(self.scroll_x), offset.y + int(self.scroll_y))
        if key is not None:
            self.post_message(self.NodeClicked(key))
