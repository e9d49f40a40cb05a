"""Typed engine events and the bus observers subscribe to.

Events are emitted from the worker threads that run pipelines. Observers (the CLI printer, the console,
tests) must be quick and thread-safe: the console turns each event into a Textual message with
post_message and does nothing else on the emitting thread.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

log = logging.getLogger("ratui.events")



@dataclass(frozen=True)
class Event:
    run_id: str

    def to_dict(self) -> dict[str, Any]:
        return {"event": type(self).__name__, **asdict(self)}


@dataclass(frozen=True)
class RunQueued(Event):
    pipeline: str
    trigger: str
    invocation: str | None = None  # the invocation (CLI run, console batch, watch plan) that queued it


@dataclass(frozen=True)
class RunStarted(Event):
    pipeline: str
    branch: str


@dataclass(frozen=True)
class PhaseStarted(Event):
    phase: str


@dataclass(frozen=True)
class PhaseFinished(Event):
    phase: str
    status: str  # done | failed | skipped | cancelled
    duration_ms: int


@dataclass(frozen=True)
class QualityResultEvent(Event):
    test: str
    severity: str
    status: str  # passed | failed | warned | error
    violations: int
    duration_ms: int


@dataclass(frozen=True)
class LogLine(Event):
    level: str
    message: str


@dataclass(frozen=True)
class RunFinished(Event):
    pipeline: str
    status: str  # success | failed | cancelled | skipped
    rows_written: int
    duration_ms: int
    error: dict[str, Any] | None = None
    warnings: int = 0
    phases: dict[str, int] = field(default_factory=dict)


Listener = Callable[[Event], None]


class EventBus:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def emit(self, event: Event) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event)
            except Exception:  # an observer's bug must never break a run
                log.exception("event listener failed on %s", type(event).__name__)
