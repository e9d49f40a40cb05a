"""An invocation: pipelines started together and run in dependency order, up to `threads` of them at once.

A `ratui run`, a console batch (run all, x+), a watch plan and a single console run are each one invocation. The
handle its caller keeps:

    run_ids      the runs so far, in run order: each is queued when its turn comes (the first at once by start())
    results      each run's RunResult as it ends
    current      a run in flight (in_flight: all of them)
    cancel()     stop: the runs in flight are interrupted and the pipelines not reached are never started
    wait()       until the invocation has ended

Before a pipeline runs, change detection decides whether it must (an unchanged one is recorded as skipped, without a
branch), and a pipeline whose upstream failed in this invocation is skipped ("upstream failed"); independent
pipelines still run. `force` and `full_refresh` run regardless.

With `threads` > 1 a pipeline starts as soon as every pipeline of the invocation it depends on has ended and a
thread is free; each run is its own Spark job group in its own FAIR pool (spark/jobs.py), so independent
pipelines share the cores instead of queueing behind each other. Results and `on_result` come from the
invocation's own thread, in the order the runs end. Nothing stops an invocation from the side but
`cancel()`: callers never raise through its callbacks.

`ref`: the branch every run forks from and merges into (main by default, or a dev branch). An atomic publish
(`publisher`) runs them all on one publish branch and, once every run passed its gate, merges that branch into
`publish_into` in one commit (`publish` says what happened); if any run failed or the invocation was cancelled,
`publish_into` is untouched and the publish branch is kept for inspection (the reaper removes it later).

What it works with comes in `RunParts` (run/parts.py): it records its runs through the run record, keeps their
controls in the runs in flight, asks the decider, and has each run executed by a RunExecutor (run/executor.py) it
makes with the state, bus and record of the parts; the project it runs is the one compiled for it, handed to every
executor.
"""

from __future__ import annotations

import logging
import threading
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable, Protocol

from ratui.engine.errors import RatuiError
from ratui.engine.events import LogLine, RunDecided, RunFinished, RunQueued
from ratui.engine.project.compiler import CompiledProject
from ratui.engine.run.changes import Decision, strategy_run_type
from ratui.engine.run.parts import RunParts
from ratui.engine.run.results import PublishOutcome, RunResult, new_run_id
from ratui.engine.vocabulary import MAIN, now_iso

OnResult = Callable[[RunResult], None]


def new_invocation_id() -> str:
    return uuid.uuid4().hex[:12]


class Publisher(Protocol):
    """An atomic publish (ops/publish.py): the invocation's runs merge into its `branch`; once the invocation has
    ended, finish() merges that branch into `into` in one commit, or says why it did not."""

    branch: str
    into: str

    def finish(self, invocation: "Invocation") -> PublishOutcome: ...


