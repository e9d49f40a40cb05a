"""The ratui console: a Textual App over the engine.

The App owns all UI state. Whatever happens on other threads (engine events, watch events, Spark's state, a batch
ending) reaches it through one channel: the controller queues it and posts one `ControllerEvents` message per
burst; the App applies the whole burst (runs to its `RunStore`, then one `runs_changed` signal: coalesced progress).
Everything that touches SQLite, files, the catalog or Spark runs in a thread worker, never on the event loop; each
worker posts one typed message (messages.py) handled with `@on`. Spark starts on first need (or is pre-warmed
after the first paint) and the status line says so while it starts.

This module is the App's life: boot, the background workers, the event pump and the guard that turns a failing
handler into the error screen. Its other jobs are mixins beside it: the keys, palette, help and moves
(app_keys.py), what it starts and asks before (app_actions.py), what it tells the user (app_notices.py).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Callable

from textual import on
from textual.app import App
from textual.message import Message
from textual.reactive import reactive
from textual.signal import Signal

from ratui.app_actions import Actions
from ratui.app_keys import APP_BINDINGS, ConsoleCommands, Navigation
from ratui.app_notices import Notices
from ratui.console.controller import BatchItem, Controller, EngineItem, SparkItem, WatchItem, utc_now
from ratui.console.follow import StateItem
from ratui.console import screen_specs, user_settings
from ratui.console.live import LiveRun, RunStore
from ratui.engine.errors import RatuiError
from ratui.messages import (
    ControllerEvents, EngineOpened, Failed, ProjectCompiled, ProjectOutlined, QuitReady, ReaperPassDone, ServeToggled,
    ShellEngineRead, SparkWhere, WatchToggled,
)
from ratui.screens.dialogs import CancelRunScreen
from ratui.screens.modes import SCREEN_CLASSES

log = logging.getLogger("ratui.console")

# How often the status line asks again where Spark runs (a cluster's executors come and go).
SPARK_WHERE_SECONDS = 15.0
# How often the status line asks the project's warm engine (the shell's commands') how it is; also when a run ends
# and when another process commits.
SHELL_ENGINE_SECONDS = 10.0

NARROW_BELOW = 110  # columns: the console's compact layout below this width (an 80x24 terminal)


@dataclass
class RunsChange:
    changed: set[str]
    ended: list[LiveRun] = field(default_factory=list)
    started: list[LiveRun] = field(default_factory=list)


class RatuiApp(Navigation, Actions, Notices, App[None]):
    """The console. Its jobs beyond its life are its mixins': Navigation (app_keys.py), Actions (app_actions.py)
    and Notices (app_notices.py); they come before App so their `notify`, `run_action` and `action_quit` are the
    App's."""

    CSS_PATH = "app.tcss"
    TITLE = "ratui"
    # below 110 columns every screen gets `-narrow` (app.tcss): panes stack or share the width, labels shorten
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]
    MODES = {spec.mode: SCREEN_CLASSES[spec.mode] for spec in screen_specs.SCREENS}
    DEFAULT_MODE = "pipelines"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    BINDINGS = APP_BINDINGS

    spark_state = reactive("idle")
    spark_where = reactive("")  # where Spark runs and its executors (the status line)
    active_runs = reactive(0)
    project_name = reactive("")
    watch_mode = reactive("off")  # off | starting | watching | pending | running | stopping (the status line)
    serving = reactive("")  # the Iceberg REST catalog's URL while the console serves it (the status line), else ""
    # the project's warm engine, which serves the shell's commands (console/shell_engine.py); None until first read
    shell_engine = reactive(None, always_update=True)

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = utc_now, prewarm: bool = False, spark_state: str | None = None,
                 blink: bool = True, controller: Controller | None = None, reaper_schedule: bool = True,
                 reaper_interval: float | None = None, read_only: bool = False,
                 shell_engine_seconds: float = SHELL_ENGINE_SECONDS) -> None:
        super().__init__()
        self.root = Path(root)
        self.clock = clock
        self.now = now
        self.prewarm = prewarm
        self.fixed_spark_state = spark_state
        self.cursor_blink = blink
        self.controller = controller or Controller(self.root, clock=clock, now=now, read_only=read_only)
        self.read_only = self.controller.read_only  # looks only: every change is refused (status line says so)
        self.store = RunStore()
        self.compiled = None
        self.outline = None  # the last compile's outline (engine/project/outline.py) until this one's compile
        self._outline_tried = False
        self.marks: dict[str, float] = {}
        self.crashes: list[BaseException] = []
        self.notices: deque[str] = deque(maxlen=100)  # every toast shown, newest last
        self.project_loaded: Signal = Signal(self, "project-loaded")
        self.runs_changed: Signal = Signal(self, "runs-changed")
        self.state_changed: Signal = Signal(self, "state-changed")  # other processes' commits (follow.py)
        self.others_active = 0  # runs in flight in other processes
        self._last_error: tuple[str, float] | None = None
        self.project_failed: Signal = Signal(self, "project-failed")
        self.project_outlined: Signal = Signal(self, "project-outlined")  # the last compile's outline, at launch
        self.boot_error: BaseException | None = None
        self._closing = False
        self._forced_full_refresh: set[str] = set()
        self._engine_opening = False
        self.reaper_changed: Signal = Signal(self, "reaper-changed")
        self.reaper_schedule = reaper_schedule and not self.read_only  # off in tests that do not ask for it
        self.reaper_interval = reaper_interval  # seconds; default: ratui.yaml reaper.interval_minutes
        self._reaper_timer = None
        self.shell_engine_seconds = shell_engine_seconds
        self._shell_engine_asking = False  # a question to the engine is out (one at a time)
        self._shell_engine_again = False  # and it was asked for again meanwhile
        self.set_reactive(RatuiApp.project_name, self.root.name)
        remembered = user_settings.load().get("theme")  # a small file, read once before the first paint
        if remembered in ("textual-dark", "textual-light"):
            self.theme = remembered

    # ------------------------------------------------------------------------------------------- boot

    def on_mount(self) -> None:
        self.mark("mounted")
        if self.fixed_spark_state is not None:
            self.spark_state = self.fixed_spark_state
        elif self.controller.spark_started():
            self.spark_state = "ready"
        self._boot()
        if self.fixed_spark_state is None:
            self._ask_spark_where()
            # executors come and go (a cluster's Worker lost or added): ask again now and then while Spark is up
            self.set_interval(SPARK_WHERE_SECONDS, self._ask_spark_where_if_ready, name="spark-where")
        self._ask_shell_engine()
        self.set_interval(self.shell_engine_seconds, self._ask_shell_engine, name="shell-engine")

    def _ask_spark_where(self) -> None:
        if self.fixed_spark_state is None and not self._closing:
            self.background(self.controller.spark_where, SparkWhere, "asking where Spark runs", group="spark-where",
                            exclusive=True)

    def _ask_spark_where_if_ready(self) -> None:
        if self.spark_state == "ready":
            self._ask_spark_where()

    @on(SparkWhere)
    def _spark_where(self, message: SparkWhere) -> None:
        self.spark_where = message.value or ""

    def _ask_shell_engine(self) -> None:
        """Ask the project's warm engine how it is (its socket, on a worker: never on the event loop). One question
        at a time: asked again while one is out, it is asked once more when the answer comes."""
        if self._closing:
            return
        if self._shell_engine_asking:
            self._shell_engine_again = True
            return
        self._shell_engine_asking, self._shell_engine_again = True, False
        self.background(self.controller.shell_engine, ShellEngineRead, "asking the shell's warm engine",
                        group="shell-engine")

    def _shell_engine_answered(self) -> None:
        self._shell_engine_asking = False
        if self._shell_engine_again:
            self._ask_shell_engine()

    @on(ShellEngineRead)
    def _shell_engine_read(self, message: ShellEngineRead) -> None:
        self.shell_engine = message.value
        self._shell_engine_answered()

    def background(self, work: Callable[[], Any], done: Callable[[Any], Message], context: str, *,
                   group: str, exclusive: bool = False) -> None:
        """Run `work` in a thread worker; post `done(its result)`, or `Failed` saying what it was doing."""

        def task() -> None:
            try:
                value = work()
            except Exception as error:  # noqa: BLE001 - the error screen or a toast says what happened
                self._post(Failed(error, context, done if isinstance(done, type) else None))
                return
            self._post(done(value))

        self.run_worker(task, name=group, group=group, thread=True, exclusive=exclusive, exit_on_error=False)

    def _post(self, message: Message) -> None:
        if not self._closing:
            try:
                self.post_message(message)
            except Exception:  # the loop has closed: nothing to tell
                pass

    def _boot(self) -> None:
        """Open the project. At launch the last compile's outline is read first (a small file, nothing of the
        engine imported) and drawn, then the compile starts: the two in parallel would share one interpreter's
        time and both come later."""
        if self.compiled is None and self.outline is None and not self._outline_tried:
            self._outline_tried = True
            self.background(self.controller.outline, ProjectOutlined, "reading the project's outline",
                            group="outline")
        else:
            self._compile_at_boot()

    def _compile_at_boot(self) -> None:
        self.background(partial(self.controller.boot, self._controller_notify), ProjectCompiled,
                        f"opening the project {self.root.name}", group="boot")

    def _controller_notify(self) -> None:
        """On any thread: items are waiting in the controller's queue (called once per burst)."""
        self._post(ControllerEvents())

    def on_ready(self) -> None:
        self.mark("first_paint")
        if self.prewarm and self.fixed_spark_state is None:
            self.set_timer(0.5, self._prewarm)

    def _prewarm(self) -> None:
        """Start Spark in the background after the first paint, so the first run does not wait ~10 s."""
        import threading

        if self.controller.spark_started() or self.compiled is None:
            if self.compiled is None and self.boot_error is None:
                self.set_timer(0.5, self._prewarm)
            return

        def warm() -> None:
            try:
                self.controller.prewarm_spark()
            except Exception as exc:  # shown in the status line; the next run reports the error with its code
                log.warning("Spark pre-warm failed: %s", exc)

        threading.Thread(target=warm, name="ratui-spark-prewarm", daemon=True).start()

    def mark(self, name: str) -> None:
        """Record when something first happened (the first-paint benchmark reads these)."""
        self.marks.setdefault(name, time.perf_counter())
        if name.endswith("_ready"):
            self._open_engine()

    def _open_engine(self) -> None:
        if not self._engine_opening and self.compiled is not None:
            self._engine_opening = True
            self.background(self.controller.open_engine, EngineOpened, "opening the engine (catalog)", group="engine")

    # ------------------------------------------------------------------------------- background results

    @on(ProjectCompiled)
    def _compiled(self, message: ProjectCompiled) -> None:
        self._project_compiled(message.value)
        if message.reloaded and not message.automatic:
            self.notify("Project reloaded.", timeout=2)
        else:  # the heavy imports wait until the first screen has its data (or a second has passed)
            self.set_timer(1.0, self._open_engine)

    @on(ProjectOutlined)
    def _outlined(self, message: ProjectOutlined) -> None:
        if self.compiled is None and message.value is not None:
            self.outline = message.value
            self.project_outlined.publish(message.value)
            self.call_after_refresh(self._compile_at_boot)  # once the tree drawn from it is on screen
        else:
            self._compile_at_boot()

    @on(EngineOpened)
    def _engine_opened(self, _message: EngineOpened) -> None:
        self.mark("engine_open")

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        error, kind = message.error, message.kind
        if kind is ProjectOutlined:  # no outline to draw (it is only a picture): compile
            self._compile_at_boot()
            return
        if kind is ShellEngineRead:  # the status line keeps what it said last; the next period asks again
            log.warning("asking the shell's warm engine failed: %s", error)
            self._shell_engine_answered()
            return
        if kind is ProjectCompiled and self.compiled is None:
            self.boot_error = error
            self.project_failed.publish(error)
        elif kind is WatchToggled:
            self.watch_mode = "off"
        elif kind is ServeToggled:
            self.serving = ""
        elif kind is QuitReady:  # quitting anyway: the runs end with the process, their branches are reaped
            self.exit()
            return
        elif isinstance(error, RatuiError) and error.code.startswith("RAT-ACC"):  # refused, not broken: a toast
            self.notify(f"{error.code} {error.message}", title="Read-only console", severity="warning", timeout=6,
                        markup=False)
            return
        elif kind is ReaperPassDone:
            code = f"{error.code} " if isinstance(error, RatuiError) else ""
            self.notify(f"{code}{error}", title="Scheduled reaper failed", severity="error", timeout=10,
                        markup=False)
            return
        self.show_error(error, message.context)

    def _project_compiled(self, compiled) -> None:
        self.compiled = compiled
        self.mark("compiled")
        self._schedule_reaper()
        self.project_loaded.publish(compiled)

    def retry_boot(self) -> None:
        self.boot_error = None
        self._boot()

    def reload_project(self, automatic: bool = False) -> None:
        if self.compiled is None:
            return
        self.background(self.controller.compile, partial(ProjectCompiled, reloaded=True, automatic=automatic),
                        "reloading the project", group="compile", exclusive=True)

    def on_unmount(self) -> None:
        self._closing = True
        if self._reaper_timer is not None:
            self._reaper_timer.stop()
        self.controller.close()

    # ----------------------------------------------------------------------------------------- events

    @on(ControllerEvents)
    def _controller_events(self, _message: ControllerEvents) -> None:
        """Everything that arrived in the controller's queue since the last time, in order of arrival."""
        items = self.controller.drain()
        runs = [item for item in items if isinstance(item, EngineItem)]
        if runs:
            self._apply_runs(runs)
        for item in items:
            if isinstance(item, WatchItem):
                self._on_watch_event(item.event)
            elif isinstance(item, SparkItem):
                if self.fixed_spark_state is None:
                    self.spark_state = item.state
                    self._ask_spark_where()
            elif isinstance(item, BatchItem):
                self._batch_done(item.batch)
            elif isinstance(item, StateItem):
                self._state_changed(item)

    def _state_changed(self, item: StateItem) -> None:
        """Another process committed (runs, branches, ledger, reaper), or the project tree changed on disk."""
        if item.kind == "project":
            self.reload_project(automatic=True)
            return
        self.others_active = item.others_active
        self.active_runs = len(self.store.active()) + self.others_active
        self.state_changed.publish(item)
        self._ask_shell_engine()  # another process committed: perhaps a command the warm engine ran

    def _apply_runs(self, items: list[EngineItem]) -> None:
        known = set(self.store.runs)
        changed, ended = self.store.apply(items)
        started = [self.store.runs[r] for r in changed if r not in known]
        for run in started:
            if run.strategy is None:
                batch = self.controller.batches.get(run.batch or "")
                forced = bool(batch and batch.full_refresh) or run.run_id in self._forced_full_refresh
                run.strategy = self._strategy(run.pipeline, forced)
        self.active_runs = len(self.store.active()) + self.others_active
        if ended and self.spark_state == "starting" and self.fixed_spark_state is None:
            if not self.controller.spark_started():  # the run gave up on a Spark that never came up
                self.spark_state = "failed"
        self.runs_changed.publish(RunsChange(changed, ended, started))
        if ended:
            self._ask_shell_engine()
        for run in ended:
            self._toast(run)
        screen = self.screen
        if ended and isinstance(screen, CancelRunScreen):
            runs = [self.store.get(r) for r in screen.run_ids]
            if all(r is None or r.finished for r in runs):  # nothing left to stop: the question is moot
                screen.dismiss(False)
                self.notify("The run ended before it was stopped.", title="Nothing to stop", timeout=4)

    def _strategy(self, key: str, full_refresh: bool) -> str | None:
        if full_refresh:
            return "full_refresh"
        pipeline = self.compiled.pipelines.get(key) if self.compiled else None
        return pipeline.config.merge_strategy if pipeline is not None and pipeline.config else None

    # ----------------------------------------------------------------------------------------- errors

    async def _dispatch_message(self, message) -> None:
        """Same guard as the screens' (screens/base.py Guarded): a failing handler shows the error screen."""
        try:
            await super()._dispatch_message(message)
        except Exception as error:  # noqa: BLE001
            if self._closing or not self.screen_stack:
                raise
            self.crashes.append(error)
            self.show_error(error, f"handling {type(message).__name__}")

    def _handle_exception(self, error: Exception) -> None:
        """An exception nothing handled: show the error screen instead of crashing, when the App can still draw.

        (Textual's hook; an exception before the first screen is up still exits with the traceback.)"""
        from textual.worker import WorkerFailed

        original = error.error if isinstance(error, WorkerFailed) else error
        if self.is_running and not self._closing and self._exit_renderables == [] and self.screen_stack:
            try:
                self.crashes.append(original)
                self.show_error(original, "unexpected error")
                return
            except Exception:
                pass
        super()._handle_exception(error)


