"""A pure-Python reference model of every merge strategy: what the table must hold after each run.

Written for clarity, not speed: a table is a list of column names and a list of row dicts. The engine's
results are compared with this model after every run (tests/engine/test_strategies_properties.py).

The rules modelled (ratui/engine/strategies.py states them for the engine):
- a key is the tuple of the unique_key columns; Python's tuple equality treats None == None, which is
  exactly IS NOT DISTINCT FROM: a NULL key is a group of its own;
- columns: a batch's new columns are added (rows already there read None); a column a batch lacks stays
  and its new rows hold None; full_refresh takes the batch's columns exactly;
- batch duplicates (incremental, scd2): one row per key, the greatest watermark (None loses), ties and no
  watermark -> the last in batch order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]


@dataclass
class Table:
    columns: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)


def _columns_after(table: Table, batch_columns: list[str]) -> list[str]:
    """The table's columns, then any batch column it does not have yet (names compare case-insensitively)."""
    out = list(table.columns)
    known = {c.lower() for c in out}
    for c in batch_columns:
        if c.lower() not in known:
            out.append(c)
            known.add(c.lower())
    return out


def _shape(row: Row, columns: list[str]) -> Row:
    """The row with exactly `columns`: missing ones None, unknown ones dropped."""
    lower = {k.lower(): v for k, v in row.items()}
    return {c: lower.get(c.lower()) for c in columns}


def _key(row: Row, keys: list[str]) -> tuple:
    return tuple(row[k] for k in keys)


def dedupe(rows: list[Row], keys: list[str], watermark: str | None) -> list[Row]:
    """One row per key: the latest by watermark (None loses), ties and no watermark -> the last in the batch."""
    best: dict[tuple, tuple[tuple, Row]] = {}
    for position, row in enumerate(rows):
        wm = row.get(watermark) if watermark else None
        rank = (wm is not None, wm if wm is not None else 0, position) if watermark else (position,)
        k = _key(row, keys)
        if k not in best or rank > best[k][0]:
            best[k] = (rank, row)
    return [row for _, row in best.values()]


# ------------------------------------------------------------------------------------------------ strategies


def full_refresh(table: Table, batch_columns: list[str], batch: list[Row]) -> Table:
    return Table(list(batch_columns), [_shape(r, batch_columns) for r in batch])


def append_only(table: Table, batch_columns: list[str], batch: list[Row]) -> Table:
    columns = _columns_after(table, batch_columns)
    return Table(columns, [_shape(r, columns) for r in table.rows + batch])


def _replace(table: Table, batch_columns: list[str], new_rows: list[Row], match: list[str]) -> Table:
    """Remove every row whose `match` tuple appears in `new_rows`, then add `new_rows`."""
    columns = _columns_after(table, batch_columns)
    new_rows = [_shape(r, columns) for r in new_rows]
    replaced = {_key(r, match) for r in new_rows}
    kept = [_shape(r, columns) for r in table.rows if _key(_shape(r, columns), match) not in replaced]
    return Table(columns, kept + new_rows)


def incremental(table: Table, batch_columns: list[str], batch: list[Row], keys: list[str],
                watermark: str | None = None) -> Table:
    return _replace(table, batch_columns, dedupe(batch, keys, watermark), keys)


def delete_insert(table: Table, batch_columns: list[str], batch: list[Row], keys: list[str]) -> Table:
    return _replace(table, batch_columns, batch, keys)


def snapshot(table: Table, batch_columns: list[str], batch: list[Row], partition_column: str) -> Table:
    return _replace(table, batch_columns, batch, [partition_column])


def scd2(table: Table, batch_columns: list[str], batch: list[Row], keys: list[str], at: Any,
         valid_from: str = "valid_from", valid_to: str = "valid_to", watermark: str | None = None) -> Table:
    """Type-2 history: a changed key's open row is closed at `at` and a new one opened at `at`."""
    columns = _columns_after(table, batch_columns + [valid_from, valid_to])
    tracked = [c for c in columns if c not in keys and c not in (valid_from, valid_to)]
    rows = [_shape(r, columns) for r in table.rows]
    for incoming in dedupe(batch, keys, watermark):
        incoming = _shape(incoming, columns)
        k = _key(incoming, keys)
        open_rows = [r for r in rows if _key(r, keys) == k and r[valid_to] is None]
        if any(all(r[c] == incoming[c] for c in tracked) for r in open_rows):
            continue  # unchanged: its open row stays as it is
        for r in open_rows:
            r[valid_to] = at
        rows.append({**incoming, valid_from: at, valid_to: None})
    return Table(columns, rows)


# ------------------------------------------------------------------------------------------------ comparing


def as_multiset(rows: list[Row]) -> Counter:
    return Counter(tuple(sorted((k.lower(), v) for k, v in r.items())) for r in rows)


def differences(expected: Table, actual_columns: list[str], actual_rows: list[Row]) -> str | None:
    """None when the engine's table equals the model's, else a readable account of how they differ."""
    if [c.lower() for c in sorted(expected.columns, key=str.lower)] != \
            [c.lower() for c in sorted(actual_columns, key=str.lower)]:
        return f"columns differ: expected {expected.columns}, got {actual_columns}"
    want, got = as_multiset(expected.rows), as_multiset(actual_rows)
    if want == got:
        return None
    missing, extra = want - got, got - want
    return (f"rows differ: {len(expected.rows)} expected, {len(actual_rows)} got\n"
            f"  missing: {[dict(r) for r in missing.elements()]}\n"
            f"  unexpected: {[dict(r) for r in extra.elements()]}")
