"""The merge strategies: how a run's result lands in the pipeline's table on the run's branch.

    full_refresh   replace the whole table (an empty result empties it, and the run says so)
    append_only    append the batch
    incremental    upsert on the unique key; batch duplicates resolve to one row (latest by watermark, else
                   the last in the batch); a NULL key is a key like any other (IS NOT DISTINCT FROM)

Merges are copy-on-write at file granularity: only the data files whose key range (Iceberg's per-file
column bounds) can hold a key of the batch are read and rewritten; every other file is carried over.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

from pyiceberg import types as it
from pyiceberg.conversions import from_bytes
from pyiceberg.table import Table

from .catalog.base import BranchCatalog
from .config import PipelineConfig
from .errors import RatuiError
from .schema_evolution import apply_changes, plan_changes
from .tables import (
    WrittenFiles, commit_files, data_files, discard, iceberg_schema_of, iceberg_to_spark_type, read_files,
    row_count, table_location, write_files,
)

ORD = "__ratui_ord"
RN = "__ratui_rn"


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


@dataclass
class WriteOutcome:
    strategy: str
    rows_written: int
    files_added: int = 0
    files_removed: int = 0
    files_kept: int = 0
    table_rows: int = 0
    created: bool = False
    schema_changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _resolve_columns(batch, names: tuple[str, ...], code: str, what: str, key: str) -> list[str]:
    actual = {c.lower(): c for c in batch.columns}
    out = []
    for name in names:
        if name.lower() not in actual:
            raise RatuiError(code, f"{what} '{name}' is not a column of the result of {key} "
                             f"(columns: {', '.join(batch.columns)})")
        out.append(actual[name.lower()])
    return out


def _create(req: WriteRequest) -> Table:
    schema = iceberg_schema_of(req.batch.schema)
    return req.catalog.create_table(req.ref, req.key, schema, table_location(req.root, req.key))


def _load_or_create(req: WriteRequest, outcome: WriteOutcome, *, replace_incompatible: bool) -> Table:
    if not req.catalog.table_exists(req.ref, req.key):
        outcome.created = True
        return _create(req)
    table = req.catalog.load_table(req.ref, req.key)
    try:
        changes = plan_changes(table.schema(), req.batch.schema, req.key)
    except RatuiError:
        if not replace_incompatible:
            raise
        # full_refresh rebuilds the table: a new schema starts a new table at the same location (the
        # branch pointer moves; main keeps its table until the merge; no file is deleted)
        namespace, layer, name = req.key.split(".")
        req.catalog.iceberg(req.ref).drop_table((namespace, layer, name))
        outcome.created = True
        outcome.notes.append("schema changed incompatibly: table rebuilt with the new schema")
        return _create(req)
    outcome.schema_changes = [f"{c.kind} {c.column}" + (f" {c.old} -> {c.new}" if c.old else f" {c.new}")
                              for c in changes]
    return apply_changes(table, req.batch.schema, changes)


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


def _clustered(df, keys: list[str]):
    """Range-partition and sort by the key, so each file covers a narrow key range and pruning pays."""
    if not keys:
        return df
    return df.repartitionByRange(*keys).sortWithinPartitions(*keys)


def _write_and_commit(req: WriteRequest, table: Table, df, *, delete, message: str) -> WrittenFiles:
    written = write_files(df, table, req.run_id)
    try:
        commit_files(table, add=written.files, delete=delete, message=message,
                     properties={"ratui.run-id": req.run_id, "ratui.strategy": req.strategy})
    except Exception:
        discard(written)
        raise
    return written


def full_refresh(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("full_refresh", req.batch_rows)
    table = _load_or_create(req, outcome, replace_incompatible=True)
    old = data_files(table)
    keys = _resolve_columns(req.batch, req.config.unique_key, "RAT-WRT-001", "unique_key", req.key)
    written = _write_and_commit(req, table, _clustered(req.batch, keys), delete=old,
                                message=f"full_refresh of {req.key}")
    outcome.files_added, outcome.files_removed = len(written.files), len(old)
    outcome.rows_written = written.rows
    if written.rows == 0:
        outcome.notes.append("the result was empty: the table is now empty" if old else "the result was empty")
    outcome.table_rows = row_count(req.catalog.load_table(req.ref, req.key))
    return outcome


def append_only(req: WriteRequest) -> WriteOutcome:
    outcome = WriteOutcome("append_only", req.batch_rows)
    table = _load_or_create(req, outcome, replace_incompatible=False)
    kept = len(data_files(table))
    written = _write_and_commit(req, table, req.batch, delete=[], message=f"append to {req.key}")
    outcome.files_added, outcome.files_kept, outcome.rows_written = len(written.files), kept, written.rows
    if written.rows == 0:
        outcome.notes.append("the batch was empty: nothing appended")
    outcome.table_rows = row_count(req.catalog.load_table(req.ref, req.key))
    return outcome


def dedupe(batch, keys: list[str], watermark: str | None):
    """One row per key: the latest by watermark (NULL watermarks lose), ties and no watermark -> last in batch."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = batch.withColumn(ORD, F.monotonically_increasing_id())
    order = ([F.col(watermark).desc_nulls_last()] if watermark else []) + [F.col(ORD).desc()]
    window = Window.partitionBy(*[F.col(k) for k in keys]).orderBy(*order)
    return ordered.withColumn(RN, F.row_number().over(window)).filter(F.col(RN) == 1).drop(RN, ORD)


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


