"""Writing a table's data files with Spark and committing them with PyIceberg, one snapshot per write.

Spark writes Parquet (with Iceberg field ids) into the table's own data folder; PyIceberg registers the files as
DataFile entries and commits one snapshot that adds them and removes the files they replace. A write that fails
before its commit leaves nothing behind (its folder is discarded); a committed file is only ever removed by the
reaper's orphan sweep, once no ref reaches it.

The files Spark wrote are found by listing the write's folder through the table's own FileIO (its pyarrow file
system for the table location), never through this process's view of a local disk: the executors that wrote them
may be a cluster's or a Spark Connect server's. Spark's side files (_SUCCESS, .crc) go the same way.
"""

from __future__ import annotations

import uuid
import zoneinfo
from dataclasses import dataclass
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

from pyarrow import fs as pafs
from pyiceberg.io.pyarrow import PyArrowFileIO, parquet_file_to_data_file
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.name_mapping import create_mapping_from_schema

from ratui.engine.errors import RatuiError
from ratui.engine.failpoints import failpoint
from ratui.engine.iceberg.deletes import DeletesOverwrite
from ratui.engine.iceberg.read import data_files, deletes_of
from ratui.engine.iceberg.schema import FIELD_ID, NAME_MAPPING, iceberg_to_spark_type
from ratui.engine.locations import local_file
from ratui.engine.project.discovery import table_folder
from ratui.engine.sql_text import cast_as, quote, renamed, type_sql

# pyarrow turns a file's timestamp statistics into Python values with zoneinfo.ZoneInfo("UTC") each time it
# registers a file; keeping the zone alive here keeps it in zoneinfo's cache, so those lookups never go back to the
# tz database (a console run once failed with pyarrow's "The zoneinfo module or pytz package must be installed"
# while registering a file, a lookup failure that did not come back in later runs)
_UTC = zoneinfo.ZoneInfo("UTC")


def table_location(root: Path, key: str) -> str:
    return str(table_folder(root, key))


def with_field_ids(df, schema: Schema):
    """Cast the result to the table's types and tag each column with its Iceberg field id.

    Hidden partition columns (partitioning.HIDDEN) pass through untagged: Spark writes them as directories. Casts
    and renames are one projection of SQL text (sql_text.py); the ids need the Column API (an alias with
    metadata: DataFrame.to() tags the schema, but Spark drops the tags when it collapses the projection, and the
    Parquet files were written without ids).
    """
    from pyspark.sql import functions as F

    from ratui.engine.write.partitioning import HIDDEN

    exprs, tags = [], []
    for f in df.schema.fields:
        if f.name.startswith(HIDDEN):
            exprs.append(quote(f.name))
            tags.append(F.col(quote(f.name)))
            continue
        field = schema.find_field(f.name, case_sensitive=False)
        target = iceberg_to_spark_type(field.field_type)
        exprs.append(cast_as(f.name, type_sql(target), field.name) if f.dataType != target
                     else renamed(f.name, field.name))
        tags.append(F.col(quote(field.name)).alias(field.name, metadata={FIELD_ID: field.field_id}))
    cast = exprs != [quote(n) for n in df.columns]  # some column to cast or rename
    return (df.selectExpr(*exprs) if cast else df).select(*tags)


@dataclass
class WrittenFiles:
    files: list[DataFile]
    folder: str  # where Spark wrote them: a local path, or a URI of the table's file system
    table: Table | None = None  # whose FileIO reaches `folder`

    @property
    def rows(self) -> int:
        return sum(f.record_count for f in self.files)


class _Folder:
    """A folder of the table's storage, reached through the table's FileIO: its pyarrow file system."""

    def __init__(self, table: Table | None, location: str):
        self.location = location
        io = getattr(table, "io", None)
        if isinstance(io, PyArrowFileIO):
            scheme, netloc, path = io.parse_location(location, io.properties)
            self.fs, self.path = io.fs_by_scheme(scheme, netloc), path
        else:  # another FileIO (or none): pyarrow's own file system for the location
            scheme = location.split("://", 1)[0] if "://" in location else "file"
            self.fs, self.path = pafs.FileSystem.from_uri(location if "://" in location
                                                          else Path(location).absolute().as_uri())
        self.scheme = scheme
        self.local = scheme == "file"

    def location_of(self, path: str) -> str:
        """A listed file as the table knows its files: a local path, or the URI of an object."""
        return path if self.local else f"{self.scheme}://{path}"

    def listing(self) -> list[pafs.FileInfo]:
        """Everything under the folder (files and folders), sorted by path; nothing when it does not exist."""
        selector = pafs.FileSelector(self.path, recursive=True, allow_not_found=True)
        return sorted(self.fs.get_file_info(selector), key=lambda info: info.path)

    def exists(self) -> bool:
        return self.fs.get_file_info(self.path).type != pafs.FileType.NotFound

    def remove(self) -> None:
        self.fs.delete_dir(self.path)


