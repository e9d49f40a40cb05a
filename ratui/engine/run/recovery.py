"""Crash recovery: runs whose process died are recorded as failed and their branches deleted; main never moved.

A run records its host, pid and the start time of that process (state/processes.py). A run still `pending` or
`running` whose process on this host is gone (a reused pid included) died: it becomes failed (RAT-RUN-006), or
succeeded if its merge had committed (the embedded catalog's merge stamps the run in its own transaction; on Nessie,
whose merge commits before the project's database hears of it, the merge commit in Nessie's log names the run). Runs
of other hosts are left to the reaper's stuck-run timeout: their process cannot be checked from here.

Commands that act on runs call `recover()` when they start; long-lived processes (console, watch) also run the
monitor, which checks every couple of seconds. Several processes may recover at once: each run is claimed by one.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
from ratui.engine.errors import RatuiError
from ratui.engine.events import Event, EventBus, RunFinished
from ratui.engine.run.in_flight import RunsInFlight
from ratui.engine.run.record import RunRecord
from ratui.engine.state import processes
from ratui.engine.state.project_state import ProjectState
from ratui.engine.storage.staging import run_staging
from ratui.engine.vocabulary import MAIN, now_iso, run_branch

log = logging.getLogger("ratui.run.recovery")


class Recovery:
    def __init__(self, state: ProjectState, record: RunRecord, bus: EventBus[Event], in_flight: RunsInFlight):
        """`in_flight`: this process's runs (never dead); `record`: where a dead run is finished."""
        self._state = state
        self._record = record
        self._bus = bus
        self._in_flight = in_flight
        self._lock = threading.Lock()
        self._monitor: threading.Thread | None = None
        self._stop = threading.Event()

    def recover(self) -> list[str]:
        """Record every dead run of this host; returns their ids."""
        record = self._record
        host = socket.gethostname()
        recovered = []
        for run in self._state.history.unfinished_runs():
            if run.get("host") != host or not run.get("pid") or self._in_flight.is_ours(run["id"]):
                continue
            if processes.alive(run["pid"], run.get("pid_started")):
                continue
            branch = run_branch(run["id"])
            if run.get("merged_at") or self._landed(run):
                # it died after its merge committed: its data is on main, so it did succeed
                if not record.claim_unfinished(run["id"], status="success", finished_at=now_iso()):
                    continue
                note = self._drop_leftovers(run["id"], branch)
                record.log(run["id"], "warning", f"process {run['pid']} died after the merge committed{note}")
                recovered.append(run["id"])
                continue
            error = RatuiError("RAT-RUN-006", f"process {run['pid']} running {run['pipeline']} died before the run "
                               "finished")
            if not record.claim_unfinished(run["id"], status="failed", finished_at=now_iso(),
                                           error_code=error.code, error_message=error.message, error_hint=error.hint):
                continue
            note = self._drop_leftovers(run["id"], branch)
            record.log(run["id"], "error", f"{error}{note} (found by process {os.getpid()})")
            self._bus.emit(RunFinished(run["id"], run["pipeline"], "failed", 0, 0, error.to_dict()))
            recovered.append(run["id"])
        return recovered

    def _landed(self, run: dict) -> bool:
        """Whether the catalog merged the run although its process died before stamping it (a catalog on a server
        merges before the project's database hears of it: catalog.merged_run)."""
        try:
            return self._state.catalog.merged_run(run["id"], run.get("ref") or MAIN,
                                                  run.get("started_at") or run.get("queued_at")) is not None
        except RatuiError as exc:  # the catalog does not answer: the run stays failed, as before
            log.debug("could not ask the catalog about run %s: %s", run["id"], exc)
            return False

    def _drop_leftovers(self, run_id: str, branch: str) -> str:
        shutil.rmtree(self._state.settings.state_dir / "staging" / run_id, ignore_errors=True)
        remote = run_staging(self._state.settings, run_id)
        if remote is not None:  # what it uploaded for a Spark that cannot see this disk
            try:
                remote.remove(force=True)
            except RatuiError as exc:  # the reaper sweeps it later
                log.debug("could not remove %s: %s", remote.url, exc)
        try:
            self._state.catalog.delete_branch(branch)
            return f"; branch {branch} deleted"
        except RatuiError:
            return ""

    # ------------------------------------------------------------------------------------------ monitor

    def start_monitor(self, interval: float = 2.0) -> None:
        """Notice a run whose process died within `interval` seconds, whichever ratui process started it."""
        with self._lock:
            if self._monitor is not None:
                return
            self._stop = threading.Event()
            self._monitor = threading.Thread(target=self._watch, args=(interval, self._stop),
                                             name="ratui-dead-run-monitor", daemon=True)
            self._monitor.start()

    def _watch(self, interval: float, stop: threading.Event) -> None:
        while not stop.wait(interval):
            try:
                self.recover()
            except Exception:  # a busy or closed database must not end the monitor; the next pass retries
                log.debug("dead-run check failed", exc_info=True)

    def stop_monitor(self) -> None:
        with self._lock:
            monitor, self._monitor = self._monitor, None
        if monitor is not None:
            self._stop.set()
            monitor.join(timeout=5)
