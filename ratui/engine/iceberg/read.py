"""Reading an Iceberg table at a ref, from Spark, without Iceberg's runtime jar.

PyIceberg's scan planning lists the data files of the current snapshot and the position-delete files that apply to
each; Spark reads the data files as Parquet with the table's schema (field ids on every column) and leaves out the
rows the delete files name (see deletes.py). Rows never pass through the Python process. A table with equality
delete files (another engine's) is refused, never read with its deleted rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Iterable

from pyiceberg import types as it
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table import Table

from ratui.engine.errors import RatuiError
from ratui.engine.iceberg.file_scan import FILE_NO, ROW_POS, FileEntry, scan_files
from ratui.engine.iceberg.schema import spark_schema_of
from ratui.engine.locations import local_file

_plans: OrderedDict[tuple[str, int], dict[str, tuple[DataFile, tuple[DataFile, ...]]]] = OrderedDict()
_plans_lock = threading.Lock()


def _plan(table: Table) -> dict[str, tuple[DataFile, tuple[DataFile, ...]]]:
    """path -> (data file, the position-delete files that apply to it), for the table's current snapshot.
    A snapshot never changes, so plans are kept (the last 64) by metadata file and snapshot id."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return {}
    key = (table.metadata_location, snapshot.snapshot_id)
    with _plans_lock:
        if key in _plans:
            _plans.move_to_end(key)
            return _plans[key]
    try:
        tasks = list(table.scan().plan_files())
    except ValueError as exc:  # PyIceberg refuses equality deletes itself
        if "delete" not in str(exc).lower():
            raise
        raise RatuiError("RAT-CAT-008", f"table {'.'.join(table.name())} has equality delete files: "
                         f"{str(exc).splitlines()[0]}") from None
    plan = {}
    for task in tasks:
        deletes = tuple(sorted(task.delete_files, key=lambda d: d.file_path))
        foreign = [d for d in deletes if d.content != DataFileContent.POSITION_DELETES]
        if foreign:
            raise RatuiError("RAT-CAT-008", f"table {'.'.join(table.name())} has delete files ratui cannot apply; "
                             "reading without them would bring deleted rows back",
                             file=local_file(table, foreign[0].file_path))
        plan[task.file.file_path] = (task.file, deletes)
    with _plans_lock:
        _plans[key] = plan
        while len(_plans) > 64:
            _plans.popitem(last=False)
    return plan


def data_files(table: Table) -> list[DataFile]:
    """The data files of the table's current snapshot (the rows their delete files name are not in the table:
    see live_rows and read_files)."""
    return [data for data, _deletes in _plan(table).values()]


def deletes_of(table: Table, data_file: DataFile) -> tuple[DataFile, ...]:
    """The position-delete files that apply to one of the table's current data files."""
    entry = _plan(table).get(data_file.file_path)
    return entry[1] if entry else ()


def live_rows(table: Table, data_file: DataFile) -> int:
    """Rows of the data file still in the table."""
    return data_file.record_count - sum(d.record_count for d in deletes_of(table, data_file))


def read_table(session, table: Table):
    """A DataFrame over the table's current snapshot (files listed by PyIceberg, read by Spark)."""
    return read_files(session, table, data_files(table))


__all__ = ["FILE_NO", "ROW_POS", "BROADCAST_DELETES", "column_max_from_stats", "data_files", "deletes_of",
           "file_entries", "live_rows", "read_files", "read_table", "row_count", "scan_plan"]


def read_files(session, table: Table, files: Iterable[DataFile], *, positions: bool = False):
    """A DataFrame over some of the table's data files (this project's copies of them, see locations.py), without
    the rows their delete files name (file_scan.py reads them).

    positions=True adds two columns: FILE_NO (the file's index in `files`) and ROW_POS (the row's position in it),
    what a position-delete file records."""
    schema = spark_schema_of(table.schema())
    entries, deleted = file_entries(table, files)
    return scan_files(session, schema, entries, positions=positions, broadcast=deleted <= BROADCAST_DELETES)


def file_entries(table: Table, files: Iterable[DataFile] | None = None) -> tuple[list[FileEntry], int]:
    """What Spark reads for some of the table's data files (default: all of the current snapshot's), and how many
    positions their delete files name."""
    plan = _plan(table)
    files = list(data_files(table) if files is None else files)
    entries, deleted = [], 0
    for f in files:
        deletes = plan.get(f.file_path, (f, ()))[1]
        deleted += sum(d.record_count for d in deletes)
        entries.append(FileEntry(local_file(table, f.file_path), f.file_path,
                                 [local_file(table, d.file_path) for d in deletes]))
    return entries, deleted


def scan_plan(table: Table) -> dict[str, Any]:
    """The table's current snapshot as a plan another Spark session reads with scan_files (JSON: an isolated
    Python pipeline's inputs, isolation/child.py)."""
    entries, deleted = file_entries(table)
    return {"schema": spark_schema_of(table.schema()).json(), "files": [e.to_dict() for e in entries],
            "broadcast": deleted <= BROADCAST_DELETES}


# Deleted positions up to this many are broadcast to every task that reads a file with deletes.
BROADCAST_DELETES = 5_000_000


def row_count(table: Table) -> int:
    """Rows in the table: its data files' rows less the positions its delete files name."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return 0
    props = snapshot.summary.additional_properties
    return int(props.get("total-records", 0)) - int(props.get("total-position-deletes", 0))


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
    plan = _plan(table)
    if any(deletes for _f, deletes in plan.values()):
        return False, None  # a deleted row may hold the largest value: scan
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