def _is_data_file(info: pafs.FileInfo) -> bool:
    return info.type == pafs.FileType.File and info.base_name.endswith(".parquet") \
        and not info.base_name.startswith((".", "_"))


# The size a write aims its data files at, unless the pipeline (`target_file_size`) or the table's own
# write.target-file-size-bytes says otherwise: big enough that a 100M-row table is tens of files, not thousands
# (planning, metadata and per-file overheads stay small), small enough that a table of a few GB still reads in
# parallel and a copy-on-write rewrite of one file stays cheap. Iceberg's own default is 512 MB.
TARGET_FILE_BYTES = 128 * 2**20
TARGET_FILE_PROPERTY = "write.target-file-size-bytes"

# Parquet (dictionary encoding, snappy) against the in-memory width of a row of Spark's types: measured 0.31 on
# merge.py's rows (15.9 bytes per row against 52); a little above, so a first write errs on smaller files. Once
# a table has files, their own bytes per row are used instead.
PARQUET_SHARE = 0.4

# Spark's in-memory width of a value of each type (the sizes Spark's own DataType.defaultSize gives).
_WIDTH = {"boolean": 1, "tinyint": 1, "smallint": 2, "int": 4, "date": 4, "float": 4, "bigint": 8, "double": 8,
          "timestamp": 8, "timestamp_ntz": 8, "string": 20, "binary": 100}

# A keyed write that rewrites more rows than this keeps the surviving rows in their files' layout (one task per
# file, no shuffle) and clusters only the new rows, instead of range-partitioning everything again.
KEEP_LAYOUT_MIN_ROWS = 2_000_000


def target_file_bytes(table: Table, configured: int | None = None) -> int:
    """The size to write `table`'s data files at: the pipeline's target_file_size, else the table's
    write.target-file-size-bytes, else TARGET_FILE_BYTES."""
    if configured:
        return configured
    try:
        return max(2**20, int(table.properties.get(TARGET_FILE_PROPERTY, TARGET_FILE_BYTES)))
    except (TypeError, ValueError):  # another engine's unreadable value: the default
        return TARGET_FILE_BYTES


def _row_width(dtype) -> float:
    """The in-memory width of a value of a Spark type (nested types: the sum or a guess per element)."""
    from pyspark.sql import types as st

    if isinstance(dtype, st.DecimalType):
        return 8 if dtype.precision <= 18 else 16
    if isinstance(dtype, st.StructType):
        return sum(_row_width(f.dataType) for f in dtype.fields)
    if isinstance(dtype, st.ArrayType):
        return 4 * _row_width(dtype.elementType)
    if isinstance(dtype, st.MapType):
        return 4 * (_row_width(dtype.keyType) + _row_width(dtype.valueType))
    return _WIDTH.get(dtype.simpleString(), 20)


def bytes_per_row(table: Table, spark_schema, files: Sequence[DataFile] | None = None,
                  constant: Iterable[str] = ()) -> float:
    """About how many bytes of Parquet a row of `table` takes: its data files' own figure when it has files
    (`files`, else its current ones), else an estimate from the row's Spark types, leaving out the `constant`
    columns (one value in every row written: Parquet keeps such a column in a few bytes a file)."""
    if files is None:
        files = data_files(table) if table.current_snapshot() is not None else []
    rows = sum(f.record_count for f in files)
    if rows:
        return max(1.0, sum(f.file_size_in_bytes for f in files) / rows)
    constant = {c.lower() for c in constant}
    width = sum(_row_width(f.dataType) for f in spark_schema.fields if f.name.lower() not in constant)
    return max(1.0, width * PARQUET_SHARE)


def rows_per_file(table: Table, spark_schema, target_bytes: int | None = None,
                  files: Sequence[DataFile] | None = None, constant: Iterable[str] = ()) -> int:
    """The rows a data file of `table` holds at its target size (at least 1,000)."""
    return max(1_000, int(target_file_bytes(table, target_bytes)
                          / bytes_per_row(table, spark_schema, files, constant)))


