"""Evolving a table's schema to accept a new result: added columns and widening types only.

    added column          the table gains it (optional); rows written before read NULL
    int -> long, float -> double, decimal(P,S) -> decimal(P',S) with P' > P
                          the table's column is widened (Iceberg's allowed promotions)
    narrower result type  (a long column receiving ints, ...) fits as it is: the values are cast up
    missing column        the table keeps it; new rows hold NULL (full_refresh drops it instead, because
                          it replaces the table; a missing unique_key column is RAT-WRT-001)

Anything else (a type Iceberg cannot promote to, e.g. string -> int, long -> int in the table, double ->
decimal, a decimal scale change) is RAT-WRT-003 before anything is written. The change is committed on the
run's branch, so a run that fails later (a quality gate, a crash) leaves main's schema as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg import types as it
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from ratui.engine.errors import RatuiError
from ratui.engine.iceberg.schema import spark_to_iceberg_type


@dataclass(frozen=True)
class SchemaChange:
    kind: str  # "add" | "widen" | "drop"
    column: str
    old: str | None
    new: str


def _widens(old, new) -> bool:
    if isinstance(old, it.IntegerType) and isinstance(new, it.LongType):
        return True
    if isinstance(old, it.FloatType) and isinstance(new, it.DoubleType):
        return True
    if isinstance(old, it.DecimalType) and isinstance(new, it.DecimalType):
        return new.scale == old.scale and new.precision > old.precision
    return False


def _fits(result_type, table_type) -> bool:
    """A result column of `result_type` can be written into a column of `table_type` without loss."""
    return result_type == table_type or _widens(result_type, table_type)


def plan_changes(table_schema: Schema, result_schema, table_name: str, *,
                 drop_missing: bool = False) -> list[SchemaChange]:
    """What the table must change to take the result. `drop_missing`: also drop columns the result lacks."""
    changes: list[SchemaChange] = []
    if drop_missing:
        present = {f.name.lower() for f in result_schema.fields}
        for f in table_schema.fields:
            if f.name.lower() not in present:
                changes.append(SchemaChange("drop", f.name, str(f.field_type), "dropped"))
    for f in result_schema.fields:
        new_type = spark_to_iceberg_type(f.dataType, f.name)
        try:
            existing = table_schema.find_field(f.name, case_sensitive=False)
        except ValueError:
            changes.append(SchemaChange("add", f.name, None, str(new_type)))
            continue
        old_type = existing.field_type
        if _fits(new_type, old_type):
            continue
        if _widens(old_type, new_type):
            changes.append(SchemaChange("widen", existing.name, str(old_type), str(new_type)))
            continue
        raise RatuiError("RAT-WRT-003", f"column '{existing.name}' of {table_name} is {old_type} but the result "
                         f"has {new_type}, which is not a widening Iceberg allows",
                         details={"column": existing.name, "table_type": str(old_type),
                                  "result_type": str(new_type)})
    return changes


def apply_changes(table: Table, result_schema, changes: list[SchemaChange]) -> Table:
    if not changes:
        return table
    by_name = {f.name.lower(): f for f in result_schema.fields}
    with table.update_schema() as update:
        for change in changes:
            if change.kind == "drop":
                update.delete_column(change.column)
                continue
            field = by_name[change.column.lower()]
            new_type = spark_to_iceberg_type(field.dataType, field.name)
            if change.kind == "add":
                update.add_column(field.name, new_type, required=False)
            else:
                update.update_column(change.column, field_type=new_type)
    table.refresh()
    # the name mapping must follow the schema, or readers of id-less files would miss new columns
    from pyiceberg.table.name_mapping import create_mapping_from_schema

    from ratui.engine.iceberg.schema import NAME_MAPPING

    with table.transaction() as tx:
        tx.set_properties({NAME_MAPPING: create_mapping_from_schema(table.schema()).model_dump_json()})
    return table
