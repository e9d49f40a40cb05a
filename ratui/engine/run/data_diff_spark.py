"""A table's data diff as one Spark job (data_diff.py's `spark` way): one aggregate over a full outer join by key, or
over the two sides tagged and grouped by every column when there is no key."""

from __future__ import annotations

from functools import reduce
from typing import Any

from pyiceberg.table import Table

from ratui.engine.run.data_diff_model import NUMERIC, SAMPLES, ColumnDiff, DataDiff
from ratui.engine.run.diff_text import SPARK
from ratui.engine.run.quality import _jsonable

# distinct counts are HyperLogLog++ estimates at this relative standard deviation: exact distinct counts of several
# columns make Spark expand every row once per column and side, and that plan's generated code is compiled afresh on
# every run (measured: 4-7 compilations a run, none with the estimate); small counts come out exact. 5% (Spark's
# default), not 1%: a 1% sketch is 16 times the registers, and a diff of a 500-row table took 5-6 s with it, 1 s at 5%
DISTINCT_RSD = 0.05
_ADAPTIVE = "spark.sql.adaptive.enabled"
_PARTITIONS = "spark.sql.shuffle.partitions"
DIFF_ROWS_PER_PARTITION = 500_000


class _Aggregate:
    """The one aggregate's expressions, and what each one reads back as (a name, or a tuple naming a sample or a
    column's figure)."""

    def __init__(self) -> None:
        self.exprs: list[Any] = []
        self.reads: list[Any] = []

    def add(self, expr, reader) -> None:
        self.exprs.append(expr.alias(f"x{len(self.exprs)}"))
        self.reads.append(reader)


