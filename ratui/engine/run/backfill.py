"""A backfill: the intervals of incremental_by_time pipelines over a range of time, each run as its own run.

    plan(compiled, state, keys, start, end, ref, resume)   what is to run: per pipeline, its interval ranges
    Backfill(parts, compiled, plan, ...).run()             runs them in order; progress as it goes; cancel()

Planning never makes an object per interval: a pipeline's work is a short list of ranges (the range asked for, or,
with `resume`, the parts of it its table has not done), counted by arithmetic; the intervals are walked lazily
while they run, so a 10,000-interval backfill plans in milliseconds and runs in memory that does not grow with it.

Order: intervals by their end, then the pipelines' dependency order, so a downstream interval runs after every
upstream interval it reads. Each interval is one run (its own branch, merged when it succeeds: every finished
interval is published even if the backfill is stopped later), forced (change detection does not apply). A failed
interval is listed with its error; a downstream interval that overlaps a failed upstream one is skipped ("upstream
failed"), every other interval still runs. `threads` > 1 runs intervals of different pipelines at once, never two
of one table (their merges would conflict) and never one before the upstream intervals it reads have ended.

`atomic`: every run merges into one publish branch (ops/publish.py), merged into the ref in one commit at the end
if every interval succeeded; else the ref is unchanged and the branch kept.
"""

from __future__ import annotations

import heapq
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator

from ratui.engine.errors import RatuiError
from ratui.engine.project import intervals
from ratui.engine.project.compiler import CompiledProject
from ratui.engine.run.invocation import Invocation, new_invocation_id
from ratui.engine.run.parts import RunParts
from ratui.engine.run.results import PublishOutcome, RunResult
from ratui.engine.vocabulary import MAIN

TRIGGER = "backfill"


@dataclass
class Target:
    """One pipeline's share of a backfill."""

    key: str
    batch: str
    ranges: list[intervals.Range]  # what runs, on the batch's grid
    total: int  # intervals in the range asked for
    todo: int  # intervals that run
    order: int  # its place in dependency order

    def to_dict(self) -> dict[str, Any]:
        return {"pipeline": self.key, "batch": self.batch, "intervals": self.total, "to_run": self.todo,
                "already_done": self.total - self.todo,
                "ranges": [[intervals.iso(a), intervals.iso(b)] for a, b in self.ranges]}


@dataclass
class BackfillPlan:
    start: datetime
    end: datetime
    targets: list[Target]
    upstream: dict[str, set[str]]  # key -> the targets it reads (directly or not)

    @property
    def todo(self) -> int:
        return sum(t.todo for t in self.targets)

    def items(self) -> Iterator[tuple[str, intervals.Range]]:
        """(key, interval) in run order: by the interval's end, then dependency order; lazily."""
        def stream(t: Target) -> Iterator[tuple[datetime, int, datetime, str]]:
            for start, end in intervals.walk(t.ranges, t.batch):
                yield end, t.order, start, t.key

        for end, _order, start, key in heapq.merge(*(stream(t) for t in self.targets)):
            yield key, (start, end)

    def to_dict(self) -> dict[str, Any]:
        return {"start": intervals.iso(self.start), "end": intervals.iso(self.end), "to_run": self.todo,
                "pipelines": [t.to_dict() for t in self.targets]}


def parse_range(start: str, end: str) -> tuple[datetime, datetime]:
    """--start and --end: ISO dates or timestamps (RAT-BKF-001); start before end (RAT-BKF-002)."""
    first = intervals.parse_time(start, "RAT-BKF-001", "--start")
    last = intervals.parse_time(end, "RAT-BKF-001", "--end")
    if first >= last:
        raise RatuiError("RAT-BKF-002", f"--start {intervals.iso(first)} is not before --end {intervals.iso(last)}")
    return first, last


def plan(compiled: CompiledProject, keys: list[str], start: datetime, end: datetime, *,
         done_of: Callable[[str], list[intervals.Range]] | None = None) -> BackfillPlan:
    """The backfill of the incremental_by_time pipelines among `keys` (RAT-BKF-003 when there is none) over
    [start, end), widened to each pipeline's interval grid. `done_of(key)`: the intervals its table has done
    (a resume runs only the others); None runs every interval of the range."""
    order = compiled.graph.order(set(keys))
    targets: list[Target] = []
    for i, key in enumerate(order):
        config = compiled.pipelines[key].config
        if config is None or config.merge_strategy != "incremental_by_time":
            continue
        whole = intervals.floor(start, config.batch), intervals.ceil(end, config.batch)
        ranges = [whole] if done_of is None else intervals.minus(whole, done_of(key))
        total = intervals.count(*whole, config.batch)
        targets.append(Target(key, config.batch, ranges, total,
                              sum(intervals.count(a, b, config.batch) for a, b in ranges), i))
    if not targets:
        raise RatuiError("RAT-BKF-003", f"none of the {len(keys)} selected pipeline(s) is incremental_by_time: "
                         "nothing to backfill")
    names = {t.key for t in targets}
    upstream = {t.key: compiled.graph.ancestors(t.key) & names for t in targets}
    return BackfillPlan(start, end, targets, upstream)


