"""What invocations work with, made once per engine by the facade and handed to each invocation: the project's
state and event bus, the run record (the only writer of runs), this process's runs in flight, change detection, and
the factory of executors (run/executor.py, imported when a run needs it: Spark and PyIceberg come with it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ratui.engine.events import Event, EventBus
from ratui.engine.run.changes import Decider
from ratui.engine.run.control import RunControl
from ratui.engine.run.in_flight import RunsInFlight
from ratui.engine.run.record import RunRecord
from ratui.engine.state.project_state import ProjectState
from ratui.engine.vocabulary import MAIN

if TYPE_CHECKING:
    from ratui.engine.project.compiler import CompiledProject
    from ratui.engine.run.executor import RunExecutor


@dataclass(frozen=True)
class RunParts:
    state: ProjectState
    bus: EventBus[Event]
    record: RunRecord
    in_flight: RunsInFlight
    decider: Decider

    def executor(self, run_id: str, key: str, control: RunControl, compiled: CompiledProject, *,
                 full_refresh: bool = False, ref: str = MAIN) -> RunExecutor:
        """The executor of one run of `key` (of the project as `compiled` by its invocation), merging into `ref`."""
        from ratui.engine.run.executor import RunExecutor  # Spark, PyIceberg: loaded when a run needs them

        return RunExecutor(self.state, self.bus, self.record, run_id, key, control, full_refresh, compiled,
                           target=ref)
