"""The ratui console: a Textual App over the engine.

The App owns all UI state. Whatever happens on other threads (engine events, watch events, Spark's state, a batch
ending) reaches it through one channel: the controller queues it and posts one `ControllerEvents` message per
burst; the App applies the whole burst (runs to its `RunStore`, then one `runs_changed` signal: coalesced progress).
Everything that touches SQLite, files, the catalog or Spark runs in a thread worker, never on the event loop; each
worker posts one typed message (messages.py) handled with `@on`. Spark starts on first need (or is pre-warmed
after the first paint) and the status line says so while it starts.
"""

from __future__ import annotations

import logging
import re
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Callable

from rich.text import Text
from textual import on
from textual.app import App
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.message import Message
from textual.reactive import reactive
from textual.signal import Signal

from ratui.console.controller import (
    BatchItem, Controller, EngineItem, SparkItem, WatchItem, read_only_refusal, utc_now,
)
from ratui.console.follow import StateItem
from ratui.console.format import batch_summary, fmt_ms, short_key
from ratui.console import screen_specs, user_settings
from ratui.console.live import LiveRun, RunStore
from ratui.engine.errors import RatuiError
from ratui.messages import (
    BatchLaunched, CancelOutcomes, ControllerEvents, EngineOpened, Failed, ProjectCompiled, QuitReady, ReaperPassDone,
    RunLaunched, RunLookedUp, SparkWhere, ThemeSaved, WatchToggled,
)
from ratui.screens.branches import BranchesScreen
from ratui.screens.dialogs import CancelRunScreen, ConfirmScreen, ErrorScreen, HelpScreen, JumpScreen
from ratui.screens.history import HistoryScreen
from ratui.screens.landing import LandingScreen
from ratui.screens.lineage import LineageScreen
from ratui.screens.logs import SparkLogScreen
from ratui.screens.pipelines import PipelinesScreen
from ratui.screens.quality import QualityScreen
from ratui.screens.query import QueryScreen
from ratui.screens.reaper import ReaperScreen
from ratui.screens.run import RunScreen
from ratui.screens.runs import RunsScreen

log = logging.getLogger("ratui.console")

# How often the status line asks again where Spark runs (a cluster's executors come and go).
SPARK_WHERE_SECONDS = 15.0

NARROW_BELOW = 110  # columns: the console's compact layout below this width (an 80x24 terminal)

# what `:` takes for a run id: its time-ordered digits and hex (run ids are 18 characters; a prefix of 6 will do)
RUN_ID_LIKE = re.compile(r"^[0-9]{6}[0-9a-f]{0,12}$")

SCREEN_ALIASES = screen_specs.ALIASES

KEY_NAMES = {
    "plus": "+", "slash": "/", "colon": ":", "question_mark": "?", "escape": "esc", "right_square_bracket": "]",
    "left_square_bracket": "[", "space": "space", "enter": "enter", "backspace": "backspace",
}


def key_text(binding: Binding) -> str:
    keys = [k.strip() for k in binding.key.split(",")]
    return " / ".join(KEY_NAMES.get(k, k) for k in keys)


@dataclass
class RunsChange:
    changed: set[str]
    ended: list[LiveRun] = field(default_factory=list)
    started: list[LiveRun] = field(default_factory=list)


# ------------------------------------------------------------------------------------------ command palette


