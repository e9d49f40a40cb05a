"""Column lineage's record (column_lineage.py computes it, sql_lineage.py traces one query): where a column comes
from (`ColumnOrigin`, its `Source`s), a table's or zone's columns (`TableLineage`), and a column's path both ways
(`ColumnPath` of `PathNode`s). The kinds of origin are column_lineage.py's docstring's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("copy", "derived", "constant", "unresolved", "table-level", "landing")
ZONE = "landing"  # a landing zone's node is `namespace.landing.zone` (landing is no layer: no table key clashes)
ROWS, FILE = "rows", "file"  # what a source without a column gives: its rows counted, its landing file's name
READS = "reads"  # downstream: a Python pipeline that reads the whole table


def zone_node(namespace: str, zone: str) -> str:
    return f"{namespace}.{ZONE}.{zone}"


def is_zone_node(name: str) -> bool:
    parts = name.split(".")
    return len(parts) == 3 and parts[1] == ZONE


@dataclass(frozen=True)
class Source:
    """What a column is computed from: a column of a table or zone, or (column None) the rows of a table (`what`
    ROWS: COUNT(*)), the name of a zone's file (FILE), a whole table (a Python pipeline reads tables)."""

    table: str
    column: str | None
    what: str = "column"

    def label(self, namespace: str | None = None) -> str:
        name = short(self.table, namespace)
        if self.column is not None:
            return f"{name}.{self.column}"
        if self.what == READS:
            return name
        return {ROWS: f"{name} (its rows)", FILE: f"{name} (its file names)"}.get(self.what, f"{name} (the whole "
                                                                                        "table)")

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "column": self.column, "what": self.what, "zone": is_zone_node(self.table)}


@dataclass(frozen=True)
class ColumnOrigin:
    table: str
    column: str
    kind: str
    sources: tuple[Source, ...] = ()
    note: str = ""  # why it is unresolved, or table-level

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "column": self.column, "kind": self.kind,
                "sources": [s.to_dict() for s in self.sources], "note": self.note or None}


@dataclass(frozen=True)
class TableLineage:
    """One node's columns with their origins. kind: "sql", "python", "zone", or "broken" (does not compile)."""

    key: str
    kind: str
    columns: tuple[ColumnOrigin, ...]
    reads: tuple[str, ...] = ()  # table-level: the tables and zones it reads
    problem: str = ""  # why its columns are not (all) known, or why its lineage is table-level only

    def column(self, name: str) -> ColumnOrigin | None:
        wanted = name.lower()
        return next((c for c in self.columns if c.column == wanted), None)

    @property
    def column_level(self) -> bool:
        return self.kind in ("sql", "zone")

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.key, "kind": self.kind, "column_level": self.column_level, "reads": list(self.reads),
                "problem": self.problem or None, "columns": [c.to_dict() for c in self.columns]}


@dataclass
class PathNode:
    """One column in a path: its origin, and the columns one step further (upstream: its sources; downstream: the
    columns computed from it). `seen`: shown already elsewhere in the same path (not expanded again)."""

    table: str
    column: str | None
    kind: str
    what: str = "column"
    note: str = ""
    via: str = ""  # downstream: the kind of the use (copy, derived, table-level)
    seen: bool = False
    children: list["PathNode"] = field(default_factory=list)

    def label(self, namespace: str | None = None) -> str:
        return Source(self.table, self.column, self.what).label(namespace)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"table": self.table, "column": self.column, "kind": self.kind, "what": self.what,
                               "zone": is_zone_node(self.table)}
        if self.note:
            out["note"] = self.note
        if self.seen:
            out["seen"] = True
        out["next"] = [c.to_dict() for c in self.children]
        return out


@dataclass
class ColumnPath:
    """A column's lineage both ways: what it comes from (to the landing zones) and what it feeds."""

    origin: ColumnOrigin
    upstream: list[PathNode]
    downstream: list[PathNode]
    cut: bool = False  # a path longer than TREE_LIMIT nodes was cut

    @staticmethod
    def lines(nodes: list[PathNode]) -> list[tuple[str, PathNode]]:
        """The nodes as a tree drawn in text: (the branch drawing before each node, the node), depth first."""
        out: list[tuple[str, PathNode]] = []

        def walk(items: list[PathNode], indent: str) -> None:
            for i, node in enumerate(items):
                last = i == len(items) - 1
                out.append((indent + ("└─ " if last else "├─ "), node))
                walk(node.children, indent + ("   " if last else "│  "))

        walk(nodes, "")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**self.origin.to_dict(), "upstream": [n.to_dict() for n in self.upstream],
                "downstream": [n.to_dict() for n in self.downstream], "cut": self.cut}


def short(key: str, namespace: str | None) -> str:
    """A key without the default namespace; a zone as `landing.zone` likewise."""
    if namespace and key.startswith(namespace + "."):
        return key[len(namespace) + 1:]
    return key
