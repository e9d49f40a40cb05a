"""Stopping runs: the per-run cancel flag, the request another process writes, and the poller that honours it.

A cancel is a request in the database (`cancel_requests`), so `ratui cancel` in another terminal, a second console
or the reaper can stop a run; the process running it polls for requests every quarter of a second and interrupts
its run (its Spark jobs included). A cancel that arrives after the merge committed is too late: the run finished.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Callable

from ratui.engine.errors import RatuiError
from ratui.engine.state.history import History
from ratui.engine.vocabulary import ACTIVE

log = logging.getLogger("ratui.run.control")

POLL_SECONDS = 0.25


class Cancelled(Exception):
    """Raised inside a run at its next checkpoint once a cancel was requested."""


class RunControl:
    """What other threads may do to a running run: cancel it."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.cancel_requested = threading.Event()
        self.cancel_error: RatuiError | None = None  # why, when it is not a user's cancel (e.g. the reaper's timeout)
        self.merged = threading.Event()
        self.done = threading.Event()

    def check(self) -> None:
        if self.cancel_requested.is_set():
            raise Cancelled()


def request_cancel(history: History, run_id: str) -> tuple[str, dict | None]:
    """Write a cancel request for a run of any process: ('requested' | 'finished' | 'unknown', the run).

    Needs only the history (no Spark, no catalog), so `ratui cancel` answers in half a second."""
    run = history.get_run(run_id)
    if run is None:
        return "unknown", None
    if run["status"] not in ACTIVE or run.get("merged_at"):
        return "finished", run
    history.request_cancel(run["id"], os.getpid(), socket.gethostname())
    return "requested", run


class WhileRunsActive:
    """A daemon thread that calls `tick(active run ids)` every `interval` seconds while this process has runs in
    flight, and ends when it has none (`ensure_running()` when a run starts brings it back). A tick that raises is
    logged and the next one comes: a busy database or a JVM starting must not stop it."""

    def __init__(self, name: str, active: Callable[[], list[str]], tick: Callable[[list[str]], None],
                 interval: float):
        self._name = name
        self._active = active
        self._tick = tick
        self._interval = interval
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def ensure_running(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._lock:  # decided under the lock ensure_running() takes: no run is left without a thread
                active = self._active()
                if not active:
                    self._thread = None
                    return
            try:
                self._tick(active)
            except Exception:
                log.debug("%s: tick failed", self._name, exc_info=True)
            time.sleep(self._interval)


class CancelPoller(WhileRunsActive):
    """Honours cancel requests other processes wrote for the runs of this process, while it has any."""

    def __init__(self, history: History, active: Callable[[], list[str]], cancel_local: Callable[[str], object]):
        super().__init__("ratui-cancel-poller", active, self._poll, POLL_SECONDS)
        self._history = history
        self._cancel_local = cancel_local

    def _poll(self, active: list[str]) -> None:
        for run_id in self._history.cancel_requested(active):
            self._cancel_local(run_id)
