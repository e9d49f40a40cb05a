"""The write strategies (a pipeline's `merge_strategy`): how a run's result lands in its table on the run's branch.

Each is declared in project/strategy_specs.py and handled by a function here (STRATEGIES); `write` runs the one
a request names. "Merge" in `merge_strategy` is the user's word for this write; a branch merge is ops/branches.py's.

    full_refresh   replace the whole table: its rows, and its columns (a column the result no longer has is
                   dropped). An empty result empties the table, and the run says so. When --full-refresh
                   forces it on an incremental or scd2 pipeline, the rebuild keeps that pipeline's shape:
                   one row per key (incremental, scd2) and open validity columns (scd2).
    append_only    append the batch as it is.
    incremental    upsert on the unique key: every existing row whose key is in the batch is replaced by the
                   batch's row. Batch duplicates resolve to one row per key, the first run too: the latest by
                   watermark_column (a NULL watermark loses), ties and no watermark -> the last in the batch.
    delete_insert  delete every existing row whose key appears in the batch, then insert the batch as it is
                   (duplicates included: a key may hold several rows).
    scd2           type-2 history. The table is the result's columns plus `scd_valid_from` / `scd_valid_to`
                   (default valid_from / valid_to, TIMESTAMP, UTC); the open (current) version of a key has
                   valid_to NULL. Batch duplicates resolve to one row per key as for incremental. The tracked
                   columns are every column but the key and the two validity columns, compared NULL-safe:
                     key absent from the table   -> a new open row, valid_from = T
                     key unchanged               -> nothing (its open row is not rewritten, no new version)
                     key changed                 -> its open row gets valid_to = T; a new open row, valid_from = T
                     key not in the batch        -> nothing (a batch is not a full extract: no deletes)
                   T is the run's `run_started_at` (the same instant `{{ run_started_at }}` renders to), so
                   every version a run closes or opens carries one timestamp, and a re-run of the same result
                   in another run changes nothing. Without a run (a direct call) T is taken once per write.
    snapshot       replace only the partitions present in the batch: every existing row whose
                   `partition_column` value appears in the batch is removed, the batch is inserted as it is;
                   other partitions stay as they were. An empty batch changes nothing.
    incremental_by_time
                   replace the rows of the run's interval [start, end) of `time_column`: the table's rows of
                   the interval are removed, the batch's inserted; a batch row outside the interval fails the
                   write (RAT-WRT-011). The snapshot records the intervals done (write/time_range.py).

NULLs never crash a run and never drop rows: a NULL key (or partition value) is a group of its own, matched
with IS NOT DISTINCT FROM semantics (`<=>`): a batch row with a NULL key replaces / closes the table's
NULL-key row(s), exactly as any other key value would.

Only the files that may hold an affected key are read or rewritten, and a file that changes a little gets a
position-delete file instead (write/row_replacement.py says how and at what cost).
"""

from __future__ import annotations

from typing import Callable

from ratui.engine.iceberg.read import data_files
from ratui.engine.project import strategy_specs
from ratui.engine.write.keys import dedupe, resolve_columns
from ratui.engine.write.prepare import aligned, prepare_table, table_names
from ratui.engine.write.request import WriteOutcome, WriteRequest
from ratui.engine.write.row_replacement import replace_matching
from ratui.engine.write.scd2 import scd2, with_validity
from ratui.engine.write.time_range import incremental_by_time
from ratui.engine.write.strategy_base import (dedupe_by, finish, key_columns, run_timestamp, watermark_column,
                                              write_and_commit)


