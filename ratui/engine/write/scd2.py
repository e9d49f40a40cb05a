"""The scd2 strategy: type-2 history (write/strategies.py says what it does to a table, row by row).

A first write (a table without files) opens a version for every batch row. Any later write finds, in one pass over
the files that may hold an open version of a batch key (Iceberg's statistics), each key's open version and whether
the batch changes it; a row the batch holds unchanged opens nothing. The versions it closes are closed in place
(the file rewritten, copy-on-write) or, in a file that changes a little, deleted by position and appended closed
with the new versions (merge-on-read): write/row_replacement.py decides which, per file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from ratui.engine.iceberg.read import FILE_NO, ROW_POS, data_files, read_files
from ratui.engine.iceberg.schema import iceberg_to_spark_type
from ratui.engine.project.strategy_specs import strategy_error
from ratui.engine.sql_text import quote, renamed
from ratui.engine.write.files import WrittenFiles, discard, session_conf
from ratui.engine.write.keys import dedupe, key_frame, match_keys, resolve_columns
from ratui.engine.write.prepare import aligned, prepare_table, table_names
from ratui.engine.write.pruning import (IN_FILTER_CONF, arrow_candidates, arrow_ranges, batch_ranges,
                                        files_in_ranges, key_filters, key_values)
from ratui.engine.write.request import WriteOutcome, WriteRequest
from ratui.engine.write.row_replacement import (BROADCAST_MAX_KEYS, HIT, broadcast_batch, classify_files,
                                                commit_rewrite, small_batch_keys)
from ratui.engine.write.strategy_base import (dedupe_by, finish, key_columns, run_timestamp, ts_literal,
                                              watermark_column, write_and_commit)

OLD, NEW, SAME = "__ratui_old_", "__ratui_new_", "__ratui_same"


def validity_names(req: WriteRequest) -> tuple[str, str]:
    """The two validity columns' names (RAT-WRT-009 when they are one, or the result has one of them)."""
    vf, vt = req.config.scd_valid_from, req.config.scd_valid_to
    if vf.lower() == vt.lower():
        raise strategy_error("RAT-WRT-009", f"scd_valid_from and scd_valid_to of {req.key} are both '{vf}'")
    clash = [c for c in req.batch.columns if c.lower() in (vf.lower(), vt.lower())]
    if clash:
        raise strategy_error("RAT-WRT-009", f"the result of {req.key} already has a column '{clash[0]}', which "
                             "the scd2 strategy maintains itself")
    return vf, vt


def with_validity(req: WriteRequest, df, ts: datetime):
    """`df` with its validity columns: every row an open version from `ts` (a full refresh of an scd2 pipeline)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    vf, vt = validity_names(req)
    return df.withColumn(vf, ts_literal(ts, st.TimestampType())).withColumn(vt, F.lit(None).cast("timestamp"))


@dataclass
class _Versioning:
    """An scd2 write's table once prepared: the key and validity columns by the table's names, the tracked columns
    (all others), and the run's instant T as literals of the validity columns' types."""

    table: Table
    schema: Any
    keys: list[str]
    vf: str
    vt: str
    vt_type: Any
    tracked: list[str]
    stamp_from: Any
    stamp_to: Any
    ts: datetime

    def opened(self, df):
        """`df`'s rows as open versions from T."""
        from pyspark.sql import functions as F

        return df.withColumn(self.vf, self.stamp_from).withColumn(self.vt, F.lit(None).cast(self.vt_type))


def _prepare(req: WriteRequest, outcome: WriteOutcome, keys: list[str]) -> _Versioning:
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    vf, vt = validity_names(req)
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
    return _Versioning(table, schema, keys, vf, vt, vt_type, tracked, ts_literal(ts, vf_type), ts_literal(ts, vt_type),
                       ts)


