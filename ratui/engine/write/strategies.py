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
range-partitioned and sorted by the key (one range per ~500k rows), so each covers a narrow key range and
later merges prune well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import reduce
from pathlib import Path
from typing import Any

from pyiceberg import types as it
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from ratui.engine.state.catalog.base import BranchCatalog
from ratui.engine.project.config import PipelineConfig
from ratui.engine.errors import RatuiError
from ratui.engine.write.partitioning import build_spec, parse_partition_by, same_terms, spec_terms
from ratui.engine.write.schema_evolution import apply_changes, plan_changes
from ratui.engine.iceberg.tables import (
    KEEP_LAYOUT_MIN_ROWS, WrittenFiles, commit_files, data_files, discard, iceberg_schema_of, iceberg_to_spark_type,
    read_files, row_count, table_location, write_files,
)

# Keys broadcast to every task when a large rewrite keeps its files' layout (see _keeps_layout).
BROADCAST_MAX_KEYS = 500_000

ORD = "__ratui_ord"
RN = "__ratui_rn"
HIT = "__ratui_hit"


@dataclass
class WriteRequest:
    session: Any
    catalog: BranchCatalog
    ref: str
    key: str
    root: Path
    run_id: str
    batch: Any  # Spark DataFrame over the run's staged result
    batch_rows: int
    config: PipelineConfig
    strategy: str
    # the run's start (UTC): a datetime, or text as the runner renders it ("2026-03-01 09:00:00.000000");
    # scd2 stamps every version the run opens or closes with it. None: taken once when the write starts.
    run_started_at: datetime | str | None = None


@dataclass
class WriteOutcome:
    strategy: str
    rows_written: int
    files_added: int = 0
    files_removed: int = 0  # files no longer in the table: rewritten + dropped whole
    files_rewritten: int = 0  # of those, files read and written again without their affected rows
    files_kept: int = 0
    table_rows: int = 0
    created: bool = False
    schema_changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    valid_at: str | None = None  # scd2: the timestamp of the versions this write opened / closed (ISO, UTC)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ------------------------------------------------------------------------------------------------ helpers


def _resolve_columns(batch, names: tuple[str, ...], code: str, what: str, key: str) -> list[str]:
    actual = {c.lower(): c for c in batch.columns}
    out = []
    for name in names:
        if name.lower() not in actual:
            raise RatuiError(code, f"{what} '{name}' is not a column of the result of {key} "
                             f"(columns: {', '.join(batch.columns)})")
        out.append(actual[name.lower()])
    return out


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


def _terms(req: WriteRequest):
    try:
        return parse_partition_by(req.config.partition_by)
    except ValueError as exc:
        raise RatuiError("RAT-WRT-007", f"{req.key}: partition_by: {exc}") from None


def _create(req: WriteRequest, spark_schema) -> Table:
    schema = iceberg_schema_of(spark_schema)
    spec = build_spec(schema, _terms(req), req.key)
    return req.catalog.create_table(req.ref, req.key, schema, table_location(req.root, req.key),
                                    partition_spec=spec)


def _prepare_table(req: WriteRequest, outcome: WriteOutcome, spark_schema, *, rebuild: bool) -> Table:
    """The table on the branch, created or evolved to take a result of `spark_schema`.

    rebuild=True (full_refresh): the table takes the result's columns exactly (missing ones are dropped);
    a change Iceberg cannot evolve (an incompatible type, another partition spec) starts a new table at the
    same location on the branch. rebuild=False: such a change is a coded error and nothing is touched.
    """
    if not req.catalog.table_exists(req.ref, req.key):
        outcome.created = True
        return _create(req, spark_schema)
    table = req.catalog.load_table(req.ref, req.key)
    terms = _terms(req)
    reasons = []
    current = spec_terms(table)
    if not same_terms(current, terms):
        was = ", ".join(map(str, current)) or "nothing"
        now = ", ".join(map(str, terms)) or "nothing"
        if not rebuild:
            raise RatuiError("RAT-WRT-007", f"{req.key} is partitioned by {was} but partition_by says {now}",
                             hint="Run it once with --full-refresh to rebuild the table with the new "
                                  "partitioning (main keeps the old table until that run merges).")
        reasons.append(f"partitioning changed ({was} -> {now})")
    changes = []
    try:
        changes = plan_changes(table.schema(), spark_schema, req.key, drop_missing=rebuild)
    except RatuiError as exc:
        if not rebuild:
            raise
        reasons.append(f"schema changed incompatibly ({exc.message})")
    partition_sources = {f.source_id for f in table.spec().fields}
    for c in changes:
        if c.kind == "drop" and table.schema().find_field(c.column).field_id in partition_sources:
            reasons.append(f"partition column {c.column} dropped")
    if reasons:
        # a new table at the same location: the branch's pointer moves; main keeps its table until the
        # merge; no file is deleted (other refs may still use them)
        namespace, layer, name = req.key.split(".")
        req.catalog.iceberg(req.ref).drop_table((namespace, layer, name))
        outcome.created = True
        outcome.notes.append("table rebuilt: " + "; ".join(reasons))
        return _create(req, spark_schema)
    outcome.schema_changes = [_describe(c) for c in changes]
    return apply_changes(table, spark_schema, changes)


