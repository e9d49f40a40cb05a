"""What a run reports when it ends (and an atomic publish, when its invocation ends), and how run ids are made."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any


def new_run_id() -> str:
    # time-ordered prefix (sorts like the run history) + randomness (unique across processes)
    return datetime.now(timezone.utc).strftime("%y%m%d%H%M%S") + uuid.uuid4().hex[:6]


@dataclass
class RunResult:
    run_id: str
    pipeline: str
    status: str
    strategy: str | None = None
    rows_written: int = 0
    duration_ms: int = 0
    phases: dict[str, int] = field(default_factory=dict)
    quality: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    warnings: int = 0
    branch: str | None = None
    write: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    reason: str | None = None
    run_type: str | None = None
    diff: dict[str, Any] | None = None  # the run's data diff (run/data_diff.py), when it got that far

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PublishOutcome:
    """An atomic publish's outcome (ops/publish.py): whether `branch` merged into `into`, and what landed there (or
    would have)."""

    branch: str
    into: str
    merged: bool
    tables: list[str]  # what landed on `into` (merged) or would have (kept)
    reason: str
    commit: str | None = None
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"event": "publish", **asdict(self)}
