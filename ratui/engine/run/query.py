"""Ad-hoc SQL over the tables at a ref: `silver.clean_orders` or `ecommerce.silver.clean_orders`.

Spark's temp views cannot carry dotted names, so each table of the ref becomes a view and the query's
table names are rewritten to those views (outside string literals and quoted identifiers).
"""

from __future__ import annotations

import re
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.state.project_state import ProjectState
from ratui.engine.vocabulary import MAIN
from ratui.engine.project.names import sql_ident
from ratui.engine.iceberg.read import read_table

# a string literal, a back-quoted identifier, or a dotted name of two or three parts
_TOKEN = re.compile(r"('(?:[^'\\]|\\.|'')*')|(`[^`]*`)|\b([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*){1,2})\b")


def rewrite(sql: str, tables: dict[str, str], default_namespace: str) -> tuple[str, set[str]]:
    """Replace table names with view names; returns the SQL and the table keys it uses."""
    used: set[str] = set()

    def swap(match: re.Match) -> str:
        name = match.group(3)
        if not name:
            return match.group(0)
        parts = name.split(".")
        key = name if len(parts) == 3 else f"{default_namespace}.{name}"
        if key in tables:
            used.add(key)
            return tables[key]
        return name

    return _TOKEN.sub(swap, sql), used


def run_query(state: ProjectState, session, sql: str, *, ref: str = MAIN,
              limit: int = 1000) -> tuple[list[str], list[list[Any]], bool]:
    """Run `sql` on `session` (a Spark session of its own) over the tables of `ref`: (columns, rows, truncated)."""
    catalog = state.catalog
    catalog.get_ref(ref)  # RAT-CAT-002 for an unknown ref
    keys = catalog.table_pointers(ref)
    views = {key: sql_ident(*key.split(".")) for key in keys}
    text, used = rewrite(sql, views, state.settings.namespace)
    for key in used:
        read_table(session, catalog.load_table(ref, key)).createOrReplaceTempView(views[key].strip("`"))
    try:
        df = session.sql(text)
        rows = df.limit(limit + 1).collect()
    except Exception as exc:
        message = str(getattr(exc, "desc", None) or exc).strip().splitlines()[0][:500]
        raise RatuiError("RAT-SQL-001", f"query failed: {message}",
                         hint=f"Tables at {ref}: {', '.join(sorted(k.split('.', 1)[1] for k in keys)) or 'none yet'}."
                         ) from None
    return list(df.columns), [list(r) for r in rows[:limit]], len(rows) > limit