def _describe(change) -> str:
    if change.kind == "widen":
        return f"widen {change.column} {change.old} -> {change.new}"
    if change.kind == "add":
        return f"add {change.column} {change.new}"
    return f"{change.kind} {change.column}"


def _aligned(df, table: Table):
    """The result with exactly the table's columns and types (missing columns are NULL)."""
    from pyspark.sql import functions as F

    present = {c.lower(): c for c in df.columns}
    cols = []
    for f in table.schema().fields:
        target = iceberg_to_spark_type(f.field_type)
        source = present.get(f.name.lower())
        column = F.col(f"`{source}`").cast(target) if source else F.lit(None).cast(target)
        cols.append(column.alias(f.name))
    return df.select(*cols)


def _table_names(table: Table, names: list[str]) -> list[str]:
    return [table.schema().find_field(n, case_sensitive=False).name for n in names]


def _write_and_commit(req: WriteRequest, table: Table, df, *, delete, message: str,
                      cluster_by=(), rows_hint: int | None = None, keep=None, keep_files=()) -> WrittenFiles:
    written = write_files(df, table, req.run_id, cluster_by, rows_hint, keep=keep, keep_files=keep_files)
    try:
        commit_files(table, add=written.files, delete=delete, message=message,
                     properties={"ratui.run-id": req.run_id, "ratui.strategy": req.strategy})
    except Exception:
        discard(written)
        raise
    return written


def _finish(req: WriteRequest, outcome: WriteOutcome) -> WriteOutcome:
    outcome.table_rows = row_count(req.catalog.load_table(req.ref, req.key))
    return outcome


