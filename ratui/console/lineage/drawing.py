"""The lineage graph's layout drawn as lines of text runs: each pipeline's label in a box of its column, the lines
of the edges in the gaps between columns (a crossing drawn as the vertical line passing through the horizontal
one, never as a junction, so a line is never seen to join another it does not)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

from ratui.console.lineage.layout import Layout, is_waypoint
from ratui.console.lineage.routing import LEAD, TRACK_GAP, gap_links

ARROW = "▶"

N, E, S, W = 1, 2, 4, 8
GLYPHS = {E | W: "─", E: "─", W: "─", N | S: "│", N: "│", S: "│", E | S: "┌", W | S: "┐", E | N: "└", W | N: "┘",
          E | W | S: "┬", E | W | N: "┴", N | S | E: "├", N | S | W: "┤", N | S | E | W: "┼"}
CROSSING = "│"  # two lines that cross without joining: the vertical one passes over

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
        sources, kids, ups = gap_links(lay, c)
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