@dataclass
class Progress:
    """What a backfill has done so far (handed to its on_progress after every interval)."""

    total: int
    done: int = 0
    failed: int = 0
    skipped: int = 0
    rows: int = 0
    began: float = field(default_factory=time.monotonic)
    failures: list[dict[str, Any]] = field(default_factory=list)  # each failed interval and its error

    @property
    def pending(self) -> int:
        return self.total - self.done - self.failed - self.skipped

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.began

    @property
    def estimate(self) -> float | None:
        """Seconds left at the pace so far (None before the first interval ended)."""
        ended = self.done + self.failed + self.skipped
        return self.elapsed / ended * self.pending if ended else None

    def to_dict(self) -> dict[str, Any]:
        return {"intervals": self.total, "done": self.done, "failed": self.failed, "skipped": self.skipped,
                "pending": self.pending, "rows": self.rows, "elapsed_s": round(self.elapsed, 3),
                "estimate_s": None if self.estimate is None else round(self.estimate, 1)}


class _Published:
    """What ops/publish.finish_publish reads of the backfill (an invocation's shape)."""

    def __init__(self, ref: str, into: str, keys: list[str], bad: list[RunResult], cancelled: bool):
        self.ref, self.publish_into, self.keys, self.error = ref, into, keys, None
        self.results = bad or [RunResult("", key, "success") for key in keys]
        self._cancelled = cancelled

    @property
    def cancelled(self) -> bool:
        return self._cancelled


class Backfill:
    def __init__(self, parts: RunParts, compiled: CompiledProject, plan: BackfillPlan, *, ref: str = MAIN,
                 threads: int = 1, publisher: Any = None,
                 on_interval: Callable[[str, intervals.Range, RunResult, Progress], None] | None = None):
        self.id = new_invocation_id()
        self.plan = plan
        self.ref = publisher.branch if publisher is not None else ref
        self.threads = max(1, threads)
        self.progress = Progress(plan.todo)
        self.publish: PublishOutcome | None = None
        self._parts, self._compiled, self._publisher = parts, compiled, publisher
        self._on_interval = on_interval
        self._failed: dict[str, list[intervals.Range]] = {}
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._live: set[Invocation] = set()
        self._over = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Stop: the intervals in flight are cancelled (their branches go), the rest stay pending; every interval
        that finished stays published."""
        self._cancelled.set()
        with self._lock:
            live = list(self._live)
        for invocation in live:
            invocation.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Until run() has returned (a stop's watchdog waits with it)."""
        return self._over.wait(timeout)

    def run(self) -> Progress:
        try:
            self._loop()
        finally:
            try:
                if self._publisher is not None:
                    self.publish = self._publisher.finish(self._published())
            finally:
                self._over.set()
        return self.progress

    def _published(self) -> _Published:
        bad = [RunResult(f["run_id"], f["pipeline"], f["status"], error=f["error"]) for f in self.progress.failures]
        return _Published(self._publisher.branch, self._publisher.into, [t.key for t in self.plan.targets], bad,
                          self.cancelled or self.progress.pending > 0)

    def _loop(self) -> None:
        running: dict[Future, tuple[str, intervals.Range]] = {}
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"ratui-backfill-{self.id}")
        try:
            for key, interval in self.plan.items():
                if self._cancelled.is_set():
                    break
                # never two runs of one table, never before the upstream intervals it reads ended, at most threads
                while running and (len(running) >= self.threads or any(
                        k == key or k in self.plan.upstream[key] for k, _ in running.values())):
                    self._reap(running, wait(list(running), return_when=FIRST_COMPLETED)[0])
                if self._cancelled.is_set():
                    break
                blocked = [up for up in sorted(self.plan.upstream[key])
                           if intervals.overlaps(interval, self._failed.get(up, ()))]
                if blocked:
                    self._ended(key, interval, RunResult("", key, "skipped", reason=f"upstream failed: "
                                                         f"{', '.join(blocked)}"))
                    continue
                running[pool.submit(self._one, key, interval)] = (key, interval)
            while running:
                self._reap(running, wait(list(running), return_when=FIRST_COMPLETED)[0])
        finally:
            pool.shutdown(wait=True)

    def _reap(self, running: dict, done) -> None:
        for future in done:
            key, interval = running.pop(future)
            self._ended(key, interval, future.result())

    def _one(self, key: str, interval: intervals.Range) -> RunResult:
        invocation = Invocation(self._parts, self._compiled, [key], trigger=TRIGGER, force=True, ref=self.ref,
                                intervals={key: interval})
        with self._lock:
            self._live.add(invocation)
        try:
            if self._cancelled.is_set():
                invocation.cancel()
            results = invocation.run()
        finally:
            with self._lock:
                self._live.discard(invocation)
        return results[0] if results else RunResult("", key, "cancelled")

    def _ended(self, key: str, interval: intervals.Range, result: RunResult) -> None:
        p = self.progress
        if result.status == "success":
            p.done += 1
            p.rows += result.rows_written
        elif result.status == "cancelled" or (result.status == "skipped" and not result.reason):
            pass  # stays pending: a resume runs it
        elif result.status == "skipped":
            p.skipped += 1
        else:
            p.failed += 1
            self._failed.setdefault(key, []).append(interval)
            p.failures.append({"pipeline": key, "start": intervals.iso(interval[0]), "end": intervals.iso(interval[1]),
                               "run_id": result.run_id, "status": result.status, "error": result.error})
        if result.status == "skipped" and result.reason:
            self._failed.setdefault(key, []).append(interval)  # its own downstream is blocked as well
        if self._on_interval is not None:
            self._on_interval(key, interval, result, p)
