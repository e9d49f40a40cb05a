"""Iceberg tables seen from Spark: schema mapping, reading a table at a ref, writing and committing files.

Spark never needs the Iceberg runtime jar: a table is read as a Parquet view over the data files that
PyIceberg's scan planning lists, with the Iceberg field ids on the Spark schema (so added columns and
widened types read right), and written as Parquet files carrying those field ids, which PyIceberg then
commits. Rows never pass through the Python process.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from pyiceberg import types as it
from pyiceberg.conversions import from_bytes
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.name_mapping import create_mapping_from_schema

from ratui.engine.errors import RatuiError
from ratui.engine.locations import local_file

FIELD_ID = "parquet.field.id"
NAME_MAPPING = "schema.name-mapping.default"


# ------------------------------------------------------------------------------------------ type mapping


def spark_to_iceberg_type(dtype, column: str):
    from pyspark.sql import types as st

    if isinstance(dtype, st.BooleanType):
        return it.BooleanType()
    if isinstance(dtype, (st.ByteType, st.ShortType, st.IntegerType)):
        return it.IntegerType()
    if isinstance(dtype, st.LongType):
        return it.LongType()
    if isinstance(dtype, st.FloatType):
        return it.FloatType()
    if isinstance(dtype, st.DoubleType):
        return it.DoubleType()
    if isinstance(dtype, st.DecimalType):
        return it.DecimalType(dtype.precision, dtype.scale)
    if isinstance(dtype, (st.StringType, st.CharType, st.VarcharType)):
        return it.StringType()
    if isinstance(dtype, st.BinaryType):
        return it.BinaryType()
    if isinstance(dtype, st.DateType):
        return it.DateType()
    if isinstance(dtype, st.TimestampNTZType):
        return it.TimestampType()
    if isinstance(dtype, st.TimestampType):
        return it.TimestamptzType()
    hint = "Cast it, e.g. CAST(NULL AS STRING)." if isinstance(dtype, st.NullType) else None
    raise RatuiError("RAT-WRT-004", f"column '{column}' has type {dtype.simpleString()}, which ratui cannot store "
                     "yet", hint=hint)


def iceberg_to_spark_type(itype):
    from pyspark.sql import types as st

    mapping = {
        it.BooleanType: st.BooleanType,
        it.IntegerType: st.IntegerType,
        it.LongType: st.LongType,
        it.FloatType: st.FloatType,
        it.DoubleType: st.DoubleType,
        it.StringType: st.StringType,
        it.BinaryType: st.BinaryType,
        it.DateType: st.DateType,
        it.TimestampType: st.TimestampNTZType,
        it.TimestamptzType: st.TimestampType,
    }
    if isinstance(itype, it.DecimalType):
        return st.DecimalType(itype.precision, itype.scale)
    for ice, spark_type in mapping.items():
        if isinstance(itype, ice):
            return spark_type()
    raise RatuiError("RAT-WRT-004", f"Iceberg type {itype} is not readable by ratui")


def spark_schema_of(schema: Schema):
    """The Spark schema of an Iceberg schema, with field ids so Spark matches Parquet columns by id."""
    from pyspark.sql import types as st

    return st.StructType([
        st.StructField(f.name, iceberg_to_spark_type(f.field_type), True, {FIELD_ID: f.field_id})
        for f in schema.fields
    ])


def iceberg_schema_of(spark_schema) -> Schema:
    """A new table's schema: every column optional (Spark's nullability is not a promise), ids from 1."""
    check_columns(spark_schema)
    fields = [
        it.NestedField(i, f.name, spark_to_iceberg_type(f.dataType, f.name), required=False)
        for i, f in enumerate(spark_schema.fields, start=1)
    ]
    return Schema(*fields)


def column_name_problem(name: str) -> str | None:
    if not name.strip():
        return "is empty"
    if "`" in name:
        return "holds a backtick"
    if any(ord(c) < 32 for c in name):
        return "holds a control character"
    return None


def check_columns(spark_schema) -> None:
    seen: dict[str, str] = {}
    for f in spark_schema.fields:
        problem = column_name_problem(f.name)
        if problem:
            raise RatuiError("RAT-WRT-010", f"column name {f.name!r} {problem}")
        low = f.name.lower()
        if low in seen:
            raise RatuiError("RAT-WRT-005", f"the result has two columns named '{seen[low]}' and '{f.name}'")
        seen[low] = f.name
        spark_to_iceberg_type(f.dataType, f.name)


# ------------------------------------------------------------------------------------------------ reading


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


# ------------------------------------------------------------------------------------------------ writing


def table_location(root: Path, key: str) -> str:
    namespace, layer, name = key.split(".")
    return str(root / namespace / "warehouse" / layer / name)


def with_field_ids(df, schema: Schema):
    """Cast the result to the table's types and tag each column with its Iceberg field id.

    Hidden partition columns (partitioning.HIDDEN) pass through untagged: Spark writes them as directories.
    """
    from pyspark.sql import functions as F

    from ratui.engine.write.partitioning import HIDDEN

    cols = []
    for f in df.schema.fields:
        column = F.col(f"`{f.name}`")
        if f.name.startswith(HIDDEN):
            cols.append(column)
            continue
        field = schema.find_field(f.name, case_sensitive=False)
        target = iceberg_to_spark_type(field.field_type)
        if f.dataType != target:
            column = column.cast(target)
        cols.append(column.alias(field.name, metadata={FIELD_ID: field.field_id}))
    return df.select(*cols)


@dataclass
class WrittenFiles:
    files: list[DataFile]
    folder: Path

    @property
    def rows(self) -> int:
        return sum(f.record_count for f in self.files)


# Rows per file a clustered write aims at (about 10-40 MB of Parquet for typical rows): a merge that rewrites
# one file and adds a few rows writes one or two files, not spark.sql.shuffle.partitions small ones.
ROWS_PER_FILE = 500_000
# A merge that rewrites more rows than this keeps the surviving rows in their files' layout (one task per
# file, no shuffle) and clusters only the new rows, instead of range-partitioning everything again.
KEEP_LAYOUT_MIN_ROWS = 2_000_000


def write_files(df, table: Table, run_id: str, cluster_by: Iterable[str] = (),
                rows_hint: int | None = None, keep=None, keep_files: Iterable[DataFile] = ()) -> WrittenFiles:
    """Spark writes `df` as Parquet into the table's data folder; returns Iceberg DataFile entries for them.

    `cluster_by`: range-partition and sort by these columns first, so each file covers a narrow range of
    them and merges can skip files by their bounds; `rows_hint` (about how many rows `df` holds) sets the
    number of ranges to one per ROWS_PER_FILE rows. A partitioned table gets one file per partition value
    per task (see partitioning.py); its DataFile partition tuples come from the files' statistics.

    `keep`: rows read from `keep_files` (by read_files, through narrow operations only) written in the same
    job without any shuffle: each of those files is read by a task of its own, so each yields one file
    again with the same key range and partition. Rewriting a large part of a table then costs a read and
    a write, not a global sort.
    """
    from ratui.engine.write.partitioning import fill_missing_partition, hidden_columns

    folder = Path(local_file(table, table.location())) / "data" / f"run-{run_id}-{uuid.uuid4().hex[:8]}"
    order = [f"`{c}`" for c in cluster_by]
    hidden: list[str] = []
    if table.spec().fields:
        df, hidden = hidden_columns(df, table)
        if keep is not None:
            keep, _ = hidden_columns(keep, table)
        order = hidden + order
    if order:
        if rows_hint is not None:
            ranges = max(1, -(-rows_hint // ROWS_PER_FILE))
            df = df.repartitionByRange(ranges, *order).sortWithinPartitions(*order)
        else:
            df = df.repartitionByRange(*order).sortWithinPartitions(*order)
    if keep is not None:
        df = keep.unionByName(df)
    writer = with_field_ids(df, table.schema()).write.mode("errorifexists")
    if hidden:
        writer = writer.partitionBy(*hidden)
    conf = df.sparkSession.conf
    saved = {}
    if keep is not None:
        # one task per kept file: no file may share a read split with another (Spark packs small files)
        biggest = str(max([f.file_size_in_bytes for f in keep_files] + [1]) + 1)
        for name in ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes"):
            saved[name] = conf.get(name, None)
            conf.set(name, biggest)
    try:
        writer.parquet(str(folder))
    finally:
        for name, value in saved.items():
            if value is None:
                conf.unset(name)
            else:
                conf.set(name, value)
    files: list[DataFile] = []
    written = WrittenFiles(files, folder)
    try:
        for path in sorted(folder.rglob("*.parquet")):
            try:
                entry = parquet_file_to_data_file(table.io, table.metadata, str(path))
            except ValueError as exc:  # e.g. a file holding two partition values: never commit it
                raise RatuiError("RAT-WRT-006", f"cannot register {path.name} in {table.name()}: {exc}") from None
            if entry.record_count == 0:
                path.unlink()  # Spark writes an empty file for an empty result; the table does not need it
                continue
            fill_missing_partition(entry, table, str(path))
            files.append(entry)
        for extra in sorted(folder.rglob("*"), reverse=True):
            if extra.is_file() and extra.suffix != ".parquet":
                extra.unlink()
            elif extra.is_dir() and not any(extra.iterdir()):
                extra.rmdir()
    except Exception:
        discard(written)
        raise
    return written


def discard(written: WrittenFiles | None) -> None:
    """Remove files a failed write produced before they were committed anywhere."""
    if written is not None and written.folder.exists():
        shutil.rmtree(written.folder, ignore_errors=True)


def commit_files(table: Table, *, add: list[DataFile], delete: list[DataFile], message: str,
                 properties: dict[str, str] | None = None) -> Table:
    """One Iceberg snapshot that removes `delete` and adds `add` (an append when nothing is deleted)."""
    summary = {"ratui.message": message, **(properties or {})}
    with table.transaction() as tx:
        if table.properties.get(NAME_MAPPING) is None:
            tx.set_properties({NAME_MAPPING: create_mapping_from_schema(table.schema()).model_dump_json()})
        if delete:
            with tx.update_snapshot(snapshot_properties=summary).overwrite() as snap:
                for f in delete:
                    snap.delete_data_file(f)
                for f in add:
                    snap.append_data_file(f)
        elif add:
            with tx.update_snapshot(snapshot_properties=summary).fast_append() as snap:
                for f in add:
                    snap.append_data_file(f)
    return table
