"""The lineage graph's layout: where the Lineage screen puts each pipeline and how it routes the edges. Pure
functions, no Textual or Rich (the widget in ratui/widgets/lineage_graph.py only styles what they compute).

A layered drawing (Sugiyama's method, kept small):

1. columns: a pipeline's column is 1 + the longest path from a root, so roots are on the left and every edge
   goes left to right. A cycle (a broken project) is cut at one edge, kept aside as a back edge, so the rest
   still lays out.
2. an edge that spans several columns gets a waypoint in each column it passes, so every link joins two
   neighbouring columns (the waypoint is drawn as a line through that column).
3. the order within each column: barycentre sweeps down and up, keeping the order with the fewest crossings.
4. rows: each node moves towards the mean row of its neighbours, keeping the order and a blank line between two
   nodes (a least-squares fit under those constraints).
5. routing: in the gap between two columns every target with several parents (or one on another row) gets a
   vertical track; each parent's line runs along its row to its targets' tracks, a track runs to its target's
   row and a line from there to the target's arrow. Tracks are ordered for the fewest crossings, and two lines
   never share a row (a target that would have to is moved down a row). A crossing is drawn as the vertical line
   passing through the horizontal one, never as a junction, so a line is never seen to join another it does not.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Union

from ratui.engine.project.dag import Graph  # the lineage follows the project's DAG as the engine walks it

Edge = tuple[str, str]  # (parent, child): data flows from parent to child

ROW_GAP = 2  # rows from one node to the next in a column (a blank line between)
LEAD = 2  # cells of line between a column's right edge and the gap's first track
TRACK_GAP = 2  # cells between two tracks
ARROW = "▶"
WAYPOINT = "\x00"  # a waypoint's id starts with this (a pipeline key never does)

N, E, S, W = 1, 2, 4, 8
GLYPHS = {E | W: "─", E: "─", W: "─", N | S: "│", N: "│", S: "│", E | S: "┌", W | S: "┐", E | N: "└", W | N: "┘",
          E | W | S: "┬", E | W | N: "┴", N | S | E: "├", N | S | W: "┤", N | S | E | W: "┼"}
CROSSING = "│"  # two lines that cross without joining: the vertical one passes over

INFINITY = 1 << 30
SEARCH_LIMIT = 16  # tracks in a gap up to which their order is improved by local search


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
    columns = _order(columns, parents, children)
    row = _rows(columns, parents, children)
    out = Layout(nodes=nodes, edges=edges, drawn=drawn, back_edges=back, column=column, columns=columns, row=row,
                 chain=chain, parents=parents, children=children)
    out.tracks = [_route_gap(out, c) for c in range(len(columns) - 1)]
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


def _order(columns: list[list[str]], parents: Mapping[str, list[str]], children: Mapping[str, list[str]],
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


def _rows(columns: list[list[str]], parents: Mapping[str, list[str]],
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


# ------------------------------------------------------------------------------------------------ routing


def _gap_links(lay: Layout, c: int) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    """Sources in column c with links into column c+1, and each side's links."""
    targets = set(lay.columns[c + 1])
    kids = {a: [b for b in lay.children.get(a, ()) if b in targets] for a in lay.columns[c]}
    sources = [a for a in lay.columns[c] if kids[a]]
    ups: dict[str, list[str]] = {b: [] for b in lay.columns[c + 1]}
    for a in sources:
        for b in kids[a]:
            ups[b].append(a)
    return sources, kids, ups


def is_straight(lay: Layout, b: str, ups: Mapping[str, list[str]]) -> bool:
    """A target whose one parent is on its own row needs no track: a straight line."""
    return len(ups[b]) == 1 and lay.row[ups[b][0]] == lay.row[b]


