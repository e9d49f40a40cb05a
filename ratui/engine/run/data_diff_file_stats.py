"""A large table's data diff without a Spark job (data_diff.py's `file_stats` way): the data files' statistics in the
manifests. Rows before and after are exact; rows added and removed are upper bounds (a rewritten file counts whole as
removed and added); NULL counts are exact unless position deletes apply; min/max come from the files' bounds."""

from __future__ import annotations

from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.table import Table

from ratui.engine.run.data_diff_model import BOUNDED, ColumnDiff, DataDiff
from ratui.engine.run.diff_text import FILE_STATS
from ratui.engine.run.quality import _jsonable


def from_stats(table: str, before: Table | None, after: Table, key: list[str], rows_before: int,
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
                if isinstance(fld.field_type, BOUNDED):
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