def dedupe(batch, keys: list[str], watermark: str | None):
    """One row per key: the latest by watermark (NULL watermarks lose), ties and no watermark -> last in batch."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = batch.withColumn(ORD, F.monotonically_increasing_id())
    order = ([F.col(f"`{watermark}`").desc_nulls_last()] if watermark else []) + [F.col(ORD).desc()]
    window = Window.partitionBy(*[F.col(f"`{k}`") for k in keys]).orderBy(*order)
    return ordered.withColumn(RN, F.row_number().over(window)).filter(F.col(RN) == 1).drop(RN, ORD)


def _match(left, left_cols: list[str], right, right_cols: list[str]):
    """NULL-safe equality of a tuple of columns (IS NOT DISTINCT FROM)."""
    return reduce(lambda a, b: a & b, [left[f"`{l}`"].eqNullSafe(right[f"`{r}`"])
                                       for l, r in zip(left_cols, right_cols)])


def _key_frame(df, cols: list[str]):
    """The distinct key tuples of `df`, renamed __k0.. so they join with the table without ambiguity."""
    from pyspark.sql import functions as F

    return df.select(*[F.col(f"`{c}`").alias(f"__k{i}") for i, c in enumerate(cols)]).distinct()


# ------------------------------------------------------------------------------------------ file pruning


def _physical(column, itype):
    """The key as the value its Iceberg bound decodes to, so the two compare in Spark."""
    from pyspark.sql import functions as F

    if isinstance(itype, it.TimestamptzType):
        return F.unix_micros(column)
    if isinstance(itype, it.TimestampType):
        return F.unix_micros(column.cast("timestamp"))
    if isinstance(itype, it.DateType):
        return F.unix_date(column)
    return column


# Types whose bounds order like Spark compares them. Floats are left out on purpose (NaN and -0.0 are not
# in Parquet's bounds), as are booleans and binary (nothing to gain).
PRUNABLE = (it.IntegerType, it.LongType, it.StringType, it.DecimalType, it.DateType, it.TimestampType,
            it.TimestamptzType)


def _usable(table: Table, cols: list[str]):
    schema = table.schema()
    out = []
    for i, c in enumerate(cols):
        f = schema.find_field(c, case_sensitive=False)
        if isinstance(f.field_type, PRUNABLE):
            out.append((i, f))
    return out


def candidate_files(session, table: Table, keys_df, cols: list[str], files: list[DataFile] | None = None):
    """The data files whose per-file bounds can hold one of the key tuples of `keys_df` (columns __k0..).

    Every prunable key column must fit the file's [lower, upper] bound (or be NULL where the file has NULLs).
    A file without usable bounds on a column cannot be excluded by that column (correct, only slower).
    Computed in Spark: a broadcast of one row per file joined with the distinct key tuples.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    files = data_files(table) if files is None else files
    usable = _usable(table, cols)
    if not usable or not files:
        return list(files)
    fields = [st.StructField("path", st.StringType())]
    for i, f in usable:
        bound_type = (st.LongType() if isinstance(f.field_type, (it.TimestampType, it.TimestamptzType))
                      else st.IntegerType() if isinstance(f.field_type, it.DateType)
                      else iceberg_to_spark_type(f.field_type))
        fields += [st.StructField(f"lo{i}", bound_type), st.StructField(f"hi{i}", bound_type),
                   st.StructField(f"nul{i}", st.BooleanType()), st.StructField(f"any{i}", st.BooleanType())]
    rows = []
    for df_ in files:
        row: list[Any] = [df_.file_path]
        for _, f in usable:
            fid = f.field_id
            lo = (df_.lower_bounds or {}).get(fid)
            hi = (df_.upper_bounds or {}).get(fid)
            nulls = (df_.null_value_counts or {}).get(fid)
            has_null = True if nulls is None else nulls > 0
            if lo is not None and hi is not None:
                row += [from_bytes(f.field_type, lo), from_bytes(f.field_type, hi), has_null, False]
            elif nulls is not None and nulls == df_.record_count:
                row += [None, None, True, False]  # only NULLs: matches NULL keys alone
            else:
                row += [None, None, True, True]  # no bounds: anything may be in it
        rows.append(tuple(row))
    ranges = session.createDataFrame(rows, st.StructType(fields))
    conds = []
    for i, f in usable:
        k = _physical(F.col(f"__k{i}"), f.field_type)
        conds.append(F.col(f"any{i}")
                     | (k.isNull() & F.col(f"nul{i}"))
                     | (k.isNotNull() & (k >= F.col(f"lo{i}")) & (k <= F.col(f"hi{i}"))))
    hit = keys_df.join(F.broadcast(ranges), reduce(lambda a, b: a & b, conds)).select("path").distinct()
    paths = {r.path for r in hit.collect()}
    return [f for f in files if f.file_path in paths]


def _single_valued(table: Table, f: DataFile, cols: list[str]) -> bool:
    """Every row of `f` holds the same tuple of `cols`, by its statistics (one bound value, or only NULLs)."""
    usable = _usable(table, cols)
    if len(usable) != len(cols):
        return False
    for _, field_ in usable:
        fid = field_.field_id
        nulls = (f.null_value_counts or {}).get(fid)
        if nulls is not None and nulls == f.record_count:
            continue
        lo, hi = (f.lower_bounds or {}).get(fid), (f.upper_bounds or {}).get(fid)
        if nulls != 0 or lo is None or lo != hi:
            return False
    return True


