"""The table a write lands in, on the run's branch: created, evolved (added columns, widened types), or rebuilt.

A rebuild (full_refresh) takes the result's columns exactly and starts a new table at the same location when
Iceberg cannot evolve the old one (an incompatible type, another partition spec); any other strategy refuses such
a change with a coded error and touches nothing. Changes happen on the branch, so main keeps its table until the
run merges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg.table import Table

from ratui.engine.errors import RatuiError
from ratui.engine.iceberg.schema import iceberg_schema_of, iceberg_to_spark_type
from ratui.engine.sql_text import cast_as, type_sql
from ratui.engine.write.partitioning import build_spec, parse_partition_by, same_terms, spec_terms
from ratui.engine.write.schema_evolution import apply_changes, plan_changes

if TYPE_CHECKING:
    from ratui.engine.write.request import WriteOutcome, WriteRequest

def partition_terms(req: WriteRequest):
    try:
        return parse_partition_by(req.config.partition_by)
    except ValueError as exc:
        raise RatuiError("RAT-WRT-007", f"{req.key}: partition_by: {exc}") from None


def create_table(req: WriteRequest, spark_schema) -> Table:
    schema = iceberg_schema_of(spark_schema)
    spec = build_spec(schema, partition_terms(req), req.key)
    return req.catalog.create_table(req.ref, req.key, schema, req.catalog.table_location(req.key),
                                    partition_spec=spec)


def prepare_table(req: WriteRequest, outcome: WriteOutcome, spark_schema, *, rebuild: bool) -> Table:
    """The table on the branch, created or evolved to take a result of `spark_schema`.

    rebuild=True (full_refresh): the table takes the result's columns exactly (missing ones are dropped);
    a change Iceberg cannot evolve (an incompatible type, another partition spec) starts a new table at the
    same location on the branch. rebuild=False: such a change is a coded error and nothing is touched.
    """
    if not req.catalog.table_exists(req.ref, req.key):
        outcome.created = True
        return create_table(req, spark_schema)
    table = req.catalog.load_table(req.ref, req.key)
    terms = partition_terms(req)
    reasons = []
    current = spec_terms(table)
    if not same_terms(current, terms):
        was = ", ".join(map(str, current)) or "nothing"
        now = ", ".join(map(str, terms)) or "nothing"
        if not rebuild:
            raise RatuiError("RAT-WRT-007", f"{req.key} is partitioned by {was} but partition_by says {now}",
                             hint="Run it once with --full-refresh to rebuild the table with the new "
                                  "partitioning (main keeps the old table until that run merges).")
        reasons.append(f"partitioning changed ({was} -> {now})")
    changes = []
    try:
        changes = plan_changes(table.schema(), spark_schema, req.key, drop_missing=rebuild)
    except RatuiError as exc:
        if not rebuild:
            raise
        reasons.append(f"schema changed incompatibly ({exc.message})")
    partition_sources = {f.source_id for f in table.spec().fields}
    for c in changes:
        if c.kind == "drop" and table.schema().find_field(c.column).field_id in partition_sources:
            reasons.append(f"partition column {c.column} dropped")
    if reasons:
        # a new table at the same location: the branch's pointer moves; main keeps its table until the
        # branch merges; no file is deleted (other refs may still use them)
        namespace, layer, name = req.key.split(".")
        req.catalog.iceberg(req.ref).drop_table((namespace, layer, name))
        outcome.created = True
        outcome.notes.append("table rebuilt: " + "; ".join(reasons))
        return create_table(req, spark_schema)
    outcome.schema_changes = [describe(c) for c in changes]
    return apply_changes(table, spark_schema, changes)


def describe(change) -> str:
    if change.kind == "widen":
        return f"widen {change.column} {change.old} -> {change.new}"
    if change.kind == "add":
        return f"add {change.column} {change.new}"
    return f"{change.kind} {change.column}"


def aligned(df, table: Table):
    """The result with exactly the table's columns and types (missing columns are NULL), as one projection of SQL
    text (sql_text.py: the Column API cost several JVM round trips per column)."""
    present = {c.lower(): c for c in df.columns}
    return df.selectExpr(*[cast_as(present.get(f.name.lower()), type_sql(iceberg_to_spark_type(f.field_type)), f.name)
                           for f in table.schema().fields])


def table_names(table: Table, names: list[str]) -> list[str]:
    return [table.schema().find_field(n, case_sensitive=False).name for n in names]