def write_files(df, table: Table, run_id: str, cluster_by: Iterable[str] = (),
                rows_hint: int | None = None, keep=None, keep_files: Iterable[DataFile] = (),
                target_bytes: int | None = None, constant: Iterable[str] = (),
                dedupe_by: tuple[list[str], str | None] | None = None) -> WrittenFiles:
    """Spark writes `df` as Parquet into the table's data folder; returns Iceberg DataFile entries for them.

    Files are written near the table's target size (target_file_bytes; `target_bytes`: the pipeline's): every
    task's output is split at the rows a file of that size holds (Spark's maxRecordsPerFile; the bytes per row
    are the table's own, see bytes_per_row), so a large write that Spark runs in a few big tasks still lands as
    many files of about that size, not one file per task.

    `cluster_by`: range-partition and sort by these columns first, so each file covers a narrow range of
    them and later keyed writes can skip files by their bounds; `rows_hint` (about how many rows `df` holds) sets the
    number of ranges to one per file's worth of rows. A partitioned table gets one file per partition value
    per task (see partitioning.py); its DataFile partition tuples come from the files' statistics.

    `keep`: rows read from `keep_files` (by read_files, through narrow operations only) written in the same
    job without any shuffle: each of those files is read by a task of its own, so each yields one file
    again with the same key range and partition. Rewriting a large part of a table then costs a read and
    a write, not a global sort.

    `constant`: columns with one value in every row of `df` (scd2's validity columns on its first write), left out
    of a new table's estimate of its bytes per row (a first write of 10M scd2 rows was laid out as 3 files of 3.3M
    rows for its two timestamps, which its Parquet files hold in a few bytes, where the same rows without them
    made 2).

    `dedupe_by` (keys, watermark): `df` may hold several rows of a key; one is written (keys.dedupe's), removed
    after the range partitioning when `cluster_by` is those keys, so the rows are shuffled once, by key, rather
    than once to remove duplicates and again to cluster (a keyed first write of 100M rows). A partitioned table's
    duplicates are removed before its ranges are made (they lead with the partition columns).
    """
    from ratui.engine.write.keys import latest_per_key, with_arrival
    from ratui.engine.write.partitioning import hidden_columns

    base = local_file(table, table.location()).rstrip("/")
    folder = f"{base}/data/run-{run_id}-{uuid.uuid4().hex[:8]}"
    order = [f"`{c}`" for c in cluster_by]
    per_file = rows_per_file(table, df.schema, target_bytes, constant=constant)
    if dedupe_by is not None:
        df = with_arrival(df)  # each row's place in the batch, before any shuffle
    partitioned = bool(table.spec().fields)
    # ranges that lead with the partition columns do not hold each key in one range: a partitioned table's
    # duplicates are removed first, by a shuffle of their own (early); any other's after its ranges are made (late)
    early, late = (dedupe_by, None) if partitioned else (None, dedupe_by)

    def deduped(frame):
        return latest_per_key(frame, *late) if late is not None else frame

    hidden: list[str] = []
    if partitioned:
        df, hidden = hidden_columns(df, table)
        if keep is not None:
            keep, _ = hidden_columns(keep, table)
        order = hidden + order
        if early is not None:
            df = latest_per_key(df, *early)
    conf: dict[str, str] = {"spark.sql.files.maxRecordsPerFile": str(per_file)}
    df = _in_ranges(df, order, rows_hint, per_file, deduped, conf)
    if keep is not None:
        df = keep.unionByName(df)
    # "error" (errorifexists): the only spelling Spark Connect knows as well
    writer = with_field_ids(df, table.schema()).write.mode("error")
    if hidden:
        writer = writer.partitionBy(*hidden)
    if keep is not None:
        # one task per kept file: no file may share a read split with another (Spark packs small files)
        biggest = str(max([f.file_size_in_bytes for f in keep_files] + [1]) + 1)
        conf.update({"spark.sql.files.maxPartitionBytes": biggest, "spark.sql.files.openCostInBytes": biggest})
    try:
        with session_conf(df.sparkSession, conf):
            writer.parquet(folder)
    except BaseException:  # failed or cancelled: what its tasks wrote (Spark's attempt files, S3A's folder markers)
        discard(WrittenFiles([], folder, table))
        raise
    return _register(table, folder)


