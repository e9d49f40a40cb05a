"""A run's data diff: what its write changed in its table, and the gates that may refuse the merge because of it.

Before (`before`): the table as the run's branch forked from its target (main, or a dev/publish branch): what the
target holds unless another run merged meanwhile. After: the table on the run's branch, after the write and the
quality tests. Computed after the quality tests and before the merge (resolve), in the quality phase:

    rows before / after; rows added, removed and changed (changed: by the pipeline's unique_key, a row whose other
    columns differ; without a key rows are compared whole, as multisets, and nothing is "changed")
    per column: NULLs, distinct non-NULL values (a HyperLogLog++ estimate, 5% relative error; exact for small
    counts) and the sum of numeric columns, before and after
    schema changes (columns added, dropped, renamed, retyped: from the two schemas, by field id)
    up to ten sample keys of each kind (whole rows when there is no key), sorted

Three ways, said in `method`:
    in_process  no Spark job: both sides read with PyIceberg (this project's FileIO, deletes applied) and compared in
                ratui's own process, when both sides together hold at most diff.in_process_rows rows and every
                column is a plain value (no struct, list or map); distinct counts are exact. A Spark job's fixed
                cost (planning, a shuffle, a few tasks: 0.5-1.4 s on 2 cores) was most of a small table's run
    spark       one Spark job (one aggregate over a full outer join by key, or over the two sides tagged and
                grouped by every column when there is no key), when both sides hold at most diff.max_rows rows
                (ratui.yaml; the snapshot summaries' counts)
    file_stats  no Spark job: the data files' statistics in the manifests. Rows before/after are exact; added /
                removed are the rows of the data files only one side has (a rewritten file counts whole as
                removed and added, so they are upper bounds); NULL counts come from each file's null count (exact
                unless position deletes apply); distinct counts, sums, changed rows and samples are not known
                (None); min/max come from the files' bounds.

A key that is not unique on a side counts each matching pair as added, removed or changed (the keyed strategies keep
keys unique); the Spark job counts such pairs in the row, NULL and sum figures too, in process they are each side's.
The gates (config.py: max_row_change, max_rows_removed, max_null_increase) fail the run with RAT-RUN-009, the diff
as the reason; a gate naming a column the table lacks is RAT-CFG-010.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import reduce
from typing import Any

from pyiceberg import types as it
from pyiceberg.conversions import from_bytes
from pyiceberg.table import Table

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.project.config import PipelineConfig, parse_limit
from ratui.engine.run.diff_text import FILE_STATS, IN_PROCESS, SPARK, method_text
from ratui.engine.run.quality import _jsonable

SAMPLES = 10
# distinct counts are HyperLogLog++ estimates at this relative standard deviation: exact distinct counts of several
# columns make Spark expand every row once per column and side, and that plan's generated code is compiled afresh on
# every run (measured: 4-7 compilations a run, none with the estimate); small counts come out exact. 5% (Spark's
# default), not 1%: a 1% sketch is 16 times the registers, and a diff of a 500-row table took 5-6 s with it, 1 s at 5%
DISTINCT_RSD = 0.05
_ADAPTIVE = "spark.sql.adaptive.enabled"
_PARTITIONS = "spark.sql.shuffle.partitions"
DIFF_ROWS_PER_PARTITION = 500_000
_NUMERIC = (it.IntegerType, it.LongType, it.FloatType, it.DoubleType, it.DecimalType)
_BOUNDED = _NUMERIC + (it.DateType, it.TimestampType, it.TimestamptzType)
# the column types the in-process diff compares (a value PyArrow hands back that hashes, sorts and prints as JSON)
_PLAIN = _BOUNDED + (it.BooleanType, it.StringType, it.BinaryType)


@dataclass
class ColumnDiff:
    name: str
    type: str
    nulls_before: int | None = None  # None: the column is not on that side (or, by file stats, not known)
    nulls_after: int | None = None
    distinct_before: int | None = None
    distinct_after: int | None = None
    sum_before: Any = None  # numeric columns only (text for decimals)
    sum_after: Any = None
    min_before: Any = None  # file_stats only: from the data files' bounds
    max_before: Any = None
    min_after: Any = None
    max_after: Any = None


@dataclass
class DataDiff:
    table: str
    method: str  # spark | file_stats
    key: list[str]
    rows_before: int
    rows_after: int
    added: int
    removed: int
    changed: int | None  # None: no key (rows compared whole) or by file stats
    new_table: bool = False  # the target had no such table
    columns: list[ColumnDiff] = field(default_factory=list)
    schema_changes: list[str] = field(default_factory=list)
    samples: dict[str, list[Any]] = field(default_factory=dict)  # added | removed | changed -> keys (or rows)
    gate: dict[str, Any] = field(default_factory=dict)  # {"checked": [...], "failed": [...]} once gated

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def column(self, name: str) -> ColumnDiff | None:
        return next((c for c in self.columns if c.name == name), None)

    @property
    def summary(self) -> str:
        changed = f", {self.changed:,} changed" if self.changed is not None else ""
        return (f"{self.rows_before:,} -> {self.rows_after:,} rows: {self.added:,} added, {self.removed:,} removed"
                f"{changed} ({method_text({'method': self.method})})")


def compute(session, table: str, before: Table | None, after: Table, key: tuple[str, ...],
            max_rows: int, in_process_rows: int = 0) -> DataDiff:
    """The diff of `after` against `before` (None: a new table)."""
    from ratui.engine.iceberg.read import row_count

    rows_before = row_count(before) if before is not None else 0
    rows_after = row_count(after)
    changes = schema_changes(before, after)
    diff: DataDiff | None = None
    if max(rows_before, rows_after) > max_rows:
        diff = _from_stats(table, before, after, list(key), rows_before, rows_after)
    elif rows_before + rows_after <= in_process_rows and _plain(before) and _plain(after):
        try:
            diff = _in_process(table, before, after, list(key))
        except (NotImplementedError, ValueError):  # PyIceberg cannot read it (equality deletes): Spark can
            diff = None
    if diff is None:
        diff = _from_spark(session, table, before, after, list(key), rows_before + rows_after)
    diff.schema_changes = changes
    diff.new_table = before is None
    return diff


# ------------------------------------------------------------------------------------------------ schema


def schema_changes(before: Table | None, after: Table) -> list[str]:
    if before is None:
        return []
    old = {f.field_id: f for f in before.schema().fields}
    new = {f.field_id: f for f in after.schema().fields}
    out = []
    for fid, f in new.items():
        if fid not in old:
            out.append(f"added column {f.name} {f.field_type}")
        else:
            if old[fid].name != f.name:
                out.append(f"renamed column {old[fid].name} to {f.name}")
            if str(old[fid].field_type) != str(f.field_type):
                out.append(f"column {f.name}: {old[fid].field_type} -> {f.field_type}")
    out.extend(f"dropped column {f.name}" for fid, f in old.items() if fid not in new)
    return out


# --------------------------------------------------------------------------------------------- in process


def _plain(table: Table | None) -> bool:
    return table is None or all(isinstance(f.field_type, _PLAIN) for f in table.schema().fields)


def _in_process(table: str, before: Table | None, after: Table, key: list[str]) -> DataDiff:
    """What _from_spark computes, from both sides read with PyIceberg: small tables, no Spark job."""
    a_types = {f.name: f.field_type for f in after.schema().fields}
    b_types = {f.name: f.field_type for f in before.schema().fields} if before is not None else a_types
    a_cols, b_cols = list(a_types), list(b_types)
    temporal: dict[str, Any] = {}  # column -> its Arrow type: compared as integers, shown as values
    a_data = _columns(after, a_cols, temporal)
    b_data = _columns(before, b_cols, temporal) if before is not None else {c: [] for c in b_cols}

    def shown(column: str, value: Any) -> Any:
        if column in temporal and value is not None:
            import pyarrow as pa

            kind = temporal[column]
            value = pa.array([value], pa.int32() if pa.types.is_date32(kind) else pa.int64()).cast(kind)[0].as_py()
        return _jsonable(_unnan(value))

    a_n = len(next(iter(a_data.values()), []))
    b_n = len(next(iter(b_data.values()), []))
    names = list(dict.fromkeys(b_cols + a_cols))
    keyed = bool(key) and all(k in a_cols and k in b_cols for k in key)
    floats = {c for c in names if isinstance(a_types.get(c) or b_types.get(c), (it.FloatType, it.DoubleType))}
    for data in (a_data, b_data):  # NaN made equal to NaN, once (as Spark's <=>, GROUP BY and distinct have it)
        for c in floats & data.keys():
            data[c] = [_NAN if v != v else v for v in data[c]]

    def rows(data: dict[str, list], cols: list[str], n: int) -> list[tuple]:
        lists = [data[c] for c in cols]
        return list(zip(*lists)) if lists else [()] * n

    samples: dict[str, list[Any]] = {}
    changed: int | None = None
    if keyed:
        others = [c for c in a_cols if c in b_types and c not in key]
        b_key, a_key = rows(b_data, key, b_n), rows(a_data, key, a_n)
        b_rest, a_rest = rows(b_data, others, b_n), rows(a_data, others, a_n)
        kinds: dict[str, list[tuple]] = {"added": [], "removed": [], "changed": []}
        b_map, a_map = dict(zip(b_key, b_rest)), dict(zip(a_key, a_rest))
        if len(b_map) == b_n and len(a_map) == a_n:  # keys unique on both sides (as the keyed strategies keep
            # them): set operations, in C
            a_keys, b_keys = a_map.keys(), b_map.keys()
            new_keys, gone_keys = a_keys - b_keys, b_keys - a_keys
            other = {k for k, _ in set(a_map.items()) - set(b_map.items())} - new_keys
            kinds = {"added": list(new_keys), "removed": list(gone_keys), "changed": list(other)}
            counts = {kind: len(found) for kind, found in kinds.items()}
        else:  # each matching pair counts, as the Spark job's join has it
            b_by: dict[tuple, list[tuple]] = {}
            for k, r in zip(b_key, b_rest):
                b_by.setdefault(k, []).append(r)
            a_by: dict[tuple, list[tuple]] = {}
            for k, r in zip(a_key, a_rest):
                a_by.setdefault(k, []).append(r)
            counts = dict.fromkeys(kinds, 0)
            for k, new in a_by.items():
                old = b_by.get(k)
                if old is None:
                    counts["added"] += len(new)
                    kinds["added"].append(k)
                    continue
                differ = sum(1 for x in old for y in new if x != y)
                if differ:
                    counts["changed"] += differ
                    kinds["changed"].append(k)
            for k, old in b_by.items():
                if k not in a_by:
                    counts["removed"] += len(old)
                    kinds["removed"].append(k)
        added, removed, changed = counts["added"], counts["removed"], counts["changed"]
        for kind, found in kinds.items():
            samples[kind] = [{c: shown(c, v) for c, v in zip(key, k)} for k in _first_sorted(found)]
    else:
        from collections import Counter

        def whole(data: dict[str, list], n: int) -> list[tuple]:
            # each row over every column either side has (None where this side lacks the column)
            missing = [None] * n
            lists = [data[c] if c in data else missing for c in names]
            return list(zip(*lists)) if lists else [()] * n

        cb, ca = Counter(whole(b_data, b_n)), Counter(whole(a_data, a_n))
        added = sum(max(n - cb.get(r, 0), 0) for r, n in ca.items())
        removed = sum(max(n - ca.get(r, 0), 0) for r, n in cb.items())
        for kind, mine, theirs, cols in (("added", ca, cb, a_cols), ("removed", cb, ca, b_cols)):
            at = [names.index(c) for c in cols]
            found = [tuple(r[i] for i in at) for r, n in mine.items() if n > theirs.get(r, 0)]
            samples[kind] = [{c: shown(c, v) for c, v in zip(cols, r)} for r in _first_sorted(found)]
    columns = []
    for c in names:
        t = a_types.get(c) or b_types.get(c)
        col = ColumnDiff(c, str(t))
        for where, data, types in (("before", b_data, b_types), ("after", a_data, a_types)):
            if c not in data:
                continue
            values = data[c]
            present = [v for v in values if v is not None]
            setattr(col, f"nulls_{where}", len(values) - len(present))
            setattr(col, f"distinct_{where}", len(set(present)))
            if isinstance(types.get(c), _NUMERIC):
                total = sum(map(_unnan, present) if c in floats else present) if present else None
                setattr(col, f"sum_{where}", _jsonable(total))
        columns.append(col)
    return DataDiff(table, IN_PROCESS, key if keyed else [], b_n, a_n, added, removed, changed if keyed else None,
                    columns=columns, samples=samples)


class _NaN:
    """NaN as one value: equal to itself, hashable, sorted after every number (as Spark orders it)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __hash__(self) -> int:
        return hash("NaN")

    def __repr__(self) -> str:
        return "NaN"


