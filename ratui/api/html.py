"""Jupyter's rich display: every result of the API renders as a small HTML table, row-capped, every value escaped.

Nothing here imports a notebook package: `_repr_html_` is a plain method that Jupyter (and IPython's HTML
formatter) calls when it finds one.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any, Iterable, Sequence

ROW_CAP = 20  # rows shown of a table, a query's result or a list of records
CELL_CAP = 200  # characters shown of one value


def cell(value: Any) -> str:
    """One value as escaped text (None as NULL, long values cut)."""
    if value is None:
        return "<i>NULL</i>"
    text = str(value)
    if len(text) > CELL_CAP:
        text = text[:CELL_CAP - 1] + "…"
    return html.escape(text, quote=True)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str = "", total: int | None = None,
          cap: int = ROW_CAP) -> str:
    """An HTML table of at most `cap` rows; `total` (when known) says how many there are in all."""
    shown = []
    for i, row in enumerate(rows):
        if i >= cap:
            break
        shown.append(row)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in shown)
    more = ""
    if total is not None and total > len(shown):
        more = f"<p><small>{len(shown)} of {total:,} rows shown</small></p>"
    elif total is None and len(shown) == cap:
        more = f"<p><small>first {cap} rows shown</small></p>"
    title = f"<p><b>{html.escape(caption)}</b></p>" if caption else ""
    return f"<div class=\"ratui\">{title}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}</div>"


def arrow(data, *, caption: str = "", total: int | None = None, cap: int = ROW_CAP) -> str:
    """A pyarrow Table's first rows. `total`: the rows there are in all, when known (None: `data` may be only the
    first of them, fetched one past the cap)."""
    head = data.slice(0, cap).to_pylist()
    columns = list(data.column_names)
    if total is None and data.num_rows <= cap:
        total = data.num_rows  # all of it is here; else only "the first rows" is known
    return table(columns, ([row[c] for c in columns] for row in head), caption=caption, total=total, cap=cap)


def records(items: Sequence[Any], columns: Sequence[str], *, caption: str = "", cap: int = ROW_CAP) -> str:
    """Dataclass records (or mappings), one row each, the named fields as columns."""
    def value(item: Any, name: str) -> Any:
        if isinstance(item, dict):
            return item.get(name)
        return getattr(item, name, None)

    return table(columns, ([value(i, c) for c in columns] for i in items), caption=caption, total=len(items),
                 cap=cap)


def field_names(item: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(item)] if dataclasses.is_dataclass(item) else []