def _gap_cost(lay: Layout, order: list[str], sources: list[str], kids: Mapping[str, list[str]],
              ups: Mapping[str, list[str]]) -> tuple[int, int, set[int]]:
    """(overlaps, crossings, rows where lines would overlap) of a track order."""
    row = lay.row
    track = {b: i for i, b in enumerate(order)}
    span = {}
    for b in order:
        rows = [row[a] for a in ups[b]] + [row[b]]
        span[b] = (min(rows), max(rows))
    target_at = {row[b]: b for b in ups if ups[b]}
    overlap_rows: set[int] = set()
    crossed = 0
    for a in sources:
        ra = row[a]
        reach = max(track.get(b, INFINITY) for b in kids[a])  # where a's line ends (INFINITY: at the arrow)
        for b in order:
            if track[b] < reach and b not in kids[a]:
                lo, hi = span[b]
                if lo < ra < hi:
                    crossed += 1
                elif ra in (lo, hi):
                    overlap_rows.add(ra)
        beside = target_at.get(ra)  # the target on a's row: its line starts at its track
        if beside is not None and beside in track:
            joins = beside in kids[a]
            if (joins and reach != track[beside]) or (not joins and reach >= track[beside]):
                overlap_rows.add(ra)
    for b in order:
        rb = row[b]
        for other in order:
            if track[other] > track[b]:
                lo, hi = span[other]
                if lo < rb < hi:
                    crossed += 1
                elif rb in (lo, hi):
                    overlap_rows.add(rb)
    return len(overlap_rows), crossed, overlap_rows


def _best_tracks(lay: Layout, targets: list[str], sources: list[str], kids: Mapping[str, list[str]],
                 ups: Mapping[str, list[str]]) -> tuple[list[str], tuple[int, int, set[int]]]:
    """The track order with the fewest overlaps, then crossings: a few heuristic starts, each improved by adjacent
    swaps while the gap is small enough for that to be quick."""
    tracked = [b for b in targets if ups[b] and not is_straight(lay, b, ups)]
    row = lay.row
    starts = [sorted(tracked, key=lambda b: row[b]), sorted(tracked, key=lambda b: -row[b]),
              sorted(tracked, key=lambda b: (sum(row[a] for a in ups[b]) / len(ups[b]) - row[b], row[b]))]
    best: tuple[list[str], tuple[int, int, set[int]]] | None = None
    for start in starts:
        order = list(start)
        cost = _gap_cost(lay, order, sources, kids, ups)
        for _ in range(2 * len(order) + 1 if len(order) <= SEARCH_LIMIT else 0):
            improved = False
            for i in range(len(order) - 1):
                order[i], order[i + 1] = order[i + 1], order[i]
                trial = _gap_cost(lay, order, sources, kids, ups)
                if trial[:2] < cost[:2]:
                    cost, improved = trial, True
                else:
                    order[i], order[i + 1] = order[i + 1], order[i]
            if not improved:
                break
        if best is None or cost[:2] < best[1][:2]:
            best = (order, cost)
    assert best is not None
    return best


def _route_gap(lay: Layout, c: int) -> list[str]:
    """Order the tracks of the gap right of column c; move targets down a row while two lines would share one."""
    column = lay.columns[c + 1]
    order: list[str] = []
    for _ in range(len(column) + 4):
        sources, kids, ups = _gap_links(lay, c)
        order, (overlaps, _, rows) = _best_tracks(lay, column, sources, kids, ups)
        if not overlaps:
            break
        for i, node in enumerate(column):  # each target on a shared row moves down one; those below make room
            if lay.row[node] in rows:
                lay.row[node] += 1
            if i:
                lay.row[node] = max(lay.row[node], lay.row[column[i - 1]] + ROW_GAP)
    return order


# ------------------------------------------------------------------------------------------------ drawing

Owner = Union[str, frozenset, None]  # a node's key (its label), the edges a line carries, or nothing