PRUNABLE = (it.IntegerType, it.LongType, it.StringType, it.DecimalType, it.DateType, it.TimestampType,
            it.TimestamptzType, it.FloatType, it.DoubleType)


def affected_files(session, table: Table, batch_keys, key: str):
    """The data files whose bounds on the first key column can hold a key of the batch.

    Files without usable bounds count as affected (correct, only slower). A NULL key affects the files
    that hold NULLs in that column.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    files = data_files(table)
    field = table.schema().find_field(key, case_sensitive=False)
    if not isinstance(field.field_type, PRUNABLE) or not files:
        return files
    itype, field_id = field.field_type, field.field_id
    if isinstance(itype, (it.TimestampType, it.TimestamptzType, it.DateType)):
        bound_type = st.LongType()
    else:
        bound_type = iceberg_to_spark_type(itype)
    rows, always = [], []
    for f in files:
        lo = (f.lower_bounds or {}).get(field_id)
        hi = (f.upper_bounds or {}).get(field_id)
        nulls = (f.null_value_counts or {}).get(field_id)
        has_null = True if nulls is None else nulls > 0
        if lo is None or hi is None:
            if nulls is not None and nulls == f.record_count:
                rows.append((f.file_path, None, None, True))
            else:
                always.append(f)
            continue
        rows.append((f.file_path, from_bytes(itype, lo), from_bytes(itype, hi), has_null))
    if not rows:
        return always
    schema = st.StructType([
        st.StructField("path", st.StringType()), st.StructField("lo", bound_type),
        st.StructField("hi", bound_type), st.StructField("has_null", st.BooleanType()),
    ])
    ranges = session.createDataFrame(rows, schema)
    k = _physical(F.col("k"), itype)
    keys = batch_keys.select(F.col(f"`{key}`").alias("k")).distinct()
    hit = keys.join(
        F.broadcast(ranges),
        (k.isNotNull() & (k >= F.col("lo")) & (k <= F.col("hi"))) | (k.isNull() & F.col("has_null")),
    ).select("path").distinct()
    paths = {r.path for r in hit.collect()}
    return always + [f for f in files if f.file_path in paths]


def incremental(req: WriteRequest) -> WriteOutcome:
    from pyspark.sql import functions as F

    outcome = WriteOutcome("incremental", 0)
    keys = _resolve_columns(req.batch, req.config.unique_key, "RAT-WRT-001", "unique_key", req.key)
    watermark = None
    if req.config.watermark_column:
        watermark = _resolve_columns(req.batch, (req.config.watermark_column,), "RAT-WRT-002",
                                     "watermark_column", req.key)[0]
    table = _load_or_create(req, outcome, replace_incompatible=False)
    batch = _aligned(dedupe(req.batch, keys, watermark), table)
    keys = [table.schema().find_field(k, case_sensitive=False).name for k in keys]
    batch = batch.persist()
    try:
        outcome.rows_written = batch.count()
        existing = data_files(table)
        affected = affected_files(req.session, table, batch, keys[0]) if existing and outcome.rows_written else []
        if affected:
            key_cols = [F.col(k).alias(f"__k{i}") for i, k in enumerate(keys)]
            batch_keys = batch.select(*key_cols).distinct()
            old = read_files(req.session, table, affected)
            cond = reduce(lambda a, b: a & b, [old[k].eqNullSafe(batch_keys[f"__k{i}"]) for i, k in enumerate(keys)])
            survivors = old.join(batch_keys, cond, "left_anti")
            result = survivors.unionByName(batch)
        else:
            result = batch
        if outcome.rows_written == 0 and not affected:
            outcome.notes.append("the batch was empty: nothing changed")
            outcome.files_kept = len(existing)
            outcome.table_rows = row_count(table)
            return outcome
        written = _write_and_commit(req, table, _clustered(result, keys), delete=affected,
                                    message=f"incremental upsert into {req.key}")
    finally:
        batch.unpersist()
    outcome.files_added, outcome.files_removed = len(written.files), len(affected)
    outcome.files_kept = len(existing) - len(affected)
    outcome.table_rows = row_count(req.catalog.load_table(req.ref, req.key))
    return outcome


STRATEGIES = {"full_refresh": full_refresh, "append_only": append_only, "incremental": incremental}


def write(req: WriteRequest) -> WriteOutcome:
    try:
        handler = STRATEGIES[req.strategy]
    except KeyError:
        raise RatuiError("RAT-CFG-008", f"merge strategy '{req.strategy}' is not supported yet") from None
    return handler(req)
