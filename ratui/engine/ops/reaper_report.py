"""What a reaper pass reports: per task, what it found, removed and kept (with the reason), bytes and errors; stored
whole in `reaper_reports` (state/reaper_reports.py), its item lists cut at STORED_ITEMS."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import REAPER_TASK_TITLES

TASK_TITLES = REAPER_TASK_TITLES
# what "removed" means for each task
TASK_VERBS = {"stuck_runs": "failed", "snapshots": "expired", "compaction": "compacted"}

STORED_ITEMS = 1000  # items of each of a task's lists a stored report keeps (its counts stay whole)


@dataclass
class TaskReport:
    """One task of a pass. `found`: what it would remove (dry run) or set out to remove; `removed`: what it did
    remove (always empty for a dry run); `kept`: what it looked at and deliberately left, with a reason. Every
    item is a dict with at least a `name` unique within the task."""

    name: str
    found: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    bytes_found: int = 0
    bytes_freed: int = 0
    error: dict[str, Any] | None = None
    duration_ms: int = 0
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return TASK_TITLES.get(self.name, self.name)

    @property
    def verb(self) -> str:
        return TASK_VERBS.get(self.name, "removed")

    def fail(self, exc: BaseException) -> None:
        if isinstance(exc, RatuiError):
            self.error = exc.to_dict()
        else:
            err = RatuiError("RAT-RPR-001", f"{TASK_TITLES.get(self.name, self.name)}: {type(exc).__name__}: {exc}")
            self.error = err.to_dict()

    def count(self, which: str) -> int:
        """How many items `which` ("found", "removed", "kept") holds: all of them, also where a stored report
        keeps only the first STORED_ITEMS (stats["listed_of"] has the whole count then)."""
        return int(self.stats.get("listed_of", {}).get(which, len(getattr(self, which))))

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        """`limit`: keep at most that many items of each list (the counts stay whole, in stats["listed_of"])."""
        lists: dict[str, list[dict[str, Any]]] = {}
        cut: dict[str, int] = {}
        for which in ("found", "removed", "kept"):
            items = getattr(self, which)
            if limit is not None and len(items) > limit:
                cut[which] = self.count(which)
                items = items[:limit]
            lists[which] = items
        stats = {**self.stats, "listed_of": {**self.stats.get("listed_of", {}), **cut}} if cut else self.stats
        return {**lists, "bytes_found": self.bytes_found, "bytes_freed": self.bytes_freed, "error": self.error,
                "duration_ms": self.duration_ms, "stats": stats}

    @classmethod
    def from_dict(cls, name: str, data: dict[str, Any]) -> "TaskReport":
        return cls(name, list(data.get("found", [])), list(data.get("removed", [])), list(data.get("kept", [])),
                   int(data.get("bytes_found", 0)), int(data.get("bytes_freed", 0)), data.get("error"),
                   int(data.get("duration_ms", 0)), dict(data.get("stats", {})))


@dataclass
class ReaperReport:
    id: int | None
    started_at: str
    finished_at: str
    dry_run: bool
    tasks: dict[str, TaskReport]
    settings: dict[str, int] = field(default_factory=dict)

    @property
    def found(self) -> int:
        return sum(t.count("found") for t in self.tasks.values())

    @property
    def removed(self) -> int:
        return sum(t.count("removed") for t in self.tasks.values())

    @property
    def bytes_found(self) -> int:
        return sum(t.bytes_found for t in self.tasks.values())

    @property
    def bytes_freed(self) -> int:
        return sum(t.bytes_freed for t in self.tasks.values())

    @property
    def errors(self) -> list[tuple[str, dict[str, Any]]]:
        return [(name, t.error) for name, t in self.tasks.items() if t.error]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        return {
            "id": self.id, "started_at": self.started_at, "finished_at": self.finished_at, "dry_run": self.dry_run,
            "found": self.found, "removed": self.removed, "bytes_found": self.bytes_found,
            "bytes_freed": self.bytes_freed, "errors": len(self.errors), "settings": self.settings,
            "tasks": {name: t.to_dict(limit) for name, t in self.tasks.items()},
        }

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "ReaperReport":
        body = json.loads(row["report"])
        tasks = {name: TaskReport.from_dict(name, data) for name, data in body.get("tasks", {}).items()}
        return cls(row["id"], row["started_at"], row["finished_at"], bool(row["dry_run"]), tasks,
                   body.get("settings", {}))
