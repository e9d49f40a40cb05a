"""Projections as Spark SQL text: a handful of calls into the JVM for a whole projection instead of several per column.

Every `col()`, `lit()`, `cast()` and `alias()` of PySpark's Column API is a py4j round trip, and the release of each
Java object it leaves behind is another. A 20-column cast-and-rename built that way took about 900 calls and
100-140 ms on a warm JVM (with PySpark's call-site capture, which ratui turns off: spark/session.py); the same
projection as SQL text through `selectExpr` took 27 calls and 17-27 ms. A forced run of the sample made about 10,000
calls before, 3,800 now (benchmarks/README.md).

Field ids (Parquet column metadata) still take the Column API: `DataFrame.to(schema)` shows them in the schema, but
Spark drops them when it collapses the projection, and the files were written without them.
"""

from __future__ import annotations


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier (backquoted, backquotes doubled)."""
    return "`" + name.replace("`", "``") + "`"


def cast_as(source: str | None, type_sql: str, name: str) -> str:
    """`CAST(source AS type) AS name`; a missing source (None) is a typed NULL."""
    value = "NULL" if source is None else quote(source)
    return f"CAST({value} AS {type_sql}) AS {quote(name)}"


def renamed(source: str, name: str) -> str:
    return quote(source) if source == name else f"{quote(source)} AS {quote(name)}"


def type_sql(data_type) -> str:
    """The SQL name of a Spark type (the primitive types ratui's tables hold: simpleString is valid SQL for them)."""
    return data_type.simpleString()
