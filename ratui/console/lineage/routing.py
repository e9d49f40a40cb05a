"""Routing the edges between two neighbouring columns of a layout: in the gap every target with several parents (or
one on another row) gets a vertical track; each parent's line runs along its row to its targets' tracks, a track
runs to its target's row and a line from there to the target's arrow. Tracks are ordered for the fewest crossings,
and two lines never share a row (a target that would have to is moved down a row)."""

from __future__ import annotations

from typing import Mapping, Protocol

LEAD = 2  # cells of line between a column's right edge and the gap's first track
TRACK_GAP = 2  # cells between two tracks
INFINITY = 1 << 30
SEARCH_LIMIT = 16  # tracks in a gap up to which their order is improved by local search


class Placed(Protocol):
    """What routing reads of a layout (layout.py's Layout): the columns, the links between neighbouring columns
    (waypoints included) and each node's row, which it may move down."""

    columns: list[list[str]]
    children: dict[str, list[str]]
    row: dict[str, int]


def gap_links(lay: Placed, c: int) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    """Sources in column c with links into column c+1, and each side's links."""
    targets = set(lay.columns[c + 1])
    kids = {a: [b for b in lay.children.get(a, ()) if b in targets] for a in lay.columns[c]}
    sources = [a for a in lay.columns[c] if kids[a]]
    ups: dict[str, list[str]] = {b: [] for b in lay.columns[c + 1]}
    for a in sources:
        for b in kids[a]:
            ups[b].append(a)
    return sources, kids, ups


def is_straight(lay: Placed, b: str, ups: Mapping[str, list[str]]) -> bool:
    """A target whose one parent is on its own row needs no track: a straight line."""
    return len(ups[b]) == 1 and lay.row[ups[b][0]] == lay.row[b]


def _gap_cost(lay: Placed, order: list[str], sources: list[str], kids: Mapping[str, list[str]],
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


def _best_tracks(lay: Placed, targets: list[str], sources: list[str], kids: Mapping[str, list[str]],
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


def route_gap(lay: Placed, c: int, row_gap: int) -> list[str]:
    """Order the tracks of the gap right of column c; move targets down a row while two lines would share one
    (keeping `row_gap` rows between two nodes of a column)."""
    column = lay.columns[c + 1]
    order: list[str] = []
    for _ in range(len(column) + 4):
        sources, kids, ups = gap_links(lay, c)
        order, (overlaps, _, rows) = _best_tracks(lay, column, sources, kids, ups)
        if not overlaps:
            break
        for i, node in enumerate(column):  # each target on a shared row moves down one; those below make room
            if lay.row[node] in rows:
                lay.row[node] += 1
            if i:
                lay.row[node] = max(lay.row[node], lay.row[column[i - 1]] + row_gap)
    return order
