"""What a table is, from its Iceberg metadata alone (no scan): schema with field ids, partition spec, the snapshot
history of the ref's current snapshot, and column statistics gathered from the data files' bounds and counts.

The statistics are Iceberg's per-file metrics (Parquet footers): minimum, maximum, null and value counts per
column over the live data files. Rows a position-delete file removes are still counted in them (`approximate`
says so), and a string's bounds may be truncated prefixes (Iceberg keeps 16 characters by default).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pyiceberg import types as it
from pyiceberg.conversions import from_bytes
from pyiceberg.table import Table

from ratui.engine.iceberg.read import data_files, deletes_of, row_count

# how many snapshots of the ref's history are described (the newest first)
HISTORY_LIMIT = 200


@dataclass(frozen=True)
class Column:
    field_id: int
    name: str  # dotted for a nested field
    type: str
    required: bool
    doc: str | None = None


@dataclass(frozen=True)
class PartitionField:
    source: str
    transform: str
    name: str
    field_id: int


@dataclass(frozen=True)
class SnapshotEntry:
    snapshot_id: int
    parent_id: int | None
    sequence: int | None
    committed_at: str  # ISO, UTC
    operation: str
    run_id: str | None
    strategy: str | None
    message: str | None
    added_rows: int
    deleted_rows: int
    added_files: int
    deleted_files: int
    total_rows: int | None


@dataclass(frozen=True)
class ColumnStats:
    name: str
    type: str
    minimum: Any
    maximum: Any
    nulls: int | None
    values: int | None
    size_bytes: int | None


@dataclass
class TableDescription:
    key: str
    location: str
    format_version: int
    snapshot_id: int | None
    rows: int
    data_files: int
    delete_files: int
    size_bytes: int
    columns: list[Column]
    partition_spec: list[PartitionField]
    sort_order: list[str]
    properties: dict[str, str]
    history: list[SnapshotEntry] = field(default_factory=list)
    stats: list[ColumnStats] = field(default_factory=list)
    approximate: bool = False  # delete files exist: the stats count rows they remove


def describe(table: Table, key: str) -> TableDescription:
    schema = table.schema()
    columns = _columns(schema.fields, "")
    names = {c.field_id: c.name for c in columns}
    spec = table.spec()
    partition = [PartitionField(names.get(f.source_id, str(f.source_id)), str(f.transform), f.name, f.field_id)
                 for f in spec.fields]
    sort_order = [f"{names.get(f.source_id, f.source_id)} {f.direction.name.lower()}"
                  for f in table.sort_order().fields]
    data = data_files(table)
    deletes = {x.file_path for d in data for x in deletes_of(table, d)}
    snapshot = table.current_snapshot()
    return TableDescription(
        key=key, location=table.location(), format_version=table.format_version,
        snapshot_id=snapshot.snapshot_id if snapshot else None, rows=row_count(table), data_files=len(data),
        delete_files=len(deletes), size_bytes=sum(d.file_size_in_bytes for d in data),
        columns=columns, partition_spec=partition, sort_order=sort_order,
        properties={k: v for k, v in table.properties.items() if not k.startswith("schema.name-mapping")},
        history=history(table), stats=column_stats(table, schema.fields, data), approximate=bool(deletes))


def _columns(fields, prefix: str) -> list[Column]:
    out: list[Column] = []
    for f in fields:
        name = f"{prefix}{f.name}"
        out.append(Column(f.field_id, name, str(f.field_type), f.required, f.doc))
        if isinstance(f.field_type, it.StructType):
            out.extend(_columns(f.field_type.fields, name + "."))
    return out


def history(table: Table, limit: int = HISTORY_LIMIT) -> list[SnapshotEntry]:
    """The current snapshot and its ancestors (what this ref's table went through), newest first."""
    by_id = {s.snapshot_id: s for s in table.metadata.snapshots}
    out: list[SnapshotEntry] = []
    current = table.current_snapshot()
    while current is not None and len(out) < limit:
        summary = current.summary
        props = dict(summary.additional_properties) if summary is not None else {}
        out.append(SnapshotEntry(
            snapshot_id=current.snapshot_id, parent_id=current.parent_snapshot_id,
            sequence=current.sequence_number,
            committed_at=datetime.fromtimestamp(current.timestamp_ms / 1000, timezone.utc).isoformat(
                timespec="milliseconds"),
            operation=summary.operation.value if summary is not None else "?",
            run_id=props.get("ratui.run-id"), strategy=props.get("ratui.strategy"),
            message=props.get("ratui.message"),
            added_rows=_int(props, "added-records"), deleted_rows=_int(props, "deleted-records")
            + _int(props, "added-position-deletes"),
            added_files=_int(props, "added-data-files"), deleted_files=_int(props, "deleted-data-files"),
            total_rows=(_int(props, "total-records") - _int(props, "total-position-deletes"))
            if "total-records" in props else None))
        current = by_id.get(current.parent_snapshot_id) if current.parent_snapshot_id is not None else None
    return out


def _int(props: dict[str, str], name: str) -> int:
    try:
        return int(props.get(name, 0))
    except ValueError:
        return 0


def column_stats(table: Table, fields, data) -> list[ColumnStats]:
    """Per top-level primitive column: min and max of the files' bounds, nulls and values summed. A bound some
    file lacks makes that column's min/max unknown (None) rather than wrong."""
    out = []
    for f in fields:
        kind = f.field_type
        if not isinstance(kind, it.PrimitiveType):
            continue
        low = high = None
        bounded = True
        nulls = values = size = 0
        counted = sized = True
        for d in data:
            if d.record_count == 0:
                continue
            lo = (d.lower_bounds or {}).get(f.field_id)
            hi = (d.upper_bounds or {}).get(f.field_id)
            n = (d.null_value_counts or {}).get(f.field_id)
            v = (d.value_counts or {}).get(f.field_id)
            s = (d.column_sizes or {}).get(f.field_id)
            if n is None or v is None:
                counted = False
            else:
                nulls += n
                values += v
            if s is None:
                sized = False
            else:
                size += s
            if n is not None and n == d.record_count:
                continue  # all NULL: no bounds to expect
            if lo is None or hi is None:
                bounded = False
                continue
            try:
                lo_v, hi_v = _readable(kind, from_bytes(kind, lo)), _readable(kind, from_bytes(kind, hi))
            except Exception:  # a type PyIceberg cannot decode: no bounds rather than a wrong one
                bounded = False
                continue
            low = lo_v if low is None or lo_v < low else low
            high = hi_v if high is None or hi_v > high else high
        out.append(ColumnStats(f.name, str(kind), low if bounded else None, high if bounded else None,
                               nulls if counted and data else None, values if counted and data else None,
                               size if sized and data else None))
    return out


def _readable(kind, value: Any) -> Any:
    """A bound as a person reads it: dates and timestamps as such, not days or microseconds since 1970."""
    from pyiceberg.utils import datetime as dt

    if isinstance(value, int):
        if isinstance(kind, it.DateType):
            return dt.days_to_date(value)
        if isinstance(kind, it.TimestamptzType):
            return dt.micros_to_timestamptz(value)
        if isinstance(kind, it.TimestampType):
            return dt.micros_to_timestamp(value)
        if isinstance(kind, it.TimeType):
            return dt.micros_to_time(value)
    return value
