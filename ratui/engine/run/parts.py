"""What invocations work with, made once per engine by the facade and handed to each invocation: the project's
state and event bus, the run record (the only writer of runs), this process's runs in flight and change detection.
The invocation hands the state, the bus and the record on to each run's executor (run/executor.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ratui.engine.events import Event, EventBus
from ratui.engine.run.changes import Decider
from ratui.engine.run.in_flight import RunsInFlight
from ratui.engine.run.record import RunRecord
from ratui.engine.state.project_state import ProjectState


@dataclass(frozen=True)
class RunParts:
    state: ProjectState
    bus: EventBus[Event]
    record: RunRecord
    in_flight: RunsInFlight
    decider: Decider
