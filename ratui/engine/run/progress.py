"""Live Spark progress of the runs in flight: their jobs, stages and tasks, as `SparkProgress` events.

One thread, alive while this process has runs in flight, asks Spark (spark/jobs.py `progress`) about each run
twice a second and emits an event when something changed, so the console's progress bars move while a phase runs
a long job. It never starts Spark and never fails a run: a failed poll is logged and tried again.
"""

from __future__ import annotations

import logging
from typing import Callable

from ratui.engine.events import Event, EventBus, SparkProgress
from ratui.engine.run.control import WhileRunsActive
from ratui.engine.spark import jobs as spark_jobs

log = logging.getLogger("ratui.progress")

POLL_SECONDS = 0.5


class ProgressReporter(WhileRunsActive):
    def __init__(self, bus: EventBus[Event], active: Callable[[], list[str]], interval: float = POLL_SECONDS):
        super().__init__("ratui-spark-progress", active, self._poll, interval)
        self._bus = bus
        self._last: dict[str, dict] = {}

    def _poll(self, active: list[str]) -> None:
        for run_id in active:
            try:
                self.report(run_id)
            except Exception:  # a JVM busy starting or stopping: try again at the next tick
                log.debug("Spark progress of %s failed", run_id, exc_info=True)
        for gone in set(self._last) - set(active):
            self._last.pop(gone, None)

    def report(self, run_id: str) -> None:
        """Emit the run's progress if it changed since the last report."""
        now = spark_jobs.progress(run_id)
        if now is None or now == self._last.get(run_id):
            return
        self._last[run_id] = now
        self._bus.emit(SparkProgress(run_id, **now))