_NAN = _NaN()


def _unnan(value: Any) -> Any:
    return float("nan") if isinstance(value, _NaN) else value


def _columns(table: Table, cols: list[str], temporal: dict[str, Any]) -> dict[str, list]:
    """Each column's values as Python objects, dates and timestamps as their integers (days, microseconds): they
    compare, hash and sort alike, and PyArrow makes an integer in a fraction of a datetime's time (a 36,000-row
    timestamp column: 1 ms against 0.17 s). `temporal` learns those columns' types, to show a sample's values."""
    import pyarrow as pa

    arrow = table.scan().to_arrow()
    out = {}
    for c in cols:
        column = arrow.column(c)
        if pa.types.is_timestamp(column.type) or pa.types.is_date32(column.type):
            temporal[c] = column.type
            column = column.cast(pa.int32() if pa.types.is_date32(column.type) else pa.int64())
        out[c] = column.to_pylist()
    return out


def _first_sorted(found: list[tuple]) -> list[tuple]:
    """The first SAMPLES tuples in Spark's order for structs: field by field, NULL first, NaN after numbers."""
    import heapq

    def order(row: tuple) -> tuple:
        return tuple((0, 0) if v is None else (2, 0) if isinstance(v, _NaN) else (1, v) for v in row)

    try:  # tuples compared in C; a NULL or NaN compared with a value raises, and the key function orders them
        return heapq.nsmallest(SAMPLES, found)
    except TypeError:
        return heapq.nsmallest(SAMPLES, found, key=order)