def classify_files(session, table: Table, candidates: list[DataFile], keys_df, cols: list[str]):
    """(partial, whole): the candidates that hold rows whose key tuple is in `keys_df`, and of those the ones
    that hold nothing else (dropped without being read again).

    One pass over the candidates' key columns finds the batch keys the table really holds (a semi-join, so
    no row carries anything but its key); those keys are then placed in files by the files' bounds. Files
    written by ratui cover disjoint key ranges, so this is exact for them; where ranges overlap, a file may
    be rewritten for a key another file holds: correct, only slower. A file is whole when its statistics
    say every row holds one key tuple (lower = upper, no NULLs, or only NULLs) and that tuple is hit.
    """
    if not candidates:
        return [], []
    kcols = [f"__k{i}" for i in range(len(cols))]
    old = read_files(session, table, candidates).select(*[_col(c) for c in cols])
    present = keys_df.join(old, _match(keys_df, kcols, old, cols), "left_semi").persist()
    try:
        if present.isEmpty():
            return [], []
        hit = candidates if len(candidates) == 1 else candidate_files(session, table, present, cols, candidates)
    finally:
        present.unpersist()
    whole = [f for f in hit if _single_valued(table, f, cols)]
    whole_paths = {f.file_path for f in whole}
    return [f for f in hit if f.file_path not in whole_paths], whole


def _keeps_layout(rewrite: list[DataFile], new_rows: int) -> bool:
    """Rewrite in place (no shuffle of the surviving rows) when that is most of the work and the batch's keys
    are few enough to broadcast; otherwise re-cluster everything written (small rewrites stay tidy)."""
    return sum(f.record_count for f in rewrite) > KEEP_LAYOUT_MIN_ROWS and new_rows <= BROADCAST_MAX_KEYS


def _col(name: str):
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


def _replace_matching(req: WriteRequest, table: Table, outcome: WriteOutcome, new_rows, match_cols: list[str],
                      *, cluster_by: list[str], message: str, empty_note: str) -> WriteOutcome:
    """Remove every row whose `match_cols` tuple (NULL-safe) appears in `new_rows`, add `new_rows`: one snapshot.

    The engine of incremental (deduplicated rows), delete_insert (rows as they are) and snapshot (match on
    the partition column).
    """
    from pyspark.sql import functions as F

    new_rows = new_rows.persist()
    try:
        outcome.rows_written = new_rows.count()
        existing = data_files(table)
        if outcome.rows_written == 0:
            outcome.notes.append(empty_note)
            outcome.files_kept = len(existing)
            return _finish(req, outcome)
        keys_df = _key_frame(new_rows, match_cols).persist()
        try:
            candidates = (candidate_files(req.session, table, keys_df, match_cols, existing)
                          if len(existing) > 1 else existing)
            partial, whole = classify_files(req.session, table, candidates, keys_df, match_cols)
            keep = _keeps_layout(partial, outcome.rows_written)
            result, survivors = new_rows, None
            if partial:
                old = read_files(req.session, table, partial)
                keys = F.broadcast(keys_df) if keep else keys_df
                survivors = old.join(keys, _match(old, match_cols, keys, [f"__k{i}" for i in range(len(match_cols))]),
                                     "left_anti")
            if keep:
                written = _write_and_commit(req, table, new_rows, delete=partial + whole, message=message,
                                            cluster_by=cluster_by, rows_hint=outcome.rows_written,
                                            keep=survivors, keep_files=partial)
            else:
                if survivors is not None:
                    result = survivors.unionByName(new_rows)
                written = _write_and_commit(req, table, result, delete=partial + whole, message=message,
                                            cluster_by=cluster_by,
                                            rows_hint=outcome.rows_written + sum(f.record_count for f in partial))
        finally:
            keys_df.unpersist()
    finally:
        new_rows.unpersist()
    outcome.files_added = len(written.files)
    outcome.files_removed = len(partial) + len(whole)
    outcome.files_rewritten = len(partial)
    outcome.files_kept = len(existing) - outcome.files_removed
    return _finish(req, outcome)


# --------------------------------------------------------------------------------------------- strategies


def _keys(req: WriteRequest) -> list[str]:
    return _resolve_columns(req.batch, req.config.unique_key, "RAT-WRT-001", "unique_key", req.key)