@dataclass
class Drawing:
    """The graph as lines of text runs: each run's owner is a node key (a label), a frozenset of the edges a line
    carries, or None (blank)."""

    width: int
    height: int
    lines: list[list[tuple[str, Owner]]]
    boxes: dict[str, tuple[int, int, int]]  # node -> (x, y, width) of its label box
    column_x: list[int]  # left edge of each column's labels
    column_end: list[int]  # right edge of each column's widest label (where the lines into the next one start)

    def text(self) -> str:
        return "\n".join("".join(t for t, _ in line).rstrip() for line in self.lines)

    def node_at(self, x: int, y: int) -> str | None:
        for key, (bx, by, bw) in self.boxes.items():
            if by == y and bx <= x < bx + bw:
                return key
        return None


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.mask = [[0] * width for _ in range(height)]
        self.joint = [[False] * width for _ in range(height)]
        self.h_edges: list[list[frozenset]] = [[frozenset()] * width for _ in range(height)]
        self.v_edges: list[list[frozenset]] = [[frozenset()] * width for _ in range(height)]
        self.text: list[list[str | None]] = [[None] * width for _ in range(height)]
        self.owner: list[list[Owner]] = [[None] * width for _ in range(height)]

    def hline(self, y: int, x1: int, x2: int, edges: frozenset) -> None:
        if x2 <= x1:
            return
        for x in range(x1, x2 + 1):
            self.mask[y][x] |= (E if x < x2 else 0) | (W if x > x1 else 0)
            self.h_edges[y][x] = self.h_edges[y][x] | edges
        self.joint[y][x1] = self.joint[y][x2] = True

    def vline(self, x: int, y1: int, y2: int, edges: frozenset) -> None:
        if y2 <= y1:
            return
        for y in range(y1, y2 + 1):
            self.mask[y][x] |= (S if y < y2 else 0) | (N if y > y1 else 0)
            self.v_edges[y][x] = self.v_edges[y][x] | edges
        self.joint[y1][x] = self.joint[y2][x] = True

    def put(self, x: int, y: int, text: str, owner: Owner) -> None:
        for i, char in enumerate(text):
            self.text[y][x + i] = char
            self.owner[y][x + i] = owner

    def lines(self) -> list[list[tuple[str, Owner]]]:
        out = []
        for y, masks in enumerate(self.mask):
            runs: list[tuple[str, Owner]] = []
            for x, mask in enumerate(masks):
                char, owner = self.text[y][x], self.owner[y][x]
                if char is None:
                    if not mask:
                        char, owner = " ", None
                    elif mask == N | S | E | W and not self.joint[y][x]:
                        char, owner = CROSSING, self.v_edges[y][x]
                    else:
                        char, owner = GLYPHS[mask], self.h_edges[y][x] | self.v_edges[y][x]
                if runs and runs[-1][1] == owner:
                    runs[-1] = (runs[-1][0] + char, owner)
                else:
                    runs.append((char, owner))
            out.append(runs)
        return out


def draw(lay: Layout, labels: Mapping[str, str]) -> Drawing:
    """Draw the layout with each node's label (one line: its status icon and name) in a box of its column."""
    count = len(lay.columns)
    widths = [max((len(labels.get(n, n)) + 2 for n in column if not is_waypoint(n)), default=1)
              for column in lay.columns]
    column_x = [0] * count
    track_x: list[dict[str, int]] = []
    for c in range(count):
        if c:
            end = column_x[c - 1] + widths[c - 1]
            order = lay.tracks[c - 1]
            xs = {b: end + LEAD + TRACK_GAP * i for i, b in enumerate(order)}
            track_x.append(xs)
            column_x[c] = (max(xs.values()) if xs else end + 1) + 3
    width = column_x[-1] + widths[-1] if count else 0
    height = max(lay.row.values(), default=-1) + 1
    canvas = _Canvas(width, height)
    boxes: dict[str, tuple[int, int, int]] = {}
    row = lay.row
    for c, column in enumerate(lay.columns):
        for node in column:
            if is_waypoint(node):
                continue
            label = f" {labels.get(node, node)} "
            canvas.put(column_x[c], row[node], label, node)
            boxes[node] = (column_x[c], row[node], len(label))
    for c in range(count - 1):
        xs = track_x[c]
        arrow = column_x[c + 1] - 1
        sources, kids, ups = _gap_links(lay, c)
        for a in sources:
            if is_waypoint(a):
                start = column_x[c] - 1  # the line goes on through the waypoint's column
            else:
                start = column_x[c] + len(labels.get(a, a)) + 2
            ends = {b: xs.get(b, arrow) for b in kids[a]}
            joins = sorted(set(ends.values()))
            x = start
            for join in joins:
                edges = frozenset(lay.link_edge(a, b) for b in kids[a] if ends[b] >= join)
                canvas.hline(row[a], x, join, edges)
                x = join
        for b, tx in xs.items():
            rb = row[b]
            joins = sorted({row[a] for a in ups[b]} | {rb})
            for y1, y2 in zip(joins, joins[1:]):
                if y2 <= rb:
                    edges = frozenset(lay.link_edge(a, b) for a in ups[b] if row[a] <= y1)
                else:
                    edges = frozenset(lay.link_edge(a, b) for a in ups[b] if row[a] >= y2)
                canvas.vline(tx, y1, y2, edges)
            canvas.hline(rb, tx, arrow, frozenset(lay.link_edge(a, b) for a in ups[b]))
        for b in lay.columns[c + 1]:
            if ups[b] and not is_waypoint(b):
                canvas.put(arrow, row[b], ARROW, frozenset(lay.link_edge(a, b) for a in ups[b]))
    column_end = [x + w for x, w in zip(column_x, widths)]
    return Drawing(width, height, canvas.lines(), boxes, column_x, column_end)


