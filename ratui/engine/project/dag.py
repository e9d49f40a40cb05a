"""The dependency graph from ref() calls: validation, deterministic order and node selection.

Selectors (several form a union):
    name | layer.name | namespace.layer.name     one pipeline
    +x  /  x+  /  +x+                            x with its ancestors / descendants / both
    layer:silver   tag:daily   namespace:ecommerce
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.project.names import LAYERS

LAYER_RANK = {layer: i for i, layer in enumerate(LAYERS)}


def _sort_key(key: str) -> tuple[int, str]:
    parts = key.split(".")  # a badly named pipeline may hold extra dots; it still sorts somewhere stable
    return (LAYER_RANK.get(parts[1] if len(parts) > 1 else "", len(LAYERS)), key)


@dataclass
class Graph:
    nodes: list[str]  # table keys
    upstream: dict[str, list[str]] = field(default_factory=dict)  # key -> keys it refs (known ones)
    downstream: dict[str, list[str]] = field(default_factory=dict)

    def ancestors(self, key: str) -> set[str]:
        return self._walk(key, self.upstream)

    def descendants(self, key: str) -> set[str]:
        return self._walk(key, self.downstream)

    @staticmethod
    def _walk(start: str, edges: dict[str, list[str]]) -> set[str]:
        seen: set[str] = set()
        stack = list(edges.get(start, ()))
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(edges.get(node, ()))
        return seen

    def order(self, keys: set[str] | None = None) -> list[str]:
        """Topological order, ties broken by layer then name, so the same project always runs the same way.

        Nodes in a cycle are left out (they carry a cycle error).
        """
        wanted = set(self.nodes) if keys is None else set(keys)
        indegree = {k: sum(1 for u in self.upstream.get(k, ()) if u in wanted) for k in wanted}
        ready = [(_sort_key(k), k) for k, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        out: list[str] = []
        while ready:
            _, key = heapq.heappop(ready)
            out.append(key)
            for child in self.downstream.get(key, ()):
                if child in indegree:
                    indegree[child] -= 1
                    if indegree[child] == 0:
                        heapq.heappush(ready, (_sort_key(child), child))
        return out


def find_cycles(nodes: list[str], upstream: dict[str, list[str]]) -> list[list[str]]:
    """Every elementary cycle found by a DFS, each as a path whose first node is repeated at the end."""
    color: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        color[node] = 1
        stack.append(node)
        for parent in sorted(upstream.get(node, ())):
            if color.get(parent, 0) == 0:
                visit(parent)
            elif color[parent] == 1:
                # dependency direction: a refs b means b -> a in data flow; print it as "a -> b" = "a reads b"
                cycle = stack[stack.index(parent):] + [parent]
                cycles.append(cycle)
        stack.pop()
        color[node] = 2

    for node in sorted(nodes):
        if color.get(node, 0) == 0:
            visit(node)
    return cycles


def build_graph(pipelines: list) -> Graph:
    """Build the graph and attach graph errors (unknown refs, cycles) to the pipelines they concern."""
    by_key = {p.key: p for p in pipelines}
    graph = Graph(nodes=sorted(by_key, key=_sort_key))
    for key in graph.nodes:
        graph.upstream[key] = []
        graph.downstream.setdefault(key, [])
    for p in pipelines:
        for ref in p.refs:
            if ref not in by_key:
                p.errors.append(RatuiError(
                    "RAT-DAG-002", f"{p.key} refs '{ref}', which no pipeline produces", file=str(p.file),
                    line=getattr(p, "ref_lines", {}).get(ref), hint=did_you_mean(ref, by_key) if by_key else None))
                continue
            if ref == p.key:
                p.errors.append(RatuiError("RAT-DAG-001", f"cycle: {p.key} -> {p.key}", file=str(p.file),
                                           hint="A pipeline reads its own table with {{ this }}, not ref()."))
                continue
            graph.upstream[p.key].append(ref)
            graph.downstream[ref].append(p.key)
    for cycle in find_cycles(graph.nodes, graph.upstream):
        path = " -> ".join(cycle)
        for key in set(cycle):
            pipe = by_key[key]
            if not any(e.code == "RAT-DAG-001" for e in pipe.errors):
                pipe.errors.append(RatuiError("RAT-DAG-001", f"cycle: {path}", file=str(pipe.file)))
    return graph


def _match_one(token: str, pipelines: dict, default_namespace: str) -> set[str]:
    parts = token.split(".")
    if len(parts) == 3:
        return {token} if token in pipelines else set()
    if len(parts) == 2:
        key = f"{default_namespace}.{token}"
        if key in pipelines:
            return {key}
        return {k for k in pipelines if k.split(".", 1)[1] == token}
    if len(parts) == 1:
        return {k for k in pipelines if k.rsplit(".", 1)[1] == token}
    return set()


def select(selectors: list[str], pipelines: dict, graph: Graph, default_namespace: str) -> list[str]:
    """Resolve selectors to table keys, in run order. No selector means every pipeline."""
    if not selectors:
        return graph.order()
    chosen: set[str] = set()
    for raw in selectors:
        selector = raw.strip()
        if not selector:
            raise RatuiError("RAT-DAG-004", "empty selector")
        if ":" in selector:
            kind, _, value = selector.partition(":")
            if kind == "layer":
                if value not in LAYERS:
                    raise RatuiError("RAT-DAG-004", f"unknown layer in selector '{selector}'",
                                     hint=did_you_mean(value, LAYERS))
                found = {k for k in pipelines if k.split(".")[1] == value}
            elif kind == "tag":
                found = {k for k, p in pipelines.items() if p.config and value in p.config.tags}
            elif kind == "namespace":
                found = {k for k in pipelines if k.split(".")[0] == value}
            else:
                raise RatuiError("RAT-DAG-004", f"unknown selector kind '{kind}:'",
                                 hint=did_you_mean(kind, ["layer", "tag", "namespace"]))
            if not found:
                raise RatuiError("RAT-DAG-003", f"selector '{selector}' matches no pipeline")
            chosen |= found
            continue
        up = selector.startswith("+")
        down = selector.endswith("+")
        token = selector.strip("+")
        if not token or "+" in token:
            raise RatuiError("RAT-DAG-004", f"invalid selector '{selector}'")
        found = _match_one(token, pipelines, default_namespace)
        if not found:
            names = sorted({k.rsplit(".", 1)[1] for k in pipelines} | {k.split(".", 1)[1] for k in pipelines})
            raise RatuiError("RAT-DAG-003", f"selector '{selector}' matches no pipeline",
                             hint=did_you_mean(token, names))
        if len(found) > 1:
            raise RatuiError("RAT-DAG-005", f"'{token}' names several pipelines: {', '.join(sorted(found))}")
        key = found.pop()
        chosen.add(key)
        if up:
            chosen |= graph.ancestors(key)
        if down:
            chosen |= graph.descendants(key)
    return graph.order(chosen)
