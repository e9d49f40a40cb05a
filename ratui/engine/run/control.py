"""Stopping runs: the per-run cancel flag and the poller that honours the requests other processes write
(run/in_flight.py writes them and keeps this process's controls).

A cancel is a request in the database (`cancel_requests`), so `ratui cancel` in another terminal, a second console
or the reaper can stop a run; the process running it polls for requests every quarter of a second and interrupts
its run (its Spark jobs included). A cancel that arrives after the merge committed is too late: the run finished.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from ratui.engine.errors import RatuiError
from ratui.engine.state.history import History

log = logging.getLogger("ratui.run.control")

POLL_SECONDS = 0.25


class Cancelled(Exception):
    """Raised inside a run at its next checkpoint once a cancel was requested."""


class PythonInterrupted(BaseException):
    """Raised inside a Python pipeline's own code by a cancel (a BaseException, so that the pipeline's
    `except Exception` does not swallow it)."""


class RunControl:
    """What other threads may do to a running run: cancel it, the Python pipeline code it runs included."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.cancel_requested = threading.Event()
        self.cancel_error: RatuiError | None = None  # why, when it is not a user's cancel (e.g. the reaper's timeout)
        self.merged = threading.Event()
        self.done = threading.Event()
        self._python_lock = threading.Lock()
        self._python_thread: int | None = None  # the thread running the pipeline's run(ctx), while it does

    def check(self) -> None:
        if self.cancel_requested.is_set():
            raise Cancelled()

    def cancel(self, error: RatuiError | None = None) -> None:
        self.cancel_error = self.cancel_error or error
        self.cancel_requested.set()
        self._interrupt_python()

    @contextmanager
    def python_code(self) -> Iterator[None]:
        """Around the user's Python code: a cancel interrupts it at its next bytecode (a loop that never reaches a
        checkpoint included) with PythonInterrupted, turned into Cancelled here. A call blocked in C (a long sleep,
        a socket read) is interrupted when it returns: Python can only raise between bytecodes."""
        with self._python_lock:
            self._python_thread = threading.get_ident()
        try:
            self.check()
            yield
        except PythonInterrupted:
            raise Cancelled() from None
        finally:
            with self._python_lock:
                self._python_thread = None
                _set_async_exception(threading.get_ident(), None)  # one set just as the code ended: dropped
        if self.cancel_requested.is_set():
            raise Cancelled()

    def _interrupt_python(self) -> None:
        with self._python_lock:
            if self._python_thread is not None:
                _set_async_exception(self._python_thread, PythonInterrupted)


def _set_async_exception(thread_id: int, exception: type[BaseException] | None) -> None:
    """CPython's PyThreadState_SetAsyncExc: raise `exception` in that thread at its next bytecode (None clears)."""
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exception) if exception is not None else None)


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
