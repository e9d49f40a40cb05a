"""A run's data diff (data_diff.py) told as text: `ratui show RUN` and the console. Light: no PyIceberg, no Spark
(the console imports it before its heavy modules load)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

# how a diff was computed (its `method`; data_diff.py): the two exact ways, and the manifests' file statistics
SPARK, IN_PROCESS, FILE_STATS = "spark", "in_process", "file_stats"
_TEXT = {SPARK: "one Spark job", IN_PROCESS: "in process, no Spark job", FILE_STATS: "from file statistics"}
SHORT = {SPARK: "Spark job", IN_PROCESS: "in process", FILE_STATS: "file stats"}


def exact(diff: dict[str, Any]) -> bool:
    """Counted row by row (changed rows, distinct counts, sums and samples known), not from file statistics."""
    return diff.get("method") in (SPARK, IN_PROCESS)


def method_text(diff: dict[str, Any]) -> str:
    return _TEXT.get(diff.get("method", FILE_STATS), "from file statistics")


def counts_text(diff: dict[str, Any]) -> str:
    """'+2 added  -1 removed  ~3 changed' (changed left out when not known). Rows compared whole (no key) across a
    schema change pair up, one removed for each added: '~720 rows changed: added column avg_order_value double'."""
    added, removed, schema = diff.get("added", 0), diff.get("removed", 0), diff.get("schema_changes") or []
    if exact(diff) and not diff.get("key") and schema and added and added == removed:
        return f"~{added:,} rows changed: {'; '.join(schema)}"
    text = f"+{added:,} added  -{removed:,} removed"
    if diff.get("changed") is not None:
        text += f"  ~{diff['changed']:,} changed"
    return text


_NUMBER = re.compile(r"(-?)(\d+)(\.\d+)?")


def number_text(value: Any) -> str:
    """A number as the counts beside it are written, with thousands separators: 14,424,144.75 (a decimal sum comes
    as its text, '14424144.75'). Anything else as it is."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return f"{value:,}"
    match = _NUMBER.fullmatch(str(value)) if isinstance(value, (str, Decimal)) else None
    if match is None:
        return str(value)
    sign, whole, fraction = match.groups()
    return f"{sign}{int(whole):,}{fraction or ''}"


def _pair(before: Any, after: Any) -> str:
    def one(v: Any) -> str:
        return "-" if v is None else number_text(v)
    if before is None and after is None:
        return ""
    return one(after) if before == after else f"{one(before)} -> {one(after)}"


def column_rows(diff: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(column, nulls, distinct, sum) per column, each "before -> after" (one value when equal; "" when unknown).
    By file statistics, the last is the range (min..max) instead of the sum."""
    rows = []
    stats = not exact(diff)
    for c in diff.get("columns") or []:
        if stats:
            lo_b, hi_b, lo_a, hi_a = c.get("min_before"), c.get("max_before"), c.get("min_after"), c.get("max_after")
            last = _pair(f"{lo_b}..{hi_b}" if lo_b is not None else None,
                         f"{lo_a}..{hi_a}" if lo_a is not None else None)
        else:
            last = _pair(c.get("sum_before"), c.get("sum_after"))
        rows.append((c["name"], _pair(c.get("nulls_before"), c.get("nulls_after")),
                     _pair(c.get("distinct_before"), c.get("distinct_after")), last))
    return rows


def sample_text(values: list[Any], limit: int = 10) -> str:
    """Sample keys (or rows) as `id=6, id=7`."""
    parts = [", ".join(f"{k}={v}" for k, v in item.items()) if isinstance(item, dict) else str(item)
             for item in values[:limit]]
    return "; ".join(parts) if any("," in p for p in parts) else ", ".join(parts)


def describe(diff: dict[str, Any]) -> list[str]:
    """The diff as text lines (`ratui show RUN`)."""
    lines = [f"{diff.get('table')} ({method_text(diff)}): {diff.get('rows_before', 0):,} -> "
             f"{diff.get('rows_after', 0):,} rows" + (", a new table" if diff.get("new_table") else ""),
             f"  {counts_text(diff)}" + (f"  (by key {', '.join(diff['key'])})" if diff.get("key") and
                                         exact(diff) else
                                         "  (rows compared whole)" if exact(diff) else
                                         "  (whole data files: upper bounds)")]
    for change in diff.get("schema_changes") or []:
        lines.append(f"  schema: {change}")
    gate = diff.get("gate") or {}
    lines += [f"  gate failed: {v}" for v in gate.get("failed") or []]
    lines += [f"  gate passed: {v}" for v in gate.get("passed") or []]
    rows = column_rows(diff)
    if rows:
        head = ("column", "nulls", "distinct", "sum" if exact(diff) else "range")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        for row in [head, *rows]:
            lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    for kind, values in (diff.get("samples") or {}).items():
        if values:
            lines.append(f"  {kind}: {sample_text(values)}")
    return lines
