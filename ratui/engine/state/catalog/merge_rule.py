"""Nessie's merge rule over three pointer maps, and the error a conflict raises.

Pure: no database, so the rule reads the same wherever the maps come from (the embedded catalog reads all three
in one transaction; see base.py for the rule in words).
"""

from __future__ import annotations

from ratui.engine.errors import RatuiError
from ratui.engine.state.catalog.base import ChangeKind, TableChange


def changes(branch: dict[str, str], base: dict[str, str], target: dict[str, str]) -> list[TableChange]:
    """What the branch changed since `base`, and whether the target changed the same key since `base` too (a
    conflict)."""
    out = []
    for key in sorted(set(branch) | set(base)):
        b, f, t = branch.get(key), base.get(key), target.get(key)
        if b == f or b == t:
            continue  # untouched on the branch, or the target already holds exactly this state
        kind: ChangeKind = "added" if f is None else "dropped" if b is None else "modified"
        out.append(TableChange(key, kind, b, t, f, conflict=t != f))
    return out


def conflict(ref: str, into: str, tables: list[str], message: str | None = None) -> RatuiError:
    """RAT-CAT-003 naming the tables in conflict (details["tables"])."""
    return RatuiError(
        "RAT-CAT-003",
        message or f"cannot merge '{ref}' into '{into}': {into} changed {', '.join(tables)} since the branch "
                   "was created",
        details={"tables": tables},
    )
