"""Writing a table's data files with Spark and committing them with PyIceberg, one snapshot per write.

Spark writes Parquet (with Iceberg field ids) into the table's own data folder; PyIceberg registers the files as
DataFile entries and commits one snapshot that adds them and removes the files they replace. A write that fails
before its commit leaves nothing behind (its folder is discarded); a committed file is only ever removed by the
reaper's orphan sweep, once no ref reaches it.
"""

from __future__ import annotations

import shutil
import uuid
import zoneinfo
from dataclasses import dataclass
from pathlib import Path
from contextlib import contextmanager
from typing import Iterable, Iterator, Sequence

from pyiceberg.io.pyarrow import parquet_file_to_data_file
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

# pyarrow turns a file's timestamp statistics into Python values with zoneinfo.ZoneInfo("UTC") each time it
# registers a file; keeping the zone alive here keeps it in zoneinfo's cache, so those lookups never go back to the
# tz database (a console run once failed with pyarrow's "The zoneinfo module or pytz package must be installed"
# while registering a file, a lookup failure that did not come back in later runs)
_UTC = zoneinfo.ZoneInfo("UTC")


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
    writer = with_field_ids(df, table.schema()).write.mode("errorifexists")
    if hidden:
        writer = writer.partitionBy(*hidden)
    if keep is not None:
        # one task per kept file: no file may share a read split with another (Spark packs small files)
        biggest = str(max([f.file_size_in_bytes for f in keep_files] + [1]) + 1)
        conf.update({"spark.sql.files.maxPartitionBytes": biggest, "spark.sql.files.openCostInBytes": biggest})
    with session_conf(df.sparkSession, conf):
        writer.parquet(str(folder))
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
    """Remove files a failed write produced before they were committed anywhere."""
    if written is not None and written.folder.exists():
        shutil.rmtree(written.folder, ignore_errors=True)


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
