"""Which data files a merge must touch, from Iceberg's per-file column bounds and one pass over key columns.

The files that may hold an affected key are chosen from the bounds of every key column (NULL counts included);
then one pass over those candidates' key columns alone finds the batch keys the table really holds, and only the
files whose bounds hold one of those are touched. A file whose statistics show it holds nothing but affected keys
is dropped without being read again. Computed in Spark: no row passes through Python.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

from pyiceberg import types as it
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from ratui.engine.iceberg.read import data_files, read_files
from ratui.engine.iceberg.schema import iceberg_to_spark_type
from ratui.engine.write.keys import col, match_keys

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
    old = read_files(session, table, candidates).select(*[col(c) for c in cols])
    present = keys_df.join(old, match_keys(keys_df, kcols, old, cols), "left_semi").persist()
    try:
        if present.isEmpty():
            return [], []
        hit = candidates if len(candidates) == 1 else candidate_files(session, table, present, cols, candidates)
    finally:
        present.unpersist()
    whole = [f for f in hit if _single_valued(table, f, cols)]
    whole_paths = {f.file_path for f in whole}
    return [f for f in hit if f.file_path not in whole_paths], whole
