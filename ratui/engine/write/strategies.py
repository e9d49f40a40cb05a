"""The merge strategies: how a run's result lands in the pipeline's table on the run's branch.

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

NULLs never crash a run and never drop rows: a NULL key (or partition value) is a group of its own, matched
with IS NOT DISTINCT FROM semantics (`<=>`): a batch row with a NULL key replaces / closes the table's
NULL-key row(s), exactly as any other key value would.

Cost. Merges are copy-on-write at file granularity and computed in Spark. The data files that may hold an
affected key are chosen from Iceberg's per-file column bounds (every key column, NULL counts included); then
one pass over those candidates' key columns alone finds the batch keys the table really holds, and only the
files whose bounds hold one of those are touched: a file whose statistics show it holds nothing but affected
keys is dropped without being read again, the others are read and rewritten without the affected rows.
A batch of new keys that fall inside existing files' ranges rewrites nothing. Untouched files are carried
over into the new snapshot; the table is never read whole and no row passes through Python. New files are
range-partitioned and sorted by the key (one range per file of the target size, write/files.py), so each covers a
narrow key range and later merges prune well.

Merge-on-read. A file of which a merge changes only a small share (MOR_MAX_SHARE) is not rewritten: a position-
delete file names its replaced rows. scd2 does the same for the open versions it closes: the old version is
deleted by position and its closed copy (valid_to = T) is appended with the new versions, so a change spread
over every file writes one delete file per file and the new rows, not the whole table.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from ratui.engine.errors import RatuiError
from ratui.engine.project import strategy_specs
from ratui.engine.iceberg.deletes import write_position_deletes
from ratui.engine.iceberg.read import FILE_NO, ROW_POS, data_files, live_rows, read_files, row_count
from ratui.engine.iceberg.schema import iceberg_to_spark_type
from ratui.engine.write.files import (KEEP_LAYOUT_MIN_ROWS, TARGET_FILE_PROPERTY, WrittenFiles, commit_files,
                                      discard, session_conf, write_files)
from ratui.engine.write.keys import dedupe, key_frame, match_keys, resolve_columns
from ratui.engine.write.prepare import aligned, prepare_table, table_names
from ratui.engine.write.request import WriteOutcome, WriteRequest  # noqa: F401 - the writer's words, named here too
from ratui.engine.locations import local_file
from ratui.engine.sql_text import quote, renamed
from ratui.engine.write.pruning import (IN_FILTER_CONF, arrow_candidates, arrow_ranges, batch_ranges, files_in_ranges,
                                        key_filters, key_values, local_keys, locate_rows, small_batch)

# Keys broadcast to every task when a large rewrite keeps its files' layout (see _keeps_layout), and when a merge
# matches them against the rows of the files they may touch: up to BROADCAST_MAX_KEYS always, up to
# BROADCAST_LARGE_MAX_KEYS when those rows are BROADCAST_RATIO times as many (shuffling a 100M-row table's key
# column to meet 1M keys took 72 s; sending the 1M keys to every task instead 39 s: benchmarks/README.md).
BROADCAST_MAX_KEYS = 500_000
BROADCAST_LARGE_MAX_KEYS = 2_000_000
BROADCAST_RATIO = 20


def _broadcast(keys: int, candidates: list[DataFile]) -> bool:
    """Whether a merge's `keys` batch rows go to every task matching them against `candidates` (else both sides
    are shuffled by key)."""
    return keys <= BROADCAST_MAX_KEYS or (
        keys <= BROADCAST_LARGE_MAX_KEYS and sum(f.record_count for f in candidates) >= BROADCAST_RATIO * keys)

# A merge writes position deletes for a file (merge-on-read) while at most this share of the file's rows would
# then be deleted; beyond it, the file is rewritten (copy-on-write). The reaper compacts files past its own share.
MOR_MAX_SHARE = 0.2

# A batch of more rows than this rewrites the files its key ranges reach, without locating rows first (the
# positions of millions of replaced rows are not worth bringing to the driver; such a change rewrites most of
# what it touches anyway).
LOCATE_MAX_ROWS = 5_000_000

# A batch of at most this many rows is brought to the driver once (small_batch): its count and key ranges are
# computed there, its key tuples go back to Spark as a local relation (every join with them is a broadcast that
# costs no job, the cached batch is not scanned again), and their distinct values filter the table's key columns
# inside the Parquet reader (pages and row groups that hold none of them are skipped) before the exact NULL-safe
# match.
LOCAL_KEYS_MAX = 20_000

HIT = "__ratui_hit"


# ------------------------------------------------------------------------------------------------ helpers


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


def _ts_literal(ts: datetime, target):
    """A Spark literal of the run's instant, exact to the microsecond, cast to the table column's type."""
    from pyspark.sql import functions as F

    return F.timestamp_micros(F.lit(_micros(ts))).cast(target)


def _write_and_commit(req: WriteRequest, table: Table, df, *, delete, message: str,
                      cluster_by=(), rows_hint: int | None = None, keep=None, keep_files=(),
                      add_deletes: Sequence[DataFile] = (), constant: Sequence[str] = (),
                      dedupe_by: tuple[list[str], str | None] | None = None) -> WrittenFiles:
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


def _finish(req: WriteRequest, outcome: WriteOutcome) -> WriteOutcome:
    outcome.table_rows = row_count(req.catalog.load_table(req.ref, req.key))
    return outcome


# ------------------------------------------------------------------------------------------ file pruning


def _keeps_layout(rewrite: list[DataFile], new_rows: int) -> bool:
    """Rewrite in place (no shuffle of the surviving rows) when that is most of the work and the batch's keys
    are few enough to broadcast; otherwise re-cluster everything written (small rewrites stay tidy)."""
    return sum(f.record_count for f in rewrite) > KEEP_LAYOUT_MIN_ROWS and new_rows <= BROADCAST_MAX_KEYS


def _commit_rewrite(req: WriteRequest, table: Table, new_rows, new_count: int, rewrite: list[DataFile],
                    kept_rows: Callable[[Any, bool], Any], *, drop: tuple[DataFile, ...] | list[DataFile] = (),
                    cluster_by: list[str], message: str, add_deletes: Sequence[DataFile] = (),
                    constant: Sequence[str] = ()) -> WrittenFiles:
    """One snapshot: `new_rows` added, each file of `rewrite` replaced by `kept_rows(its rows, broadcast)` (the
    rows that stay, changed or not), the files of `drop` removed unread.

    A large rewrite keeps its files' layout (one task per file, no shuffle; the batch's keys broadcast) and
    clusters only the new rows; a small one re-clusters everything it writes."""
    keep = _keeps_layout(rewrite, new_count)
    kept = kept_rows(read_files(req.session, table, rewrite), keep) if rewrite else None
    delete = list(rewrite) + list(drop)
    try:
        if keep:
            return _write_and_commit(req, table, new_rows, delete=delete, message=message, cluster_by=cluster_by,
                                     rows_hint=new_count, keep=kept, keep_files=rewrite, add_deletes=add_deletes,
                                     constant=constant)
        result = kept.unionByName(new_rows) if kept is not None else new_rows
        return _write_and_commit(req, table, result, delete=delete, message=message, cluster_by=cluster_by,
                                 rows_hint=new_count + sum(f.record_count for f in rewrite), add_deletes=add_deletes,
                                 constant=constant)
    except BaseException:
        for folder in {d.file_path.rsplit("/", 1)[0] for d in add_deletes}:
            discard(WrittenFiles([], folder, table))  # never committed: nothing refers to them
        raise


def _small_batch(req: WriteRequest, batch, cols: list[str]):
    """small_batch of the batch's key columns `cols`, unless the run's result alone (req.batch_rows, counted before
    any dedupe) holds more than LOCAL_KEYS_MAX rows: the batch is then known to be large (or larger than worth
    it), and the job that would bring its first rows to the driver is not run."""
    from pyspark.sql import functions as F

    if req.batch_rows is not None and req.batch_rows > LOCAL_KEYS_MAX:
        return None
    return small_batch(batch.select(*[F.col(f"`{c}`") for c in cols]), LOCAL_KEYS_MAX)


def _replace_matching(req: WriteRequest, table: Table, outcome: WriteOutcome, new_rows, match_cols: list[str],
                      *, cluster_by: list[str], message: str, empty_note: str,
                      unique_keys: bool = False) -> WriteOutcome:
    """Remove every row whose `match_cols` tuple (NULL-safe) appears in `new_rows`, add `new_rows`: one snapshot.

    The engine of incremental (deduplicated rows), delete_insert (rows as they are) and snapshot (match on
    the partition column). Each file holding replaced rows is handled by how much of it changes (see `_plan`):
    dropped whole, rewritten (copy-on-write), or given a position-delete file (merge-on-read).
    """
    from pyspark.sql import functions as F

    new_rows = new_rows.persist()
    try:
        # one job: a small batch's key columns come to the driver (its count, key ranges and keys need no other
        # job; the job also fills the batch's cache); a larger batch gets one more job for its count and key
        # ranges. The files those ranges reach come from Iceberg's statistics.
        local = _small_batch(req, new_rows, match_cols)
        if local is not None:
            outcome.rows_written, ranges = arrow_ranges(table, local, match_cols)
        else:
            outcome.rows_written, ranges = batch_ranges(table, new_rows, match_cols)
        existing = data_files(table)
        if outcome.rows_written == 0:
            outcome.notes.append(empty_note)
            outcome.files_kept = len(existing)
            return _finish(req, outcome)
        values = None
        if local is not None:
            keys_df, values = local_keys(req.session, local, new_rows.schema, match_cols)
        else:
            keys_df = key_frame(new_rows, match_cols, unique=unique_keys).persist()
        try:
            candidates = files_in_ranges(existing, ranges)
            whole, rewrite, deletes = _plan(req, table, candidates, keys_df, match_cols, outcome.rows_written,
                                            values, ranges)

            def survivors(old, broadcast: bool):
                keys = F.broadcast(keys_df) if broadcast else keys_df
                return old.join(keys, match_keys(old, match_cols, keys, [f"__k{i}" for i in range(len(match_cols))]),
                                "left_anti")

            written = _commit_rewrite(req, table, new_rows, outcome.rows_written, rewrite, survivors,
                                      drop=whole, cluster_by=cluster_by, message=message, add_deletes=deletes)
        finally:
            keys_df.unpersist()
    finally:
        new_rows.unpersist()
    outcome.files_added = len(written.files)
    outcome.files_removed = len(rewrite) + len(whole)
    outcome.files_rewritten = len(rewrite)
    outcome.delete_files_added = len(deletes)
    outcome.rows_deleted_by_position = sum(d.record_count for d in deletes)
    outcome.files_kept = len(existing) - outcome.files_removed
    return _finish(req, outcome)


def _plan(req: WriteRequest, table: Table, candidates: list[DataFile], keys_df, cols: list[str], new_rows: int,
          values: list[tuple[list | None, bool]] | None = None, ranges=()):
    """(whole, rewrite, deletes): the files to drop unread (every live row replaced), the files to rewrite without
    their replaced rows, and the position-delete files written for the rest.

    One pass over the candidates' key columns finds the rows to replace (their file and position). A file goes
    copy-on-write when, counting the rows its delete files already take out, more than MOR_MAX_SHARE of it would be
    deleted; otherwise merge-on-read: a delete file naming the positions, the file itself untouched. Files
    written before are never read whole, and a new key that falls in a file's key range touches nothing.

    When the batch holds more rows than MOR_MAX_SHARE of the candidates' live rows, the share of most candidates
    that changes is past the threshold anyway: the candidates are rewritten without the pass that locates rows
    (a small table changed whole costs one job, not three)."""
    if not candidates:
        return [], [], []
    if new_rows > LOCATE_MAX_ROWS or (
            req.merge_on_read and new_rows > MOR_MAX_SHARE * sum(live_rows(table, f) for f in candidates)):
        return [], list(candidates), []
    # one job: the file and position of every row the batch replaces, to the driver (a position is two numbers; a
    # batch of millions of rows never gets here, see above)
    with session_conf(req.session, IN_FILTER_CONF if values is not None else {}):
        found = locate_rows(req.session, table, candidates, keys_df, cols,
                            broadcast=_broadcast(new_rows, candidates), values=values, ranges=ranges).toArrow()
    whole, rewrite, _, deletes = _classify(req, table, candidates, found)
    return whole, rewrite, deletes


def _classify(req: WriteRequest, table: Table, candidates: list[DataFile], found, *, drop_whole: bool = True):
    """(whole, rewrite, mor, deletes) for the rows `found` (Arrow: FILE_NO, ROW_POS of the rows to take out of
    `candidates`): the files to drop unread (every live row taken out; with drop_whole=False they are rewritten
    instead), the files to rewrite (copy-on-write), the indexes of the files given a position-delete file
    (merge-on-read), and those delete files (written here, in the order of `mor`)."""
    import pyarrow.compute as pc

    counts = {entry["values"]: entry["counts"] for entry in pc.value_counts(found[FILE_NO]).to_pylist()}
    whole: list[DataFile] = []
    rewrite: list[DataFile] = []
    mor: list[int] = []
    for i, n in sorted(counts.items()):
        f = candidates[i]
        live = live_rows(table, f)
        if n >= live and drop_whole:
            whole.append(f)
        elif n >= live or (f.record_count - live + n) / f.record_count > MOR_MAX_SHARE or not req.merge_on_read:
            rewrite.append(f)
        else:
            mor.append(i)
    deletes: list[DataFile] = []
    if mor:
        # beside the run's data files (the sweep spares a live run's `run-{run_id}-*` folders), on the table's storage
        folder = f"{local_file(table, table.location()).rstrip('/')}/data/run-{req.run_id}-del{uuid.uuid4().hex[:8]}"
        try:
            for i in mor:
                positions = found.filter(pc.equal(found[FILE_NO], i))[ROW_POS]
                deletes.append(write_position_deletes(table.io, folder, candidates[i], positions.combine_chunks()))
        except BaseException:
            discard(WrittenFiles([], folder, table))
            raise
    return whole, rewrite, mor, deletes


# --------------------------------------------------------------------------------------------- strategies


def _keys(req: WriteRequest) -> list[str]:
    return resolve_columns(req.batch, req.config.unique_key, "RAT-WRT-001", "unique_key", req.key)


def _dedupe_by(table: Table, keys: list[str], watermark: str | None) -> tuple[list[str], str | None]:
    """write_files' dedupe_by: the keys and watermark by their names in the table (the aligned result's)."""
    return table_names(table, keys), table_names(table, [watermark])[0] if watermark else None


def _watermark(req: WriteRequest) -> str | None:
    if not req.config.watermark_column:
        return None
    return resolve_columns(req.batch, (req.config.watermark_column,), "RAT-WRT-002", "watermark_column",
                            req.key)[0]


KEYED = strategy_specs.KEYED


def full_refresh(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("full_refresh", req.batch_rows or 0)
    keys = _keys(req)
    result = req.batch
    pipeline_strategy = req.config.merge_strategy
    # --full-refresh of a keyed pipeline rebuilds it in its own shape: one row per key (removed as it is written)
    one_per_key = pipeline_strategy in ("incremental", "scd2") and bool(keys)
    watermark = _watermark(req) if one_per_key else None
    ts = None
    if pipeline_strategy == "scd2":
        ts = run_timestamp(req.run_started_at)
        result = _with_validity(req, result, ts)
        outcome.valid_at = ts.isoformat()
    table = prepare_table(req, outcome, result.schema, rebuild=True)
    old = data_files(table)
    # a table later merges prune by key is written clustered by it; a full_refresh pipeline's table is only ever
    # replaced whole: its result is written as the query produced it, like any Spark write
    cluster = table_names(table, keys) if pipeline_strategy in KEYED and keys else []
    written = _write_and_commit(req, table, aligned(result, table), delete=old,
                                message=f"full_refresh of {req.key}", cluster_by=cluster, rows_hint=req.batch_rows,
                                dedupe_by=_dedupe_by(table, keys, watermark) if one_per_key else None)
    outcome.files_added, outcome.files_removed = len(written.files), len(old)
    outcome.rows_written = written.rows
    if written.rows == 0:
        outcome.notes.append("the result was empty: the table is now empty" if old else "the result was empty")
    return _finish(req, outcome)


def append_only(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("append_only", req.batch_rows or 0)
    table = prepare_table(req, outcome, req.batch.schema, rebuild=False)
    kept = len(data_files(table))
    written = _write_and_commit(req, table, aligned(req.batch, table), delete=[], message=f"append to {req.key}")
    outcome.files_added, outcome.files_kept, outcome.rows_written = len(written.files), kept, written.rows
    if written.rows == 0:
        outcome.notes.append("the batch was empty: nothing appended")
    return _finish(req, outcome)


def incremental(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("incremental", 0)
    keys, watermark = _keys(req), _watermark(req)
    table = prepare_table(req, outcome, req.batch.schema, rebuild=False)
    keys = table_names(table, keys)
    batch = aligned(dedupe(req.batch, resolve_columns(req.batch, tuple(keys), "RAT-WRT-001", "unique_key",
                                                         req.key), watermark), table)
    return _replace_matching(req, table, outcome, batch, keys, cluster_by=keys,
                             message=f"incremental upsert into {req.key}",
                             empty_note="the batch was empty: nothing changed", unique_keys=True)


def delete_insert(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("delete_insert", 0)
    keys = _keys(req)
    table = prepare_table(req, outcome, req.batch.schema, rebuild=False)
    keys = table_names(table, keys)
    return _replace_matching(req, table, outcome, aligned(req.batch, table), keys, cluster_by=keys,
                             message=f"delete_insert into {req.key}",
                             empty_note="the batch was empty: nothing deleted or inserted")


def snapshot(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("snapshot", 0)
    if not req.config.partition_column:
        raise RatuiError("RAT-CFG-004", f"merge strategy 'snapshot' of {req.key} needs a partition_column")
    resolve_columns(req.batch, (req.config.partition_column,), "RAT-WRT-008", "partition_column", req.key)
    table = prepare_table(req, outcome, req.batch.schema, rebuild=False)
    part = table_names(table, [req.config.partition_column])
    return _replace_matching(req, table, outcome, aligned(req.batch, table), part, cluster_by=part,
                             message=f"snapshot of the batch's partitions of {req.key}",
                             empty_note="the batch was empty: no partition replaced")


def _validity_names(req: WriteRequest) -> tuple[str, str]:
    vf, vt = req.config.scd_valid_from, req.config.scd_valid_to
    if vf.lower() == vt.lower():
        raise RatuiError("RAT-WRT-009", f"scd_valid_from and scd_valid_to of {req.key} are both '{vf}'")
    clash = [c for c in req.batch.columns if c.lower() in (vf.lower(), vt.lower())]
    if clash:
        raise RatuiError("RAT-WRT-009", f"the result of {req.key} already has a column '{clash[0]}', which the "
                         "scd2 strategy maintains itself")
    return vf, vt


def _with_validity(req: WriteRequest, df, ts: datetime):
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    vf, vt = _validity_names(req)
    return df.withColumn(vf, _ts_literal(ts, st.TimestampType())).withColumn(vt, F.lit(None).cast("timestamp"))


def scd2(req: WriteRequest) -> WriteOutcome:
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    outcome = WriteOutcome("scd2", 0)
    keys, watermark = _keys(req), _watermark(req)
    vf, vt = _validity_names(req)
    ts = run_timestamp(req.run_started_at)
    outcome.valid_at = ts.isoformat()
    shaped = req.batch.withColumn(vf, F.lit(None).cast(st.TimestampType())).withColumn(
        vt, F.lit(None).cast(st.TimestampType()))
    existed = req.catalog.table_exists(req.ref, req.key)
    table = prepare_table(req, outcome, shaped.schema, rebuild=False)
    if existed and any(c.startswith("add ") and c.split()[1].lower() in (vf.lower(), vt.lower())
                       for c in outcome.schema_changes):
        outcome.notes.append(f"{vf} / {vt} added: the rows already in the table count as open versions")
    schema = table.schema()
    keys = table_names(table, keys)
    vf, vt = table_names(table, [vf, vt])
    vf_type = iceberg_to_spark_type(schema.find_field(vf).field_type)
    vt_type = iceberg_to_spark_type(schema.find_field(vt).field_type)
    tracked = [f.name for f in schema.fields if f.name not in set(keys) | {vf, vt}]
    stamp_from, stamp_to = _ts_literal(ts, vf_type), _ts_literal(ts, vt_type)

    batch_keys = resolve_columns(req.batch, tuple(keys), "RAT-WRT-001", "unique_key", req.key)
    existing = data_files(table)
    if not existing:
        # a first write (or one into a table without files): every batch row opens a version and nothing is looked
        # up or closed, so the batch is written as a full refresh writes it (clustered by key, a row per key kept
        # as it is range-partitioned: one shuffle), without caching it or a job for its key ranges
        written = _write_and_commit(req, table, aligned(req.batch, table).withColumn(vf, stamp_from).withColumn(
            vt, F.lit(None).cast(vt_type)), delete=[], message=f"scd2 versions of {req.key} at {ts.isoformat()}",
            cluster_by=keys, rows_hint=req.batch_rows, constant=(vf, vt),  # both validity columns constant
            dedupe_by=_dedupe_by(table, keys, watermark))
        outcome.rows_written = written.rows
        outcome.files_added = len(written.files)
        if written.rows == 0:
            outcome.notes.append("the batch was empty: no version opened or closed")
        return _finish(req, outcome)
    batch = aligned(dedupe(req.batch, batch_keys, watermark), table).persist()
    matched = None
    to_open = batch
    deletes: list[DataFile] = []
    try:
        outcome.rows_written = 0
        # one job (it also fills the batch's cache): a small batch's key columns come to the driver, whose count,
        # key ranges and candidate files then need no other job; a larger batch's count and key ranges are one
        # aggregate. The files that may hold an open version of a batch key come from Iceberg's statistics.
        local = _small_batch(req, batch, keys)
        if local is not None:
            batch_rows, ranges = arrow_ranges(table, local, keys)
        else:
            batch_rows, ranges = batch_ranges(table, batch, keys)
        if batch_rows == 0:
            outcome.notes.append("the batch was empty: no version opened or closed")
            outcome.files_kept = len(existing)
            return _finish(req, outcome)
        kcols = [f"__k{i}" for i in range(len(keys))]
        candidates = [f for f in files_in_ranges(existing, ranges) if _may_hold_open(f, schema.find_field(vt))]
        values = None
        if local is not None:
            candidates = arrow_candidates(table, candidates, local, keys)
            values = key_values(local, batch.schema, keys)
        found = None
        if candidates:
            # one pass over the candidates (the job that fills `matched`'s cache): the open version of each batch
            # key, where it lies and whether it changes; the positions of those that change come to the driver
            # (two numbers a row)
            matched = _open_versions(req, table, candidates, batch, batch_rows, keys, tracked, vt, values,
                                     ranges).persist()
            with session_conf(req.session, IN_FILTER_CONF if values is not None else {}):
                found = matched.where(~F.col(SAME)).select(FILE_NO, ROW_POS).toArrow()
            same = matched.where(F.col(SAME))
            if same.isEmpty():  # a small job over the cache (its batches hold the SAME column's bounds)
                outcome.rows_written = batch_rows  # every batch row is new or changed: each opens a version
            else:
                # a batch row with an identical open row (key and every tracked column, NULL-safe) changes nothing
                same = same.select(*[F.col(f"`{OLD}{k}`").alias(kc) for k, kc in zip(keys, kcols)])
                if batch_rows <= BROADCAST_MAX_KEYS:
                    same = F.broadcast(same)
                to_open = batch.join(same, match_keys(batch, keys, same, kcols), "left_anti").persist()
                outcome.rows_written = to_open.count()  # over the two cached frames: a small job
        else:
            outcome.rows_written = batch_rows  # no open version of any batch key: every row opens one
        if outcome.rows_written == 0:
            outcome.notes.append("no key changed: no version opened or closed")
            outcome.files_kept = len(existing)
            return _finish(req, outcome)
        opened_keys = key_frame(to_open, keys).withColumn(HIT, F.lit(True))
        rewrite: list[DataFile] = []
        closed_copies, closed_count = None, 0
        if matched is not None and found is not None:
            closing = matched.where(~F.col(SAME))
            if found.num_rows:
                # a file that changes a little keeps its rows: a position-delete file takes the open version
                # out and its closed copy is appended with the new versions (merge-on-read); a file that
                # changes much is rewritten with those versions closed in place (copy-on-write)
                _, rewrite, mor, deletes = _classify(req, table, candidates, found, drop_whole=False)
                if mor:
                    closed_count = sum(d.record_count for d in deletes)
                    closed_copies = closing.where(F.col(FILE_NO).isin(mor)).select(
                        *[(stamp_to if f.name == vt else F.col(f"`{OLD}{f.name}`")).alias(f.name)
                          for f in schema.fields])
        new_versions = to_open.withColumn(vf, stamp_from).withColumn(vt, F.lit(None).cast(vt_type))
        if closed_copies is not None:
            new_versions = new_versions.unionByName(closed_copies)

        def closed(old, broadcast: bool):
            """The rewritten files' rows, the open versions of the changed keys closed at T."""
            hits = F.broadcast(opened_keys) if broadcast else opened_keys
            marked = old.join(hits, match_keys(old, keys, hits, kcols), "left")
            return marked.withColumn(
                vt, F.when(F.col(f"`{vt}`").isNull() & F.col(HIT).isNotNull(), stamp_to)
                .otherwise(F.col(f"`{vt}`"))).select(*[F.col(f"`{f.name}`") for f in schema.fields])

        written = _commit_rewrite(req, table, new_versions, outcome.rows_written + closed_count, rewrite,
                                  closed, cluster_by=keys, add_deletes=deletes,
                                  message=f"scd2 versions of {req.key} at {ts.isoformat()}")
        deletes_done = deletes
        deletes = []  # committed, or discarded by _commit_rewrite
    finally:
        for folder in {d.file_path.rsplit("/", 1)[0] for d in deletes}:
            discard(WrittenFiles([], folder, table))  # written, never committed: nothing refers to them
        if to_open is not batch:
            to_open.unpersist()
        if matched is not None:
            matched.unpersist()
        batch.unpersist()
    outcome.files_added = len(written.files)
    outcome.files_removed = outcome.files_rewritten = len(rewrite)
    outcome.files_kept = len(existing) - len(rewrite)
    outcome.delete_files_added = len(deletes_done)
    outcome.rows_deleted_by_position = sum(d.record_count for d in deletes_done)
    return _finish(req, outcome)


