"""Column-level lineage: where each output column of each pipeline comes from, across the DAG into landing zones.

A SQL pipeline's template is rendered with a placeholder table name for each ref(), landing_zone() and {{ this }}
(the first-run rendering: `is_incremental()` false), parsed by sqlglot (Spark dialect), qualified against the
columns of its sources, and traced by sqlglot's lineage: each output column gets the source columns its value is
computed from (the columns of its projection, through CTEs, subqueries and unions; a column used only in a
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
(`zone_columns`). Nothing is guessed: an unknown source makes the columns that need it unresolved, with the reason.

It is computed on demand (`ratui lineage`, the console's column path), never on the compile path, and lazily: a
pipeline's lineage is computed when asked for, with its ancestors', once per ProjectLineage (one per compile).
Column names are as Spark resolves them: case-insensitive, shown in lower case.
"""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.project.templating import TemplateContext, parse_ref, render
from ratui.engine.vocabulary import LAYERS

if TYPE_CHECKING:
    from ratui.engine.project.compiler import CompiledProject
    from ratui.engine.project.discovery import Pipeline

KINDS = ("copy", "derived", "constant", "unresolved", "table-level", "landing")
ZONE = "landing"  # a landing zone's node is `namespace.landing.zone` (landing is no layer: no table key clashes)
ROWS, FILE = "rows", "file"  # what a source without a column gives: its rows counted, its landing file's name
READS = "reads"  # downstream: a Python pipeline that reads the whole table
PLACEHOLDER = "__ratui_src_"
THIS = "__ratui_this"
ZONE_FILES_READ = 50  # a zone's columns are read from at most this many of its files (their first bytes)
JSON_PREFIX = 1 << 20  # bytes of a JSON lines file whose lines name the zone's columns
TREE_LIMIT = 400  # nodes of one printed path (a wide fan-out is cut, and says so)

# (columns, or None with the reason they are unknown)
Columns = tuple[list[str] | None, str]


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


# ---------------------------------------------------------------------------------------------- the project


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


# ---------------------------------------------------------------------------------------------- one query


def render_for_lineage(pipeline: "Pipeline") -> tuple[str, dict[str, str]]:
    """The first-run rendering of a SQL pipeline with a placeholder table for each source: (sql, placeholder ->
    table key or zone node)."""
    names: dict[str, str] = {}

    def placeholder(target: str) -> str:
        name = f"{PLACEHOLDER}{len(names)}"
        names[name] = target
        return f"`{name}`"

    names[THIS] = pipeline.key
    context = TemplateContext(
        ref=lambda name: placeholder(parse_ref(name, pipeline.namespace, str(pipeline.file))),
        landing_zone=lambda zone: placeholder(zone_node(pipeline.namespace, zone)),
        this=f"`{THIS}`", run_started_at="2000-01-01 00:00:00.000000", watermark_value=None,
        is_incremental=False, is_scd2=False)
    assert pipeline.file is not None
    return render(pipeline.text, pipeline.file, context), names


