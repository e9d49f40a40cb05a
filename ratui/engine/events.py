"""Typed engine events and the bus observers subscribe to.

Events are emitted from the worker threads that run pipelines (and, for watch mode, from the watcher's threads).
Observers (the CLI printer, the console,
tests) must be quick and thread-safe: the console turns each event into a Textual message with
post_message and does nothing else on the emitting thread.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

if TYPE_CHECKING:
    from ratui.engine.errors import RatuiError

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
    ref: str = "main"  # the branch the run merges into
    publishes_into: str | None = None  # an atomic invocation's: the ref its publish branch lands on at the end


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
class RunDecided(Event):
    """Change detection sent the run: what it does (vocabulary.RUN_TYPES) and why (run/changes.py)."""
    pipeline: str
    run_type: str
    reason: str


@dataclass(frozen=True)
class RunIsolated(Event):
    """How a Python pipeline's run(ctx) was kept from the machine (isolation/levels.py): "confined: landlock-abi7
    + seccomp", "process", "none (asked confined: ...)"."""
    isolation: str


@dataclass(frozen=True)
class StagingProgress(Event):
    """Landing files staged for Spark so far: an object-store zone's objects fetched into the run's staging
    folder, or local files uploaded for a Spark that cannot see this disk (storage/staging.py)."""
    zone: str
    done: int
    total: int
    bytes_done: int
    bytes_total: int


@dataclass(frozen=True)
class SparkProgress(Event):
    """The run's Spark jobs right now (Spark's status tracker, or Spark Connect's progress reports): jobs done so
    far in the run, and the stages and tasks of the jobs running. `jobs_running` 0: no job runs at the moment."""
    jobs_done: int
    jobs_running: int
    stages_done: int
    stages_total: int
    tasks_done: int
    tasks_running: int
    tasks_total: int
    bytes_read: int | None = None  # Spark Connect reports it; the status tracker does not

    @property
    def fraction(self) -> float | None:
        return self.tasks_done / self.tasks_total if self.tasks_total else None


@dataclass(frozen=True)
class RunFinished(Event):
    pipeline: str
    status: str  # success | failed | cancelled | skipped
    rows_written: int
    duration_ms: int
    error: dict[str, Any] | None = None
    warnings: int = 0
    phases: dict[str, int] = field(default_factory=dict)
    reason: str | None = None  # why it ran, or why it was skipped ("unchanged since run ...", "upstream failed: x")
    diff: dict[str, Any] | None = None  # the run's data diff (run/data_diff.py), when it got that far


E = TypeVar("E")


class EventBus(Generic[E]):
    """Listeners of one kind of event (the engine's, or a watcher's), called on the emitting thread."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[E], None]] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: Callable[[E], None]) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def emit(self, event: E) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event)
            except Exception:  # an observer's bug must never break a run
                log.exception("event listener failed on %s", type(event).__name__)


# ------------------------------------------------------------------------------------------ watch mode


@dataclass(frozen=True)
class WatchEvent:
    def to_dict(self) -> dict[str, Any]:
        return {"event": type(self).__name__, **{k: _jsonable(v) for k, v in self.__dict__.items()}}


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):  # a RatuiError, a RunResult
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


@dataclass(frozen=True)
class WatchStarted(WatchEvent):
    root: str
    debounce_ms: int


@dataclass(frozen=True)
class WatchState(WatchEvent):
    state: str  # stopped | watching | pending (changes waiting for the quiet period) | running


@dataclass(frozen=True)
class WatchReloaded(WatchEvent):
    """ratui.yaml was reloaded (settings apply from the next run)."""

    debounce_ms: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class WatchErrors(WatchEvent):
    """Broken files the latest changes touch; nothing of them runs until the next save fixes them."""

    errors: tuple[RatuiError, ...]
    changed: tuple[str, ...]
    blocked: tuple[str, ...] = ()


@dataclass(frozen=True)
class WatchPlanStarted(WatchEvent):
    keys: tuple[str, ...]
    reasons: dict[str, str]
    changed: tuple[str, ...]


@dataclass(frozen=True)
class WatchRunResult(WatchEvent):
    result: Any  # a RunResult (whatever the runner returned)


@dataclass(frozen=True)
class WatchPlanFinished(WatchEvent):
    keys: tuple[str, ...]
    results: tuple[Any, ...]
    duration_ms: int
    error: str | None = None  # "stopped" when the watcher stopped mid-plan; the exception when the runner raised


@dataclass(frozen=True)
class WatchFailed(WatchEvent):
    """Something went wrong inside the watcher (a runner raised, the folder vanished); it keeps watching."""

    message: str
    details: str = ""


@dataclass(frozen=True)
class WatchStopped(WatchEvent):
    pass
