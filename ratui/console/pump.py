"""What other threads hand the App, and the queue that coalesces it.

Engine events, watch events, Spark's state and a batch ending happen on other threads. Each is queued here as a
typed item on the thread where it happens; the App is told once per burst and `drain()` hands over everything
that arrived since the last call, so a burst of progress becomes one message and one repaint. Textual-free.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ratui.console.follow import StateItem
from ratui.engine.events import Event, RunQueued
from ratui.engine.vocabulary import MAIN

if TYPE_CHECKING:
    from ratui.engine.run.invocation import Invocation


@dataclass
class Batch:
    """Several runs started together (`x+`, run all): one engine invocation, one after another in dependency
    order. Its state is the invocation's."""

    id: str
    keys: list[str]
    full_refresh: bool
    invocation: "Invocation | None" = None
    results: list[Any] = field(default_factory=list)  # RunResults as each run ends
    ref: str = MAIN  # the ref its runs merge into
    atomic: bool = False  # all of them land on `ref` in one commit, or none does

    @property
    def publish(self) -> Any:
        """An atomic batch's PublishOutcome (branch, into, merged, tables, reason, commit), once it ended."""
        return getattr(self.invocation, "publish", None) if self.invocation is not None else None

    @property
    def run_ids(self) -> list[str]:
        return self.invocation.run_ids if self.invocation else []

    @property
    def current(self) -> str | None:
        return self.invocation.current if self.invocation else None

    @property
    def cancelled(self) -> bool:
        return bool(self.invocation and self.invocation.cancelled)

    @property
    def done(self) -> bool:
        return bool(self.invocation and self.invocation.done)

    @property
    def error(self) -> BaseException | None:
        return self.invocation.error if self.invocation else None


# ------------------------------------------------------------------------------ what the queue carries


@dataclass(frozen=True)
class EngineItem:
    """An engine event, with the batch its run belongs to and when it arrived (monotonic and wall clock)."""

    event: Event
    batch: str | None
    at: float
    clock_text: str


@dataclass(frozen=True)
class WatchItem:
    event: Any  # a WatchEvent of the watch toggle's Watcher


@dataclass(frozen=True)
class SparkItem:
    state: str  # starting | ready | failed


@dataclass(frozen=True)
class BatchItem:
    batch: Batch  # it ended (all its runs did, or it was cancelled)


Item = EngineItem | WatchItem | SparkItem | BatchItem | StateItem


class EventQueue:
    """The controller's inbound half (a mixin of Controller, which sets the attributes in its __init__): the
    queue, whether the App has been told of it, and which batch each run belongs to."""

    clock: Callable[[], float]
    now: Callable[[], Any]
    _queue: deque[Item]
    _lock: threading.Lock
    _pending: bool
    _notify: Callable[[], None]
    _batch_of_run: dict[str, str]
    batches: dict[str, Batch]

    def _post(self, item: Item) -> None:
        """On any thread: queue the item and, if the App has not been told yet, tell it once."""
        with self._lock:
            self._queue.append(item)
            if self._pending:
                return
            self._pending = True
        self._notify()

    def _on_event(self, event: Event) -> None:
        if isinstance(event, RunQueued) and event.invocation in self.batches:
            self._batch_of_run[event.run_id] = event.invocation
        batch = self._batch_of_run.get(event.run_id)
        self._post(EngineItem(event, batch, self.clock(), self.now().strftime("%H:%M:%S")))

    def drain(self) -> list[Item]:
        with self._lock:
            items = list(self._queue)
            self._queue.clear()
            self._pending = False
        return items

    def batch_of(self, run_id: str) -> Batch | None:
        """The unfinished batch this run belongs to."""
        batch = self.batches.get(self._batch_of_run.get(run_id, ""))
        return batch if batch is not None and not batch.done else None

