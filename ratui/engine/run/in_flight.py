"""This process's runs in flight: each one's control (run/control.py), the cancel of any run, and the threads that
poll while this process has a run in flight (cancel requests of other processes, Spark progress).

    in_flight.queued(run_id)        a run recorded as queued: cancellable before it starts
    in_flight.begin(run_id)         its control, when its executor starts (the pollers run while any is in flight)
    in_flight.release(run_id)       it ended: wait() returns, a late cancel answers 'finished'
    in_flight.cancel(run_id)        a run of any process: the request is written, a run of this one stops at once

One per engine; the invocation, recovery (is this run ours?) and the reaper (a stuck run of this process) use it.
"""

from __future__ import annotations

import os
import socket
import threading

from ratui.engine.errors import RatuiError
from ratui.engine.events import Event, EventBus
from ratui.engine.run.control import CancelPoller, RunControl
from ratui.engine.run.progress import ProgressReporter
from ratui.engine.run.record import RunRecord
from ratui.engine.spark import jobs as spark_jobs
from ratui.engine.vocabulary import ACTIVE


class RunsInFlight:
    def __init__(self, record: RunRecord, bus: EventBus[Event]):
        self._record = record
        self._controls: dict[str, RunControl] = {}
        self._lock = threading.Lock()
        self.poller = CancelPoller(record.history, self.active, self.cancel_here)
        self.progress = ProgressReporter(bus, self.active)

    def queued(self, run_id: str) -> RunControl:
        """A run just queued: its control, so that a cancel reaches it before it starts."""
        with self._lock:
            control = self._controls[run_id] = RunControl(run_id)
        self.poller.ensure_running()
        return control

    def begin(self, run_id: str) -> RunControl:
        """The control of a run whose executor starts now (the one made when it was queued, if it was)."""
        with self._lock:
            control = self._controls.setdefault(run_id, RunControl(run_id))
        self.poller.ensure_running()
        self.progress.ensure_running()
        return control

    def release(self, run_id: str) -> None:
        with self._lock:
            control = self._controls.pop(run_id, None)
        if control is not None:
            control.done.set()

    def active(self) -> list[str]:
        """Runs of this process that have not ended (queued ones included)."""
        with self._lock:
            return [r for r, c in self._controls.items() if not c.done.is_set()]

    def is_ours(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._controls

    def wait(self, run_id: str, timeout: float | None = None) -> bool:
        with self._lock:
            control = self._controls.get(run_id)
        return True if control is None else control.done.wait(timeout)

    def cancel(self, run_id: str, error: RatuiError | None = None) -> str:
        """Ask a run to stop, from any thread or process: 'requested', 'finished' (too late: it already ended, or
        its merge has committed) or 'unknown'. The request is written to the database (the process running the
        run honours it at its next checkpoint; `ratui cancel` needs no Spark and no catalog for it); a run of this
        process is also interrupted at once (its Spark jobs are cancelled)."""
        run = self._record.history.get_run(run_id)
        if run is None:
            return "unknown"
        if run["status"] not in ACTIVE or run.get("merged_at"):
            return "finished"
        self._record.request_cancel(run["id"], os.getpid(), socket.gethostname())
        return self.cancel_here(run["id"], error) or "requested"

    def cancel_here(self, run_id: str, error: RatuiError | None = None) -> str | None:
        """Interrupt a run of this process: 'requested', 'finished', or None when it is not one of ours."""
        with self._lock:
            control = self._controls.get(run_id)
        if control is None:
            return None
        if control.merged.is_set() or control.done.is_set():
            return "finished"
        control.cancel(error)  # a Python pipeline's own code is interrupted too
        spark_jobs.cancel_run(run_id)
        return "requested"
