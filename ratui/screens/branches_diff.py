"""The Branches screen's diff of a ref against main, as cells: each table's change and schema changes as whoever
made them, who changed it since the fork, a measure on both sides (`12,010 / 12,000`), and the diff's title."""

from __future__ import annotations

from rich.text import Text

from ratui.console.controller import DiffRow, TableState
from ratui.console.format import short_key
from ratui.engine.vocabulary import MAIN

CHANGE_STYLE = {"added": "green", "modified": "yellow", "dropped": "red", "table": ""}


def pair(branch: TableState | None, main: TableState | None, what: str) -> Text:
    """One measure of a table on both sides of a diff: `12,010 / 12,000` (`-` where the table is absent)."""

    def measure(state: TableState | None) -> str:
        if state is None:
            return "-"
        value = getattr(state, what)
        if value is None:
            return "?" if state.snapshot_id is not None else "0"
        return str(value)[:10] if what == "snapshot_id" else f"{value:,}"

    return Text(f"{measure(branch)} / {measure(main)}", justify="right" if what != "snapshot_id" else "left")


def as_changed(row: DiffRow) -> tuple[str, tuple[str, ...]]:
    """The change and schema changes as whoever changed the table made them: a table main added since the fork is
    "added" (by main), not "dropped" (from the branch's side, as the engine puts it)."""
    if row.changed_on != "right":
        return row.change, row.schema_changes
    change = {"added": "dropped", "dropped": "added"}.get(row.change, row.change)
    schema = []
    for item in row.schema_changes:
        if item.startswith("+ "):
            schema.append("- " + item[2:].split(" ", 1)[0])
        elif item.startswith("- "):
            schema.append("+ " + item[2:])
        elif " renamed to " in item:
            old, new = item[2:].split(" renamed to ", 1)
            schema.append(f"~ {new} renamed to {old}")
        elif " -> " in item:
            head, after = item.rsplit(" -> ", 1)
            column, before = head[2:].rsplit(" ", 1)
            schema.append(f"~ {column} {after} -> {before}")
        else:
            schema.append(item)
    return change, tuple(schema)


def changed_by(row: DiffRow, ref: str, against: str) -> Text:
    """Who changed the table since the fork: the branch, the other side, or both (a conflict, unless each side only
    appended: then it merges by append)."""
    if row.by_append:
        return Text("⇉ both appended: merges", style="green")
    if row.conflict or row.changed_on == "both":
        return Text(f"✘ both: {against} changed too", style="red")
    if row.changed_on == "left":
        return Text(ref if len(ref) <= 10 else "branch", style="cyan")
    if row.changed_on == "right":
        return Text(against, style="magenta")
    return Text("-", style="dim")



def rows_cell(state: TableState | None) -> Text:
    """A table's rows on one side (`-` where it is absent, `?` where they are not known)."""
    if state is None or state.snapshot_id is None:
        return Text("-", style="dim")
    return Text(f"{state.rows:,}" if state.rows is not None else "?")


def diff_columns(ref: str, narrow: bool) -> list[str]:
    """The diff table's headers: main lists its tables; another ref its differences (no snapshots when narrow)."""
    if ref == MAIN:
        return ["TABLE", "SNAPSHOT (#sequence id · rows)"]
    sides = f"{ref if len(ref) <= 10 else 'branch'}/main"
    return ["TABLE", "CHANGE", "CHANGED BY", f"ROWS {sides}", "FILES", *([] if narrow else [f"SNAPSHOT {sides}"]),
            "SCHEMA"]


def diff_cells(row: DiffRow, ref: str, namespace: str | None, narrow: bool) -> list:
    """One table's cells under diff_columns(ref, narrow)."""
    if ref == MAIN:
        return [row.table, row.main.describe() if row.main else Text("-", style="dim")]
    change, changes = as_changed(row)
    schema = "; ".join(changes) if changes else "-"
    cells = [short_key(row.table, namespace), Text(change, style=CHANGE_STYLE.get(change, "")),
             changed_by(row, ref, MAIN), pair(row.branch, row.main, "rows"), pair(row.branch, row.main, "files")]
    if not narrow:
        cells.append(pair(row.branch, row.main, "snapshot_id"))
    cells.append(Text(schema, style="dim" if schema == "-" else "yellow"))
    return cells


def diff_title(ref: str, rows: list[DiffRow]) -> str:
    """Main's tables, or how many tables differ on `ref` and how (changed on either side, in conflict, appended)."""
    if ref == MAIN:
        return f"Tables on main ({len(rows)})"
    conflicts = sum(1 for r in rows if r.conflict)
    appended = sum(1 for r in rows if r.by_append)
    mine = sum(1 for r in rows if r.changed_on == "left")
    theirs = sum(1 for r in rows if r.changed_on == "right")
    parts = [f"{mine} changed on {ref}" if mine else "", f"{theirs} on main" if theirs else "",
             f"{conflicts} in conflict" if conflicts else "",
             f"{appended} appended on both (merge by append)" if appended else ""]
    said = ", ".join(p for p in parts if p)
    return (f"Diff of {ref} against main: {len(rows)} table(s) differ" + (f" ({said})" if said else "")
            + ("" if rows else " · l: its history"))
