"""A small table's data diff without a Spark job (data_diff.py's `in_process` way): both sides read with PyIceberg
and compared in ratui's own process, giving what the Spark job gives (exact distinct counts)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from pyiceberg import types as it
from pyiceberg.table import Table

from ratui.engine.run.data_diff_model import NUMERIC, PLAIN, SAMPLES, ColumnDiff, DataDiff
from ratui.engine.run.diff_text import IN_PROCESS
from ratui.engine.run.quality import _jsonable


def plain(table: Table | None) -> bool:
    """Whether every column of `table` holds plain values (no struct, list or map): what this way compares."""
    return table is None or all(isinstance(f.field_type, PLAIN) for f in table.schema().fields)


@dataclass
class _Side:
    """One side of the diff: its columns' values (column -> list), their names and types, its row count."""

    data: dict[str, list]
    cols: list[str]
    types: dict[str, Any]
    n: int

    def rows(self, cols: list[str]) -> list[tuple]:
        lists = [self.data[c] for c in cols]
        return list(zip(*lists)) if lists else [()] * self.n


def in_process(table: str, before: Table | None, after: Table, key: list[str]) -> DataDiff:
    """What the Spark job computes, from both sides read with PyIceberg: small tables, no Spark job."""
    a_types = {f.name: f.field_type for f in after.schema().fields}
    b_types = {f.name: f.field_type for f in before.schema().fields} if before is not None else a_types
    temporal: dict[str, Any] = {}  # column -> its Arrow type: compared as integers, shown as values
    a_data = _columns(after, list(a_types), temporal)
    b_data = _columns(before, list(b_types), temporal) if before is not None else {c: [] for c in b_types}
    a = _Side(a_data, list(a_types), a_types, len(next(iter(a_data.values()), [])))
    b = _Side(b_data, list(b_types), b_types, len(next(iter(b_data.values()), [])))

    def shown(column: str, value: Any) -> Any:
        if column in temporal and value is not None:
            import pyarrow as pa

            kind = temporal[column]
            value = pa.array([value], pa.int32() if pa.types.is_date32(kind) else pa.int64()).cast(kind)[0].as_py()
        return _jsonable(_unnan(value))

    names = list(dict.fromkeys(b.cols + a.cols))
    keyed = bool(key) and all(k in a.cols and k in b.cols for k in key)
    floats = {c for c in names if isinstance(a_types.get(c) or b_types.get(c), (it.FloatType, it.DoubleType))}
    for data in (a.data, b.data):  # NaN made equal to NaN, once (as Spark's <=>, GROUP BY and distinct have it)
        for c in floats & data.keys():
            data[c] = [_NAN if v != v else v for v in data[c]]
    if keyed:
        counts, samples = _keyed_changes(b, a, key, shown)
    else:
        counts, samples = _whole_row_changes(b, a, names, shown)
    return DataDiff(table, IN_PROCESS, key if keyed else [], b.n, a.n, counts["added"], counts["removed"],
                    counts["changed"] if keyed else None, columns=_column_stats(names, b, a, floats),
                    samples=samples)


def _keyed_changes(b: _Side, a: _Side, key: list[str],
                   shown: Callable[[str, Any], Any]) -> tuple[dict[str, int], dict[str, list[Any]]]:
    """Rows added, removed and changed by key (each matching pair counts when a key is not unique, as the Spark
    job's join has it), and sample keys of each kind."""
    others = [c for c in a.cols if c in b.types and c not in key]
    b_key, a_key = b.rows(key), a.rows(key)
    b_rest, a_rest = b.rows(others), a.rows(others)
    kinds: dict[str, list[tuple]] = {"added": [], "removed": [], "changed": []}
    b_map, a_map = dict(zip(b_key, b_rest)), dict(zip(a_key, a_rest))
    if len(b_map) == b.n and len(a_map) == a.n:  # keys unique on both sides (as the keyed strategies keep them):
        # set operations, in C
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
    samples = {kind: [{c: shown(c, v) for c, v in zip(key, k)} for k in _first_sorted(found)]
               for kind, found in kinds.items()}
    return counts, samples


def _whole_row_changes(b: _Side, a: _Side, names: list[str],
                       shown: Callable[[str, Any], Any]) -> tuple[dict[str, int], dict[str, list[Any]]]:
    """Rows added and removed, rows compared whole as multisets (nothing is "changed"), and sample rows."""

    def whole(side: _Side) -> list[tuple]:
        # each row over every column either side has (None where this side lacks the column)
        missing = [None] * side.n
        lists = [side.data[c] if c in side.data else missing for c in names]
        return list(zip(*lists)) if lists else [()] * side.n

    cb, ca = Counter(whole(b)), Counter(whole(a))
    counts = {"added": sum(max(n - cb.get(r, 0), 0) for r, n in ca.items()),
              "removed": sum(max(n - ca.get(r, 0), 0) for r, n in cb.items()), "changed": 0}
    samples: dict[str, list[Any]] = {}
    for kind, mine, theirs, cols in (("added", ca, cb, a.cols), ("removed", cb, ca, b.cols)):
        at = [names.index(c) for c in cols]
        found = [tuple(r[i] for i in at) for r, n in mine.items() if n > theirs.get(r, 0)]
        samples[kind] = [{c: shown(c, v) for c, v in zip(cols, r)} for r in _first_sorted(found)]
    return counts, samples


def _column_stats(names: list[str], b: _Side, a: _Side, floats: set[str]) -> list[ColumnDiff]:
    """Each column's NULLs, distinct values and (numeric columns) sum on each side that has it."""
    columns = []
    for c in names:
        t = a.types.get(c) or b.types.get(c)
        col = ColumnDiff(c, str(t))
        for where, side in (("before", b), ("after", a)):
            if c not in side.data:
                continue
            values = side.data[c]
            present = [v for v in values if v is not None]
            setattr(col, f"nulls_{where}", len(values) - len(present))
            setattr(col, f"distinct_{where}", len(set(present)))
            if isinstance(side.types.get(c), NUMERIC):
                total = sum(map(_unnan, present) if c in floats else present) if present else None
                setattr(col, f"sum_{where}", _jsonable(total))
        columns.append(col)
    return columns


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
