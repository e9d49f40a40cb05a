"""What every write strategy (strategies.py) shares: the configured key and watermark columns found in the batch,
the run's instant as a Spark literal, writing a DataFrame's files and committing them as one snapshot, and the
outcome's final row count."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Sequence

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from ratui.engine.iceberg.read import row_count
from ratui.engine.write.files import TARGET_FILE_PROPERTY, WrittenFiles, commit_files, discard, write_files
from ratui.engine.write.keys import resolve_columns
from ratui.engine.write.prepare import table_names
from ratui.engine.write.request import WriteOutcome, WriteRequest

# ------------------------------------------------------------------------------------------ the batch's columns


def key_columns(req: WriteRequest) -> list[str]:
    """The pipeline's unique_key columns as the batch names them (RAT-WRT-001 for one it does not have)."""
    return resolve_columns(req.batch, req.config.unique_key, "RAT-WRT-001", "unique_key", req.key)


def watermark_column(req: WriteRequest) -> str | None:
    """The pipeline's watermark_column as the batch names it (RAT-WRT-002), or None without one."""
    if not req.config.watermark_column:
        return None
    return resolve_columns(req.batch, (req.config.watermark_column,), "RAT-WRT-002", "watermark_column",
                           req.key)[0]


def dedupe_by(table: Table, keys: list[str], watermark: str | None) -> tuple[list[str], str | None]:
    """write_files' dedupe_by: the keys and watermark by their names in the table (the aligned result's)."""
    return table_names(table, keys), table_names(table, [watermark])[0] if watermark else None


# -------------------------------------------------------------------------------------------- the run's instant


def run_timestamp(value: datetime | str | None) -> datetime:
    """The run's instant as an aware UTC datetime (naive text or datetimes are UTC, as the runner writes them)."""
    if value is None:
        return datetime.now(timezone.utc)
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _micros(ts: datetime) -> int:
    delta = ts - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def ts_literal(ts: datetime, target):
    """A Spark literal of the run's instant, exact to the microsecond, cast to the table column's type."""
    from pyspark.sql import functions as F

    return F.timestamp_micros(F.lit(_micros(ts))).cast(target)


# ------------------------------------------------------------------------------------------ writing and committing


def write_and_commit(req: WriteRequest, table: Table, df, *, delete, message: str,
                     cluster_by=(), rows_hint: int | None = None, keep=None, keep_files=(),
                     add_deletes: Sequence[DataFile] = (), constant: Sequence[str] = (),
                     dedupe_by: tuple[list[str], str | None] | None = None) -> WrittenFiles:
    """Write `df`'s files (write_files) and commit them with `add_deletes`, `delete` taken out, as one snapshot
    on the run's ref; the files are discarded when the commit fails."""
    target = req.config.target_file_size
    written = write_files(df, table, req.run_id, cluster_by, rows_hint, keep=keep, keep_files=keep_files,
                          target_bytes=target, constant=constant, dedupe_by=dedupe_by)
    # the pipeline's size, recorded as Iceberg's own table property: other engines that write the table aim at it
    # too, and ratui's compaction does
    table_properties = ({TARGET_FILE_PROPERTY: str(target)}
                        if target and table.properties.get(TARGET_FILE_PROPERTY) != str(target) else {})
    try:
        commit_files(table, add=written.files, delete=delete, message=message, add_deletes=list(add_deletes),
                     properties={**req.snapshot_properties, "ratui.run-id": req.run_id,
                                 "ratui.strategy": req.strategy}, table_properties=table_properties)
    except Exception:
        discard(written)
        raise
    return written


def finish(req: WriteRequest, outcome: WriteOutcome) -> WriteOutcome:
    """The outcome, with the table's row count after the write."""
    outcome.table_rows = row_count(req.catalog.load_table(req.ref, req.key))
    return outcome