def _watermark(req: WriteRequest) -> str | None:
    if not req.config.watermark_column:
        return None
    return _resolve_columns(req.batch, (req.config.watermark_column,), "RAT-WRT-002", "watermark_column",
                            req.key)[0]


def full_refresh(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("full_refresh", req.batch_rows)
    keys = _keys(req)
    result = req.batch
    pipeline_strategy = req.config.merge_strategy
    if pipeline_strategy in ("incremental", "scd2") and keys:
        # --full-refresh of a keyed pipeline rebuilds it in its own shape: one row per key
        result = dedupe(result, keys, _watermark(req))
    ts = None
    if pipeline_strategy == "scd2":
        ts = run_timestamp(req.run_started_at)
        result = _with_validity(req, result, ts)
        outcome.valid_at = ts.isoformat()
    table = _prepare_table(req, outcome, result.schema, rebuild=True)
    old = data_files(table)
    written = _write_and_commit(req, table, _aligned(result, table), delete=old,
                                message=f"full_refresh of {req.key}", cluster_by=_table_names(table, keys),
                                rows_hint=req.batch_rows)
    outcome.files_added, outcome.files_removed = len(written.files), len(old)
    outcome.rows_written = written.rows
    if written.rows == 0:
        outcome.notes.append("the result was empty: the table is now empty" if old else "the result was empty")
    return _finish(req, outcome)


def append_only(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("append_only", req.batch_rows)
    table = _prepare_table(req, outcome, req.batch.schema, rebuild=False)
    kept = len(data_files(table))
    written = _write_and_commit(req, table, _aligned(req.batch, table), delete=[], message=f"append to {req.key}")
    outcome.files_added, outcome.files_kept, outcome.rows_written = len(written.files), kept, written.rows
    if written.rows == 0:
        outcome.notes.append("the batch was empty: nothing appended")
    return _finish(req, outcome)


def incremental(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("incremental", 0)
    keys, watermark = _keys(req), _watermark(req)
    table = _prepare_table(req, outcome, req.batch.schema, rebuild=False)
    keys = _table_names(table, keys)
    batch = _aligned(dedupe(req.batch, _resolve_columns(req.batch, tuple(keys), "RAT-WRT-001", "unique_key",
                                                         req.key), watermark), table)
    return _replace_matching(req, table, outcome, batch, keys, cluster_by=keys,
                             message=f"incremental upsert into {req.key}",
                             empty_note="the batch was empty: nothing changed")


def delete_insert(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("delete_insert", 0)
    keys = _keys(req)
    table = _prepare_table(req, outcome, req.batch.schema, rebuild=False)
    keys = _table_names(table, keys)
    return _replace_matching(req, table, outcome, _aligned(req.batch, table), keys, cluster_by=keys,
                             message=f"delete_insert into {req.key}",
                             empty_note="the batch was empty: nothing deleted or inserted")


def snapshot(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("snapshot", 0)
    if not req.config.partition_column:
        raise RatuiError("RAT-CFG-004", f"merge strategy 'snapshot' of {req.key} needs a partition_column")
    _resolve_columns(req.batch, (req.config.partition_column,), "RAT-WRT-008", "partition_column", req.key)
    table = _prepare_table(req, outcome, req.batch.schema, rebuild=False)
    part = _table_names(table, [req.config.partition_column])
    return _replace_matching(req, table, outcome, _aligned(req.batch, table), part, cluster_by=part,
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
    table = _prepare_table(req, outcome, shaped.schema, rebuild=False)
    if existed and any(c.startswith("add ") and c.split()[1].lower() in (vf.lower(), vt.lower())
                       for c in outcome.schema_changes):
        outcome.notes.append(f"{vf} / {vt} added: the rows already in the table count as open versions")
    schema = table.schema()
    keys = _table_names(table, keys)
    vf, vt = _table_names(table, [vf, vt])
    vf_type = iceberg_to_spark_type(schema.find_field(vf).field_type)
    vt_type = iceberg_to_spark_type(schema.find_field(vt).field_type)
    tracked = [f.name for f in schema.fields if f.name not in set(keys) | {vf, vt}]
    stamp_from, stamp_to = _ts_literal(ts, vf_type), _ts_literal(ts, vt_type)

    batch = _aligned(dedupe(req.batch, _resolve_columns(req.batch, tuple(keys), "RAT-WRT-001", "unique_key",
                                                         req.key), watermark), table).persist()
    try:
        outcome.rows_written = 0
        existing = data_files(table)
        if batch.count() == 0:
            outcome.notes.append("the batch was empty: no version opened or closed")
            outcome.files_kept = len(existing)
            return _finish(req, outcome)
        keys_df = _key_frame(batch, keys)
        candidates = candidate_files(req.session, table, keys_df, keys, existing) if len(existing) > 1 else existing
        kcols = [f"__k{i}" for i in range(len(keys))]
        if candidates:
            open_rows = read_files(req.session, table, candidates).filter(F.col(f"`{vt}`").isNull()).select(
                *[F.col(f"`{c}`") for c in keys + tracked])
            # a batch row with an identical open row (key and every tracked column, NULL-safe) changes nothing
            same = _key_frame(batch.join(open_rows, _match(batch, keys + tracked, open_rows, keys + tracked),
                                         "left_semi"), keys)
            to_open = batch.join(same, _match(batch, keys, same, kcols), "left_anti")
        else:
            open_rows, to_open = None, batch
        to_open = to_open.persist()
        try:
            outcome.rows_written = to_open.count()
            if outcome.rows_written == 0:
                outcome.notes.append("no key changed: no version opened or closed")
                outcome.files_kept = len(existing)
                return _finish(req, outcome)
            opened_keys = _key_frame(to_open, keys).withColumn(HIT, F.lit(True))
            rewrite: list[DataFile] = []
            if open_rows is not None:
                # the keys whose open version closes, placed in files by the files' bounds (as classify_files)
                changed = _key_frame(to_open, keys)
                closing = changed.join(open_rows, _match(changed, kcols, open_rows, keys), "left_semi").persist()
                try:
                    if not closing.isEmpty():
                        rewrite = (candidates if len(candidates) == 1
                                   else candidate_files(req.session, table, closing, keys, candidates))
                finally:
                    closing.unpersist()
            new_versions = to_open.withColumn(vf, stamp_from).withColumn(vt, F.lit(None).cast(vt_type))
            keep = _keeps_layout(rewrite, outcome.rows_written)
            result, closed = new_versions, None
            if rewrite:
                old = read_files(req.session, table, rewrite)
                hits = F.broadcast(opened_keys) if keep else opened_keys
                marked = old.join(hits, _match(old, keys, hits, kcols), "left")
                closed = marked.withColumn(
                    vt, F.when(F.col(f"`{vt}`").isNull() & F.col(HIT).isNotNull(), stamp_to)
                    .otherwise(F.col(f"`{vt}`"))).select(*[F.col(f"`{f.name}`") for f in schema.fields])
            message = f"scd2 versions of {req.key} at {ts.isoformat()}"
            if keep:
                written = _write_and_commit(req, table, new_versions, delete=rewrite, cluster_by=keys,
                                            message=message, rows_hint=outcome.rows_written,
                                            keep=closed, keep_files=rewrite)
            else:
                if closed is not None:
                    result = closed.unionByName(new_versions)
                written = _write_and_commit(req, table, result, delete=rewrite, cluster_by=keys, message=message,
                                            rows_hint=outcome.rows_written + sum(f.record_count for f in rewrite))
        finally:
            to_open.unpersist()
    finally:
        batch.unpersist()
    outcome.files_added = len(written.files)
    outcome.files_removed = outcome.files_rewritten = len(rewrite)
    outcome.files_kept = len(existing) - len(rewrite)
    return _finish(req, outcome)


STRATEGIES = {
    "full_refresh": full_refresh,
    "append_only": append_only,
    "incremental": incremental,
    "delete_insert": delete_insert,
    "scd2": scd2,
    "snapshot": snapshot,
}


def write(req: WriteRequest) -> WriteOutcome:
    try:
        handler = STRATEGIES[req.strategy]
    except KeyError:
        raise RatuiError("RAT-CFG-008", f"merge strategy '{req.strategy}' is not supported yet") from None
    return handler(req)
