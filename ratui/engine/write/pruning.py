"""Which data files and rows a keyed write touches, from Iceberg's per-file column bounds and one pass over key columns.

The files that may hold an affected key are chosen from the bounds of every key column (NULL counts included);
then one pass over those candidates' key columns alone (with their row positions) finds the rows the batch
replaces: their file and position (locate_rows). Computed in Spark: no row passes through Python.
"""

from __future__ import annotations

from typing import Any

from pyiceberg import types as it
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from ratui.engine.iceberg.read import FILE_NO, ROW_POS, read_files
from ratui.engine.sql_text import quote
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


def arrow_candidates(table: Table, files: list[DataFile], rows, cols: list[str]) -> list[DataFile]:
    """The files of `files` whose per-file bounds can hold one of the key tuples of `rows` (a batch's key columns
    `cols` on the driver, small_batch), with no Spark job.

    Every prunable key column of a tuple must fit the file's [lower, upper] bound (or be NULL where the file has
    NULLs): a batch of keys at both ends of the table's range reaches the files that hold them, not every file
    between (files_in_ranges). A file without usable bounds on a column cannot be excluded by that column (correct,
    only slower)."""
    import pyarrow.compute as pc

    usable = _usable(table, cols)
    if not usable or not files:
        return list(files)
    keys = {i: _arrow_physical(rows.column(cols[i]), f.field_type) for i, f in usable}
    out = []
    for data in files:
        fits = None
        for i, f in usable:
            fid = f.field_id
            nulls = (data.null_value_counts or {}).get(fid)
            lo, hi = (data.lower_bounds or {}).get(fid), (data.upper_bounds or {}).get(fid)
            if lo is not None and hi is not None:
                low, high = from_bytes(f.field_type, lo), from_bytes(f.field_type, hi)
                inside = pc.and_(pc.greater_equal(keys[i], low), pc.less_equal(keys[i], high))
                # a NULL key fits where the file has NULLs (or may have: no count)
                column_fits = pc.fill_null(inside, nulls is None or nulls > 0)
            elif nulls is not None and nulls == data.record_count:
                column_fits = pc.is_null(keys[i])  # only NULLs: matches NULL keys alone
            else:
                continue  # no bounds: anything may be in it
            fits = column_fits if fits is None else pc.and_(fits, column_fits)
        if fits is None or pc.any(fits).as_py():
            out.append(data)
    return out


def batch_ranges(table: Table, batch, cols: list[str]):
    """(rows, ranges): one job over the batch gives its row count and, for every prunable key column, the range of
    its values as Iceberg's bounds encode them, and whether it holds NULLs: [(field, lo, hi, has_null)]."""
    from pyspark.sql import functions as F

    usable = _usable(table, cols)
    aggs = [F.count(F.lit(1)).alias("n")]
    for i, f in usable:
        k = _physical(col(cols[i]), f.field_type)
        aggs += [F.min(k).alias(f"lo{i}"), F.max(k).alias(f"hi{i}"), F.count(k).alias(f"nn{i}")]
    row = batch.agg(*aggs).collect()[0]  # collect, not first(): a global aggregate is one job either way
    rows = int(row["n"])
    return rows, [(f, row[f"lo{i}"], row[f"hi{i}"], row[f"nn{i}"] < rows) for i, f in usable]


def small_batch(batch, limit: int):
    """The rows of `batch` (a few columns of it: its keys) on the driver, as Arrow, when it holds at most `limit`
    of them, else None. One job, which also fills the cache of a persisted frame `batch` selects from; a larger
    batch brings at most limit + 1 rows here."""
    rows = batch.limit(limit + 1).toArrow()
    return rows if rows.num_rows <= limit else None