def analyse_sql(pipeline: "Pipeline", source_columns: Callable[[str], Columns],
                reads: tuple[str, ...]) -> TableLineage:
    """A SQL pipeline's output columns with their sources, given the columns of what it reads."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError
    from sqlglot.lineage import lineage as sqlglot_lineage
    from sqlglot.optimizer import build_scope, qualify

    key = pipeline.key

    def broken(why: str) -> TableLineage:
        return TableLineage(key, "sql", (), reads, why)

    try:
        sql, names = render_for_lineage(pipeline)
    except RatuiError as exc:
        return broken(f"its template does not render without a run: {exc.code} {exc.message}")
    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
    except SqlglotError as exc:
        return broken(f"sqlglot cannot parse its SQL: {_first_line(exc)}")
    if not trees or not isinstance(trees[-1], exp.Query):
        return broken("its SQL is not a query (SELECT)")
    tree = trees[-1]
    schema: dict[str, Any] = {}  # placeholder -> {column: type} (sqlglot's mapping schema; the types do not matter)
    unknown: dict[str, str] = {}  # placeholder -> why its columns are not known
    for placeholder, target in names.items():
        if placeholder == THIS and not any(t.name == THIS for t in tree.find_all(exp.Table)):
            continue
        known, why = source_columns(target)
        if known is None:
            unknown[placeholder] = why
        else:
            schema[placeholder] = {c: "unknown" for c in known}
    try:
        qualified = qualify.qualify(tree, dialect="spark", schema=schema, validate_qualify_columns=False,
                                    identify=False)
        scope = build_scope(qualified)
        if scope is None:
            return broken("its SQL is not a query (SELECT)")
        traced = sqlglot_lineage(None, qualified, schema, dialect="spark", scope=scope)
    except (SqlglotError, RecursionError, ValueError, KeyError) as exc:
        why = _first_line(exc)
        if unknown:
            why += "; " + "; ".join(sorted(set(unknown.values())))
        return broken(f"sqlglot cannot trace its columns: {why}")
    ctes = {cte.alias_or_name: cte.this for cte in qualified.find_all(exp.CTE)}
    columns: list[ColumnOrigin] = []
    for name, node in traced.items():
        if name == "*":
            star = [w for p, w in unknown.items()] or ["a source's columns are not known"]
            return TableLineage(key, "sql", tuple(columns), reads,
                                f"SELECT * over a source whose columns are not known: {'; '.join(sorted(set(star)))}")
        columns.append(_origin(key, name, node, names, schema, unknown, ctes))
    return TableLineage(key, "sql", tuple(columns), reads)


def _origin(key: str, name: str, root: Any, names: dict[str, str], schema: dict[str, Any],
            unknown: dict[str, str], ctes: dict[str, Any]) -> ColumnOrigin:
    from sqlglot import exp

    sources: list[Source] = []
    problems: list[str] = []
    copy = True
    for node in root.walk():
        if node.downstream:
            if not _plain(node.expression):
                copy = False
            continue
        if isinstance(node.expression, exp.Table):
            table = node.expression.name
            column = _column_name(node.name)
            target = names.get(table)
            if target is None:
                problems.append(f"'{table}' is not a source ratui resolves")
                continue
            if table in schema and column not in schema[table]:
                problems.append(f"{target} has no column '{column}'")
                continue
            if table in unknown and column == "*":
                problems.append(unknown[table])
                continue
            sources.append(Source(target, column))
            continue
        copy = False  # a projection with no column under it: rows counted, a file name, a constant
        expression = node.expression
        if isinstance(expression, exp.Placeholder):  # a column sqlglot found in no source it knows
            why = f"'{_column_name(node.name)}' is in none of the sources whose columns ratui knows"
            problems.append("; ".join([why, *sorted(set(unknown.values()))]))
            continue
        if any(isinstance(c, exp.Column) for c in expression.find_all(exp.Column)):
            problems.append(f"'{expression.sql('spark')}' names a column sqlglot cannot trace")
        for count in expression.find_all(exp.Count):
            if isinstance(count.this, exp.Star) or count.this is None:
                sources.extend(Source(t, None, ROWS) for t in _tables(node.source, names, ctes))
        if any(_is_file_name(f) for f in expression.find_all(exp.Func)):
            sources.extend(Source(t, None, FILE) for t in _tables(node.source, names, ctes) if is_zone_node(t))
    unique = tuple(sorted(dict.fromkeys(sources), key=lambda s: (s.table, s.column or "", s.what)))
    if problems:
        return ColumnOrigin(key, name, "unresolved", unique, "; ".join(dict.fromkeys(problems)))
    if not unique:
        return ColumnOrigin(key, name, "constant")
    columns = [s for s in unique if s.column is not None]
    kind = "copy" if copy and len(columns) == 1 and len(unique) == 1 else "derived"
    return ColumnOrigin(key, name, kind, unique)


def _plain(expression: Any) -> bool:
    """A projection that passes one column's value on as it is: `c`, `t.c`, `c AS d`."""
    from sqlglot import exp

    if isinstance(expression, exp.Alias):
        expression = expression.this
    return isinstance(expression, exp.Column)


