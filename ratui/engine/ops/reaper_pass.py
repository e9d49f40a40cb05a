"""One pass of the reaper: what its tasks work with, and what it has decided so far (later tasks of a dry run act
on the planned effects of earlier ones: a run the dry run would time out no longer protects its branch, files of
snapshots it would expire are not marked, a branch it would delete counts as deleted inside the retention window)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ratui.engine.events import Event, EventBus
from ratui.engine.run.in_flight import RunsInFlight
from ratui.engine.run.record import RunRecord
from ratui.engine.vocabulary import ACTIVE

if TYPE_CHECKING:
    from ratui.engine.project.settings import Settings
    from ratui.engine.state.catalog.base import BranchCatalog
    from ratui.engine.state.history import History
    from ratui.engine.state.project_state import ProjectState


@dataclass
class ReaperPass:
    state: ProjectState
    catalog: BranchCatalog
    record: RunRecord  # where stuck runs are failed and old ones deleted
    dry_run: bool
    now: datetime
    in_flight: RunsInFlight | None = None  # this process's runs: a stuck one is interrupted too
    bus: EventBus[Event] | None = None  # a run failed by its timeout is told as finished
    timed_out: set[str] = field(default_factory=set)  # runs failed (or, dry, to be failed) by stuck_runs
    branches_removed: set[str] = field(default_factory=set)
    expiry: dict[str, set[int]] = field(default_factory=dict)  # main table key -> snapshot ids (dry run only)

    @property
    def settings(self) -> Settings:
        return self.state.settings

    @property
    def history(self) -> History:
        return self.state.history

    def live_runs(self) -> dict[str, dict[str, Any]]:
        """Runs still going (pending or running), less those this pass timed out."""
        return {r["id"]: r for r in self.history.runs_in(ACTIVE) if r["id"] not in self.timed_out}

    def rel(self, path: str | Path) -> str:
        """A path as the report shows it: relative to the project when inside it."""
        try:
            return str(Path(path).relative_to(Path(os.path.realpath(self.settings.root))))
        except ValueError:
            return str(path)