def scd2(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("scd2", 0)
    keys, watermark = key_columns(req), watermark_column(req)
    v = _prepare(req, outcome, keys)
    batch_keys = resolve_columns(req.batch, tuple(v.keys), "RAT-WRT-001", "unique_key", req.key)
    existing = data_files(v.table)
    if not existing:
        return _first_versions(req, outcome, v, watermark)
    return _VersionChange(req, outcome, v, existing).run(aligned(dedupe(req.batch, batch_keys, watermark), v.table))


def _first_versions(req: WriteRequest, outcome: WriteOutcome, v: _Versioning, watermark: str | None) -> WriteOutcome:
    """A first write (or one into a table without files): every batch row opens a version and nothing is looked
    up or closed, so the batch is written as a full refresh writes it (clustered by key, a row per key kept as it
    is range-partitioned: one shuffle), without caching it or a job for its key ranges."""
    written = write_and_commit(req, v.table, v.opened(aligned(req.batch, v.table)), delete=[],
                               message=f"scd2 versions of {req.key} at {v.ts.isoformat()}", cluster_by=v.keys,
                               rows_hint=req.batch_rows, constant=(v.vf, v.vt),  # both validity columns constant
                               dedupe_by=dedupe_by(v.table, v.keys, watermark))
    outcome.rows_written = written.rows
    outcome.files_added = len(written.files)
    if written.rows == 0:
        outcome.notes.append("the batch was empty: no version opened or closed")
    return finish(req, outcome)


@dataclass
class _VersionChange:
    """An scd2 write into a table that has files: find the open versions the batch changes, close them, open the
    new ones, in one snapshot. The frames it caches and the delete files it writes are released by run()."""

    req: WriteRequest
    outcome: WriteOutcome
    v: _Versioning
    existing: list[DataFile]
    matched: Any = None  # the batch keys' open versions in the candidates (_open_versions), cached
    to_open: Any = None  # the batch rows that open a version (the batch, without the rows it holds unchanged)
    deletes: list[DataFile] = field(default_factory=list)  # position-delete files written, not committed yet

    def run(self, batch) -> WriteOutcome:
        batch = self.to_open = batch.persist()
        try:
            return self._change(batch)
        finally:
            for folder in {d.file_path.rsplit("/", 1)[0] for d in self.deletes}:
                discard(WrittenFiles([], folder, self.v.table))  # written, never committed: nothing refers to them
            if self.to_open is not batch:
                self.to_open.unpersist()
            if self.matched is not None:
                self.matched.unpersist()
            batch.unpersist()

    def _change(self, batch) -> WriteOutcome:
        req, outcome, v = self.req, self.outcome, self.v
        outcome.rows_written = 0
        # one job (it also fills the batch's cache): a small batch's key columns come to the driver, whose count,
        # key ranges and candidate files then need no other job; a larger batch's count and key ranges are one
        # aggregate. The files that may hold an open version of a batch key come from Iceberg's statistics.
        local = small_batch_keys(req, batch, v.keys)
        if local is not None:
            batch_rows, ranges = arrow_ranges(v.table, local, v.keys)
        else:
            batch_rows, ranges = batch_ranges(v.table, batch, v.keys)
        if batch_rows == 0:
            return self._unchanged("the batch was empty: no version opened or closed")
        candidates = [f for f in files_in_ranges(self.existing, ranges) if _may_hold_open(f, v.schema.find_field(v.vt))]
        values = None
        if local is not None:
            candidates = arrow_candidates(v.table, candidates, local, v.keys)
            values = key_values(local, batch.schema, v.keys)
        found = self._find_changes(batch, batch_rows, candidates, values, ranges) if candidates else None
        if not candidates:
            outcome.rows_written = batch_rows  # no open version of any batch key: every row opens one
        if outcome.rows_written == 0:
            return self._unchanged("no key changed: no version opened or closed")
        return self._commit(candidates, found)

    def _unchanged(self, note: str) -> WriteOutcome:
        self.outcome.notes.append(note)
        self.outcome.files_kept = len(self.existing)
        return finish(self.req, self.outcome)

    def _find_changes(self, batch, batch_rows: int, candidates: list[DataFile], values, ranges):
        """One pass over the candidates (the job that fills `matched`'s cache): the open version of each batch key,
        where it lies and whether it changes; the positions of those that change come to the driver (two numbers a
        row), returned as Arrow. Sets outcome.rows_written and to_open: the batch rows that open a version."""
        from pyspark.sql import functions as F

        v = self.v
        self.matched = _open_versions(self.req, v.table, candidates, batch, batch_rows, v.keys, v.tracked, v.vt,
                                      values, ranges).persist()
        with session_conf(self.req.session, IN_FILTER_CONF if values is not None else {}):
            found = self.matched.where(~F.col(SAME)).select(FILE_NO, ROW_POS).toArrow()
        same = self.matched.where(F.col(SAME))
        if same.isEmpty():  # a small job over the cache (its batches hold the SAME column's bounds)
            self.outcome.rows_written = batch_rows  # every batch row is new or changed: each opens a version
            return found
        # a batch row with an identical open row (key and every tracked column, NULL-safe) changes nothing
        kcols = [f"__k{i}" for i in range(len(v.keys))]
        same = same.select(*[F.col(f"`{OLD}{k}`").alias(kc) for k, kc in zip(v.keys, kcols)])
        if batch_rows <= BROADCAST_MAX_KEYS:
            same = F.broadcast(same)
        self.to_open = batch.join(same, match_keys(batch, v.keys, same, kcols), "left_anti").persist()
        self.outcome.rows_written = self.to_open.count()  # over the two cached frames: a small job
        return found

    def _commit(self, candidates: list[DataFile], found) -> WriteOutcome:
        """Close the changed keys' open versions and open the new ones, in one snapshot. A file that changes a
        little keeps its rows: a position-delete file takes the open version out and its closed copy is appended
        with the new versions (merge-on-read); a file that changes much is rewritten with those versions closed in
        place (copy-on-write)."""
        from pyspark.sql import functions as F

        req, outcome, v = self.req, self.outcome, self.v
        kcols = [f"__k{i}" for i in range(len(v.keys))]
        opened_keys = key_frame(self.to_open, v.keys).withColumn(HIT, F.lit(True))
        rewrite: list[DataFile] = []
        closed_copies, closed_count = None, 0
        if self.matched is not None and found is not None and found.num_rows:
            _, rewrite, mor, self.deletes = classify_files(req, v.table, candidates, found, drop_whole=False)
            if mor:
                closed_count = sum(d.record_count for d in self.deletes)
                closed_copies = self.matched.where(~F.col(SAME)).where(F.col(FILE_NO).isin(mor)).select(
                    *[(v.stamp_to if f.name == v.vt else F.col(f"`{OLD}{f.name}`")).alias(f.name)
                      for f in v.schema.fields])
        new_versions = v.opened(self.to_open)
        if closed_copies is not None:
            new_versions = new_versions.unionByName(closed_copies)

        def closed(old, broadcast: bool):
            """The rewritten files' rows, the open versions of the changed keys closed at T."""
            hits = F.broadcast(opened_keys) if broadcast else opened_keys
            marked = old.join(hits, match_keys(old, v.keys, hits, kcols), "left")
            return marked.withColumn(
                v.vt, F.when(F.col(f"`{v.vt}`").isNull() & F.col(HIT).isNotNull(), v.stamp_to)
                .otherwise(F.col(f"`{v.vt}`"))).select(*[F.col(f"`{f.name}`") for f in v.schema.fields])

        written = commit_rewrite(req, v.table, new_versions, outcome.rows_written + closed_count, rewrite,
                                 closed, cluster_by=v.keys, add_deletes=self.deletes,
                                 message=f"scd2 versions of {req.key} at {v.ts.isoformat()}")
        deletes_done, self.deletes = self.deletes, []  # committed, or discarded by commit_rewrite
        outcome.files_added = len(written.files)
        outcome.files_removed = outcome.files_rewritten = len(rewrite)
        outcome.files_kept = len(self.existing) - len(rewrite)
        outcome.delete_files_added = len(deletes_done)
        outcome.rows_deleted_by_position = sum(d.record_count for d in deletes_done)
        return finish(req, outcome)


def _may_hold_open(data: DataFile, vt) -> bool:
    """False when Iceberg's statistics show that a data file holds no open version (no NULL in `vt`, the valid_to
    field): a file of closed versions alone is never read. Deleted rows only lower the true count."""
    nulls = (data.null_value_counts or {}).get(vt.field_id)
    return nulls is None or nulls > 0


def _open_versions(req: WriteRequest, table: Table, candidates: list[DataFile], batch, batch_rows: int,
                   keys: list[str], tracked: list[str], vt: str, values=None, ranges=()):
    """The open versions (`vt` NULL) in `candidates` of the batch's keys: every table column prefixed OLD, their
    FILE_NO and ROW_POS, and SAME: whether the batch row of the key holds the same tracked values (NULL-safe).
    One pass over the candidates; a batch small beside them goes to every task (broadcast_batch). The table's
    key columns are filtered first on the batch's key values or ranges (key_filters, what the Parquet reader
    can skip pages by), then matched exactly."""
    from pyspark.sql import functions as F

    # SQL text: a few JVM calls, not several per column (sql_text.py)
    fields = [f.name for f in table.schema().fields]
    old = read_files(req.session, table, candidates, positions=True).where(f"{quote(vt)} IS NULL")
    old = key_filters(old, keys, values, ranges)
    old = old.selectExpr(*[renamed(c, OLD + c) for c in fields], FILE_NO, ROW_POS)
    new = batch.selectExpr(*[renamed(c, NEW + c) for c in keys + tracked])
    if broadcast_batch(batch_rows, candidates):
        new = F.broadcast(new)
    both = old.join(new, match_keys(old, [OLD + k for k in keys], new, [NEW + k for k in keys]), "inner")
    same = " AND ".join(f"{quote(OLD + c)} <=> {quote(NEW + c)}" for c in tracked) or "true"
    return both.selectExpr(*[quote(OLD + c) for c in fields], FILE_NO, ROW_POS, f"{same} AS {SAME}")
