"""A table at a ref, read from its Iceberg metadata with PyIceberg: no Spark, no JVM.

    t = p.table("silver.clean_orders", ref="main")      # or ref="main@3f2a9c", or at="2026-01-31 12:00"
    t.to_arrow(limit=100); t.to_pandas(); t.to_polars()
    t.scan(filter="amount > 100", columns=["order_id", "amount"]).to_arrow()
    t.snapshots(); t.schema

The table is pinned when it is made: the metadata file the ref pointed at then (a run that lands later does not
change what this object reads; ask for the table again to see it). Position deletes are applied by PyIceberg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ratui.api import html
from ratui.api.convert import to_pandas, to_polars
from ratui.api.records import SNAPSHOT_COLUMNS, Records, SnapshotInfo
from ratui.engine.errors import RatuiError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table as IcebergTable


def check_limit(limit: Any) -> int | None:
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise RatuiError("RAT-API-002", f"limit must be a whole number of 0 or more (or None), got {limit!r}")
    return limit


def _read_error(exc: Exception, key: str, what: str) -> RatuiError:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "delete" in text.lower() and "equality" in text.lower():
        return RatuiError("RAT-CAT-008", f"table {key} has equality delete files: {text}")
    return RatuiError("RAT-API-005", f"{what} of {key}: {text}")


class Scan:
    """Rows of a table chosen by an Iceberg row filter and a list of columns (read when converted)."""

    def __init__(self, table: "Table", filter: str | None = None, columns: Sequence[str] | None = None,
                 limit: int | None = None):
        if filter is not None and not isinstance(filter, str):
            raise RatuiError("RAT-API-002", f"filter must be a string such as \"id > 3\", got {type(filter).__name__}")
        if isinstance(columns, str):
            columns = [columns]
        if columns is not None and (not isinstance(columns, (list, tuple))
                                    or not all(isinstance(c, str) for c in columns)):
            raise RatuiError("RAT-API-002", f"columns must be a list of column names, got {columns!r}")
        self.table = table
        self.filter = filter
        self.columns = tuple(columns) if columns is not None else None
        self.limit = check_limit(limit)
        if self.columns is not None:
            known = set(table.iceberg.schema().column_names)
            unknown = [c for c in self.columns if c not in known]
            if unknown:
                raise RatuiError("RAT-API-005", f"no column {', '.join(map(repr, unknown))} in {table.key}: its "
                                 f"columns are {', '.join(table.iceberg.schema().column_names)}")
        if filter is not None:
            try:  # parsed and bound now: a bad filter is told here, not at the first read
                from pyiceberg.expressions import parser
                from pyiceberg.expressions.visitors import bind

                bind(table.iceberg.schema(), parser.parse(filter), case_sensitive=True)
            except Exception as exc:  # noqa: BLE001 - PyIceberg's parse and bind errors have no common type
                raise _read_error(exc, table.key, f"filter {filter!r} is not usable") from None

    def _iceberg_scan(self, limit: int | None):
        kwargs: dict[str, Any] = {}
        if self.filter is not None:
            kwargs["row_filter"] = self.filter
        if self.columns is not None:
            kwargs["selected_fields"] = self.columns
        limits = [x for x in (limit, self.limit) if x is not None]
        if limits:
            kwargs["limit"] = min(limits)
        return self.table.iceberg.scan(**kwargs)

    def to_arrow(self, limit: int | None = None) -> "pa.Table":
        limit = check_limit(limit)
        self.table.project._check_open()
        try:
            return self._iceberg_scan(limit).to_arrow()
        except RatuiError:
            raise
        except (ValueError, TypeError, NotImplementedError) as exc:  # PyIceberg's refusals (equality deletes)
            raise _read_error(exc, self.table.key, "cannot read") from None

    def to_pandas(self, limit: int | None = None):
        return to_pandas(self.to_arrow(limit))

    def to_polars(self, limit: int | None = None):
        return to_polars(self.to_arrow(limit))

    def count(self) -> int:
        return self.to_arrow().num_rows

    def _repr_html_(self) -> str:
        what = f"{self.table.key} at {self.table.ref}" + (f" where {self.filter}" if self.filter else "")
        return html.arrow(self.to_arrow(limit=html.ROW_CAP + 1), caption=what, total=None)

    def __repr__(self) -> str:
        return f"<Scan {self.table.key} at {self.table.ref} filter={self.filter!r} columns={self.columns!r}>"


class Table:
    """One table at one ref (or past state), read through PyIceberg. `iceberg`: the PyIceberg table itself."""

    def __init__(self, project: Any, key: str, ref: str, iceberg: "IcebergTable"):
        self.project = project
        self.key = key
        self.ref = ref  # the branch, or "branch@HASH" for a past state
        self.iceberg = iceberg

    @property
    def schema(self) -> "pa.Schema":
        """The table's columns as an Arrow schema (Iceberg's own: `t.iceberg.schema()`)."""
        return self.iceberg.schema().as_arrow()

    @property
    def snapshot_id(self) -> int | None:
        snapshot = self.iceberg.current_snapshot()
        return snapshot.snapshot_id if snapshot is not None else None

    def scan(self, filter: str | None = None, columns: Sequence[str] | None = None,
             limit: int | None = None) -> Scan:
        """Rows where `filter` holds (an Iceberg row filter: "id > 3 and status = 'paid'"), only `columns`."""
        self.project._check_open()
        return Scan(self, filter, columns, limit)

    def to_arrow(self, limit: int | None = None) -> "pa.Table":
        return Scan(self).to_arrow(limit)

    def to_pandas(self, limit: int | None = None):
        return Scan(self).to_pandas(limit)

    def to_polars(self, limit: int | None = None):
        return Scan(self).to_polars(limit)

    def count(self) -> int:
        """Rows in the table (from the snapshot's summary when it says, else by reading)."""
        snapshot = self.iceberg.current_snapshot()
        if snapshot is None:
            return 0
        total = (snapshot.summary.additional_properties.get("total-records") if snapshot.summary else None)
        deletes = (snapshot.summary.additional_properties.get("total-position-deletes", "0")
                   if snapshot.summary else "0")
        if total is not None and deletes == "0":
            return int(total)
        return Scan(self).count()

    def snapshots(self) -> Records[SnapshotInfo]:
        """The table's Iceberg snapshots, oldest first (its own history, whatever ref wrote each)."""
        return Records([SnapshotInfo.of(s) for s in self.iceberg.snapshots()], columns=SNAPSHOT_COLUMNS,
                       caption=f"snapshots of {self.key}")

    def describe(self):
        """Schema, partition spec, snapshot history and column statistics from the metadata (the engine's)."""
        from ratui.engine.iceberg.describe import describe

        return describe(self.iceberg, self.key)

    def _repr_html_(self) -> str:
        columns = ", ".join(f"{f.name}: {f.type}" for f in self.schema)
        head = self.to_arrow(limit=html.ROW_CAP)
        return html.arrow(head, caption=f"{self.key} at {self.ref} ({columns})", total=self.count())

    def __repr__(self) -> str:
        return f"<Table {self.key} at {self.ref}, snapshot {self.snapshot_id}>"
