"""The data diff's record (data_diff.py computes it; diff_text.py tells it): a table's rows and columns before and
after a run's write, and what the three ways of computing it share."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pyiceberg import types as it

from ratui.engine.run.diff_text import method_text

SAMPLES = 10  # sample keys (or rows) of each kind of change
NUMERIC = (it.IntegerType, it.LongType, it.FloatType, it.DoubleType, it.DecimalType)
BOUNDED = NUMERIC + (it.DateType, it.TimestampType, it.TimestamptzType)
# the column types the in-process diff compares (a value PyArrow hands back that hashes, sorts and prints as JSON)
PLAIN = BOUNDED + (it.BooleanType, it.StringType, it.BinaryType)


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
