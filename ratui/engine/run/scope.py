"""What the steps of one run share: who the run is (`RunScope`) and where what it says goes (`RunLog`).

The executor (run/executor.py) makes both when a run starts and hands them to its steps (build.py, gates.py) and to
the sources it reads (sources.py): they write the run's record and tell observers through these, never by calling
back into the executor.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ratui.engine.events import Event, EventBus, LogLine, StagingProgress
from ratui.engine.run.control import RunControl
from ratui.engine.run.record import RunRecord
from ratui.engine.state.project_state import ProjectState
from ratui.engine.vocabulary import run_branch

if TYPE_CHECKING:
    from ratui.engine.project.settings import Settings
    from ratui.engine.state.catalog.base import BranchCatalog
    from ratui.engine.storage.staging import RemoteStaging


class Log(Protocol):
    """Where a reader of a run's inputs says what it did (RunSources)."""

    notes: list[str]

    def line(self, message: str, level: str = "info") -> None: ...

    def note(self, text: str) -> None:
        """A warning worth keeping with the run ("RAT-LND-009 ..."), logged too."""

    def staging(self, zone: str, done: int, total: int, size: int, total_bytes: int) -> None:
        """An object-store zone's files being fetched: `done` of `total`, `size` of `total_bytes` bytes."""


class RunLog:
    """A run's log: each line is written to its record and told to observers (LogLine); its notes; its staging
    progress (StagingProgress)."""

    def __init__(self, record: RunRecord, bus: EventBus[Event], run_id: str):
        self._record = record
        self._bus = bus
        self.run_id = run_id
        self.notes: list[str] = []  # warnings worth keeping with the run (coded: "RAT-LND-009 ...")

    def line(self, message: str, level: str = "info") -> None:
        self._record.log(self.run_id, level, message)
        self._bus.emit(LogLine(self.run_id, level, message))

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.line(text, "warning")

    def staging(self, zone: str, done: int, total: int, size: int, total_bytes: int) -> None:
        self._bus.emit(StagingProgress(self.run_id, zone, done, total, size, total_bytes))


class DebugLog:
    """The log of reads that belong to no run (a merge's quality gate, run/merge_gate.py): Python's logging, at debug
    level."""

    def __init__(self, name: str):
        self._log = logging.getLogger(name)
        self.notes: list[str] = []

    def line(self, message: str, level: str = "info") -> None:
        self._log.debug("%s: %s", level, message)

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.line(text, "warning")

    def staging(self, zone: str, done: int, total: int, size: int, total_bytes: int) -> None:
        self._log.debug("zone %s: %d of %d files staged", zone, done, total)


@dataclass
class RunScope:
    """One run of one pipeline: who it is, what it works with, and its log."""

    state: ProjectState
    record: RunRecord
    bus: EventBus[Event]
    control: RunControl
    run_id: str
    key: str
    target: str  # the ref the run forks from and merges into
    full_refresh: bool
    run_started_at: str
    staging: Path  # the run's own folder of staged landing files
    remote_staging: "RemoteStaging | None"  # where local landing files go for a Spark that cannot see this disk
    # an incremental_by_time run's interval (project/intervals.py): given by a backfill, else the run finds the
    # intervals due (executor.py); None for every other strategy
    interval: "tuple[datetime, datetime] | None" = None
    log: RunLog = field(init=False)

    def __post_init__(self) -> None:
        self.log = RunLog(self.record, self.bus, self.run_id)

    @property
    def branch(self) -> str:
        return run_branch(self.run_id)

    @property
    def settings(self) -> "Settings":
        return self.state.settings

    @property
    def catalog(self) -> "BranchCatalog":
        return self.state.catalog