# ---------------------------------------------------------------------------------------- lineage, moving


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


# ------------------------------------------------------------------------------------- a focused view, at scale
#
# A project of thousands of pipelines is never laid out whole: the screen shows one pipeline (the focus) with its
# upstream and downstream to a depth, at most FAN neighbours of a pipeline in each direction (the rest grouped in
# one "… and N more" node) and at most BUDGET pipelines in all. What this costs follows the focused subgraph (the
# pipelines visited), never the project: the walk reads only the edges of the pipelines it shows.

MORE = "\x01"  # a group node's key starts with this ("… and N more" parents or children of a pipeline)
FAN = 12  # neighbours of one pipeline shown in each direction, by default (the screen fits it to its height)
BUDGET = 120  # pipelines in a focused view at most (its layout stays well under the screen's time goal)
MAX_DEPTH = 50
COLUMN_CELLS = 12  # the least width a layer takes (a short label and its lines): for the quick "fits" refusal


def is_more(node: str) -> bool:
    return node.startswith(MORE)


def more_label(count: int) -> str:
    return f"… and {count:,} more"


@dataclass
class Focus:
    """A pipeline's neighbourhood: what a focused view lays out."""

    key: str  # the focused pipeline
    depth: int  # how far up and down (edges) it reaches
    nodes: list[str]  # the focus first, then each level's pipelines and group nodes, nearest first
    upstream: dict[str, list[str]]  # node -> its parents in the view (the edges drawn)
    level: dict[str, int]  # node -> its distance from the focus: negative upstream, positive downstream
    hidden: dict[str, list[str]]  # group node -> the pipelines it stands for (not drawn)
    deeper: bool  # a greater depth would show more pipelines (False: depth is where the lineage ends)
    ups: int = 0  # pipelines upstream of the focus in the view
    downs: int = 0
    beyond: int = 0  # pipelines within the depth left out because the view was full (BUDGET)

    @property
    def pipelines(self) -> list[str]:
        return [n for n in self.nodes if not is_more(n)]

    def group_of(self, node: str) -> tuple[str, str]:
        """A group node's (direction "up" or "down", the pipeline whose parents or children it stands for)."""
        _, direction, key = node.split(MORE, 2)
        return direction, key


def focus(graph: Graph, key: str, depth: int, fan: int = FAN, budget: int = BUDGET) -> Focus:
    """The pipelines up to `depth` edges upstream and downstream of `key` (one level up, one down, then the next),
    each pipeline showing at most `fan` new neighbours per direction (the rest in one group node), and at most
    `budget` nodes in all (group nodes included; past it, what is left is counted in `beyond`). Reads only the
    edges of the pipelines it reaches. A cycle (a broken project) is walked once; the layout cuts it."""
    depth = max(1, min(depth, MAX_DEPTH))
    fan = max(1, fan)
    level: dict[str, int] = {key: 0}
    nodes = [key]
    upstream: dict[str, list[str]] = {key: []}
    hidden: dict[str, list[str]] = {}
    counts = {"up": 0, "down": 0}
    beyond: set[str] = set()

    def link(parent: str, child: str) -> None:
        parents = upstream.setdefault(child, [])
        if parent not in parents:
            parents.append(parent)

    def add(node: str, at: int) -> None:
        level[node] = at
        nodes.append(node)
        upstream.setdefault(node, [])

    sides = (("up", graph.upstream, -1), ("down", graph.downstream, 1))
    frontiers = {"up": [key], "down": [key]}
    for step in range(1, depth + 1):
        for direction, links, sign in sides:
            reached: list[str] = []
            for node in frontiers[direction]:
                near = sorted(set(links.get(node, ())) - {node})
                new = [n for n in near if n not in level]
                room = budget - len(level)
                cap = max(0, fan - (len(near) - len(new)))
                take = len(new) if len(new) <= min(cap, room) else max(0, min(cap, room) - 1)  # and the group
                chosen = set(new[:take])
                for n in near:
                    if n in chosen:
                        add(n, sign * step)
                        reached.append(n)
                        counts[direction] += 1
                    elif n not in level:
                        continue
                    link(n, node) if direction == "up" else link(node, n)
                rest = new[take:]
                if rest and room - take >= 1:
                    group = f"{MORE}{direction}{MORE}{node}"
                    hidden[group] = rest
                    add(group, sign * step)
                    link(group, node) if direction == "up" else link(node, group)
                elif rest:
                    beyond.update(rest)
            frontiers[direction] = reached
    deeper = any(n not in level for direction, links, _ in sides for node in frontiers[direction]
                 for n in links.get(node, ()))
    # a pipeline grouped under one neighbour but reached through another is drawn: its group no longer holds it
    for group, members in list(hidden.items()):
        direction, owner = group.split(MORE, 2)[1:]
        kept = [n for n in members if n not in level]
        for n in members:
            if n in level:
                link(n, owner) if direction == "up" else link(owner, n)
        if kept:
            hidden[group] = kept
        else:
            del hidden[group]
            nodes.remove(group)
            del level[group]
            upstream.pop(group, None)
            for parents in upstream.values():
                if group in parents:
                    parents.remove(group)
    beyond -= set(level)
    reach = max((abs(level[n]) for n in nodes if not is_more(n)), default=0)
    if not deeper and not beyond:
        depth = max(1, reach)  # asked deeper than the lineage goes: the depth that shows it all
    return Focus(key, depth, nodes, upstream, level, hidden, deeper, counts["up"], counts["down"], len(beyond))


