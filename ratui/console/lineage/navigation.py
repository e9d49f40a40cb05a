"""Moving in the lineage graph: what a selected pipeline lights (its ancestors, its descendants, the edges on the
paths through it) and which pipeline a key press selects next."""

from __future__ import annotations

from typing import Iterable

from ratui.console.lineage.layout import Edge, Layout
from ratui.engine.project.dag import Graph  # the lineage follows the project's DAG as the engine walks it


def lineage(lay: Layout, key: str) -> tuple[set[str], set[str], set[Edge]]:
    """The node's ancestors, its descendants, and the drawn edges on the paths through it."""
    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for parent, child in lay.edges:
        ups.setdefault(child, []).append(parent)
        downs.setdefault(parent, []).append(child)
    graph = Graph(list(lay.nodes), ups, downs)
    ancestors = graph.ancestors(key)
    descendants = graph.descendants(key)
    upper, lower = ancestors | {key}, descendants | {key}
    lit = {(p, c) for p, c in lay.drawn if (p in ancestors and c in upper) or (p in lower and c in descendants)}
    ancestors.discard(key)
    descendants.discard(key)
    return ancestors, descendants, lit


def _nearest(lay: Layout, candidates: Iterable[str], y: int) -> str | None:
    return min(candidates, key=lambda n: (abs(lay.row[n] - y), lay.row[n]), default=None)


def move(lay: Layout, key: str, direction: str) -> str | None:
    """The node a key press selects from `key`: up/down within its column; left/right to the neighbouring column,
    the nearest node connected to `key` there if there is one, else the nearest there; upstream/downstream to the
    nearest direct parent/child (the closest column first). None: nothing there."""
    if key not in lay.column:
        return None
    c, y = lay.column[key], lay.row[key]
    here = lay.in_column(c)
    if direction in ("up", "down"):
        i = here.index(key) + (-1 if direction == "up" else 1)
        return here[i] if 0 <= i < len(here) else None
    if direction in ("left", "right"):
        side = c - 1 if direction == "left" else c + 1
        there = lay.in_column(side)
        linked = set(lay.up(key) if direction == "left" else lay.down(key))
        return _nearest(lay, [n for n in there if n in linked], y) or _nearest(lay, there, y)
    if direction in ("upstream", "downstream"):
        near = lay.up(key) if direction == "upstream" else lay.down(key)
        return min(near, key=lambda n: (abs(lay.column[n] - c), abs(lay.row[n] - y), lay.row[n]), default=None)
    raise ValueError(f"unknown direction {direction!r}")