def _arrow_physical(column, itype):
    """A key column on the driver (Arrow) as the values its Iceberg bounds decode to (see _physical)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(itype, (it.TimestampType, it.TimestamptzType)):
        # Iceberg bounds are microseconds since the epoch (UTC: Spark's session time zone)
        return pc.cast(column, pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())
    if isinstance(itype, it.DateType):
        return column.cast(pa.int32())  # days since the epoch
    return column


def arrow_ranges(table: Table, rows, cols: list[str]):
    """batch_ranges of a batch already on the driver (small_batch): the same (rows, ranges), with no Spark job."""
    import pyarrow.compute as pc

    out = []
    for i, f in _usable(table, cols):
        column = _arrow_physical(rows.column(cols[i]), f.field_type)
        low = high = None
        if column.null_count < len(column):
            bounds = pc.min_max(column)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
        out.append((f, low, high, column.null_count > 0))
    return rows.num_rows, out


def files_in_ranges(files: list[DataFile], ranges) -> list[DataFile]:
    """The files whose bounds overlap every range of `ranges` (batch_ranges), or that hold NULLs where the batch
    does. No Spark job: Iceberg's per-file statistics against the batch's range. A file without bounds on a column
    cannot be excluded by it."""
    out = []
    for data in files:
        hit = True
        for field_, lo, hi, batch_null in ranges:
            fid = field_.field_id
            nulls = (data.null_value_counts or {}).get(fid)
            file_null = True if nulls is None else nulls > 0
            flo, fhi = (data.lower_bounds or {}).get(fid), (data.upper_bounds or {}).get(fid)
            if flo is None or fhi is None:
                hit = batch_null if nulls is not None and nulls == data.record_count else True
            else:
                overlap = lo is not None and from_bytes(field_.field_type, flo) <= hi and \
                    from_bytes(field_.field_type, fhi) >= lo
                hit = overlap or (batch_null and file_null)
            if not hit:
                break
        if hit:
            out.append(data)
    return out


# Values of an IN filter Spark hands to the Parquet reader as they are (by default, more than 10 become a
# min..max range, which skips nothing when the keys are spread): with them the reader skips every page and row
# group whose statistics hold none of the keys.
# Spark hands Parquet an IN of n values as n nested ORs, and the reader walks them recursively: 1,000 values
# overflowed an executor thread's stack (StackOverflowError, the JVM gone: measured with 100k rows, Spark 4), 500
# did not. 250 keeps a wide margin (other key types, deeper plans); above it the batch's min..max range filters.
IN_FILTER_MAX_VALUES = 250
IN_FILTER_CONF = {"spark.sql.parquet.pushdown.inFilterThreshold": str(IN_FILTER_MAX_VALUES)}


def local_keys(session, rows, schema, cols: list[str]) -> tuple[Any, list[tuple[list | None, bool]]]:
    """The key columns `cols` of a batch on the driver (small_batch; `schema` its Spark schema) given back to Spark
    as a local relation (columns __k0..: every join with it is a broadcast that costs no job), with key_values:
    what locate_rows filters the table's key columns by. Repeated key tuples stay: the frame is only ever joined
    to keep or leave out the table's rows that match one."""
    from pyspark.sql import types as st

    names = [f"__k{i}" for i in range(len(cols))]
    keys = rows.select(cols).rename_columns(names)
    key_schema = st.StructType([st.StructField(n, schema[c].dataType) for n, c in zip(names, cols)])
    return session.createDataFrame(keys, schema=key_schema), key_values(rows, schema, cols)


def key_values(rows, schema, cols: list[str]) -> list[tuple[list | None, bool]]:
    """Per key column `cols` of a batch on the driver (small_batch; `schema` its Spark schema): its distinct
    non-NULL values (None when there are more than IN_FILTER_MAX_VALUES, or for a type whose Python values would
    not make literals of exactly the column's type) and whether it holds a NULL (see key_filters)."""
    import pyarrow.compute as pc
    from pyspark.sql import types as st

    values: list[tuple[list | None, bool]] = []
    for c in cols:
        column = rows.column(c)
        # only types whose Python values make literals of exactly the column's type (timestamps, decimals and
        # floats could be compared through a conversion: never risk a superset that is not one)
        exact = isinstance(schema[c].dataType, (st.IntegralType, st.StringType, st.DateType))
        distinct = pc.unique(column.drop_null()).to_pylist() if exact else None
        if distinct is not None and len(distinct) > IN_FILTER_MAX_VALUES:
            distinct = None
        values.append((distinct, column.null_count > 0))
    return values


