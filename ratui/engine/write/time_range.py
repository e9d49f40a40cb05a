"""incremental_by_time: a run replaces the rows of its interval of time, [start, end) on the pipeline's time_column.

    1. every result row must lie in the interval: a row outside it (a NULL time too) fails the write (RAT-WRT-011,
       with how many), before anything is written
    2. the table's rows of the interval are removed, the result's added, in one snapshot: a data file whose
       time_column bounds lie inside the interval is dropped unread, one that straddles it is rewritten without
       its rows of the interval, the others are untouched (per-file bounds, as the other strategies prune)
    3. the snapshot's summary records the intervals the table has done (project/intervals.py), this one added;
       an empty result still commits it: the interval is done, and holds no rows

Running an interval twice gives the same table: the second run removes exactly what the first added.
"""

from __future__ import annotations

from datetime import date, datetime

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.types import DateType, TimestampType, TimestamptzType

from ratui.engine.errors import RatuiError
from ratui.engine.iceberg.read import data_files
from ratui.engine.project import intervals, strategy_specs
from ratui.engine.write.keys import resolve_columns
from ratui.engine.write.prepare import aligned, prepare_table, table_names
from ratui.engine.write.request import WriteOutcome, WriteRequest
from ratui.engine.write.row_replacement import commit_rewrite
from ratui.engine.write.strategy_base import finish

_EPOCH = datetime(1970, 1, 1)


def _in_interval(column: str, start: datetime, end: datetime):
    """Spark's test of a row being in [start, end) (NULL for a NULL time); the bounds are UTC, as the session is."""
    from pyspark.sql import functions as F

    t = F.col(f"`{column}`")
    return (t >= F.to_timestamp(F.lit(intervals.iso(start)))) & (t < F.to_timestamp(F.lit(intervals.iso(end))))


def _bounds(field_type, start: datetime, end: datetime) -> tuple[int, int] | None:
    """The interval in the physical unit of the column's Iceberg bounds (micros, or days for a DATE)."""
    if isinstance(field_type, (TimestampType, TimestamptzType)):
        return (int((start - _EPOCH).total_seconds() * 1_000_000), int((end - _EPOCH).total_seconds() * 1_000_000))
    if isinstance(field_type, DateType):  # a date d is inside when start <= d (its midnight) < end
        first = (start.date() - date(1970, 1, 1)).days + (0 if start.time() == datetime.min.time() else 1)
        last = (end.date() - date(1970, 1, 1)).days + (0 if end.time() == datetime.min.time() else 1)
        return first * 1_000_000, last * 1_000_000
    return None


def plan_files(table, column: str, start: datetime, end: datetime) -> tuple[list[DataFile], list[DataFile]]:
    """(whole, rewrite): the files every live row of which lies in the interval (dropped unread), and those that
    may hold some (rewritten without them); a file without bounds on the column is rewritten."""
    field = table.schema().find_field(column, case_sensitive=False)
    span = _bounds(field.field_type, start, end)
    whole: list[DataFile] = []
    rewrite: list[DataFile] = []
    for f in data_files(table):
        lo, hi = (f.lower_bounds or {}).get(field.field_id), (f.upper_bounds or {}).get(field.field_id)
        if span is None or lo is None or hi is None:
            rewrite.append(f)
            continue
        low, high = int(from_bytes(field.field_type, lo)), int(from_bytes(field.field_type, hi))  # type: ignore
        if isinstance(field.field_type, DateType):
            low, high = low * 1_000_000, high * 1_000_000
        if high < span[0] or low >= span[1]:
            continue
        nulls = (f.null_value_counts or {}).get(field.field_id)
        if low >= span[0] and high < span[1] and nulls == 0:
            whole.append(f)
        else:
            rewrite.append(f)
    return whole, rewrite


def check_rows(req: WriteRequest, batch, column: str) -> int:
    """The result's row count; RAT-WRT-011 when any row's time is outside the run's interval (or NULL)."""
    from pyspark.sql import functions as F

    start, end = req.interval  # type: ignore[misc]
    inside = F.coalesce(_in_interval(column, start, end), F.lit(False))
    row = batch.agg(F.count(F.lit(1)).alias("n"), F.sum(F.when(inside, 0).otherwise(1)).alias("out")).collect()[0]
    total, outside = int(row["n"]), int(row["out"] or 0)
    if outside:
        raise RatuiError("RAT-WRT-011", f"{req.key}: {outside} of {total} result row(s) have {column} outside the "
                         f"run's interval [{intervals.iso(start)}, {intervals.iso(end)}) (or NULL); nothing was "
                         "written", details={"pipeline": req.key, "rows_outside": outside,
                                             "start": intervals.iso(start), "end": intervals.iso(end)})
    return total


def _record_only(req: WriteRequest, table, message: str) -> None:
    """A snapshot with no file change, carrying the write's summary (the interval done, with no rows)."""
    with table.transaction() as tx:
        with tx.update_snapshot(snapshot_properties={"ratui.message": message, **req.snapshot_properties,
                                                     "ratui.run-id": req.run_id, "ratui.strategy": req.strategy}
                                ).fast_append():
            pass


def incremental_by_time(req: WriteRequest) -> WriteOutcome:
    from pyspark.sql import functions as F

    outcome = WriteOutcome("incremental_by_time", 0)
    if not req.config.time_column:
        raise strategy_specs.strategy_error("RAT-CFG-011", f"merge strategy 'incremental_by_time' of {req.key} "
                                            "needs a time_column")
    if req.interval is None:
        raise RatuiError("RAT-RUN-002", f"the incremental_by_time write of {req.key} was given no interval")
    start, end = req.interval
    column = resolve_columns(req.batch, (req.config.time_column,), "RAT-WRT-012", "time_column", req.key)[0]
    batch = req.batch.persist()
    try:
        outcome.rows_written = check_rows(req, batch, column)
        table = prepare_table(req, outcome, batch.schema, rebuild=False)
        tcol = table_names(table, [column])[0]
        whole, rewrite = plan_files(table, tcol, start, end)
        message = f"incremental_by_time of {req.key} [{intervals.iso(start)}, {intervals.iso(end)})"
        if not whole and not rewrite and outcome.rows_written == 0:
            _record_only(req, table, message)
            outcome.notes.append("the interval holds no rows")
            return finish(req, outcome)

        def survivors(old, _broadcast: bool):
            return old.filter(~F.coalesce(_in_interval(tcol, start, end), F.lit(False)))

        written = commit_rewrite(req, table, aligned(batch, table), outcome.rows_written, rewrite, survivors,
                                 drop=whole, cluster_by=[tcol], message=message)
    finally:
        batch.unpersist()
    outcome.files_added = len(written.files)
    outcome.files_removed = len(whole) + len(rewrite)
    outcome.files_rewritten = len(rewrite)
    return finish(req, outcome)
