"""What every concern of the Engine works with: the project's state and event bus, and the run side made once
(run record, runs in flight, change detection, recovery). Engine.__init__ (facade/engine.py) makes them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ratui.engine.events import Event, EventBus
from ratui.engine.project.compiler import CompiledProject, compile_project
from ratui.engine.project.settings import Settings
from ratui.engine.run.changes import Decider
from ratui.engine.run.in_flight import RunsInFlight
from ratui.engine.run.parts import RunParts
from ratui.engine.run.record import RunRecord
from ratui.engine.run.recovery import Recovery
from ratui.engine.state.project_state import ProjectState


class EngineBase:
    def __init__(self, state: ProjectState, *, bus: EventBus[Event] | None = None):
        self._state = state
        self._bus: EventBus[Event] = bus or EventBus()
        self._record = RunRecord(state.history)
        self._in_flight = RunsInFlight(self._record, self._bus)
        self._parts = RunParts(state, self._bus, self._record, self._in_flight, Decider(state))
        self._recovery = Recovery(state, self._record, self._bus, self._in_flight)
        self._lock = threading.Lock()
        self._lineage: Any = None  # the column lineage of the last compile asked about (column_lineage)

    @property
    def settings(self) -> Settings:
        return self._state.settings

    @property
    def root(self) -> Path:
        return self._state.settings.root

    @property
    def state(self) -> ProjectState:
        """The project's state (catalog, history, ledger): for tests and tools. Commands and the console use the
        methods of the engine instead."""
        return self._state

    def compile(self) -> CompiledProject:
        return compile_project(self.root, self.settings)