def full_refresh(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("full_refresh", req.batch_rows or 0)
    keys = key_columns(req)
    result = req.batch
    shape = strategy_specs.BY_NAME.get(req.config.merge_strategy)  # the pipeline's own strategy
    # --full-refresh of a keyed pipeline rebuilds it in its own shape: one row per key (removed as it is written)
    one_per_key = shape is not None and shape.one_row_per_key and bool(keys)
    watermark = watermark_column(req) if one_per_key else None
    if shape is not None and shape.versions:
        ts = run_timestamp(req.run_started_at)
        result = with_validity(req, result, ts)
        outcome.valid_at = ts.isoformat()
    table = prepare_table(req, outcome, result.schema, rebuild=True)
    old = data_files(table)
    # a table later keyed writes prune by key is written clustered by it; a full_refresh pipeline's table is only
    # ever replaced whole: its result is written as the query produced it, like any Spark write
    cluster = table_names(table, keys) if shape is not None and shape.needs_key and keys else []
    written = write_and_commit(req, table, aligned(result, table), delete=old,
                               message=f"full_refresh of {req.key}", cluster_by=cluster, rows_hint=req.batch_rows,
                               dedupe_by=dedupe_by(table, keys, watermark) if one_per_key else None)
    outcome.files_added, outcome.files_removed = len(written.files), len(old)
    outcome.rows_written = written.rows
    if written.rows == 0:
        outcome.notes.append("the result was empty: the table is now empty" if old else "the result was empty")
    return finish(req, outcome)


def append_only(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("append_only", req.batch_rows or 0)
    table = prepare_table(req, outcome, req.batch.schema, rebuild=False)
    kept = len(data_files(table))
    written = write_and_commit(req, table, aligned(req.batch, table), delete=[], message=f"append to {req.key}")
    outcome.files_added, outcome.files_kept, outcome.rows_written = len(written.files), kept, written.rows
    if written.rows == 0:
        outcome.notes.append("the batch was empty: nothing appended")
    return finish(req, outcome)


def incremental(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("incremental", 0)
    keys, watermark = key_columns(req), watermark_column(req)
    table = prepare_table(req, outcome, req.batch.schema, rebuild=False)
    keys = table_names(table, keys)
    batch = aligned(dedupe(req.batch, resolve_columns(req.batch, tuple(keys), "RAT-WRT-001", "unique_key",
                                                      req.key), watermark), table)
    return replace_matching(req, table, outcome, batch, keys, cluster_by=keys,
                            message=f"incremental upsert into {req.key}",
                            empty_note="the batch was empty: nothing changed", unique_keys=True)


def delete_insert(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("delete_insert", 0)
    keys = key_columns(req)
    table = prepare_table(req, outcome, req.batch.schema, rebuild=False)
    keys = table_names(table, keys)
    return replace_matching(req, table, outcome, aligned(req.batch, table), keys, cluster_by=keys,
                            message=f"delete_insert into {req.key}",
                            empty_note="the batch was empty: nothing deleted or inserted")


def snapshot(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("snapshot", 0)
    if not req.config.partition_column:
        raise strategy_specs.strategy_error("RAT-CFG-004", f"merge strategy 'snapshot' of {req.key} needs a "
                                            "partition_column")
    resolve_columns(req.batch, (req.config.partition_column,), "RAT-WRT-008", "partition_column", req.key,
                    hint=strategy_specs.hint("RAT-WRT-008"))
    table = prepare_table(req, outcome, req.batch.schema, rebuild=False)
    part = table_names(table, [req.config.partition_column])
    return replace_matching(req, table, outcome, aligned(req.batch, table), part, cluster_by=part,
                            message=f"snapshot of the batch's partitions of {req.key}",
                            empty_note="the batch was empty: no partition replaced")


STRATEGIES: dict[str, Callable[[WriteRequest], WriteOutcome]] = {
    # a handler for every strategy project/strategy_specs.py declares, and no other
    "full_refresh": full_refresh,
    "append_only": append_only,
    "incremental": incremental,
    "delete_insert": delete_insert,
    "scd2": scd2,
    "snapshot": snapshot,
    "incremental_by_time": incremental_by_time,
}
if tuple(STRATEGIES) != strategy_specs.NAMES:
    raise RuntimeError(f"write/strategies.py handles {sorted(STRATEGIES)}, strategy_specs.py declares "
                       f"{sorted(strategy_specs.NAMES)}")


def write(req: WriteRequest) -> WriteOutcome:
    """Write the request's batch into its table with the strategy it names (RAT-CFG-008 for one ratui lacks)."""
    try:
        handler = STRATEGIES[req.strategy]
    except KeyError:
        raise strategy_specs.strategy_error("RAT-CFG-008",
                                            f"merge strategy '{req.strategy}' is not supported yet") from None
    return handler(req)
