"""Column-level lineage: where each output column of each pipeline comes from, across the DAG into landing zones.

A SQL pipeline's template (sql_lineage.py) is rendered with a placeholder table name for each ref(), landing_zone()
and {{ this }} (the first-run rendering: `is_incremental()` false), parsed by sqlglot (Spark dialect), qualified
against the columns of its sources, and traced by sqlglot's lineage: each output column gets the source columns its
value is computed from (the columns of its projection, through CTEs, subqueries and unions; a column used only in a
filter, a join condition or a GROUP BY feeds no value and is not a source) and a kind:

    copy        the value of one source column, unchanged (perhaps renamed)
    derived     computed from its sources (a cast, an expression, an aggregate); COUNT(*) counts the rows of the
                tables it reads, input_file_name() is each row's landing file: sources without a column
    constant    computed from no column (a literal, the run's time)
    unresolved  ratui cannot say, and says why (a source whose columns it does not know, SQL sqlglot cannot read)
    table-level a Python pipeline's column: a Python pipeline's lineage is its tables only
    landing     a landing zone's column, as its files name it (where every path upstream ends)

The columns of a source are, for a SQL pipeline, its own lineage's output columns (computed first, in DAG order);
for a Python pipeline, its Iceberg table's on main (`table_columns`, given by the engine, which owns the catalog);
for a landing zone, what its files say: a CSV header, the keys of the first JSON lines, a Parquet footer
(`zone_columns`: landing/zone_columns.py, each format's own FORMAT.columns). Nothing is guessed: an unknown source
makes the columns that need it unresolved, with the reason.

It is computed on demand (`ratui lineage`, the console's column path), never on the compile path, and lazily: a
pipeline's lineage is computed when asked for, with its ancestors', once per ProjectLineage (one per compile).
Column names are as Spark resolves them: case-insensitive, shown in lower case. The record (origins, paths) is
lineage_model.py's.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.landing.zone_columns import Columns, read_zone_columns
from ratui.engine.project.lineage_model import (READS, ZONE, ColumnOrigin, ColumnPath, PathNode, Source, TableLineage,
                                                is_zone_node, short, zone_node)
from ratui.engine.project.sql_lineage import analyse_sql
from ratui.engine.vocabulary import LAYERS

if TYPE_CHECKING:
    from ratui.engine.project.compiler import CompiledProject
    from ratui.engine.project.discovery import Pipeline

TREE_LIMIT = 400  # nodes of one printed path (a wide fan-out is cut, and says so)


class ProjectLineage:
    """The column lineage of one compiled project, computed lazily (a table's when asked for, with its ancestors'),
    each table once. Thread-safe."""

    def __init__(self, compiled: "CompiledProject", *,
                 table_columns: Callable[[str], list[str] | None] = lambda key: None,
                 zone_columns: Callable[[str, str], Columns] | None = None):
        self.compiled = compiled
        self._table_columns = table_columns
        self._zone_columns = zone_columns or (lambda ns, zone: read_zone_columns(compiled.settings, ns, zone))
        self._tables: dict[str, TableLineage] = {}
        self._lock = threading.RLock()
        self._readers: dict[str, list[str]] | None = None  # zone node -> pipelines reading it

    @property
    def namespace(self) -> str:
        return self.compiled.settings.namespace

    # ------------------------------------------------------------------------------------- names

    def resolve_table(self, name: str) -> str:
        """A table as a user names it (namespace.layer.name, layer.name, or namespace.landing.zone, landing.zone)
        -> its key; RAT-LIN-001 (malformed) or RAT-LIN-002 (unknown) otherwise."""
        text = name.strip()
        parts = text.split(".")
        if not text or any(not p for p in parts) or len(parts) not in (2, 3):
            raise RatuiError("RAT-LIN-001", f"'{name}' is not a table name: write layer.name or "
                             "namespace.layer.name (a zone: landing.zone)")
        if len(parts) == 2:
            parts = [self.namespace, *parts]
        key = ".".join(parts)
        if parts[1] == ZONE:
            if key in self._zone_readers():
                return key
            known = sorted(self._zone_readers())
        elif key in self.compiled.pipelines:
            return key
        else:
            known = list(self.compiled.pipelines)
        if parts[1] not in LAYERS and parts[1] != ZONE:
            raise RatuiError("RAT-LIN-002", f"no table '{name}': '{parts[1]}' is not a layer (bronze, silver, "
                             "gold) or landing", hint=did_you_mean(parts[1], [*LAYERS, ZONE]))
        names = [short(k, self.namespace) for k in known]
        raise RatuiError("RAT-LIN-002", f"no table '{name}' in this project",
                         hint=did_you_mean(short(key, self.namespace), names) if names else None)

    def split_column(self, name: str) -> tuple[str, str | None]:
        """TABLE.COLUMN or TABLE -> (table key, column or None). A name of two parts is a table (layer.name); of
        four, a column of namespace.layer.name; of three, a column of layer.name unless it names a table."""
        text = name.strip()
        parts = text.split(".")
        if not text or any(not p.strip() for p in parts) or not 2 <= len(parts) <= 4:
            raise RatuiError("RAT-LIN-001", f"'{name}' is not TABLE or TABLE.COLUMN (TABLE: layer.name or "
                             "namespace.layer.name)")
        if len(parts) == 2:
            return self.resolve_table(text), None
        if len(parts) == 4:
            return self.resolve_table(".".join(parts[:3])), parts[3]
        if parts[0] in LAYERS or parts[0] == ZONE:
            return self.resolve_table(".".join(parts[:2])), parts[2]
        return self.resolve_table(text), None

    # ------------------------------------------------------------------------------------ computing

    def table(self, key: str) -> TableLineage:
        """The lineage of a table key or a zone node (computing its ancestors' first)."""
        with self._lock:
            found = self._tables.get(key)
            if found is not None:
                return found
            # ancestors first, in DAG order, iteratively (a deep DAG must not recurse Python's stack away)
            graph = self.compiled.graph
            wanted = {key} | graph.ancestors(key) if key in self.compiled.pipelines else {key}
            for node in graph.order(wanted & set(self.compiled.pipelines)) if key in self.compiled.pipelines else []:
                if node not in self._tables:
                    self._tables[node] = self._compute(self.compiled.pipelines[node])
            if key not in self._tables:  # a zone, or a pipeline in a cycle (left out of the order)
                self._tables[key] = self._zone(key) if is_zone_node(key) else self._compute(
                    self.compiled.pipelines[key])
            return self._tables[key]

    def _zone(self, node: str) -> TableLineage:
        namespace, _, zone = node.split(".", 2)
        columns, why = self._zone_columns(namespace, zone)
        return TableLineage(node, "zone", tuple(ColumnOrigin(node, c, "landing") for c in columns or ()),
                            problem="" if columns is not None else why)

    def _compute(self, pipeline: "Pipeline") -> TableLineage:
        reads = tuple(pipeline.refs) + tuple(zone_node(pipeline.namespace, z) for z in pipeline.zones)
        if pipeline.errors and pipeline.kind != "python":
            error = pipeline.errors[0]
            return self._known_columns(pipeline.key, "broken", reads, f"it does not compile: {error.code} "
                                       f"{error.message}", "unresolved")
        if pipeline.kind == "python":
            return self._known_columns(pipeline.key, "python", reads, "a Python pipeline: its lineage is "
                                       "table-level only (the tables it reads, not which column feeds which)",
                                       "table-level")
        return analyse_sql(pipeline, self._source_columns, reads)

    def _known_columns(self, key: str, kind: str, reads: tuple[str, ...], why: str,
                       column_kind: str) -> TableLineage:
        """A table whose columns come from its Iceberg table (when it exists), each with no column-level origin."""
        names = self._table_columns(key) or []
        sources = tuple(Source(r, None, "table") for r in reads) if column_kind == "table-level" else ()
        columns = tuple(ColumnOrigin(key, n.lower(), column_kind, sources, why) for n in names)
        problem = why if names else f"{why}; its columns are known once its table exists (after its first run)"
        return TableLineage(key, kind, columns, reads, problem)

    def _source_columns(self, key: str) -> Columns:
        """The columns a query reading `key` (a table key or a zone node) sees, or None and why not."""
        if is_zone_node(key):
            lineage = self.table(key)
            return ([c.column for c in lineage.columns] if lineage.columns else None), lineage.problem
        if key not in self.compiled.pipelines:
            return None, f"no pipeline produces {key}"
        lineage = self.table(key)
        if lineage.columns and lineage.kind in ("sql", "python", "broken") and not (
                lineage.kind == "sql" and lineage.problem):
            return [c.column for c in lineage.columns], ""
        names = self._table_columns(key)  # what its table holds on main, when its own lineage cannot say
        if names:
            return [n.lower() for n in names], ""
        return None, f"the columns of {short(key, self.namespace)} are not known ({lineage.problem or 'no table'})"

    def _zone_readers(self) -> dict[str, list[str]]:
        if self._readers is None:
            readers: dict[str, list[str]] = {}
            for key, pipeline in self.compiled.pipelines.items():
                for zone in pipeline.zones:
                    readers.setdefault(zone_node(pipeline.namespace, zone), []).append(key)
            self._readers = readers
        return self._readers

    # ------------------------------------------------------------------------------------- paths

    def readers(self, key: str) -> list[str]:
        """The pipelines that read a table or zone, in DAG order."""
        if is_zone_node(key):
            return self._zone_readers().get(key, [])
        return self.compiled.graph.order(set(self.compiled.graph.downstream.get(key, ())))

    def uses(self, key: str, column: str) -> list[tuple[ColumnOrigin, str]]:
        """The columns computed from `key.column` one step downstream, with how (the use's kind: copy, derived,
        table-level for a Python pipeline that reads the whole table)."""
        out: list[tuple[ColumnOrigin, str]] = []
        for reader in self.readers(key):
            lineage = self.table(reader)
            if lineage.kind == "python":
                out.append((ColumnOrigin(reader, "*", "table-level", (Source(key, None, "table"),),
                                         "a Python pipeline reads the whole table"), "table-level"))
                continue
            for origin in lineage.columns:
                if any(s.table == key and s.column == column for s in origin.sources):
                    out.append((origin, origin.kind))
        return out

    def column_path(self, key: str, column: str) -> ColumnPath:
        """A column's upstream path (to the landing zones) and downstream uses (to the last pipeline)."""
        lineage = self.table(key)
        origin = lineage.column(column)
        if origin is None:
            self._missing_column(lineage, column)
        assert origin is not None
        budget = [TREE_LIMIT]
        seen: set[tuple[str, str | None]] = {(key, origin.column)}
        upstream = [self._up(s, seen, budget) for s in origin.sources]
        seen = {(key, origin.column)}
        downstream = [self._down(o, via, seen, budget) for o, via in self.uses(key, origin.column)]
        return ColumnPath(origin, upstream, downstream, cut=budget[0] < 0)

    def _missing_column(self, lineage: TableLineage, column: str) -> None:
        name = short(lineage.key, self.namespace)
        if lineage.kind == "python":
            raise RatuiError("RAT-LIN-004", f"{name} is a Python pipeline: its lineage is table-level only, "
                             f"not column '{column}'",
                             hint=f"`ratui lineage {name}` shows the tables it reads: "
                                  + (", ".join(short(r, self.namespace) for r in lineage.reads) or "none") + ".")
        names = [c.column for c in lineage.columns]
        if not names:
            raise RatuiError("RAT-LIN-003", f"the columns of {name} are not known: {lineage.problem}",
                             hint=f"`ratui lineage {name}` says why.")
        raise RatuiError("RAT-LIN-003", f"{name} has no column '{column}'",
                         hint=did_you_mean(column.lower(), names) + f" ({len(names)} column(s): `ratui lineage "
                                                                     f"{name}` lists them)")

    def _spent(self, budget: list[int]) -> bool:
        budget[0] -= 1
        return budget[0] < 0

    def _up(self, source: Source, seen: set, budget: list[int]) -> PathNode:
        if source.column is None:
            return PathNode(source.table, None, "table-level" if source.what == "table" else "derived", source.what)
        lineage = self.table(source.table)
        origin = lineage.column(source.column)
        if is_zone_node(source.table):
            return PathNode(source.table, source.column, "landing",
                            note="" if origin is not None else (lineage.problem or "not among its columns"))
        if origin is None:
            return PathNode(source.table, source.column, "unresolved",
                            note=lineage.problem or f"{short(source.table, self.namespace)} has no such column")
        node = PathNode(source.table, source.column, origin.kind, note=origin.note)
        if (source.table, source.column) in seen:
            node.seen = True
            return node
        seen.add((source.table, source.column))
        for parent in origin.sources:
            if self._spent(budget):
                break
            node.children.append(self._up(parent, seen, budget))
        return node

    def _down(self, origin: ColumnOrigin, via: str, seen: set, budget: list[int]) -> PathNode:
        node = PathNode(origin.table, None if origin.column == "*" else origin.column, origin.kind,
                        READS if origin.column == "*" else "column", note=origin.note if via == "table-level"
                        else "", via=via)
        if origin.column == "*":
            return node
        if (origin.table, origin.column) in seen:
            node.seen = True
            return node
        seen.add((origin.table, origin.column))
        for use, how in self.uses(origin.table, origin.column):
            if self._spent(budget):
                break
            node.children.append(self._down(use, how, seen, budget))
        return node
