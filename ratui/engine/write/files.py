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
from typing import Iterable, Iterator, Sequence

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
from ratui.engine.iceberg.read import deletes_of
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
    from ratui.engine.write.partitioning import hidden_columns

    base = local_file(table, table.location()).rstrip("/")
    folder = f"{base}/data/run-{run_id}-{uuid.uuid4().hex[:8]}"
    order = [f"`{c}`" for c in cluster_by]
    hidden: list[str] = []
    if table.spec().fields:
        df, hidden = hidden_columns(df, table)
        if keep is not None:
            keep, _ = hidden_columns(keep, table)
        order = hidden + order
    conf: dict[str, str] = {}
    if order:
        if rows_hint is not None and rows_hint <= ROWS_PER_FILE:
            # one file's worth: one sorted task, no sampling job and no shuffle
            df = df.coalesce(1).sortWithinPartitions(*order)
        elif rows_hint is not None:
            ranges = max(1, round(rows_hint / ROWS_PER_FILE))
            df = df.repartitionByRange(ranges, *order).sortWithinPartitions(*order)
        else:
            # rows not counted (the query runs once, here): Spark's adaptive execution merges neighbouring key
            # ranges until each holds about a file's worth of shuffled rows
            df = df.repartitionByRange(*order).sortWithinPartitions(*order)
            conf.update(UNCOUNTED_RANGES)
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


# A write whose rows were not counted: ranges Spark may merge (adaptive execution) into about ROWS_PER_FILE rows
# each (about 24 MB of shuffled rows for typical tables).
UNCOUNTED_RANGES = {
    "spark.sql.shuffle.partitions": "64",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "24m",
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
                 properties: dict[str, str] | None = None, add_deletes: Sequence[DataFile] = ()) -> Table:
    """One Iceberg snapshot that removes `delete` (with the position-delete files that apply to them), adds `add`
    and the position-delete files `add_deletes` (an append when it only adds data files)."""
    summary = {"ratui.message": message, **(properties or {})}
    failpoint("kill:commit")
    stale = [d for f in delete for d in deletes_of(table, f)]
    with table.transaction() as tx:
        if table.properties.get(NAME_MAPPING) is None:
            tx.set_properties({NAME_MAPPING: create_mapping_from_schema(table.schema()).model_dump_json()})
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