def from_spark(session, table: str, before: Table | None, after: Table, key: list[str], rows: int) -> DataDiff:
    from ratui.engine.iceberg.read import read_table
    from ratui.engine.iceberg.schema import spark_schema_of
    from ratui.engine.write.files import session_conf

    a_df = read_table(session, after)
    b_df = read_table(session, before) if before is not None else \
        session.createDataFrame([], spark_schema_of(after.schema()))
    a_types = {f.name: f.field_type for f in after.schema().fields}
    b_types = {f.name: f.field_type for f in before.schema().fields} if before is not None else a_types
    a_cols, b_cols = list(a_df.columns), list(b_df.columns)
    names = list(dict.fromkeys(b_cols + a_cols))  # every column either side has
    keyed = bool(key) and all(k in a_cols and k in b_cols for k in key)
    agg = _Aggregate()
    sides = {"before": (b_cols, b_types), "after": (a_cols, a_types)}
    if keyed:
        source = _keyed_aggregate(agg, b_df, a_df, key, names, sides)
    else:
        source = _whole_row_aggregate(agg, b_df, a_df, names, sides)
    # the one Spark job: adaptive execution would run each shuffle stage as a job of its own (5 for a keyed diff,
    # measured), so it is off for this query in the run's own session (a full outer join is never broadcast). Without
    # it nothing coalesces the shuffle's partitions either: spark.sql.shuffle.partitions (200 unless set) tasks of a
    # few rows each, every one holding a sketch per column, took a minute a diff on 2 cores; the diff's rows (both
    # sides at most diff.max_rows) are split into one partition per DIFF_ROWS_PER_PARTITION instead
    with session_conf(session, {_ADAPTIVE: "false", _PARTITIONS: str(max(1, -(-rows // DIFF_ROWS_PER_PARTITION)))}):
        row = source.agg(*agg.exprs).first()
    values = {agg.reads[i]: row[i] for i in range(len(agg.reads))}
    return _read_back(table, values, names, a_types, b_types, key if keyed else None)


def _q(name: str):
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


def _keyed_aggregate(agg: _Aggregate, b_df, a_df, key: list[str], names: list[str],
                     sides: dict[str, tuple[list[str], dict[str, Any]]]):
    """The two sides joined by key (NULL-safe), `agg` filled with the counts of rows added, removed and changed,
    sample keys of each, and every column's figures on each side."""
    from pyspark.sql import functions as F

    (b_cols, _), (a_cols, _) = sides["before"], sides["after"]
    b = b_df.select(*[_q(c).alias(f"b{i}") for i, c in enumerate(b_cols)], F.lit(True).alias("_b"))
    a = a_df.select(*[_q(c).alias(f"a{i}") for i, c in enumerate(a_cols)], F.lit(True).alias("_a"))
    bc = {c: F.col(f"b{i}") for i, c in enumerate(b_cols)}
    ac = {c: F.col(f"a{i}") for i, c in enumerate(a_cols)}
    joined = b.join(a, reduce(lambda x, y: x & y, [bc[k].eqNullSafe(ac[k]) for k in key]), "full_outer")
    in_b, in_a = F.col("_b").isNotNull(), F.col("_a").isNotNull()
    others = [c for c in a_cols if c in bc and c not in key]
    same = reduce(lambda x, y: x & y, [bc[c].eqNullSafe(ac[c]) for c in others], F.lit(True))
    kinds = {"added": (in_a & ~in_b, ac), "removed": (in_b & ~in_a, bc), "changed": (in_a & in_b & ~same, ac)}
    for kind, (cond, _side) in kinds.items():
        agg.add(F.count_if(cond), kind)
    agg.add(F.count_if(in_b), "rows_before")
    agg.add(F.count_if(in_a), "rows_after")
    for kind, (cond, side) in kinds.items():
        keys = F.struct(*[side[k].alias(k) for k in key])
        agg.add(F.slice(F.array_sort(F.collect_list(F.when(cond, keys))), 1, SAMPLES), ("sample", kind))
    for c in names:
        for where, cols, present in (("before", bc, in_b), ("after", ac, in_a)):
            if c not in cols:
                continue
            agg.add(F.count_if(present & cols[c].isNull()), ("nulls", where, c))
            agg.add(F.approx_count_distinct(cols[c], DISTINCT_RSD), ("distinct", where, c))
            if isinstance(sides[where][1].get(c), NUMERIC):
                agg.add(F.sum(cols[c]), ("sum", where, c))
    return joined


def _whole_row_aggregate(agg: _Aggregate, b_df, a_df, names: list[str],
                         sides: dict[str, tuple[list[str], dict[str, Any]]]):
    """Rows compared whole, as multisets: each distinct row with how many times each side holds it; `agg` filled
    with the rows added and removed, sample rows of each, and every column's figures on each side."""
    from pyspark.sql import functions as F

    (b_cols, _), (a_cols, _) = sides["before"], sides["after"]
    b = b_df.withColumn("_nb", F.lit(1)).withColumn("_na", F.lit(0))
    a = a_df.withColumn("_nb", F.lit(0)).withColumn("_na", F.lit(1))
    both = b.unionByName(a, allowMissingColumns=True)
    source = both.groupBy(*[_q(c) for c in names]).agg(F.sum("_nb").alias("_nb"), F.sum("_na").alias("_na"))
    nb, na = F.col("_nb"), F.col("_na")
    agg.add(F.sum(F.greatest(na - nb, F.lit(0))), "added")
    agg.add(F.sum(F.greatest(nb - na, F.lit(0))), "removed")
    agg.add(F.sum(nb), "rows_before")
    agg.add(F.sum(na), "rows_after")
    agg.add(F.slice(F.array_sort(F.collect_list(F.when(na > nb, F.struct(*[_q(c) for c in a_cols])))), 1, SAMPLES),
            ("sample", "added"))
    agg.add(F.slice(F.array_sort(F.collect_list(F.when(nb > na, F.struct(*[_q(c) for c in b_cols])))), 1, SAMPLES),
            ("sample", "removed"))
    for c in names:
        for where, n in (("before", nb), ("after", na)):
            side_cols, types = sides[where]
            if c not in side_cols:
                continue
            agg.add(F.sum(F.when(_q(c).isNull(), n).otherwise(0)), ("nulls", where, c))
            agg.add(F.approx_count_distinct(F.when(n > 0, _q(c)), DISTINCT_RSD), ("distinct", where, c))
            if isinstance(types.get(c), NUMERIC):
                agg.add(F.sum(_q(c) * n), ("sum", where, c))
    return source


def _read_back(table: str, values: dict[Any, Any], names: list[str], a_types: dict[str, Any],
               b_types: dict[str, Any], key: list[str] | None) -> DataDiff:
    """The DataDiff of the aggregate's values (`key` None: rows compared whole)."""
    columns = []
    for c in names:
        t = a_types.get(c) or b_types.get(c)
        col = ColumnDiff(c, str(t))
        for where in ("before", "after"):
            if ("nulls", where, c) in values:
                setattr(col, f"nulls_{where}", int(values[("nulls", where, c)] or 0))
                setattr(col, f"distinct_{where}", int(values[("distinct", where, c)] or 0))
            if ("sum", where, c) in values:
                setattr(col, f"sum_{where}", _jsonable(values[("sum", where, c)]))
        columns.append(col)
    samples = {kind: [_jsonable_row(r) for r in values[("sample", kind)] or []]
               for kind in ("added", "removed", "changed") if ("sample", kind) in values}

    def count(name: str) -> int:
        return int(values[name] or 0)

    return DataDiff(table, SPARK, key or [], count("rows_before"), count("rows_after"), count("added"),
                    count("removed"), count("changed") if key is not None else None, columns=columns,
                    samples=samples)


def _jsonable_row(row) -> Any:
    data = row.asDict(recursive=True)
    return {k: _jsonable(v) for k, v in data.items()}