OLD, NEW, SAME = "__ratui_old_", "__ratui_new_", "__ratui_same"


def _may_hold_open(data: DataFile, vt) -> bool:
    """False when Iceberg's statistics show that a data file holds no open version (no NULL in `vt`, the valid_to
    field): a file of closed versions alone is never read. Deleted rows only lower the true count."""
    nulls = (data.null_value_counts or {}).get(vt.field_id)
    return nulls is None or nulls > 0


def _open_versions(req: WriteRequest, table: Table, candidates: list[DataFile], batch, batch_rows: int,
                   keys: list[str], tracked: list[str], vt: str, values=None, ranges=()):
    """The open versions (`vt` NULL) in `candidates` of the batch's keys: every table column prefixed OLD, their
    FILE_NO and ROW_POS, and SAME: whether the batch row of the key holds the same tracked values (NULL-safe).
    One pass over the candidates; a batch small beside them goes to every task (_broadcast). The table's
    key columns are filtered first on the batch's key values or ranges (key_filters, what the Parquet reader
    can skip pages by), then matched exactly."""
    from pyspark.sql import functions as F

    # SQL text: a few JVM calls, not several per column (sql_text.py)
    fields = [f.name for f in table.schema().fields]
    old = read_files(req.session, table, candidates, positions=True).where(f"{quote(vt)} IS NULL")
    old = key_filters(old, keys, values, ranges)
    old = old.selectExpr(*[renamed(c, OLD + c) for c in fields], FILE_NO, ROW_POS)
    new = batch.selectExpr(*[renamed(c, NEW + c) for c in keys + tracked])
    if _broadcast(batch_rows, candidates):
        new = F.broadcast(new)
    both = old.join(new, match_keys(old, [OLD + k for k in keys], new, [NEW + k for k in keys]), "inner")
    same = " AND ".join(f"{quote(OLD + c)} <=> {quote(NEW + c)}" for c in tracked) or "true"
    return both.selectExpr(*[quote(OLD + c) for c in fields], FILE_NO, ROW_POS, f"{same} AS {SAME}")


STRATEGIES = {  # a handler for every strategy project/strategy_specs.py declares, and no other
    "full_refresh": full_refresh,
    "append_only": append_only,
    "incremental": incremental,
    "delete_insert": delete_insert,
    "scd2": scd2,
    "snapshot": snapshot,
}
if tuple(STRATEGIES) != strategy_specs.NAMES:
    raise RuntimeError(f"write/strategies.py handles {sorted(STRATEGIES)}, strategy_specs.py declares "
                       f"{sorted(strategy_specs.NAMES)}")


def write(req: WriteRequest) -> WriteOutcome:
    try:
        handler = STRATEGIES[req.strategy]
    except KeyError:
        raise RatuiError("RAT-CFG-008", f"merge strategy '{req.strategy}' is not supported yet") from None
    return handler(req)
