"""Replacing the rows of a table that a batch's keys match: the engine of incremental, delete_insert and snapshot
(write/strategies.py), and of scd2's closing of the versions it replaces (write/scd2.py).

Cost. A replacement is copy-on-write at file granularity and computed in Spark. The data files that may hold an
affected key are chosen from Iceberg's per-file column bounds (every key column, NULL counts included); then
one pass over those candidates' key columns alone finds the batch keys the table really holds, and only the
files whose bounds hold one of those are touched: a file whose statistics show it holds nothing but affected
keys is dropped without being read again, the others are read and rewritten without the affected rows.
A batch of new keys that fall inside existing files' ranges rewrites nothing. Untouched files are carried
over into the new snapshot; the table is never read whole and no row passes through Python. New files are
range-partitioned and sorted by the key (one range per file of the target size, write/files.py), so each covers a
narrow key range and later replacements prune well.

Merge-on-read (Iceberg's name for it: the reader merges the deletes in; no branch is merged). A file of which a
write changes only a small share (MOR_MAX_SHARE) is not rewritten: a position-delete file names its replaced rows.
scd2 does the same for the open versions it closes: the old version is deleted by position and its closed copy
(valid_to = T) is appended with the new versions, so a change spread over every file writes one delete file per
file and the new rows, not the whole table.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Sequence

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from ratui.engine.iceberg.deletes import write_position_deletes
from ratui.engine.iceberg.read import FILE_NO, ROW_POS, data_files, live_rows, read_files
from ratui.engine.locations import local_file
from ratui.engine.write.files import KEEP_LAYOUT_MIN_ROWS, WrittenFiles, discard, session_conf
from ratui.engine.write.keys import key_frame, match_keys
from ratui.engine.write.pruning import (IN_FILTER_CONF, arrow_ranges, batch_ranges, files_in_ranges, local_keys,
                                        locate_rows, small_batch)
from ratui.engine.write.request import WriteOutcome, WriteRequest
from ratui.engine.write.strategy_base import finish, write_and_commit

# Keys broadcast to every task when a large rewrite keeps its files' layout (see keeps_layout), and when a write
# matches them against the rows of the files they may touch: up to BROADCAST_MAX_KEYS always, up to
# BROADCAST_LARGE_MAX_KEYS when those rows are BROADCAST_RATIO times as many (shuffling a 100M-row table's key
# column to meet 1M keys took 72 s; sending the 1M keys to every task instead 39 s: benchmarks/README.md).
BROADCAST_MAX_KEYS = 500_000
BROADCAST_LARGE_MAX_KEYS = 2_000_000
BROADCAST_RATIO = 20


def broadcast_batch(keys: int, candidates: list[DataFile]) -> bool:
    """Whether a write's `keys` batch rows go to every task matching them against `candidates` (else both sides
    are shuffled by key)."""
    return keys <= BROADCAST_MAX_KEYS or (
        keys <= BROADCAST_LARGE_MAX_KEYS and sum(f.record_count for f in candidates) >= BROADCAST_RATIO * keys)


# A replacement writes position deletes for a file (merge-on-read) while at most this share of the file's rows would
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


def keeps_layout(rewrite: list[DataFile], new_rows: int) -> bool:
    """Rewrite in place (no shuffle of the surviving rows) when that is most of the work and the batch's keys
    are few enough to broadcast; otherwise re-cluster everything written (small rewrites stay tidy)."""
    return sum(f.record_count for f in rewrite) > KEEP_LAYOUT_MIN_ROWS and new_rows <= BROADCAST_MAX_KEYS


def commit_rewrite(req: WriteRequest, table: Table, new_rows, new_count: int, rewrite: list[DataFile],
                   kept_rows: Callable[[Any, bool], Any], *, drop: tuple[DataFile, ...] | list[DataFile] = (),
                   cluster_by: list[str], message: str, add_deletes: Sequence[DataFile] = (),
                   constant: Sequence[str] = ()) -> WrittenFiles:
    """One snapshot: `new_rows` added, each file of `rewrite` replaced by `kept_rows(its rows, broadcast)` (the
    rows that stay, changed or not), the files of `drop` removed unread.

    A large rewrite keeps its files' layout (one task per file, no shuffle; the batch's keys broadcast) and
    clusters only the new rows; a small one re-clusters everything it writes."""
    keep = keeps_layout(rewrite, new_count)
    kept = kept_rows(read_files(req.session, table, rewrite), keep) if rewrite else None
    delete = list(rewrite) + list(drop)
    try:
        if keep:
            return write_and_commit(req, table, new_rows, delete=delete, message=message, cluster_by=cluster_by,
                                    rows_hint=new_count, keep=kept, keep_files=rewrite, add_deletes=add_deletes,
                                    constant=constant)
        result = kept.unionByName(new_rows) if kept is not None else new_rows
        return write_and_commit(req, table, result, delete=delete, message=message, cluster_by=cluster_by,
                                rows_hint=new_count + sum(f.record_count for f in rewrite), add_deletes=add_deletes,
                                constant=constant)
    except BaseException:
        for folder in {d.file_path.rsplit("/", 1)[0] for d in add_deletes}:
            discard(WrittenFiles([], folder, table))  # never committed: nothing refers to them
        raise


def small_batch_keys(req: WriteRequest, batch, cols: list[str]):
    """small_batch of the batch's key columns `cols`, unless the run's result alone (req.batch_rows, counted before
    any dedupe) holds more than LOCAL_KEYS_MAX rows: the batch is then known to be large (or larger than worth
    it), and the job that would bring its first rows to the driver is not run."""
    from pyspark.sql import functions as F

    if req.batch_rows is not None and req.batch_rows > LOCAL_KEYS_MAX:
        return None
    return small_batch(batch.select(*[F.col(f"`{c}`") for c in cols]), LOCAL_KEYS_MAX)


def replace_matching(req: WriteRequest, table: Table, outcome: WriteOutcome, new_rows, match_cols: list[str],
                     *, cluster_by: list[str], message: str, empty_note: str,
                     unique_keys: bool = False) -> WriteOutcome:
    """Remove every row whose `match_cols` tuple (NULL-safe) appears in `new_rows`, add `new_rows`: one snapshot.

    The engine of incremental (deduplicated rows), delete_insert (rows as they are) and snapshot (match on
    the partition column). Each file holding replaced rows is handled by how much of it changes (see `plan_files`):
    dropped whole, rewritten (copy-on-write), or given a position-delete file (merge-on-read).
    """
    from pyspark.sql import functions as F

    new_rows = new_rows.persist()
    try:
        # one job: a small batch's key columns come to the driver (its count, key ranges and keys need no other
        # job; the job also fills the batch's cache); a larger batch gets one more job for its count and key
        # ranges. The files those ranges reach come from Iceberg's statistics.
        local = small_batch_keys(req, new_rows, match_cols)
        if local is not None:
            outcome.rows_written, ranges = arrow_ranges(table, local, match_cols)
        else:
            outcome.rows_written, ranges = batch_ranges(table, new_rows, match_cols)
        existing = data_files(table)
        if outcome.rows_written == 0:
            outcome.notes.append(empty_note)
            outcome.files_kept = len(existing)
            return finish(req, outcome)
        values = None
        if local is not None:
            keys_df, values = local_keys(req.session, local, new_rows.schema, match_cols)
        else:
            keys_df = key_frame(new_rows, match_cols, unique=unique_keys).persist()
        try:
            candidates = files_in_ranges(existing, ranges)
            whole, rewrite, deletes = plan_files(req, table, candidates, keys_df, match_cols, outcome.rows_written,
                                                 values, ranges)

            def survivors(old, broadcast: bool):
                keys = F.broadcast(keys_df) if broadcast else keys_df
                return old.join(keys, match_keys(old, match_cols, keys, [f"__k{i}" for i in range(len(match_cols))]),
                                "left_anti")

            written = commit_rewrite(req, table, new_rows, outcome.rows_written, rewrite, survivors,
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
    return finish(req, outcome)


def plan_files(req: WriteRequest, table: Table, candidates: list[DataFile], keys_df, cols: list[str], new_rows: int,
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
                            broadcast=broadcast_batch(new_rows, candidates), values=values, ranges=ranges).toArrow()
    whole, rewrite, _, deletes = classify_files(req, table, candidates, found)
    return whole, rewrite, deletes


def classify_files(req: WriteRequest, table: Table, candidates: list[DataFile], found, *, drop_whole: bool = True):
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