def _configure_logging(root: Path) -> None:
    """Warnings from any thread go to .ratui/logs/console.log: never to the terminal Textual draws on."""
    path = root / ".ratui" / "logs"
    path.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path / "console.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root_logger = logging.getLogger()
    root_logger.addHandler(handler)
    if root_logger.level > logging.INFO or root_logger.level == logging.NOTSET:
        root_logger.setLevel(logging.WARNING)


def _dump_threads_on_sigusr1(root: Path) -> None:
    """`kill -USR1 PID` writes every thread's stack to .ratui/logs/console.log (a console that seems stuck can
    say where it is, without stopping it)."""
    import faulthandler
    import signal

    if not hasattr(signal, "SIGUSR1"):
        return
    try:
        stream = (root / ".ratui" / "logs" / "console.log").open("a", encoding="utf-8")
    except OSError:
        return
    faulthandler.register(signal.SIGUSR1, file=stream, all_threads=True)


def run_app(root: Path, read_only: bool = False) -> None:
    """`ratui` / `ratui tui --project DIR`: open the console on the project at `root` (`read_only`: it looks, it
    changes nothing)."""
    root = Path(root).resolve()
    _configure_logging(root)
    _dump_threads_on_sigusr1(root)
    app = RatuiApp(root, prewarm=True, read_only=read_only)
    app.run()
    app.controller.finish_serving()  # the shell's commands it served, cancelled on the way out, end here