def _in_ranges(df, order: list[str], rows_hint: int | None, per_file: int, deduped: Callable[[Any], Any],
               conf: dict[str, str]):
    """`df` (its duplicates removed by `deduped`) range-partitioned and sorted by `order` into about a file's worth
    of rows per range, with the settings that takes added to `conf`; as it is without an order."""
    if not order:
        return deduped(df)
    if rows_hint is not None and rows_hint <= per_file:
        # one file's worth: one sorted task, no sampling job and no shuffle
        return deduped(df.coalesce(1)).sortWithinPartitions(*order)
    if rows_hint is not None:
        # ranges of at most a file's worth each; Spark's ranges come from a sample and vary a little, so the
        # cap per file is above a file's worth (a range never leaves a sliver of a file behind it)
        ranges = max(1, -(-rows_hint // per_file))
        conf["spark.sql.files.maxRecordsPerFile"] = str(per_file + per_file // 2)
        return deduped(df.repartitionByRange(ranges, *order)).sortWithinPartitions(*order)
    # rows not counted (the query runs once, here): Spark's adaptive execution merges neighbouring key
    # ranges until each holds about a file's worth of shuffled rows
    df = deduped(df.repartitionByRange(*order)).sortWithinPartitions(*order)
    conf.update(uncounted_ranges(per_file, df.schema))
    return df


def _register(table: Table, folder: str) -> WrittenFiles:
    """DataFile entries for the Parquet files Spark wrote under `folder`, found through the table's FileIO. Empty
    files are removed (Spark writes one for an empty result), and so is everything that is not a data file
    (_SUCCESS, .crc side files, folders left empty)."""
    from ratui.engine.write.partitioning import fill_missing_partition

    files: list[DataFile] = []
    written = WrittenFiles(files, folder, table)
    try:
        where = _Folder(table, folder)
        listing = where.listing()
        for info in listing:
            if not _is_data_file(info):
                continue
            location = where.location_of(info.path)
            try:
                entry = parquet_file_to_data_file(table.io, table.metadata, location)
            except ValueError as exc:  # e.g. a file holding two partition values: never commit it
                raise RatuiError("RAT-WRT-006", f"cannot register {info.base_name} in {table.name()}: {exc}") from None
            if entry.record_count == 0:
                where.fs.delete_file(info.path)  # the table does not need an empty file
                continue
            fill_missing_partition(entry, table, location)
            files.append(entry)
        for info in listing:
            if info.type == pafs.FileType.File and not _is_data_file(info):
                where.fs.delete_file(info.path)
        if where.local:  # object stores have no folders to leave empty
            for info in sorted((i for i in listing if i.type == pafs.FileType.Directory),
                               key=lambda i: i.path, reverse=True):
                if not where.fs.get_file_info(pafs.FileSelector(info.path, allow_not_found=True)):
                    where.fs.delete_dir(info.path)
    except Exception:
        discard(written)
        raise
    return written


def uncounted_ranges(per_file: int, spark_schema) -> dict[str, str]:
    """A write whose rows were not counted: ranges Spark may merge (adaptive execution) into about `per_file` rows
    each, by their shuffled size (Spark's in-memory width of a row)."""
    width = sum(_row_width(f.dataType) for f in spark_schema.fields)
    return {
        "spark.sql.shuffle.partitions": "64",
        "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(max(2**20, int(per_file * width))),
    }


@contextmanager
def session_conf(session, values: dict[str, str]) -> Iterator[None]:
    """Spark SQL settings for the duration of one write, on the run's own session (other runs never see them)."""
    conf = session.conf
    saved = {name: conf.get(name, None) for name in values}
    for name, value in values.items():
        conf.set(name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                conf.unset(name)
            else:
                conf.set(name, value)


def discard(written: WrittenFiles | None) -> None:
    """Remove files a failed write produced before they were committed anywhere (through the table's FileIO)."""
    if written is None:
        return
    try:
        where = _Folder(written.table, str(written.folder))
        if where.exists():
            where.remove()
    except OSError:  # gone already, or unreachable: the reaper's orphan sweep removes what is left
        pass


def commit_files(table: Table, *, add: list[DataFile], delete: list[DataFile], message: str,
                 properties: dict[str, str] | None = None, add_deletes: Sequence[DataFile] = (),
                 table_properties: dict[str, str] | None = None) -> Table:
    """One Iceberg snapshot that removes `delete` (with the position-delete files that apply to them), adds `add`
    and the position-delete files `add_deletes` (an append when it only adds data files); `table_properties` are
    set on the table in the same commit."""
    summary = {"ratui.message": message, **(properties or {})}
    failpoint("kill:commit")
    stale = [d for f in delete for d in deletes_of(table, f)]
    with table.transaction() as tx:
        if table.properties.get(NAME_MAPPING) is None:
            tx.set_properties({NAME_MAPPING: create_mapping_from_schema(table.schema()).model_dump_json()})
        if table_properties:
            tx.set_properties(table_properties)
        if add_deletes or stale:
            with DeletesOverwrite(operation=Operation.OVERWRITE, transaction=tx, io=table.io,
                                  snapshot_properties=summary) as producer:
                for f in list(delete) + stale:
                    producer.delete_data_file(f)
                for f in list(add) + list(add_deletes):
                    producer.append_data_file(f)
        elif delete:
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
