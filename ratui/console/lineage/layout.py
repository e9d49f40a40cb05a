"""Where each pipeline of the lineage graph goes: its column (1 + the longest path from a root; a cycle cut at one
edge), a waypoint in every column a long edge passes, the order within each column (barycentre sweeps, fewest
crossings) and its row (each node towards the mean row of its neighbours, a blank line between two). `layout` runs
these steps and then the routing (routing.py)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ratui.console.lineage.routing import route_gap

Edge = tuple[str, str]  # (parent, child): data flows from parent to child

ROW_GAP = 2  # rows from one node to the next in a column (a blank line between)
WAYPOINT = "\x00"  # a waypoint's id starts with this (a pipeline key never does)


def is_waypoint(node: str) -> bool:
    return node.startswith(WAYPOINT)


def edges_of(nodes: Iterable[str], upstream: Mapping[str, Iterable[str]]) -> list[Edge]:
    """(parent, child) for every ref between known nodes, once each (a pipeline that refs itself is left out)."""
    nodes = list(nodes)
    known = set(nodes)
    out: list[Edge] = []
    seen: set[Edge] = set()
    for child in nodes:
        for parent in upstream.get(child, ()):
            edge = (parent, child)
            if parent in known and parent != child and edge not in seen:
                seen.add(edge)
                out.append(edge)
    return out


def columns_of(nodes: list[str], edges: list[Edge]) -> tuple[dict[str, int], list[Edge]]:
    """Each node's column (0 for a root, else 1 + the longest path from a root) and the edges cut to break cycles
    (none in a valid project). Deterministic: ties follow the order of `nodes`."""
    index = {n: i for i, n in enumerate(nodes)}
    parents: dict[str, list[str]] = {n: [] for n in nodes}
    children: dict[str, list[str]] = {n: [] for n in nodes}
    for parent, child in edges:
        parents[child].append(parent)
        children[parent].append(child)
    waiting = {n: len(parents[n]) for n in nodes}
    ready = [index[n] for n in nodes if waiting[n] == 0]
    heapq.heapify(ready)
    done: set[str] = set()
    cut: list[Edge] = []
    order: list[str] = []
    while len(order) < len(nodes):
        if not ready:
            cut_edge = _cycle_edge(nodes, parents, done, index)
            cut.append(cut_edge)
            waiting[cut_edge[1]] -= 1
            if waiting[cut_edge[1]] == 0:
                heapq.heappush(ready, index[cut_edge[1]])
            continue
        node = nodes[heapq.heappop(ready)]
        done.add(node)
        order.append(node)
        for child in children[node]:
            if (node, child) in cut:
                continue
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, index[child])
    cut_set = set(cut)
    column: dict[str, int] = {}
    for node in order:
        column[node] = max((column[p] + 1 for p in parents[node] if (p, node) not in cut_set), default=0)
    return column, cut


def _cycle_edge(nodes: list[str], parents: dict[str, list[str]], done: set[str], index: dict[str, int]) -> Edge:
    """An edge on a cycle among the nodes still waiting: walk up from the first of them until a node repeats."""
    node = next(n for n in nodes if n not in done)
    path: list[str] = []
    seen: dict[str, int] = {}
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = min((p for p in parents[node] if p not in done), key=index.__getitem__)
    # path[-1]'s parent is `node`, which is already on the path: that edge closes the cycle
    return node, path[-1]


@dataclass
class Layout:
    """Where every node goes (column and row) and how the links between neighbouring columns are routed."""

    nodes: list[str]  # the real nodes (pipelines), in the order given
    edges: list[Edge]  # every edge between known nodes (what the lineage follows)
    drawn: list[Edge]  # the edges drawn (all but the back edges)
    back_edges: list[Edge]  # cut to break cycles (or, in a focused view, within a level or backwards): not drawn
    column: dict[str, int]  # node or waypoint -> column
    columns: list[list[str]]  # per column, top to bottom (waypoints included)
    row: dict[str, int]  # node or waypoint -> row
    chain: dict[Edge, list[str]]  # drawn edge -> its path (parent, waypoints..., child)
    tracks: list[list[str]] = field(default_factory=list)  # per gap: targets with a track, left to right
    parents: dict[str, list[str]] = field(default_factory=dict)  # links (neighbouring columns), waypoints included
    children: dict[str, list[str]] = field(default_factory=dict)

    def up(self, key: str) -> list[str]:
        """The node's direct parents (real nodes)."""
        return [p for p, c in self.edges if c == key]

    def down(self, key: str) -> list[str]:
        return [c for p, c in self.edges if p == key]

    def first(self) -> str | None:
        """The top left pipeline (what is selected first)."""
        column = self.in_column(0)
        return column[0] if column else None

    def in_column(self, column: int) -> list[str]:
        """The real nodes of a column, top to bottom."""
        if not 0 <= column < len(self.columns):
            return []
        return [n for n in self.columns[column] if not is_waypoint(n)]

    def link_edge(self, a: str, b: str) -> Edge:
        """The drawn edge a link between neighbouring columns belongs to."""
        if not is_waypoint(a) and not is_waypoint(b):
            return a, b
        waypoint = a if is_waypoint(a) else b
        _, parent, child, _ = waypoint.split(WAYPOINT)
        return parent, child


