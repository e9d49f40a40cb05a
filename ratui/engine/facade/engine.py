"""The engine of one project, and the only door to it: compile, run, cancel, wait, read, query, reap.

    engine = Engine.open(root)                      # settings from ratui.yaml, state from .ratui/ratui.db
    engine.recover()                                # commands that act on runs call it (crash recovery)
    results = engine.run(keys, trigger="cli")       # an invocation in this thread
    invocation = engine.start(keys, trigger="console")   # ... or in the background: run ids, cancel(), wait()
    engine.cancel(run_id)                           # from any thread; `ratui cancel` from another process

Everything the CLI, the console, the Python API and watch mode need is a method here; they never reach into the
engine's parts. The parts are explicit: a ProjectState (settings, catalog, history, ledger) and an EventBus, given
to the constructor (`Engine.open()` makes them); the run side (run record, runs in flight, change detection,
recovery) is made once here and handed to every invocation (facade/base.py). Each concern of the door is a module
of this package: project.py, runs.py, branches.py, landing.py, queries.py, upkeep.py, schedules.py, alerts.py,
freshness.py. Thread-safe; one engine per project per process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ratui.engine.events import Event, EventBus
from ratui.engine.facade.alerts import AlertsPart
from ratui.engine.facade.branches import BranchesPart
from ratui.engine.facade.freshness import FreshnessPart
from ratui.engine.facade.landing import LandingPart
from ratui.engine.facade.project import ProjectPart
from ratui.engine.facade.queries import QueriesPart
from ratui.engine.facade.runs import RunsPart
from ratui.engine.facade.schedules import SchedulesPart
from ratui.engine.facade.upkeep import UpkeepPart
from ratui.engine.project.settings import Settings, load_settings
from ratui.engine.state.project_state import ProjectState


class Engine(ProjectPart, RunsPart, BranchesPart, LandingPart, QueriesPart, UpkeepPart, SchedulesPart, AlertsPart,
             FreshnessPart):
    def __init__(self, state: ProjectState, *, bus: EventBus[Event] | None = None):
        super().__init__(state, bus=bus)
        self._bus.subscribe(self._alerts_on_event)  # whichever process ends a run alerts about it (alerts.md)

    @classmethod
    def open(cls, root: Path, settings: Settings | None = None, *, bus: EventBus[Event] | None = None) -> "Engine":
        """The engine of the project at `root` (its ratui.yaml, or `settings`). Runs nothing, recovers nothing."""
        return cls(ProjectState.open(settings or load_settings(root)), bus=bus)

    def subscribe(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Engine events (run queued/started/finished, phases, quality results, log lines), delivered on the
        thread that emits them. Returns the unsubscribe."""
        return self._bus.subscribe(listener)

    def close(self) -> None:
        self.flush_alerts()  # a command's runs said what they must before it exits (bounded)
        self.stop_monitor()
        self._state.close()