def _column_name(name: str) -> str:
    """`alias.column` (the column perhaps quoted) of a lineage node -> column."""
    tail = name.rsplit(".", 1)[-1] if not name.endswith(('"', "`")) else name[:-1].rsplit(name[-1], 1)[-1]
    return tail.strip('"`').lower()


def _is_file_name(func: Any) -> bool:
    from sqlglot import exp

    name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
    return name in ("input_file_name", "input_file_block_start", "input_file_block_length")


def _tables(select: Any, names: dict[str, str], ctes: dict[str, Any], depth: int = 0) -> list[str]:
    """The sources (keys, zone nodes) whose rows a SELECT reads: its tables, through the CTEs it names."""
    from sqlglot import exp

    out: list[str] = []
    if depth > 50:
        return out
    for table in select.find_all(exp.Table):
        if table.name in names:
            out.append(names[table.name])
        elif table.name in ctes:
            out.extend(_tables(ctes[table.name], names, ctes, depth + 1))
    return list(dict.fromkeys(out))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


# ---------------------------------------------------------------------------------------------- zones


def read_zone_columns(settings: Any, namespace: str, zone: str) -> Columns:
    """A landing zone's columns from its files' first bytes (never its rows): the active files, or when none is
    left (a new_files zone whose files were all loaded and archived) the archived ones. A CSV file's header, a
    Parquet footer, the keys of a JSON file's first lines (Spark orders inferred JSON columns by name)."""
    from ratui.engine.landing.formats import zone_format
    from ratui.engine.landing.zone import open_zone

    try:
        opened = open_zone(settings, namespace, zone)
        entries = opened.list()
        if not entries:
            entries = [e for e in opened.processed() if e.name.count("/") == 2]
            entries.sort(key=lambda e: e.name, reverse=True)  # the newest run's archive first
        if not entries:
            return None, f"landing zone '{zone}' has no files to read its columns from"
        entries = entries[:ZONE_FILES_READ]
        fmt = zone_format(zone, [e.name for e in entries], opened.url)
        files = [_zone_file(opened, e) for e in entries]
        names: list[str] = []
        for zf in files:
            if zf.size == 0:
                continue
            for name in _file_columns(fmt, zf):
                if name.lower() not in names:
                    names.append(name.lower())
        if fmt == "json":
            names.sort()
        if not names:
            return None, f"the files of landing zone '{zone}' name no columns"
        return names, ""
    except RatuiError as exc:
        return None, f"the columns of landing zone '{zone}' cannot be read: {exc.code} {exc.message}"
    except OSError as exc:
        return None, f"the columns of landing zone '{zone}' cannot be read: {exc}"


def _zone_file(zone: Any, entry: Any) -> Any:
    from ratui.engine.landing.files import ZoneFile

    if getattr(entry, "path", None) is not None:
        return ZoneFile(Path(entry.path), entry.name)
    from ratui.engine.landing.s3 import S3Object  # an object: its first bytes and footer by ranged reads

    return ZoneFile(None, entry.name, source=S3Object(zone, entry))


def _file_columns(fmt: str, zf: Any) -> Iterable[str]:
    if fmt == "csv":
        from ratui.engine.landing.formats.csv import csv_layout

        return csv_layout(zf)[1]
    if fmt == "parquet":
        from ratui.engine.landing.formats.parquet import parquet_schema

        return list(parquet_schema(zf).names)
    from ratui.engine.landing.formats.json import is_json_document

    data = zf.head(JSON_PREFIX)
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    if is_json_document(zf):
        if zf.size > 8 * JSON_PREFIX:
            return []
        text = zf.read_bytes().decode("utf-8", errors="replace").lstrip("\ufeff")
        try:
            document = json.loads(text)
        except ValueError:
            return []
        rows = document if isinstance(document, list) else [document]
    else:
        lines = text.splitlines()
        if len(data) >= JSON_PREFIX and lines:
            lines = lines[:-1]  # the last line read may be cut short
        rows = []
        for line in io.StringIO("\n".join(lines)):
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    names: list[str] = []
    for row in rows:
        if isinstance(row, dict):
            names.extend(k for k in row if k not in names)
    return names
