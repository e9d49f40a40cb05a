"""Watch mode: file changes -> debounced, coalesced, dependency-aware run plans, run through the Engine.

Three pieces:

    WatchFilter        (ignore.py) drops, at the source, every path that must never trigger a run
    plan_for_changes   (plan.py) pure: a compiled project + changed paths -> Plan (which pipelines to run, in
                       order, and why; whether ratui.yaml must be reloaded; the coded errors of broken files)
    Watcher            a watching thread (watchfiles) feeding a worker thread that waits for a quiet period
                       (the debounce, default 300 ms from ratui.yaml `watch.debounce_ms`), plans, and runs

Coalescing falls out of the design: the worker takes every change seen so far as one batch, so a burst of
saves is one plan with each pipeline once, and all the saves made while a batch runs become exactly one
follow-up plan after it. Nothing here raises into the watcher's threads: a broken file is reported with its
coded error and the watcher waits for the next save; a runner that raises is reported and forgotten.

Observers subscribe to `Watcher.bus` (or pass `on_event`) and receive the Watch* events of engine/events.py, from
the watcher's threads: they must be quick and thread-safe, as for the engine's own events. Watch mode runs above the
engine: it reaches it through the Engine facade only.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

from ratui.engine.errors import RatuiError
from ratui.engine.events import (
    EventBus, WatchErrors, WatchEvent, WatchFailed, WatchPlanFinished, WatchPlanStarted, WatchReloaded,
    WatchRunResult, WatchStarted, WatchState, WatchStopped,
)
from ratui.engine.landing.local import landing_folder
from ratui.engine.landing.zone import configured_zones
from ratui.engine.project.compiler import CompiledProject, compile_project, recompile
from ratui.engine.project.settings import SETTINGS_FILE, Settings, load_settings
from ratui.engine.watch.ignore import WatchFilter, is_ignored, rel_parts
from ratui.engine.watch.plan import Plan, plan_for_changes

log = logging.getLogger("ratui.watch")

RunKeys = Callable[[list[str]], list]


class Watcher:
    """Watch a project tree and run what each change affects.

        watcher = Watcher(root)                          # its own Engine
        watcher = Watcher(engine=engine, on_event=print)   # an existing Engine (the console's)
        watcher = Watcher(root, run_keys=recorder)         # any runner: list of keys -> list of results
        watcher.start(); ...; watcher.stop()               # start/stop as often as you like (a toggle)

    `debounce_ms` (default: ratui.yaml `watch.debounce_ms`, 300) is a quiet period: a plan is made that long
    after the last relevant change. One plan runs at a time on the worker thread; changes made meanwhile
    wait and become the next plan.
    """

    def __init__(self, root: Path | str | None = None, *, engine: Any = None, run_keys: RunKeys | None = None,
                 debounce_ms: int | None = None, on_event: Callable[[WatchEvent], None] | None = None,
                 step_ms: int = 50, ref: str | Callable[[], str] = "main"):
        if engine is None and root is None:
            raise ValueError("Watcher needs a project root or an engine")
        if engine is None and run_keys is None:
            from ratui.engine.facade.engine import Engine

            engine = Engine.open(Path(str(root)))
            engine.recover()
        self.engine = engine
        # the branch plans run on: a name, or a callable read at each plan (the console's working ref)
        self.ref: Callable[[], str] = ref if callable(ref) else (lambda: ref)  # type: ignore[assignment]
        self.settings: Settings = engine.settings if engine is not None else load_settings(Path(str(root)))
        self.root = self.settings.root
        self._fixed_debounce = debounce_ms
        self.debounce_ms = debounce_ms if debounce_ms is not None else self.settings.watch_debounce_ms
        self.step_ms = step_ms
        self._run_keys = run_keys
        self.bus: EventBus[WatchEvent] = EventBus()
        if on_event is not None:
            self.bus.subscribe(on_event)
        self.filter = WatchFilter(self.root)
        self._cond = threading.Condition()
        self._changes: dict[str, Any] = {}  # path -> latest watchfiles Change
        self._last_change = 0.0
        self._plan_lock = threading.Lock()  # one plan at a time, across start/stop generations
        self._stop = threading.Event()  # this generation's; a new one per start()
        self._stop.set()
        self._threads: list[threading.Thread] = []
        self._state = "stopped"
        self._state_lock = threading.Lock()
        self._streamed: set[int] = set()
        self._invocation = None  # the engine invocation of the plan in flight
        # the last compile while watching: a save recompiles only its pipeline (compiler.recompile); None after a
        # stop (changes made while not watching were not seen)
        self._compiled: CompiledProject | None = None

    # ------------------------------------------------------------------------------------ public

    @property
    def state(self) -> str:
        """stopped | watching | pending (changes waiting for the quiet period) | running (a plan runs)."""
        return self._state

    @property
    def running(self) -> bool:
        """Watching now (started and not stopped)."""
        return not self._stop.is_set() and any(t.is_alive() for t in self._threads)

    def subscribe(self, listener: Callable[[WatchEvent], None]) -> Callable[[], None]:
        return self.bus.subscribe(listener)

    def start(self, timeout: float = 10.0) -> "Watcher":
        """Start watching; returns once the file system watch is in place (at most `timeout` s; a UI may
        pass 0 and not wait: changes in the first few milliseconds may then go unseen)."""
        if self.running:
            return self
        stop, ready = threading.Event(), threading.Event()
        self._stop = stop
        with self._cond:
            self._changes.clear()
        self._compiled = None
        watching = threading.Thread(target=self._watch_loop, args=(stop, ready), name="ratui-watch", daemon=True)
        worker = threading.Thread(target=self._work_loop, args=(stop,), name="ratui-watch-worker", daemon=True)
        poller = threading.Thread(target=self._poll_loop, args=(stop,), name="ratui-watch-s3", daemon=True)
        self._threads = [watching, worker, poller]
        watching.start()
        ready.wait(timeout)
        poller.start()
        self.bus.emit(WatchStarted(str(self.root), self.debounce_ms))
        self._set_state("watching")
        worker.start()
        return self

    def stop(self, *, cancel_runs: bool = True, timeout: float = 30.0) -> None:
        """Stop watching. A plan in flight ends after its current run, which is cancelled if `cancel_runs`;
        waits up to `timeout` s for that (a UI may pass 0: the threads then finish on their own)."""
        stop, threads = self._stop, self._threads
        was_running = not stop.is_set()
        stop.set()
        with self._cond:
            self._cond.notify_all()
        invocation = self._invocation
        if cancel_runs and invocation is not None:  # only the watcher's own runs, never the console's or another's
            try:
                invocation.cancel()
            except Exception:  # stopping must not fail
                log.exception("could not cancel the watch plan's runs")
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._set_state("stopped")
        if was_running:
            self.bus.emit(WatchStopped())

    def __enter__(self) -> "Watcher":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def add_changes(self, changes: Iterable[tuple[Any, str]], at: float | None = None) -> None:
        """Feed changes (watchfiles' (Change, path) pairs) seen at monotonic time `at` (default: now)."""
        kept = [(c, p) for c, p in changes if not is_ignored(self.root, p)]
        if not kept:
            return
        with self._cond:
            for change, path in kept:
                self._changes[path] = change
            self._last_change = max(self._last_change, time.monotonic() if at is None else at)
            self._cond.notify_all()

    # ------------------------------------------------------------------------------------ threads

    def _set_state(self, state: str) -> None:
        with self._state_lock:
            if state == self._state:
                return
            self._state = state
        self.bus.emit(WatchState(state))

    def _watch_loop(self, stop: threading.Event, ready: threading.Event) -> None:
        import watchfiles

        while not stop.is_set():
            try:
                for changes in watchfiles.watch(
                    self.root, watch_filter=self.filter, step=self.step_ms, debounce=max(200, 4 * self.step_ms),
                    stop_event=stop, rust_timeout=100, yield_on_timeout=True, raise_interrupt=False,
                ):
                    ready.set()  # the first (timeout) yield: the OS watch is in place
                    if changes:
                        # watchfiles yields after `step` ms without any event: the last one is that old
                        self.add_changes(changes, at=time.monotonic() - self.step_ms / 1000)
            except Exception as exc:  # the folder vanished, too many watches, ...: say so, try again
                ready.set()
                self.bus.emit(WatchFailed(f"watching {self.root} failed: {type(exc).__name__}: {exc}",
                                          traceback.format_exc()))
                stop.wait(1.0)

    def _poll_loop(self, stop: threading.Event) -> None:
        """Object-store zones cannot be watched: list each one every `watch.poll_seconds` and turn what changed
        (new, rewritten or deleted objects) into changes of the zone's files, as a saved file would be. Objects
        a run archived are not changes. The first listing is the baseline. A zone that cannot be listed is
        reported once per distinct error and polled again."""
        from watchfiles import Change

        seen: dict[tuple[str, str], dict[str, tuple]] = {}
        reported: dict[tuple[str, str], str] = {}
        while not stop.is_set():
            zones = [z for z in configured_zones(self.settings) if z.polled]
            for zone in zones:
                key = (zone.namespace, zone.name)
                try:
                    now = {f.name: (f.size, f.mtime_ns, f.etag, f.version) for f in zone.list()}
                    reported.pop(key, None)
                except RatuiError as exc:
                    if reported.get(key) != exc.code:
                        reported[key] = exc.code
                        self.bus.emit(WatchFailed(f"cannot poll landing zone {zone.name} ({zone.url}): "
                                                  f"{exc.code} {exc.message}"))
                    continue
                before = seen.get(key)
                seen[key] = now
                if before is None:
                    continue
                folder = landing_folder(self.root, zone.namespace, zone.name)
                changes = [(Change.added if n not in before else Change.modified, str(folder / n))
                           for n in now if before.get(n) != now[n]]
                gone = [n for n in before if n not in now]
                if gone:
                    try:
                        archived = {f.base_name for f in zone.processed()}
                    except RatuiError:
                        archived = set()
                    changes += [(Change.deleted, str(folder / n)) for n in gone if n not in archived]
                if changes:
                    self.add_changes(changes)
            stop.wait(self.settings.watch_poll_seconds if zones else 1.0)

    def _work_loop(self, stop: threading.Event) -> None:
        try:  # compiled once now, so that the first save compiles one pipeline, not the project
            with self._plan_lock:
                if not stop.is_set() and self._compiled is None:
                    self._compiled = compile_project(self.root, self.settings)
        except Exception:  # a broken ratui.yaml: the first plan compiles, and reports it
            self._compiled = None
        while True:
            with self._cond:
                while not stop.is_set():
                    if self._changes:
                        remaining = self._last_change + self.debounce_ms / 1000 - time.monotonic()
                        if remaining <= 0:
                            break
                        self._set_state("pending")
                        self._cond.wait(remaining)
                    else:
                        self._set_state("watching")
                        self._cond.wait()
                if stop.is_set():
                    return
                changes, self._changes = self._changes, {}
            try:
                with self._plan_lock:
                    if not stop.is_set():
                        self._handle([(c, p) for p, c in changes.items()], stop)
            except Exception as exc:  # never let the worker die
                self.bus.emit(WatchFailed(f"watch plan failed: {type(exc).__name__}: {exc}", traceback.format_exc()))

    # ------------------------------------------------------------------------------------ one batch

    def make_plan(self, changes: Iterable[tuple[Any, str] | str | Path]) -> Plan:
        """Reload ratui.yaml if it changed, compile, and plan (no run)."""
        changes = list(changes)
        reload_errors: list[RatuiError] = []
        if any(rel_parts(self.root, c[1] if isinstance(c, tuple) else c) == (SETTINGS_FILE,) for c in changes):
            try:
                self._reload()
            except RatuiError as exc:  # keep the previous settings; the next save of ratui.yaml retries
                reload_errors.append(exc)
        compiled = None
        if self._compiled is not None and not reload_errors and self._compiled.settings is self.settings:
            paths = [Path(c[1] if isinstance(c, tuple) else c) for c in changes]
            compiled = recompile(self._compiled, [p if p.is_absolute() else self.root / p for p in paths])
        if compiled is None:
            compiled = compile_project(self.root, self.settings)
        self._compiled = compiled
        plan = plan_for_changes(compiled, self.root, changes)
        plan.errors[:0] = reload_errors
        return plan

    def _reload(self) -> None:
        new = load_settings(self.root)
        old = self.settings
        notes = []
        if (new.spark_master, new.spark_remote, new.spark_config) != \
                (old.spark_master, old.spark_remote, old.spark_config):
            notes.append("Spark settings take effect when ratui restarts (the SparkSession is shared)")
        self.settings = new
        if self.engine is not None:
            self.engine.apply_settings(new)
        if self._fixed_debounce is None:
            self.debounce_ms = new.watch_debounce_ms
        self.bus.emit(WatchReloaded(self.debounce_ms, tuple(notes)))

    def _handle(self, changes: list[tuple[Any, str]], stop: threading.Event) -> None:
        plan = self.make_plan(changes)
        if plan.errors:
            self.bus.emit(WatchErrors(tuple(plan.errors), tuple(plan.changed), tuple(plan.blocked)))
        if not plan.keys or stop.is_set():
            return
        self._set_state("running")
        self.bus.emit(WatchPlanStarted(tuple(plan.keys), dict(plan.reasons), tuple(plan.changed)))
        began = time.monotonic()
        results: list[Any] = []
        error = None
        self._streamed = set()
        try:
            results = list(self._run(plan.keys, stop) or [])
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.bus.emit(WatchFailed(f"the run of {', '.join(plan.keys)} raised {error}", traceback.format_exc()))
        if error is None and stop.is_set():
            error = "stopped"
        for result in results:
            if id(result) not in self._streamed:
                self.bus.emit(WatchRunResult(result))
        self.bus.emit(WatchPlanFinished(tuple(plan.keys), tuple(results), int((time.monotonic() - began) * 1000),
                                        error))

    def _run(self, keys: list[str], stop: threading.Event) -> list:
        if self._run_keys is not None:
            return self._run_keys(keys)

        def on_result(result: Any) -> None:
            self._streamed.add(id(result))
            self.bus.emit(WatchRunResult(result))
            if stop.is_set() and self._invocation is not None:  # stopped: the plan ends after this run
                self._invocation.cancel()

        # the project as this plan compiled it: the invocation and its runs compile it no more
        invocation = self.engine.start(keys, trigger="watch", on_result=on_result, ref=self.ref(),
                                       compiled=self._compiled)
        self._invocation = invocation
        if stop.is_set():  # stopped while the plan was being made
            invocation.cancel()
        try:
            invocation.wait()
        finally:
            self._invocation = None
        return list(invocation.results)
