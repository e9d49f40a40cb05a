"""What the Lineage screen shows in a view of width x height cells: the whole graph when it fits, else a pipeline's
neighbourhood (focus.py), laid out and drawn (in a worker, never on the event loop)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from ratui.console.lineage.drawing import Drawing, draw
from ratui.console.lineage.focus import BUDGET, Focus, fan_for, focus, is_more, more_label
from ratui.console.lineage.layout import ROW_GAP, Layout, columns_of, edges_of, layout
from ratui.console.lineage.routing import LEAD, TRACK_GAP
from ratui.engine.project.dag import Graph

COLUMN_CELLS = 12  # the least width a layer takes (a short label and its lines): for the quick "fits" refusal


def whole_fits(graph: Graph, width: int, height: int, label: Callable[[str], str] | None = None) -> bool:
    """Does the whole graph read in a view of width x height cells? Each layer's pipelines must fit its height (one
    every ROW_GAP rows) and the layers side by side at most twice its width (it scrolls sideways that far). Too many
    pipelines for any shape are refused before looking at the edges (a large project costs nothing here)."""
    count = len(graph.nodes)
    if count == 0:
        return True
    rows = max(1, height // ROW_GAP)
    if count > rows * max(1, 2 * width // COLUMN_CELLS):
        return False
    nodes = list(graph.nodes)
    column, _ = columns_of(nodes, edges_of(nodes, graph.upstream))
    per: dict[int, int] = {}
    widest: dict[int, int] = {}
    for node, c in column.items():
        per[c] = per.get(c, 0) + 1
        wide = len(label(node) if label is not None else node) + 2
        widest[c] = max(widest.get(c, 0), wide)
    if max(per.values()) > rows:
        return False
    cells = sum(widest.values()) + (len(widest) - 1) * (LEAD + TRACK_GAP + 4)
    return cells <= 2 * width


@dataclass
class View:
    """What the Lineage screen shows: the whole graph or a focused one, laid out and drawn (in a worker)."""

    whole: bool  # the whole graph (else focused on focus.key)
    layout: Layout
    drawing: Drawing | None
    focus: Focus | None
    fits: bool  # the whole graph fits the view (the screen may show it)
    total: int  # pipelines in the project
    size: tuple[int, int]  # the view's (width, height) it was made for
    fan: int
    namespace: str | None  # the labels' names are short in this namespace (the focus's, when focused)
    seconds: float = 0.0  # the time it took (laid out and drawn)


def short_name(key: str, namespace: str | None) -> str:
    """'ecommerce.silver.clean_orders' -> 'silver.clean_orders' in that namespace (console/format.py short_key)."""
    if namespace and key.startswith(namespace + "."):
        return key[len(namespace) + 1:]
    return key


def view(graph: Graph, *, key: str | None, depth: int, width: int, height: int, namespace: str | None = None,
         whole: bool | None = None, budget: int = BUDGET, icon: str = "·") -> View:
    """Lay out and draw what the screen shows in a width x height view: the whole graph when `whole` is True or
    None (the screen's choice) and it fits, else `key`'s neighbourhood to `depth`. Labels are `icon name`, the name
    short in the project's `namespace` (the whole graph) or the focus's (a focused view: its neighbours mostly
    share it); the screen gives each its status icon (same width). A group node's label is made here."""
    start = time.perf_counter()
    fits = whole_fits(graph, width, height, lambda k: f"{icon} {short_name(k, namespace)}")
    fan = fan_for(height)
    if key is None or (key not in graph.upstream and key not in graph.nodes):
        key = graph.nodes[0] if graph.nodes else None
    near: Focus | None = None
    if (fits and whole is not False) or key is None:
        lay = layout(graph.nodes, graph.upstream)
    else:
        near = focus(graph, key, depth, fan, budget)
        lay = layout(near.nodes, near.upstream, near.level)
        namespace = key.split(".", 1)[0] if "." in key else namespace
    names = {n: more_label(len(near.hidden[n])) if near is not None and is_more(n)
             else f"{icon} {short_name(n, namespace)}" for n in lay.nodes}
    drawing = draw(lay, names) if lay.nodes else None
    return View(near is None, lay, drawing, near, fits, len(graph.nodes), (width, height), fan, namespace,
                time.perf_counter() - start)
