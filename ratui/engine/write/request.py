"""What a write is asked to do and what it did: the types the writer (strategies.py) and the table preparation
(prepare.py) share, apart from both so that neither imports the other for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ratui.engine.project.config import PipelineConfig
from ratui.engine.state.catalog.base import BranchCatalog


@dataclass
class WriteRequest:
    session: Any
    catalog: BranchCatalog
    ref: str
    key: str
    root: Path
    run_id: str
    batch: Any  # Spark DataFrame over the run's result (persisted, or the query itself: see run/executor.py)
    batch_rows: int | None  # None: not counted yet (full_refresh, append_only count what they write)
    config: PipelineConfig
    strategy: str
    # the run's start (UTC): a datetime, or text as the runner renders it ("2026-03-01 09:00:00.000000");
    # scd2 stamps every version the run opens or closes with it. None: taken once when the write starts.
    run_started_at: datetime | str | None = None
    merge_on_read: bool = True  # False: every touched file is rewritten (copy-on-write only)
    # more properties for the summary of the snapshot the write commits (the landing files it read:
    # state/landing_facts.py)
    snapshot_properties: dict[str, str] = field(default_factory=dict)
    # incremental_by_time: the [start, end) whose rows the write replaces (naive UTC datetimes)
    interval: tuple[datetime, datetime] | None = None


@dataclass
class WriteOutcome:
    strategy: str
    rows_written: int
    files_added: int = 0
    files_removed: int = 0  # files no longer in the table: rewritten + dropped whole
    files_rewritten: int = 0  # of those, files read and written again without their affected rows
    files_kept: int = 0
    table_rows: int = 0
    created: bool = False
    schema_changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    valid_at: str | None = None  # scd2: the timestamp of the versions this write opened / closed (ISO, UTC)
    delete_files_added: int = 0  # merge-on-read: position-delete files written (one per data file touched)
    rows_deleted_by_position: int = 0  # rows those delete files take out of the table

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)