# ------------------------------------------------------------------------------------------------- Spark


def _from_spark(session, table: str, before: Table | None, after: Table, key: list[str], rows: int) -> DataDiff:
    from pyspark.sql import functions as F

    from ratui.engine.iceberg.read import read_table
    from ratui.engine.iceberg.schema import spark_schema_of

    a_df = read_table(session, after)
    b_df = read_table(session, before) if before is not None else \
        session.createDataFrame([], spark_schema_of(after.schema()))
    a_types = {f.name: f.field_type for f in after.schema().fields}
    b_types = {f.name: f.field_type for f in before.schema().fields} if before is not None else a_types
    a_cols, b_cols = list(a_df.columns), list(b_df.columns)
    names = list(dict.fromkeys(b_cols + a_cols))  # every column either side has
    keyed = bool(key) and all(k in a_cols and k in b_cols for k in key)

    def q(name: str):
        return F.col(f"`{name}`")

    aggs: list[Any] = []  # the aggregate's expressions
    reads: list[Any] = []  # and how to read each back

    def add(expr, reader) -> None:
        aggs.append(expr.alias(f"x{len(aggs)}"))
        reads.append(reader)

    if keyed:
        b = b_df.select(*[q(c).alias(f"b{i}") for i, c in enumerate(b_cols)], F.lit(True).alias("_b"))
        a = a_df.select(*[q(c).alias(f"a{i}") for i, c in enumerate(a_cols)], F.lit(True).alias("_a"))
        bc = {c: F.col(f"b{i}") for i, c in enumerate(b_cols)}
        ac = {c: F.col(f"a{i}") for i, c in enumerate(a_cols)}
        joined = b.join(a, reduce(lambda x, y: x & y, [bc[k].eqNullSafe(ac[k]) for k in key]), "full_outer")
        in_b, in_a = F.col("_b").isNotNull(), F.col("_a").isNotNull()
        others = [c for c in a_cols if c in bc and c not in key]
        same = reduce(lambda x, y: x & y, [bc[c].eqNullSafe(ac[c]) for c in others], F.lit(True))
        kinds = {"added": (in_a & ~in_b, ac), "removed": (in_b & ~in_a, bc), "changed": (in_a & in_b & ~same, ac)}
        for kind, (cond, _side) in kinds.items():
            add(F.count_if(cond), kind)
        add(F.count_if(in_b), "rows_before")
        add(F.count_if(in_a), "rows_after")
        for kind, (cond, side) in kinds.items():
            keys = F.struct(*[side[k].alias(k) for k in key])
            add(F.slice(F.array_sort(F.collect_list(F.when(cond, keys))), 1, SAMPLES), ("sample", kind))
        for c in names:
            for where, cols, present in (("before", bc, in_b), ("after", ac, in_a)):
                if c not in cols:
                    continue
                add(F.count_if(present & cols[c].isNull()), ("nulls", where, c))
                add(F.approx_count_distinct(cols[c], DISTINCT_RSD), ("distinct", where, c))
                types = b_types if where == "before" else a_types
                if isinstance(types.get(c), _NUMERIC):
                    add(F.sum(cols[c]), ("sum", where, c))
        source = joined
    else:
        # rows compared whole, as multisets: each distinct row with how many times each side holds it
        b = b_df.withColumn("_nb", F.lit(1)).withColumn("_na", F.lit(0))
        a = a_df.withColumn("_nb", F.lit(0)).withColumn("_na", F.lit(1))
        both = b.unionByName(a, allowMissingColumns=True)
        source = both.groupBy(*[q(c) for c in names]).agg(F.sum("_nb").alias("_nb"), F.sum("_na").alias("_na"))
        nb, na = F.col("_nb"), F.col("_na")
        add(F.sum(F.greatest(na - nb, F.lit(0))), "added")
        add(F.sum(F.greatest(nb - na, F.lit(0))), "removed")
        add(F.sum(nb), "rows_before")
        add(F.sum(na), "rows_after")
        add(F.slice(F.array_sort(F.collect_list(F.when(na > nb, F.struct(*[q(c) for c in a_cols])))), 1, SAMPLES),
            ("sample", "added"))
        add(F.slice(F.array_sort(F.collect_list(F.when(nb > na, F.struct(*[q(c) for c in b_cols])))), 1, SAMPLES),
            ("sample", "removed"))
        for c in names:
            for where, side_cols, n in (("before", b_cols, nb), ("after", a_cols, na)):
                if c not in side_cols:
                    continue
                add(F.sum(F.when(q(c).isNull(), n).otherwise(0)), ("nulls", where, c))
                add(F.approx_count_distinct(F.when(n > 0, q(c)), DISTINCT_RSD), ("distinct", where, c))
                types = b_types if where == "before" else a_types
                if isinstance(types.get(c), _NUMERIC):
                    add(F.sum(q(c) * n), ("sum", where, c))
    # the one Spark job: adaptive execution would run each shuffle stage as a job of its own (5 for a keyed diff,
    # measured), so it is off for this query in the run's own session (a full outer join is never broadcast). Without
    # it nothing coalesces the shuffle's partitions either: spark.sql.shuffle.partitions (200 unless set) tasks of a
    # few rows each, every one holding a sketch per column, took a minute a diff on 2 cores; the diff's rows (both
    # sides at most diff.max_rows) are split into one partition per DIFF_ROWS_PER_PARTITION instead
    from ratui.engine.write.files import session_conf

    with session_conf(session, {_ADAPTIVE: "false", _PARTITIONS: str(max(1, -(-rows // DIFF_ROWS_PER_PARTITION)))}):
        row = source.agg(*aggs).first()
    values = {reads[i]: row[i] for i in range(len(reads))}
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
    return DataDiff(table, SPARK, key if keyed else [], int(values["rows_before"] or 0),
                    int(values["rows_after"] or 0), int(values["added"] or 0), int(values["removed"] or 0),
                    int(values["changed"] or 0) if keyed else None, columns=columns, samples=samples)


def _jsonable_row(row) -> Any:
    data = row.asDict(recursive=True)
    return {k: _jsonable(v) for k, v in data.items()}


# -------------------------------------------------------------------------------------------- file stats


def _from_stats(table: str, before: Table | None, after: Table, key: list[str], rows_before: int,
                rows_after: int) -> DataDiff:
    from ratui.engine.iceberg.read import data_files, live_rows

    b_files = {f.file_path: f for f in data_files(before)} if before is not None else {}
    a_files = {f.file_path: f for f in data_files(after)}
    added = sum(live_rows(after, f) for p, f in a_files.items() if p not in b_files)
    removed = sum(live_rows(before, f) for p, f in b_files.items() if p not in a_files) if before is not None else 0
    for p in set(a_files) & set(b_files):  # rows a shared file lost to position deletes
        assert before is not None
        removed += max(live_rows(before, b_files[p]) - live_rows(after, a_files[p]), 0)
    names: dict[str, Any] = {}
    sides = [("before", before, b_files), ("after", after, a_files)] if before is not None else \
        [("after", after, a_files)]
    for _where, t, _files in sides:
        for f in t.schema().fields:
            names.setdefault(f.name, f.field_type)
    columns = []
    for name, ftype in names.items():
        col = ColumnDiff(name, str(ftype))
        for where, t, files in sides:
            schema = t.schema()
            try:
                fld = schema.find_field(name)
            except ValueError:
                continue
            nulls = 0
            lo = hi = None
            for data in files.values():
                nulls += (data.null_value_counts or {}).get(fld.field_id, 0)
                if isinstance(fld.field_type, _BOUNDED):
                    low = (data.lower_bounds or {}).get(fld.field_id)
                    high = (data.upper_bounds or {}).get(fld.field_id)
                    if low is not None:
                        v = from_bytes(fld.field_type, low)
                        lo = v if lo is None or v < lo else lo
                    if high is not None:
                        v = from_bytes(fld.field_type, high)
                        hi = v if hi is None or v > hi else hi
            setattr(col, f"nulls_{where}", nulls)
            setattr(col, f"min_{where}", _jsonable(lo))
            setattr(col, f"max_{where}", _jsonable(hi))
        columns.append(col)
    return DataDiff(table, FILE_STATS, key, rows_before, rows_after, added, removed, None, columns=columns)


# ------------------------------------------------------------------------------------------------- gates


def gates(config: PipelineConfig) -> bool:
    return bool(config.max_row_change or config.max_rows_removed or config.max_null_increase)


def check_gates(diff: DataDiff, config: PipelineConfig, file: str, line_of: dict[str, int | None]) -> list[str]:
    """Each gate's verdict, recorded in diff.gate; returns the failures (empty: the merge may go on).
    RAT-CFG-010 when max_null_increase names a column the table does not have after the run."""
    checked: list[str] = []
    failed: list[str] = []
    base = diff.rows_before
    for item in config.max_null_increase:  # a misspelt column is an error whatever the table's history
        name = item.split()[0]
        col = diff.column(name)
        if col is None or col.nulls_after is None:
            raise RatuiError("RAT-CFG-010", f"max_null_increase names column '{name}', which {diff.table} does not "
                             "have", file=file, line=line_of.get("max_null_increase"),
                             hint=did_you_mean(name, [c.name for c in diff.columns if c.nulls_after is not None]))
    if diff.new_table:
        diff.gate = {"passed": ["gates not applied: a new table (the target had no such table to compare with)"],
                     "failed": []}
        return []

    def limit_check(name: str, text: str | None, count: int, what: str) -> None:
        if not text:
            return
        number, percent = parse_limit(text)
        if percent:
            if base == 0:
                checked.append(f"{name} {text}: not applied (the table had no rows before)")
                return
            share = 100.0 * count / base
            verdict = f"{name} {text}: {what} {count:,} = {share:.1f}% of {base:,} rows"
            (failed if share > number else checked).append(verdict)
        else:
            verdict = f"{name} {text}: {what} {count:,} rows"
            (failed if count > number else checked).append(verdict)

    limit_check("max_row_change", config.max_row_change, diff.added + diff.removed + (diff.changed or 0),
                "added + removed + changed" if diff.changed is not None else "added + removed")
    limit_check("max_rows_removed", config.max_rows_removed, diff.removed, "removed")
    for item in config.max_null_increase:
        name, text = item.split()
        col = diff.column(name)
        assert col is not None and col.nulls_after is not None
        if base == 0:
            checked.append(f"max_null_increase {name} {text}: not applied (the table had no rows before)")
            continue
        limit, _percent = parse_limit(text)
        share_before = 100.0 * (col.nulls_before or 0) / diff.rows_before if diff.rows_before else 0.0
        share_after = 100.0 * col.nulls_after / diff.rows_after if diff.rows_after else 0.0
        rise = share_after - share_before
        verdict = (f"max_null_increase {name} {text}: NULLs {share_before:.1f}% -> {share_after:.1f}% "
                   f"({col.nulls_before or 0:,} -> {col.nulls_after:,} rows)")
        (failed if rise > limit + 1e-9 else checked).append(verdict)
    diff.gate = {"passed": checked, "failed": failed}
    return failed
