"""Reading an Iceberg table at a ref, from Spark, without Iceberg's runtime jar.

PyIceberg's scan planning lists the data files of the current snapshot; Spark reads them as Parquet with the
table's schema (field ids on every column). Rows never pass through the Python process. A table whose files carry
delete files is refused, never read with its deleted rows.
"""

from __future__ import annotations

from typing import Any, Iterable

from pyiceberg import types as it
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from ratui.engine.errors import RatuiError
from ratui.engine.iceberg.schema import spark_schema_of
from ratui.engine.locations import local_file

def data_files(table: Table) -> list[DataFile]:
    """The data files of the table's current snapshot. A table whose files carry delete files (rows another
    engine deleted by position or equality) is refused, never read with its deleted rows (RAT-CAT-008)."""
    if table.current_snapshot() is None:
        return []
    try:
        tasks = list(table.scan().plan_files())
    except ValueError as exc:  # PyIceberg refuses equality deletes itself
        if "delete" not in str(exc).lower():
            raise
        raise RatuiError("RAT-CAT-008", f"table {'.'.join(table.name())} has equality delete files: "
                         f"{str(exc).splitlines()[0]}") from None
    with_deletes = [t for t in tasks if t.delete_files]
    if with_deletes:
        raise RatuiError("RAT-CAT-008", f"table {'.'.join(table.name())} has {len(with_deletes)} data file(s) with "
                         "delete files; reading them without the deletes would bring deleted rows back",
                         file=local_file(table, with_deletes[0].file.file_path))
    return [task.file for task in tasks]


def read_table(session, table: Table):
    """A DataFrame over the table's current snapshot (files listed by PyIceberg, read by Spark)."""
    return read_files(session, table, data_files(table))


def read_files(session, table: Table, files: Iterable[DataFile]):
    """A DataFrame over some of the table's data files: this project's copies of them (see locations.py)."""
    paths = [local_file(table, f.file_path) for f in files]
    if not paths:
        return session.createDataFrame([], spark_schema_of(table.schema()))
    return session.read.schema(spark_schema_of(table.schema())).parquet(*paths)


def row_count(table: Table) -> int:
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return 0
    return int(snapshot.summary.additional_properties.get("total-records", 0))


def column_max_from_stats(table: Table, column: str) -> tuple[bool, Any]:
    """(exact, value): the max of a column from per-file upper bounds, when those bounds are exact.

    Parquet min/max of numbers, dates and timestamps are exact; strings may be truncated, so those
    return (False, None) and the caller scans.
    """
    field = table.schema().find_field(column)
    exact_types = (it.IntegerType, it.LongType, it.DateType, it.TimestampType, it.TimestamptzType, it.DecimalType,
                   it.FloatType, it.DoubleType)
    if not isinstance(field.field_type, exact_types):
        return False, None
    best = None
    for f in data_files(table):
        if f.record_count == 0:
            continue
        bound = (f.upper_bounds or {}).get(field.field_id)
        if bound is None:
            nulls = (f.null_value_counts or {}).get(field.field_id)
            if nulls is not None and nulls == f.record_count:
                continue  # all NULL: contributes nothing to max
            return False, None
        value = from_bytes(field.field_type, bound)
        best = value if best is None or value > best else best
    return True, best
