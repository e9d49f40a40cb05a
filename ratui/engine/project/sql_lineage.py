"""Column lineage of one SQL pipeline: its template rendered with a placeholder table per source, parsed by
sqlglot (Spark dialect), qualified against its sources' columns and traced by sqlglot's lineage, each output column
given its sources and kind (column_lineage.py's docstring says what the kinds mean)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ratui.engine.errors import RatuiError
from ratui.engine.landing.zone_columns import Columns
from ratui.engine.project.lineage_model import FILE, ROWS, ColumnOrigin, Source, TableLineage, is_zone_node, zone_node
from ratui.engine.project.templating import TemplateContext, parse_ref, render

if TYPE_CHECKING:
    from ratui.engine.project.discovery import Pipeline

PLACEHOLDER = "__ratui_src_"
THIS = "__ratui_this"


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
        is_incremental=False, is_scd2=False, start="2000-01-01T00:00:00", end="2000-01-02T00:00:00")
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