# Key types whose range (batch_ranges) is the column's own values, so it filters the table's column as it is.
RANGE_FILTER_TYPES = (it.IntegerType, it.LongType, it.StringType)


def locate_rows(session, table: Table, candidates: list[DataFile], keys_df, cols: list[str], *,
                broadcast: bool = False, values: list[tuple[list | None, bool]] | None = None, ranges=()):
    """(FILE_NO, ROW_POS) of every live row of `candidates` whose `cols` tuple (NULL-safe) is a key tuple of `keys_df`
    (columns __k0..): FILE_NO is the file's index in `candidates`, ROW_POS the row's position in the file.
    `broadcast`: the keys are few: every task gets them all, and the table's key column is never shuffled.
    `values` (local_keys): each key column's values, filtered on first (a superset of the matches, which the
    Parquet reader can apply to its pages); the exact NULL-safe match follows. `ranges` (batch_ranges): a key
    column without such values is filtered on the batch's range of it instead (also a superset, which skips the
    pages of a file that lie outside it: a batch of recent keys reads the end of a file, not all of it)."""
    from pyspark.sql import functions as F

    if broadcast:
        keys_df = F.broadcast(keys_df)
    kcols = [f"__k{i}" for i in range(len(cols))]
    old = read_files(session, table, candidates, positions=True).select(*[col(c) for c in cols], F.col(FILE_NO),
                                                                         F.col(ROW_POS))
    old = key_filters(old, cols, values, ranges)
    return old.join(keys_df, match_keys(old, cols, keys_df, kcols), "left_semi").select(FILE_NO, ROW_POS)


def key_filters(old, cols: list[str], values: list[tuple[list | None, bool]] | None = None, ranges=()):
    """`old` (a table's rows, its key columns `cols` by their table names) filtered on what can match a batch's
    keys: each key column's values (key_values: an IN list the Parquet reader applies to its pages, see
    IN_FILTER_CONF), else the batch's range of it (batch_ranges). A superset of the matching rows: the exact
    NULL-safe match follows."""
    from pyspark.sql import functions as F

    listed = set()
    for c, (distinct, has_null) in zip(cols, values or []):
        if distinct is None:
            continue
        listed.add(c.lower())
        keep = in_list(c, distinct) if distinct else F.lit(False)
        old = old.where(keep | col(c).isNull() if has_null else keep)
    for field_, low, high, has_null in ranges:
        if field_.name.lower() in listed or not isinstance(field_.field_type, RANGE_FILTER_TYPES):
            continue
        inside = col(field_.name).between(F.lit(low), F.lit(high)) if low is not None else F.lit(False)
        old = old.where(inside | col(field_.name).isNull() if has_null else inside)
    return old


def in_list(name: str, values: list):
    """`name IN (values)` for ints, dates and strings (what local_keys lists), made from one SQL text: Column.isin
    makes each value a literal through its own call into the JVM (a second for a thousand keys). A string holding
    a quote, a backslash or a `$` (whose reading depends on the session's escaping and variable settings) goes
    through isin."""
    from datetime import date, datetime

    from pyspark.sql import functions as F

    texts = []
    for v in values:
        if isinstance(v, (bool, datetime)) or not isinstance(v, (int, str, date)):
            return col(name).isin(values)
        if isinstance(v, int):
            texts.append(str(v))
        elif isinstance(v, date):
            texts.append(f"DATE'{v.isoformat()}'")
        elif "'" in v or "\\" in v or "$" in v:
            return col(name).isin(values)
        else:
            texts.append(f"'{v}'")
    return F.expr(f"{quote(name)} IN ({', '.join(texts)})")
