"""The Pipelines screen's tree: the widget (namespace > layer > pipeline, filled lazily, folded a node or a level at a
time), how the project's pipelines are grouped into it and let through by the name filter, and each node's label.

The labels are computed from what the screen hands in (the pipeline, its last runs, its runs in flight): no read
here, nothing that waits."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ratui.console.format import fmt_ms, glyph, sparkline
from ratui.engine.vocabulary import LAYERS

STRATEGY_WIDTH = 13
# a project of up to this many pipelines opens fully expanded; a larger one by layer (screens/pipelines.py)
EXPAND_ALL_UP_TO = 200


class PipelineTree(Tree):
    """The project's tree; `populate(node)` fills a layer's pipelines before it first expands (lazy)."""

    BINDINGS = [
        Binding("space", "toggle_node", "Expand", show=False),
        Binding("left", "fold", "Collapse", show=False),
        Binding("right", "unfold", "Expand", show=False),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.populate: Any = lambda node: None

    def _toggle_node(self, node: TreeNode) -> None:
        if node.allow_expand and not node.is_expanded:
            self.populate(node)
        super()._toggle_node(node)

    def action_toggle_expand_all(self) -> None:
        node = self.cursor_node
        if node is not None and node.parent is not None and all(n.is_collapsed for n in node.siblings):
            for sibling in node.siblings:
                self.populate(sibling)
        super().action_toggle_expand_all()

    def action_fold(self) -> None:
        """left: collapse the node under the cursor; on a collapsed node or a pipeline, go to its parent."""
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)

    def action_unfold(self) -> None:
        """right: expand the node under the cursor; on an expanded one, go to its first child."""
        node = self.cursor_node
        if node is None or not node.allow_expand:
            return
        if not node.is_expanded:
            self.populate(node)
            node.expand()
        elif node.children:
            self.move_cursor(node.children[0])

    def namespaces(self) -> list[TreeNode]:
        return [n for n in self.root.children if n.data and n.data[0] == "namespace"]

    def layers(self) -> list[TreeNode]:
        return [n for ns in self.namespaces() for n in ns.children if n.data and n.data[0] == "layer"]

    def fold_one_level(self) -> None:
        """[: collapse the whole tree one level: every layer (the namespaces show their layers), then every
        namespace. The cursor goes up to what stays in view."""
        open_layers = [n for n in self.layers() if n.is_expanded and n.parent is not None and n.parent.is_expanded]
        cursor = self.cursor_node
        for node in open_layers or self.namespaces():
            node.collapse()
        if cursor is not None and cursor.data and cursor.data[0] == "pipeline" and cursor.parent is not None:
            self.move_cursor(cursor.parent if open_layers else cursor.parent.parent)
        elif cursor is not None and cursor.data and cursor.data[0] == "layer" and not open_layers:
            self.move_cursor(cursor.parent)

    def unfold_one_level(self) -> None:
        """]: expand the whole tree one level: every namespace, then every layer (filled as they open)."""
        closed = [n for n in self.namespaces() if not n.is_expanded]
        if closed:
            for node in closed:
                node.expand()
            return
        for node in self.layers():
            self.populate(node)
            node.expand()


def group_by_layer(pipelines: Mapping[str, Any], keys: Iterable[str] | None = None) -> dict[str, dict[str, list[str]]]:
    """namespace -> layer -> pipeline keys (namespaces by name, layers bronze/silver/gold first, pipelines by name)
    of `keys` (default: every pipeline)."""
    by_ns: dict[str, dict[str, list]] = {}
    for key in (pipelines if keys is None else keys):
        pipeline = pipelines[key]
        by_ns.setdefault(pipeline.namespace, {}).setdefault(pipeline.layer, []).append(pipeline)
    out: dict[str, dict[str, list[str]]] = {}
    for ns in sorted(by_ns):
        layers = sorted(by_ns[ns], key=lambda x: (LAYERS.index(x) if x in LAYERS else 99, x))
        out[ns] = {layer: [p.key for p in sorted(by_ns[ns][layer], key=lambda p: p.name)] for layer in layers}
    return out


def let_through(keys: Iterable[str], name_filter: str) -> list[str]:
    """The keys the name filter lets through: a case-insensitive substring of the key (plain text, never a
    pattern), every key without a filter."""
    needle = name_filter.strip().casefold()
    if not needle:
        return list(keys)
    return [k for k in keys if needle in k.casefold()]


def name_width(names: Iterable[str], narrow: bool) -> int:
    """The width of the pipelines' names in the tree: the longest, within bounds (narrower below the breakpoint)."""
    return min(20 if narrow else 28, max([14, *map(len, names)]))


def group_label(name: str, keys: list[str], recent: Mapping[str, list[dict[str, Any]]], active: set[str]) -> Text:
    """A namespace or layer: its pipelines (`keys`, those the filter shows), how many run now (`active`: the
    pipelines with a run in flight) and how many last failed."""
    text = Text(name, style="bold")
    text.append(f" ({len(keys)})", style="bold")
    failed = sum(1 for k in keys if (recent.get(k) or [{}])[0].get("status") == "failed")
    running = sum(1 for k in keys if k in active)
    if running:
        icon, style = glyph("running")
        text.append(f" {icon} {running}", style=style)
    if failed:
        icon, style = glyph("failed")
        text.append(f" {icon} {failed}", style=style)
    return text


def pipeline_label(pipeline: Any, runs: list[dict[str, Any]], active: list[Any], width: int, narrow: bool) -> Text:
    """A pipeline: its state (a broken one's first error code; a running one's phase and Spark's progress; else
    its last status and duration), its name in `width` cells, and when there is room its strategy and the
    sparkline of its recent durations. `runs`: its last runs (newest first); `active`: its runs in flight."""
    text = Text()
    name = pipeline.name.ljust(width)[:width]
    if pipeline.errors:
        text.append("✘ ", style="bold red")
        text.append(name, style="red")
        text.append(f" {pipeline.errors[0].code}", style="red")
        return text
    if active:
        icon, style = glyph("running")
        run = active[-1]
        phase = run.current_phase or run.status
        fraction = run.spark.fraction if run.spark is not None else None
        if fraction is not None:  # Spark's progress of the phase's running job
            status_text = Text(f"{phase[:4]} {fraction * 100:2.0f}%".rjust(8), style="cyan")
        else:
            status_text = Text(f"{phase:>8}", style="cyan")
    elif runs:
        icon, style = glyph(runs[0]["status"])
        status_text = Text(f"{fmt_ms(runs[0]['duration_ms']):>8}")
    else:
        icon, style = glyph(None)
        status_text = Text(f"{'-':>8}", style="dim")
    text.append(f"{icon} ", style=style)
    text.append(name)
    text.append(" ")
    text.append_text(status_text)
    if narrow:  # the name, its state and time win; strategy and history are in the detail pane
        return text
    strategy = pipeline.config.merge_strategy if pipeline.config else "?"
    text.append(f" {strategy:<{STRATEGY_WIDTH}}", style="dim")
    text.append(" ")
    text.append(sparkline([r["duration_ms"] for r in reversed(runs)], 8), style="cyan")
    return text