def fan_for(rows: int) -> int:
    """Neighbours per pipeline and direction that fit a view of `rows` rows (a pipeline every ROW_GAP rows, one
    of them the group node)."""
    return max(4, min(40, rows // ROW_GAP - 1))


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
    import time

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


# ------------------------------------------------------------------------------------ finding a pipeline by name


@dataclass
class Found:
    """Pipelines whose names hold what was typed (best first, at most `limit`), how many in all, and when none
    does, the closest names (a typo)."""

    matches: list[str]
    total: int
    close: list[str] = field(default_factory=list)


def find(text: str, keys: Iterable[str], namespace: str | None = None, limit: int = 100) -> Found:
    """The pipelines `text` names. Every word typed must be part of the key (case-insensitive); the name itself
    first, then a name or `layer.name` that starts with it, then the rest, each in key order. Nothing typed: all."""
    keys = list(keys)
    words = text.strip().lower().split()
    if not words:
        return Found(keys[:limit], len(keys))
    whole = " ".join(words)
    ranked: list[tuple[int, str]] = []
    for key in keys:
        low = key.lower()
        if not all(w in low for w in words):
            continue
        name = low.rsplit(".", 1)[-1]
        local = low.split(".", 1)[-1]
        if whole in (low, local, name):
            rank = 0
        elif name.startswith(whole):
            rank = 1
        elif local.startswith(whole) or (namespace and low.startswith(f"{namespace.lower()}.{whole}")):
            rank = 2
        elif whole in name:
            rank = 3
        else:
            rank = 4
        ranked.append((rank, key))
    ranked.sort()
    if ranked:
        return Found([k for _, k in ranked[:limit]], len(ranked))
    return Found([], 0, close_names(whole, keys))


def close_names(text: str, keys: list[str], count: int = 5) -> list[str]:
    """The pipelines whose name (or layer.name, or key, when `text` has dots) is closest to `text`: a typo's likely
    meaning, best first (ties in key order)."""
    from difflib import SequenceMatcher

    text = text.strip().lower()
    dots = text.count(".")
    by_form: dict[str, list[str]] = {}
    for key in sorted(keys):
        low = key.lower()
        form = low if dots >= 2 else low.split(".", 1)[-1] if dots == 1 else low.rsplit(".", 1)[-1]
        by_form.setdefault(form, []).append(key)
    matcher = SequenceMatcher()
    matcher.set_seq2(text)
    scored: list[tuple[float, str]] = []
    for form, same in by_form.items():
        matcher.set_seq1(form)
        if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6:
            score = matcher.ratio()
            if score >= 0.6:
                scored.extend((-score, key) for key in same)
    scored.sort()
    return [key for _, key in scored[:count]]
