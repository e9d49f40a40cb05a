"""A focused view, at scale.

A project of thousands of pipelines is never laid out whole: the screen shows one pipeline (the focus) with its
upstream and downstream to a depth, at most FAN neighbours of a pipeline in each direction (the rest grouped in
one "… and N more" node) and at most BUDGET pipelines in all. What this costs follows the focused subgraph (the
pipelines visited), never the project: the walk reads only the edges of the pipelines it shows."""

from __future__ import annotations

from dataclasses import dataclass

from ratui.console.lineage.layout import ROW_GAP
from ratui.engine.project.dag import Graph

MORE = "\x01"  # a group node's key starts with this ("… and N more" parents or children of a pipeline)
FAN = 12  # neighbours of one pipeline shown in each direction, by default (the screen fits it to its height)
BUDGET = 120  # pipelines in a focused view at most (its layout stays well under the screen's time goal)
MAX_DEPTH = 50


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