class Invocation:
    def __init__(self, parts: RunParts, compiled: CompiledProject, keys: list[str], *, trigger: str,
                 full_refresh: bool = False, force: bool = False, on_result: OnResult | None = None,
                 on_done: Callable[["Invocation"], None] | None = None, invocation_id: str | None = None,
                 threads: int = 1, ref: str = MAIN, publisher: Publisher | None = None,
                 intervals: dict[str, Any] | None = None, schedule: str | None = None):
        self.id = invocation_id or new_invocation_id()
        self.schedule = schedule  # the schedule that fired it (trigger 'schedule'), recorded on each run
        self.keys = list(keys)
        self.trigger = trigger
        self.full_refresh = full_refresh
        self.force = force
        self.run_ids: list[str] = []
        self.results: list[RunResult] = []
        self.threads = max(1, threads)
        self.in_flight: list[str] = []  # the runs executing now, in start order
        self.error: BaseException | None = None  # the invocation's own failure (never a run's: see results)
        self.ref = publisher.branch if publisher is not None else ref
        self.publish_into = publisher.into if publisher is not None else None
        self.publish: PublishOutcome | None = None  # an atomic publish's outcome, once the invocation ended
        self._parts = parts
        self._publisher = publisher
        self._compiled = compiled
        self._on_result = on_result
        self._on_done = on_done
        self._cancelled = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._queued: dict[str, str] = {}  # key -> run id queued ahead of its turn (the first, by start())
        # key -> the one interval its incremental_by_time run replaces (a backfill's step: run/backfill.py)
        self.intervals = dict(intervals or {})

    # ------------------------------------------------------------------------------------------ handle

    @property
    def current(self) -> str | None:
        """The earliest-started run in flight (None between runs)."""
        with self._lock:
            return self.in_flight[0] if self.in_flight else None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> str:
        """Stop the invocation: interrupt the runs in flight; the runs not started end as cancelled."""
        self._cancelled.set()
        with self._lock:
            running = list(self.in_flight)
        answers = [self._parts.in_flight.cancel(run_id) for run_id in running]
        if not answers:
            return "finished" if self.done else "requested"
        return "requested" if "requested" in answers else answers[0]

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    # ------------------------------------------------------------------------------------------ running

    def run(self) -> list[RunResult]:
        """Run every pipeline in the calling thread; returns the results (an exception of `on_result` or of
        the invocation itself propagates after the unstarted runs were closed)."""
        try:
            self._loop()
        finally:
            self._finish()
        if self.error is not None:
            raise self.error
        return self.results

    def start(self) -> "Invocation":
        """Run in a daemon thread; returns at once, with the first run queued (its id is `run_ids[0]`)."""
        if self.keys:
            self._queued[self.keys[0]] = self._queue(self.keys[0])

        def work() -> None:
            try:
                self._loop()
            except BaseException:  # kept in self.error; a daemon thread must not die loudly
                pass
            finally:
                self._finish()

        threading.Thread(target=work, name=f"ratui-invocation-{self.id}", daemon=True).start()
        return self

    def _queue(self, key: str) -> str:
        """Record a pending run, ready to be cancelled before it starts."""
        run_id = new_run_id()
        self._parts.record.create(run_id, key, self.trigger, self._strategy(key), self.id, ref=self.ref,
                                  schedule=self.schedule)
        self._parts.in_flight.queued(run_id)
        self._parts.bus.emit(RunQueued(run_id, key, self.trigger, self.id, self.ref, self.publish_into))
        with self._lock:
            self.run_ids.append(run_id)
        return run_id

    def _strategy(self, key: str) -> str | None:
        pipeline = self._compiled.pipelines.get(key)
        return pipeline.config.merge_strategy if pipeline is not None and pipeline.config else None

    def _loop(self) -> None:
        compiled = self._compiled
        ours = set(self.keys)
        waiting = list(self.keys)
        ended: set[str] = set()
        failed: set[str] = set()
        running: dict[Future, str] = {}
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"ratui-run-{self.id}") if self.threads > 1 \
            else None

        def deliver(key: str, result: RunResult) -> None:
            ended.add(key)
            if result.status != "success" and not (result.status == "skipped" and result.run_type == "skip"):
                failed.add(key)
            self.results.append(result)
            if self._on_result is not None:
                self._on_result(result)

        needs_of = {key: compiled.graph.ancestors(key) & ours for key in waiting}  # walked once, not per turn
        try:
            for key, result in self._skip_unchanged():
                waiting.remove(key)
                deliver(key, result)
            self._data_server_early(waiting)
            while waiting or running:
                if self._cancelled.is_set():
                    waiting.clear()
                for key in list(waiting):
                    if len(running) >= self.threads or self._cancelled.is_set():
                        break
                    needs = needs_of[key]
                    if not needs <= ended:
                        continue  # an upstream of this invocation is still to come or running
                    waiting.remove(key)
                    upstream_failed = sorted(needs & failed)
                    if upstream_failed:
                        names = ", ".join(upstream_failed)
                        deliver(key, self._skip(key, f"upstream failed: {names}",
                                                RatuiError("RAT-RUN-005", f"{key} was not run because {names} failed")))
                    elif pool is None:
                        deliver(key, self._run_pipeline(key))
                    else:
                        running[pool.submit(self._run_pipeline, key)] = key
                if running:
                    done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                    for future in done:
                        deliver(running.pop(future), future.result())
        except BaseException as exc:
            self.error = exc
            if running:  # the runs in flight still end (their branches go); nothing new starts
                self._cancelled.set()
                wait(list(running))
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)

    def _data_server_early(self, keys: list[str]) -> None:
        """A Python pipeline of these runs in a child: the data server starts now, in the background, while the
        runs before it and its own branch and config phases go (isolation/early.py). Never raises."""
        from ratui.engine.isolation import early

        pipelines = [self._compiled.pipelines[k] for k in keys if k in self._compiled.pipelines]
        if not any(p.kind == "python" for p in pipelines):
            return  # and the catalog is not opened for it (an unchanged project is read without it)
        try:
            storage = self._parts.state.catalog.storage
            early.start_for(pipelines, self._compiled.settings, tables_root=storage.root,
                            tables_remote=storage.remote)
        except Exception as exc:  # noqa: BLE001 - the run that needs the server starts it and reports
            logging.getLogger("ratui.isolation").info("the data server was not started early: %s", exc)

    def _skip_unchanged(self) -> list[tuple[str, RunResult]]:
        """The pre-pass: every pipeline that is unchanged, and whose upstream pipelines in this invocation are all
        unchanged too, is decided now against one read of the ref and recorded as skipped in one transaction (a
        no-op run of a large project costs one pointer read and one commit, not a few per pipeline). What is left
        is decided as before, when its turn comes. Never raises: on any trouble the pipelines are decided one by
        one, as they were."""
        if self.force or self.full_refresh or self._cancelled.is_set():
            return []
        try:
            unchanged = self._parts.decider.unchanged(self._compiled, self.keys, ref=self.ref)
            if not unchanged:
                return []
            results = self._record_skips([(key, decision.reason, self._queued.get(key))
                                          for key, decision in unchanged.items()])
        except Exception:
            return []
        for key in unchanged:  # recorded: a run queued ahead of its turn is one of them now
            self._queued.pop(key, None)
        with self._lock:
            known = set(self.run_ids)
            self.run_ids.extend(r.run_id for r in results if r.run_id not in known)
        return [(result.pipeline, result) for result in results]

    def _record_skips(self, items: list[tuple[str, str, str | None]]) -> list[RunResult]:
        """Record (key, reason, queued run id or None) as skipped runs in one transaction; their events follow."""
        rows: list[dict[str, Any]] = [
            {"id": queued or new_run_id(), "pipeline": key, "trigger": self.trigger, "strategy": self._strategy(key),
             "invocation": self.id, "ref": self.ref, "reason": reason, "queued": queued is not None,
             "schedule": self.schedule}
            for key, reason, queued in items]
        self._parts.record.record_skipped(rows)
        bus, results = self._parts.bus, []
        for (key, reason, queued), row in zip(items, rows):
            run_id = str(row["id"])
            if queued is None:
                bus.emit(RunQueued(run_id, key, self.trigger, self.id, self.ref, self.publish_into))
            bus.emit(LogLine(run_id, "info", f"skipped: {reason}"))
            self._parts.in_flight.release(run_id)
            bus.emit(RunFinished(run_id, key, "skipped", 0, 0, None, reason=reason))
            results.append(RunResult(run_id, key, "skipped", row["strategy"], reason=reason, run_type="skip"))
        return results

    def _skip(self, key: str, reason: str, error: RatuiError | None) -> RunResult:
        """A pipeline that does not run gets a run record saying why (a queued one is updated)."""
        record, bus = self._parts.record, self._parts.bus
        run_id = self._queued.pop(key, None)
        if run_id is None:  # never queued: it never gets a branch; observers learn its trigger and batch
            run_id = new_run_id()
            record.create(run_id, key, self.trigger, self._strategy(key), self.id, run_type="skip", ref=self.ref,
                          schedule=self.schedule)
            bus.emit(RunQueued(run_id, key, self.trigger, self.id, self.ref, self.publish_into))
        if run_id not in self.run_ids:
            with self._lock:
                self.run_ids.append(run_id)
        stamp = now_iso()
        record.update(run_id, status="skipped", run_type="skip", reason=reason, started_at=stamp, finished_at=stamp,
                      duration_ms=0, error_code=error.code if error else None,
                      error_message=error.message if error else None, error_hint=error.hint if error else None)
        record.log(run_id, "info", f"skipped: {reason}")
        bus.emit(LogLine(run_id, "info", f"skipped: {reason}"))
        self._parts.in_flight.release(run_id)
        bus.emit(RunFinished(run_id, key, "skipped", 0, 0, error.to_dict() if error else None, reason=reason))
        return RunResult(run_id, key, "skipped", self._strategy(key), error=error.to_dict() if error else None,
                         reason=reason, run_type="skip")

    def _run_pipeline(self, key: str) -> RunResult:
        """Decide whether the pipeline must run; skip it, or execute its run (queued now if it was not)."""
        parts = self._parts
        pipeline = self._compiled.pipelines[key]
        try:
            decision = parts.decider.decide(pipeline, force=self.force, full_refresh=self.full_refresh, ref=self.ref)
        except Exception as exc:  # deciding reads files and SQLite: never lose the run over it
            decision = Decision(key, strategy_run_type(pipeline), f"change detection failed ({exc}); running")
        if not decision.runs:
            return self._skip(key, decision.reason, None)
        run_id = self._queued.pop(key, None) or self._queue(key)
        with self._lock:
            self.in_flight.append(run_id)
        try:
            parts.record.update(run_id, run_type=decision.run_type, reason=decision.reason)
            parts.bus.emit(RunDecided(run_id, key, decision.run_type, decision.reason))
            if self._cancelled.is_set():
                parts.in_flight.cancel_here(run_id)  # cancelled between its queueing and its start: it stops at once
            control = parts.in_flight.begin(run_id)
            try:
                from ratui.engine.run.executor import RunExecutor  # Spark, PyIceberg: loaded when a run needs them

                result = RunExecutor(parts.state, parts.bus, parts.record, run_id, key, control, self.full_refresh,
                                     self._compiled, target=self.ref,
                                     interval=self.intervals.get(key)).execute()
            finally:
                parts.in_flight.release(run_id)
        finally:
            with self._lock:
                self.in_flight.remove(run_id)
        result.run_type, result.reason = decision.run_type, decision.reason
        return result

    def _not_started(self, run_id: str, reason: str) -> None:
        """A queued run its invocation never started: cancelled, with the reason."""
        record = self._parts.record
        error = RatuiError("RAT-RUN-001", f"run {run_id} was not started: {reason}")
        if record.claim_unfinished(run_id, status="cancelled", finished_at=now_iso(), reason=reason,
                                   error_code=error.code, error_message=error.message, error_hint=error.hint):
            run = record.history.get_run(run_id)
            record.log(run_id, "warning", f"not started: {reason}")
            self._parts.bus.emit(RunFinished(run_id, run["pipeline"] if run else "", "cancelled", 0, 0,
                                             error.to_dict()))
        self._parts.in_flight.release(run_id)

    def _finish(self) -> None:
        """A run queued ahead of its turn that never started (the invocation stopped first) ends as cancelled; an
        atomic publish merges its branch, or says why not."""
        try:
            for run_id in self._queued.values():
                self._not_started(run_id, "cancelled before it started" if self.cancelled else
                                  "the invocation stopped before it started")
            self._queued.clear()
            if self._publisher is not None:
                self.publish = self._publisher.finish(self)
        finally:
            self._done.set()
            if self._on_done is not None:
                try:
                    self._on_done(self)
                except Exception:  # an observer's failure is not the invocation's
                    pass