class ConsoleCommands(Provider):
    """The console's commands: run, cancel, open a screen, reload, toggle theme."""

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        app: RatuiApp = self.app  # type: ignore[assignment]
        commands: list[tuple[str, str, Callable[[], Any]]] = [
            *[(f"Open {spec.title}", f"{spec.summary} ({spec.key})", partial(app.action_open, spec.mode))
              for spec in screen_specs.SCREENS],
            ("Toggle watch", "run what each file save affects (w)", app.action_toggle_watch),
            ("Toggle theme", "switch between dark and light", app.action_toggle_theme),
            ("Reload project", "re-read the project files (ctrl+r on Pipelines)", app.reload_project),
            ("Help: all keys", "every key binding, per screen (?)", app.action_help),
        ]
        compiled = app.compiled
        if compiled is not None:
            commands.append(("Run all pipelines", "every pipeline in dependency order",
                             partial(app.run_batch, compiled.graph.order(), "all pipelines")))
            for key in compiled.graph.order():
                name = short_key(key, compiled.settings.namespace)
                commands.append((f"Run {name}", key, partial(app.run_pipeline, key)))
                chosen = compiled.graph.order({key, *compiled.graph.descendants(key)})
                if len(chosen) > 1:
                    commands.append((f"Run {name}+ (with descendants)", f"{len(chosen)} pipelines",
                                     partial(app.run_batch, chosen, f"{name}+")))
                commands.append((f"Full refresh {name}", f"rebuild {key} from scratch",
                                 partial(app.run_pipeline, key, True)))
        for run in app.store.active():
            commands.append((f"Cancel run {run.run_id} ({run.pipeline})", "asks for confirmation",
                             partial(app.confirm_cancel, [run.run_id])))
        return commands

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            if name.startswith(("Open", "Toggle", "Reload", "Run all", "Cancel", "Help")):
                yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, text=name, help=help_text)


# ---------------------------------------------------------------------------------------------------- app


# the screen classes of the modes screen_specs.py declares (each class says its MODE)
SCREEN_CLASSES = {cls.MODE: cls for cls in (PipelinesScreen, RunsScreen, QualityScreen, BranchesScreen, LandingScreen,
                                            ReaperScreen, QueryScreen, LineageScreen, SparkLogScreen)}
if set(SCREEN_CLASSES) != set(screen_specs.BY_MODE):
    raise RuntimeError(f"screen classes {sorted(SCREEN_CLASSES)} != screen specs {sorted(screen_specs.BY_MODE)}")


class RatuiApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "ratui"
    # below 110 columns every screen gets `-narrow` (app.tcss): panes stack or share the width, labels shorten
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]
    MODES = {spec.mode: SCREEN_CLASSES[spec.mode] for spec in screen_specs.SCREENS}
    DEFAULT_MODE = "pipelines"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    BINDINGS = [
        *[Binding(spec.key, f"open('{spec.mode}')", spec.title, id=f"app.{spec.mode}", show=False)
          for spec in screen_specs.SCREENS],
        Binding("w", "toggle_watch", "Watch", id="app.watch"),
        Binding("colon", "jump", "Jump", id="app.jump", key_display=":"),
        Binding("question_mark", "help", "Help", id="app.help", key_display="?"),
        Binding("ctrl+t", "toggle_theme", "Theme", id="app.theme", show=False),
        Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True, show=False),  # in ? and the palette
    ]

    spark_state = reactive("idle")
    spark_where = reactive("")  # where Spark runs and its executors (the status line)
    active_runs = reactive(0)
    project_name = reactive("")
    watch_mode = reactive("off")  # off | starting | watching | pending | running | stopping (the status line)

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = utc_now, prewarm: bool = False, spark_state: str | None = None,
                 blink: bool = True, controller: Controller | None = None, reaper_schedule: bool = True,
                 reaper_interval: float | None = None, read_only: bool = False) -> None:
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
        self.marks: dict[str, float] = {}
        self.crashes: list[BaseException] = []
        self.notices: deque[str] = deque(maxlen=100)  # every toast shown, newest last
        self.project_loaded: Signal = Signal(self, "project-loaded")
        self.runs_changed: Signal = Signal(self, "runs-changed")
        self.state_changed: Signal = Signal(self, "state-changed")  # other processes' commits (follow.py)
        self.others_active = 0  # runs in flight in other processes
        self._last_error: tuple[str, float] | None = None
        self.project_failed: Signal = Signal(self, "project-failed")
        self.boot_error: BaseException | None = None
        self._closing = False
        self._forced_full_refresh: set[str] = set()
        self._engine_opening = False
        self.reaper_changed: Signal = Signal(self, "reaper-changed")
        self.reaper_schedule = reaper_schedule and not self.read_only  # off in tests that do not ask for it
        self.reaper_interval = reaper_interval  # seconds; default: ratui.yaml reaper.interval_minutes
        self._reaper_timer = None
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

    @on(EngineOpened)
    def _engine_opened(self, _message: EngineOpened) -> None:
        self.mark("engine_open")

    @on(RunLaunched)
    def _run_launched(self, message: RunLaunched) -> None:
        run_id, key, full_refresh = message.value
        live = self.store.get(run_id)
        if live is not None:
            live.strategy = self._strategy(key, full_refresh)
        elif full_refresh:  # its events have not arrived yet
            self._forced_full_refresh.add(run_id)
        self.open_run(run_id)

    @on(CancelOutcomes)
    def _cancelled(self, message: CancelOutcomes) -> None:
        for run_id, outcome in message.value:
            if outcome == "requested":
                self.notify(f"Cancelling run {run_id}: it stops at its next checkpoint; main is unchanged.",
                            title="Cancel", timeout=4, markup=False)
            elif outcome == "finished":
                self.notify(f"Run {run_id} had already finished.", severity="warning", markup=False)
            else:
                self.notify(f"Run {run_id} is not running in this console.", severity="warning", markup=False)

    @on(WatchToggled)
    def _watch_toggled(self, message: WatchToggled) -> None:
        self.watch_mode = self._watch_mode(message.value)

    @on(ReaperPassDone)
    def _scheduled_reap_done(self, message: ReaperPassDone) -> None:
        self.reaper_finished(message.value, scheduled=True)

    @on(QuitReady)
    def _quit_ready(self, _message: QuitReady) -> None:
        self.exit()

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        error, kind = message.error, message.kind
        if kind is ProjectCompiled and self.compiled is None:
            self.boot_error = error
            self.project_failed.publish(error)
        elif kind is WatchToggled:
            self.watch_mode = "off"
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

    def _toast(self, run: LiveRun) -> None:
        screen = self.screen
        if isinstance(screen, RunScreen) and screen.run_id == run.run_id:
            return  # it is on screen already
        name = short_key(run.pipeline, run.pipeline.split(".")[0])
        if run.status == "success":
            extra = f", {run.warnings} quality warning(s)" if run.warnings else ""
            self.notify(f"{name} succeeded in {fmt_ms(run.duration_ms)}: {run.rows_written or 0:,} rows{extra}.",
                        title="Run finished", severity="warning" if run.warnings else "information", markup=False)
        elif run.status == "failed":
            code = (run.error or {}).get("code", "")
            self.notify(f"{name} failed: {code} {(run.error or {}).get('message', '')}", title="Run failed",
                        severity="error", timeout=10, markup=False)
        elif run.status == "cancelled":
            self.notify(f"{name} was cancelled; main is unchanged.", title="Run cancelled", severity="warning",
                        markup=False)
        elif run.outcome == "upstream":
            self.notify(f"{name} was not run: {run.reason or 'an upstream run failed'}.", title="Run skipped",
                        severity="warning", markup=False)
        elif run.outcome == "unchanged" and not run.batch:
            # a batch reports its unchanged pipelines together; a single run says why nothing ran, and what to do
            self.notify(f"{name}: nothing to do, {run.reason or 'unchanged'}. F forces a run.", title="Unchanged",
                        markup=False)

    # ------------------------------------------------------------------------------------------ watch

    @staticmethod
    def _watch_mode(state: str) -> str:
        return "off" if state in ("stopped", "off") else state

    def action_toggle_watch(self) -> None:
        if self.watch_mode in ("starting", "stopping"):
            return
        if self.watch_mode == "off":
            if self.refuse_read_only("watch mode (it runs pipelines)"):
                return
            if self.compiled is None:
                self.notify("The project is still opening.", severity="warning")
                return
            self.watch_mode = "starting"
            self.background(self.controller.start_watch, WatchToggled, "starting watch mode", group="watch")
        else:
            self.watch_mode = "stopping"
            self.background(self.controller.stop_watch, WatchToggled, "stopping watch mode", group="watch")

    def _on_watch_event(self, event) -> None:
        from ratui.engine import events as w

        if isinstance(event, w.WatchState):
            # while stopping, a late "watching"/"running" from the threads must not undo the toggle
            if not (self.watch_mode == "stopping" and event.state != "stopped"):
                self.watch_mode = self._watch_mode(event.state)
        elif isinstance(event, w.WatchStarted):
            self.notify(f"Watching {self.root.name}: a save runs what it affects (w stops).", title="Watch",
                        timeout=3, markup=False)
        elif isinstance(event, w.WatchErrors):
            for error in event.errors:
                where = f"{error.location}: " if getattr(error, "location", None) else ""
                self.notify(f"{error.code} {where}{error.message}\nhint: {error.hint}", title="Watch: broken file",
                            severity="error", timeout=10, markup=False)
        elif isinstance(event, w.WatchPlanStarted):
            names = ", ".join(short_key(k, k.split(".")[0]) for k in event.keys)
            self.notify(f"Running {names}.", title="Watch", timeout=3, markup=False)
        elif isinstance(event, w.WatchReloaded):
            notes = "\n".join(event.notes)
            self.notify("ratui.yaml reloaded." + (f"\n{notes}" if notes else ""), title="Watch", timeout=4,
                        markup=False)
        elif isinstance(event, w.WatchFailed):
            self.notify(event.message, title="Watch", severity="error", timeout=10, markup=False)

    # ----------------------------------------------------------------------------------------- reaper

    def reaper_interval_seconds(self) -> float | None:
        if self.reaper_interval is not None:
            return self.reaper_interval
        settings = self.controller.settings
        return settings.reaper_interval_minutes * 60 if settings is not None else None

    def reaper_schedule_text(self) -> str:
        seconds = self.reaper_interval_seconds()
        if not self.reaper_schedule or seconds is None:
            return "off in this console"
        every = f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
        return f"every {every} while this console runs (first pass one interval after it opened)"

    def _schedule_reaper(self) -> None:
        """Every reaper.interval_minutes, a real pass in a worker. The first comes one interval after the console
        opened (never at start), so a console opened briefly, or a test, does not reap."""
        if not self.reaper_schedule or self._reaper_timer is not None:
            return
        seconds = self.reaper_interval_seconds()
        if seconds:
            self._reaper_timer = self.set_interval(seconds, self._scheduled_reap, name="reaper-schedule")

    def _scheduled_reap(self) -> None:
        if self._closing or any(w.name == "reap-scheduled" and not w.is_finished for w in self.workers):
            return
        self.background(partial(self.controller.reaper_run, False), ReaperPassDone, "the scheduled reaper pass",
                        group="reap-scheduled")

    def reaper_finished(self, report, scheduled: bool = False) -> None:
        """A real pass ended (scheduled or run now): say what it did and refresh the Reaper screen."""
        from ratui.engine.vocabulary import format_bytes
        from ratui.screens.reaper import TASK_TITLES

        if not scheduled or report.removed or report.errors:
            text = f"{report.removed} removed of {report.found} found, {format_bytes(report.bytes_freed)} freed."
            for name, error in report.errors:
                text += f"\n{TASK_TITLES.get(name, name)}: {(error or {}).get('code', '')} " \
                        f"{(error or {}).get('message', '')}"
            self.notify(text, title="Scheduled reaper" if scheduled else "Reaper",
                        severity="warning" if report.errors else "information", timeout=6, markup=False)
        self.reaper_changed.publish(report)

    def _batch_done(self, batch) -> None:
        results = list(batch.results)
        errors = [batch.error] if batch.error is not None and not isinstance(batch.error, RatuiError) else []
        text, clean = batch_summary(results, len(batch.keys), batch.cancelled)
        self.notify(text, title="Batch finished", severity="information" if clean else "warning", markup=False)
        if getattr(batch, "atomic", False):
            self._publish_done(batch)
        for error in errors:
            self.show_error(error, "running the batch")

    def _publish_done(self, batch) -> None:
        """An atomic publish ended: what landed on its ref in one commit, or why nothing did."""
        outcome = batch.publish
        if outcome is None:
            self.notify(f"NOT published: {batch.ref} unchanged (the publish did not finish: "
                        f"{batch.error or 'no outcome'}).", title="Publish", severity="error", timeout=12,
                        markup=False)
        elif outcome.merged:
            if outcome.commit:
                text = (f"Published {len(outcome.tables)} table(s) into {outcome.into} in one commit "
                        f"{outcome.commit[:12]}: {', '.join(short_key(t, t.split('.')[0]) for t in outcome.tables)}.")
            else:
                text = outcome.reason[:1].upper() + outcome.reason[1:] + "."  # nothing to publish: ...
            self.notify(text, title="Publish", timeout=8, markup=False)
        else:
            code = f"{outcome.error.get('code')} " if outcome.error else ""
            self.notify(f"NOT published: {code}{outcome.reason}.", title="Publish", severity="error", timeout=12,
                        markup=False)

    # ------------------------------------------------------------------------------------- read-only

    def refuse_read_only(self, what: str) -> bool:
        """In a read-only console: say that `what` is refused and return True (the caller does nothing)."""
        if not self.read_only:
            return False
        error = read_only_refusal(what)
        self.notify(f"{error.code} {error.message}.", title="Read-only console", severity="warning", timeout=6,
                    markup=False)
        return True

    async def run_action(self, action, default_namespace=None) -> bool:
        """Every key's action passes here: one marked with @changes is refused in a read-only console."""
        if self.read_only and isinstance(action, str):
            what = self._changes(action, default_namespace)
            if what is not None:
                return self.refuse_read_only(what)
        return await super().run_action(action, default_namespace)

    def _changes(self, action: str, namespace) -> str | None:
        from textual.actions import ActionError, parse

        try:
            destination, name, _params = parse(action)
        except ActionError:
            return None
        target = {"app": self, "screen": self.screen, "": namespace or self}.get(destination)
        return getattr(getattr(target, f"action_{name}", None), "changes", None)

    # ---------------------------------------------------------------------------------------- actions

    def run_pipeline(self, key: str, full_refresh: bool = False, force: bool = False) -> None:
        """Start one run in the background and open its live detail (`force`: even when nothing changed)."""
        if self.refuse_read_only("running a pipeline"):
            return
        if self.compiled is None:
            self.notify("The project is still opening.", severity="warning")
            return
        pipeline = self.compiled.pipelines.get(key) if self.compiled else None
        if pipeline is not None and pipeline.errors:
            error = pipeline.errors[0]
            self.notify(f"{error.code} {error.message}\nhint: {error.hint}", title=f"Cannot run {pipeline.name}",
                        severity="error", timeout=10, markup=False)
            return

        def launch() -> tuple[str, str, bool]:
            return self.controller.start(key, full_refresh=full_refresh, force=force), key, full_refresh

        self.background(launch, RunLaunched, "starting the run", group="launch")

    def run_batch(self, keys: list[str], label: str, full_refresh: bool = False, *,
                  whole_project: bool = False, force: bool = False) -> None:
        """Run several pipelines one after another (dependency order) and follow them in the run detail.

        As on the command line, nothing runs while a compile error stands in the way: for the whole project
        any problem in it, for a selection a problem of a selected pipeline."""
        if self.refuse_read_only("running pipelines"):
            return
        if self.compiled is None or not keys:
            return
        problems = (self.compiled.all_errors() if whole_project else
                    [e for k in keys for e in self.compiled.pipelines[k].errors])
        if problems:
            first = problems[0]
            where = f"{Path(first.file).name}{':' + str(first.line) if first.line else ''} " if first.file else ""
            self.notify(f"{len(problems)} problem(s) in {'the project' if whole_project else 'the selection'}: "
                        f"nothing was run.\n{first.code} {where}{first.message}\nhint: {first.hint}",
                        title=f"Cannot run {label}", severity="error", timeout=12, markup=False)
            return
        def launch() -> tuple[Any, str]:  # the first run is queued in SQLite: off the event loop
            return self.controller.start_batch(keys, full_refresh=full_refresh, force=force), label

        self.background(launch, BatchLaunched, f"starting {label}", group="launch")

    @on(BatchLaunched)
    def _batch_launched(self, message: BatchLaunched) -> None:
        batch, label = message.value
        self.notify(f"Running {label}: {len(batch.keys)} pipeline(s) in dependency order.", title="Batch",
                    markup=False, timeout=4)
        self.push_screen(RunScreen(batch=batch.id, origin=self.current_mode))

    def confirm_cancel(self, run_ids: list[str]) -> None:
        if self.refuse_read_only("cancelling a run"):
            return
        runs = [self.store.get(r) for r in run_ids]
        names = ", ".join(f"{r.pipeline} ({r.run_id})" for r in runs if r is not None) or ", ".join(run_ids)
        body = Text(f"Stop {names}?\n\n")
        body.append("The run stops at its next checkpoint and its running Spark job is interrupted. It ends "
                    "as cancelled, its branch is deleted and main is unchanged.", style="dim")
        if any(self.controller.batch_of(r) for r in run_ids):
            body.append("\nThe rest of its batch is not started.", style="dim")

        def done(ok: bool | None) -> None:
            if ok:
                self.background(partial(self._cancel, run_ids), CancelOutcomes, "cancelling", group="cancel")

        self.push_screen(CancelRunScreen(run_ids, body), done)

    def _cancel(self, run_ids: list[str]) -> list[tuple[str, str]]:
        return [(run_id, self.controller.cancel(run_id)) for run_id in run_ids]

    def open_run(self, run_id: str) -> None:
        self.push_screen(RunScreen(run_id, origin=self.current_mode))

    def open_quality(self, run_id: str) -> None:
        self.push_screen(QualityScreen(run_id, origin=self.current_mode))

    def action_open(self, mode: str) -> None:
        """Show that screen itself (not a run detail left open on top of it)."""
        if self.current_mode != mode:
            self.switch_mode(mode)
        self.call_later(self._to_base)

    def _to_base(self) -> None:
        while len(self.screen_stack) > 1 and not isinstance(self.screen, (ErrorScreen, ConfirmScreen)):
            self.pop_screen()

    def action_jump(self) -> None:
        names = sorted({k.rsplit(".", 1)[1] for k in self.compiled.pipelines}) if self.compiled else []
        self.push_screen(JumpScreen(names), self.jump)

    def jump(self, text: str | None) -> None:
        """`:` — a screen's name (or a unique prefix of it), `run ID` or a run id alone, a pipeline's name
        (name, layer.name or namespace.layer.name, or a unique prefix), help or quit."""
        if not text:
            return
        raw = text.strip().lstrip(":").strip()
        word, _, rest = raw.partition(" ")
        word, rest = word.lower(), rest.strip()
        if word == "run" and rest:
            self.jump_to_run(rest)
            return
        if word in ("help", "keys", "?"):
            self.action_help()
            return
        if word in ("quit", "q!", "exit"):
            self.run_worker(self.action_quit())
            return
        if word not in SCREEN_ALIASES and len(word) >= 2 and not rest:  # a unique prefix: "bra" -> branches
            matches = {mode for alias, mode in SCREEN_ALIASES.items() if alias.startswith(word)}
            if len(matches) == 1:
                word = matches.pop()
        if word in SCREEN_ALIASES and not rest:
            self.action_open(SCREEN_ALIASES[word])
            return
        key = self._pipeline_named(raw)
        if key is not None:
            self.show_pipeline(key)
        elif RUN_ID_LIKE.match(raw):
            self.jump_to_run(raw)
        else:
            self.notify(f"Nothing is called '{raw}': type a screen ("
                        + ", ".join(spec.mode for spec in screen_specs.SCREENS)
                        + "), a pipeline's name, a run id, help or quit.",
                        severity="warning", markup=False)

    def _pipeline_named(self, text: str) -> str | None:
        """The pipeline `text` names: its key, layer.name or name, else the one pipeline whose name starts so."""
        if self.compiled is None:
            return None
        text = text.strip().lower()
        keys = list(self.compiled.pipelines)
        for key in keys:
            if text in (key, key.split(".", 1)[1], key.rsplit(".", 1)[1]):
                return key
        starts = [k for k in keys if k.rsplit(".", 1)[1].startswith(text) or k.split(".", 1)[1].startswith(text)]
        return starts[0] if len(starts) == 1 else None

    def show_pipeline(self, key: str, mode: str = "pipelines") -> None:
        """A screen (Pipelines, Lineage, Query) with the pipeline `key` selected: its `select_key(key)`."""
        self.action_open(mode)
        self.call_later(lambda: self.call_later(self._select_pipeline, key, mode))

    def _select_pipeline(self, key: str, mode: str) -> None:
        screen = self.screen
        select = getattr(screen, "select_key", None)
        if getattr(screen, "MODE", None) == mode and select is not None:
            select(key)

    def jump_to_run(self, run_id: str) -> None:
        """Open a run by id (or a unique prefix), after looking it up: an unknown id says so."""
        self.background(lambda: (run_id, self.controller.get_run(run_id)), RunLookedUp, "looking up the run",
                        group="jump")

    @on(RunLookedUp)
    def _run_looked_up(self, message: RunLookedUp) -> None:
        typed, record = message.value
        if record is None:
            self.notify(f"No run '{typed}' in the history (a run id, or the start of one).", title="Jump",
                        severity="warning", markup=False)
        else:
            self.open_run(record["id"])

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        sections = [("Everywhere", [(key_text(b), b.description) for b in self.BINDINGS]
                     + [("ctrl+p", "Command palette")])]
        screens = [(f"{spec.title} ({spec.key})", SCREEN_CLASSES[spec.mode]) for spec in screen_specs.SCREENS]
        for title, screen in (*screens, ("Run detail", RunScreen),
                              ("History (l on Branches, h on Pipelines)", HistoryScreen)):
            sections.append((title, [(key_text(b), b.description) for b in screen.BINDINGS]))
        sections[1][1].extend([("↑ ↓", "Move in the tree"), ("enter", "Open the pipeline's latest run")])
        sections[2][1].append(("enter", "Open the run"))
        sections[4][1].append(("enter", "Switch to it (a run's branch: open its run)"))
        return sections

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_sections()))

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"
        word = "light" if self.theme == "textual-light" else "dark"
        self.background(lambda: user_settings.save({"theme": self.theme}), ThemeSaved, "saving the theme",
                        group="theme")
        self.notify(f"Theme: {word}.", title="Theme", timeout=2, markup=False)

    @on(ThemeSaved)
    def _theme_saved(self, message: ThemeSaved) -> None:
        if message.value is None:
            self.notify("The theme applies to this session; it could not be saved in your config folder.",
                        title="Theme", severity="warning", timeout=4, markup=False)

    async def action_quit(self) -> None:
        active = self.store.active()
        if not active:
            self.exit()
            return
        body = Text(f"{len(active)} run(s) in flight: {', '.join(r.pipeline for r in active)}.\n\n")
        body.append("Quitting cancels them: their branches are deleted and main is unchanged.", style="dim")

        def done(ok: bool | None) -> None:
            if ok:
                self.notify("Cancelling runs in flight…", timeout=3)
                self.background(self.controller.cancel_all, QuitReady, "cancelling runs to quit", group="quit")

        self.push_screen(ConfirmScreen("Quit ratui?", body, "Stop the runs and quit", back="Stay"), done)

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        self.notices.append(f"{title}: {message}" if title else message)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # ----------------------------------------------------------------------------------------- errors

    def show_error(self, error: BaseException, context: str = "") -> None:
        log_file = self._log_error(error, context)
        if isinstance(self.screen, ErrorScreen):
            return
        # the same failure again soon after (a screen that follows the database reloads on its own): a toast,
        # not the error screen over and over
        key = f"{type(error).__name__}: {error}"
        now = time.monotonic()
        if self._last_error is not None and self._last_error[0] == key and now - self._last_error[1] < 30:
            self.notify(f"{key} (again; details in .ratui/logs/console.log)", title="Error", severity="error",
                        timeout=5, markup=False)
            return
        self._last_error = (key, now)
        self.push_screen(ErrorScreen(error, context, log_file))

    def _log_error(self, error: BaseException, context: str) -> str | None:
        if isinstance(error, RatuiError):
            return None
        try:
            path = self.root / ".ratui" / "logs" / "console.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                fh.write(f"--- {utc_now().isoformat()} {context}\n")
                fh.write("".join(traceback.format_exception(type(error), error, error.__traceback__)))
            return ".ratui/logs/console.log"
        except OSError:
            return None

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
    RatuiApp(root, prewarm=True, read_only=read_only).run()
