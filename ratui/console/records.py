"""What the controller's read queries hand the screens: plain frozen values, built on a worker thread and only
read on the event loop (a page of runs and its filter, a ref's tables, a branch, a diff row). Textual-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ratui.engine.vocabulary import MAIN, PUBLISH_PREFIX, RUN_PREFIX, RUN_STATUSES


@dataclass(frozen=True)
class RunFilter:
    """What `/` on the Runs screen typed: `status:failed pipeline:orders some text` (bare statuses work too)."""

    pipeline: str | None = None
    status: str | None = None
    text: str | None = None
    problem: str | None = None  # what could not be understood (an unknown status): said, never silently empty

    @classmethod
    def parse(cls, query: str) -> "RunFilter":
        pipeline = status = problem = None
        words: list[str] = []
        for token in query.split():
            key, sep, value = token.partition(":")
            key = key.lower()
            if sep and key in ("status", "s") and value:
                if value.lower() in RUN_STATUSES:
                    status = value.lower()
                else:
                    problem = f"unknown status '{value}': one of {', '.join(RUN_STATUSES)}"
            elif sep and key in ("pipeline", "p") and value:
                pipeline = value
            elif not sep and token.lower() in RUN_STATUSES:
                status = token.lower()
            else:
                words.append(token)
        return cls(pipeline, status, " ".join(words) or None, problem)

    @property
    def active(self) -> bool:
        return bool(self.pipeline or self.status or self.text)

    def describe(self) -> str:
        parts = []
        if self.status:
            parts.append(f"status:{self.status}")
        if self.pipeline:
            parts.append(f"pipeline:{self.pipeline}")
        if self.text:
            parts.append(self.text)
        return " ".join(parts)


@dataclass(frozen=True)
class RunsPage:
    rows: list[dict[str, Any]]
    total: int
    page: int
    size: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))


@dataclass(frozen=True)
class TableState:
    """One table on one ref: its current snapshot, row count and (when known) data files."""

    snapshot_id: int | None
    sequence: int | None
    rows: int | None
    files: int | None = None

    def describe(self) -> str:
        if self.snapshot_id is None:
            return "empty"
        rows = f"{self.rows:,} rows" if self.rows is not None else "? rows"
        files = f" · {self.files} file{'s' if self.files != 1 else ''}" if self.files is not None else ""
        seq = f"#{self.sequence} " if self.sequence is not None else ""
        return f"{seq}{str(self.snapshot_id)[:10]} · {rows}{files}"


RESERVED_PREFIXES = (RUN_PREFIX, PUBLISH_PREFIX)  # branches ratui keeps for runs and atomic publishes


def ref_kind(name: str) -> str:
    """main | run | publish | branch (a user's own branch: the console may work on it)."""
    if name == MAIN:
        return "main"
    if name.startswith(RUN_PREFIX):
        return "run"
    if name.startswith("publish-"):
        return "publish"
    return "branch"


@dataclass(frozen=True)
class BranchRow:
    name: str
    head: str
    created_at: str
    run_id: str | None
    tables: int

    @property
    def kind(self) -> str:
        return ref_kind(self.name)


@dataclass(frozen=True)
class DiffRow:
    table: str
    change: str  # added | modified | dropped (from the branch's side) | (main's own listing: "table")
    conflict: bool
    branch: TableState | None
    main: TableState | None
    changed_on: str = ""  # who changed it since the fork: "left" (the branch), "right" (main), "both", "" (unknown)
    schema_changes: tuple[str, ...] = ()  # main's columns -> the branch's: "+ col type", "- col", "~ ..."
    by_append: bool = False  # changed on both sides, each only by appends: it merges by append, no conflict