def layout(nodes: Iterable[str], upstream: Mapping[str, Iterable[str]],
           levels: Mapping[str, int] | None = None) -> Layout:
    """Lay out the DAG of `nodes` (pipeline keys, in a stable order) whose refs are `upstream` (key -> parents).
    `levels` (a focused view: each node's distance from the focus, negative upstream) puts each node in the column
    of its level; an edge that does not go from a lower level to a higher one is then left undrawn (a back edge)."""
    nodes = list(dict.fromkeys(nodes))
    edges = edges_of(nodes, upstream)
    if levels is None:
        column, back = columns_of(nodes, edges)
    else:
        low = min((levels[n] for n in nodes), default=0)
        column = {n: levels[n] - low for n in nodes}
        back = [(p, c) for p, c in edges if column[p] >= column[c]]
    cut = set(back)
    drawn = [e for e in edges if e not in cut]
    width = max(column.values(), default=-1) + 1
    columns: list[list[str]] = [[] for _ in range(width)]
    for node in nodes:
        columns[column[node]].append(node)
    parents: dict[str, list[str]] = {n: [] for n in nodes}
    children: dict[str, list[str]] = {n: [] for n in nodes}
    chain: dict[Edge, list[str]] = {}
    for parent, child in drawn:
        path = [parent]
        for step in range(column[parent] + 1, column[child]):
            waypoint = f"{WAYPOINT}{parent}{WAYPOINT}{child}{WAYPOINT}{step}"
            column[waypoint] = step
            columns[step].append(waypoint)
            parents[waypoint] = []
            children[waypoint] = []
            path.append(waypoint)
        path.append(child)
        chain[(parent, child)] = path
        for a, b in zip(path, path[1:]):
            children[a].append(b)
            parents[b].append(a)
    columns = _order_columns(columns, parents, children)
    row = _settle_rows(columns, parents, children)
    out = Layout(nodes=nodes, edges=edges, drawn=drawn, back_edges=back, column=column, columns=columns, row=row,
                 chain=chain, parents=parents, children=children)
    out.tracks = [route_gap(out, c, ROW_GAP) for c in range(len(columns) - 1)]
    return out


# ------------------------------------------------------------------------------------------ order and rows


def crossings(columns: list[list[str]], children: Mapping[str, list[str]]) -> int:
    """Crossings of straight links between neighbouring columns (what the ordering minimises)."""
    total = 0
    for left, right in zip(columns, columns[1:]):
        pos = {n: i for i, n in enumerate(right)}
        links = [(i, pos[b]) for i, a in enumerate(left) for b in children.get(a, ()) if b in pos]
        for k, (a1, b1) in enumerate(links):
            for a2, b2 in links[k + 1:]:
                if (a1 - a2) * (b1 - b2) < 0:
                    total += 1
    return total


def _sort_by(column: list[str], neighbours: list[str], links: Mapping[str, list[str]]) -> list[str]:
    pos = {n: i for i, n in enumerate(neighbours)}

    def key(item: tuple[int, str]) -> tuple[float, int]:
        i, node = item
        near = [pos[m] for m in links.get(node, ()) if m in pos]
        return (sum(near) / len(near) if near else float(i), i)

    return [node for _, node in sorted(enumerate(column), key=key)]


def _order_columns(columns: list[list[str]], parents: Mapping[str, list[str]], children: Mapping[str, list[str]],
           sweeps: int = 8) -> list[list[str]]:
    """Barycentre sweeps (down by parents, up by children); the order with the fewest crossings wins."""
    current = [list(c) for c in columns]
    best, fewest = [list(c) for c in current], crossings(current, children)
    for sweep in range(sweeps):
        if sweep % 2 == 0:
            for c in range(1, len(current)):
                current[c] = _sort_by(current[c], current[c - 1], parents)
        else:
            for c in range(len(current) - 2, -1, -1):
                current[c] = _sort_by(current[c], current[c + 1], children)
        count = crossings(current, children)
        if count < fewest:
            best, fewest = [list(c) for c in current], count
        if fewest == 0:
            break
    return best


def place(desired: list[float], gap: int = ROW_GAP) -> list[int]:
    """Whole rows as close as can be to `desired` (least squares), in the same order and at least `gap` apart
    (pool-adjacent-violators on the rows less their minimal offsets)."""
    blocks: list[list[float]] = []  # [sum, count]
    for i, want in enumerate(desired):
        blocks.append([want - gap * i, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    fit: list[float] = []
    for total, count in blocks:
        fit.extend([total / count] * int(count))
    return [math.floor(value + 0.5) + gap * i for i, value in enumerate(fit)]


def _settle_rows(columns: list[list[str]], parents: Mapping[str, list[str]],
          children: Mapping[str, list[str]]) -> dict[str, int]:
    row = {n: ROW_GAP * i for column in columns for i, n in enumerate(column)}

    def settle(column: list[str], links: Mapping[str, list[str]]) -> None:
        wanted = [sum(row[m] for m in links[n]) / len(links[n]) if links.get(n) else float(row[n]) for n in column]
        for node, value in zip(column, place(wanted)):
            row[node] = value

    for _ in range(2):
        for c in range(1, len(columns)):
            settle(columns[c], parents)
        for c in range(len(columns) - 2, -1, -1):
            settle(columns[c], children)
    for c in range(1, len(columns)):
        settle(columns[c], parents)
    top = min(row.values(), default=0)
    return {n: r - top for n, r in row.items()}
