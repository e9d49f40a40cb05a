"""Live Spark progress of the runs in flight: their jobs, stages and tasks, as `SparkProgress` events.

One thread, alive while this process has runs in flight, asks Spark (spark/session.py `progress`) about each run
twice a second and emits an event when something changed, so the console's progress bars move while a phase runs
a long job. It never starts Spark and never fails a run: a failed poll is logged and tried again.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from ratui.engine.events import Event, EventBus, SparkProgress
from ratui.engine.spark import session as spark_mod

log = logging.getLogger("ratui.progress")

POLL_SECONDS = 0.5


class ProgressReporter:
    def __init__(self, bus: EventBus[Event], active: Callable[[], list[str]], interval: float = POLL_SECONDS):
        self._bus = bus
        self._active = active
        self._interval = interval
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last: dict[str, dict] = {}

    def ensure_running(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._poll, name="ratui-spark-progress", daemon=True)
            self._thread.start()

    def _poll(self) -> None:
        while True:
            with self._lock:  # decided under the lock ensure_running() takes: no run is left without a reporter
                active = self._active()
                if not active:
                    self._thread = None
                    self._last.clear()
                    return
            for run_id in active:
                try:
                    self.report(run_id)
                except Exception:  # a JVM busy starting or stopping: try again at the next tick
                    log.debug("Spark progress of %s failed", run_id, exc_info=True)
            for gone in set(self._last) - set(active):
                self._last.pop(gone, None)
            time.sleep(self._interval)

    def report(self, run_id: str) -> None:
        """Emit the run's progress if it changed since the last report."""
        now = spark_mod.progress(run_id)
        if now is None or now == self._last.get(run_id):
            return
        self._last[run_id] = now
        self._bus.emit(SparkProgress(run_id, **now))
