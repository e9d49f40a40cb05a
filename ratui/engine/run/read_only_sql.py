"""Whether an ad-hoc query only reads the project's tables: what a read-only console (`ratui tui --read-only`,
`ratui web --read-only`) lets through to Spark.

Parsed with sqlglot (Spark's dialect), never matched as text: one statement; a SELECT (with its CTEs, set
operations and subqueries), VALUES or DESCRIBE; every table it names is a table of the project at the ref
(or a CTE of the query); no function that reaches outside the data (`reflect`, `java_method`, `read_files`),
and no table-valued function but the ones that make rows from values. Anything the parser cannot read is
refused too: a read-only console runs only what it can tell is a read.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlglot
from sqlglot import exp

from ratui.engine.errors import RatuiError

CODE = "RAT-ACC-002"
STATEMENTS = (exp.Select, exp.SetOperation, exp.Values, exp.Describe, exp.Subquery, exp.Paren)
REFUSED_FUNCTIONS = {"reflect", "java_method", "try_reflect", "read_files", "input_file_name",
                     "input_file_block_start", "input_file_block_length"}
ROW_FUNCTIONS = {"range", "explode", "explode_outer", "inline", "inline_outer", "posexplode", "posexplode_outer",
                 "stack", "json_tuple", "values"}


def _function_name(node: Any) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return str(node.sql_name()).lower() if isinstance(node, exp.Func) else ""


def check_read_only(sql: str, tables: set[str], default_namespace: str) -> None:
    """Raise RAT-ACC-002 naming why, unless `sql` only reads `tables` (keys namespace.layer.name)."""
    quiet = logging.getLogger("sqlglot")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "unsupported syntax, falling back to a Command" is our refusal, not a warning
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.ParseError as exc:
        first = str(exc).splitlines()[0][:200]
        raise RatuiError(CODE, f"this console is read-only and cannot tell that the query only reads: {first}",
                         hint="A read-only console runs SELECT queries over the project's tables only.") from None
    finally:
        quiet.setLevel(level)
    if len(statements) != 1:
        raise RatuiError(CODE, f"this console is read-only: one SELECT at a time ({len(statements)} statements)")
    statement = statements[0]
    if not isinstance(statement, STATEMENTS):
        kind = statement.key.upper() if not isinstance(statement, exp.Command) else str(statement.this).upper()
        raise RatuiError(CODE, f"this console is read-only: {kind} is not a read",
                         hint="A read-only console runs SELECT, VALUES and DESCRIBE over the project's tables.")
    for function in statement.find_all(exp.Func):
        name = _function_name(function)
        if name in REFUSED_FUNCTIONS:
            raise RatuiError(CODE, f"this console is read-only: {name}() reaches outside the project's tables",
                             hint="A read-only console reads the project's tables and nothing else.")
    ctes = {str(cte.alias_or_name).lower() for cte in statement.find_all(exp.CTE)}
    for table in statement.find_all(exp.Table):
        if isinstance(table.this, exp.Func):
            name = _function_name(table.this)
            if name not in ROW_FUNCTIONS:
                raise RatuiError(CODE, f"this console is read-only: {name}() is not a table of the project",
                                 hint="A read-only console reads the project's tables and nothing else.")
            continue
        parts = [p for p in (table.catalog, table.db, table.name) if p]
        if len(parts) == 1 and parts[0].lower() in ctes:
            continue
        key = ".".join(parts) if len(parts) == 3 else f"{default_namespace}.{'.'.join(parts)}"
        if key not in tables:
            raise RatuiError(CODE, f"this console is read-only: {'.'.join(parts)} is not a table of the project "
                                   "at this ref",
                             hint="A read-only console reads the project's tables (layer.name or "
                                  "namespace.layer.name) and nothing else: no files, no other catalogs.")
