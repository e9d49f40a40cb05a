"""What the App starts: runs and batches, cancelling them, quitting with runs in flight, watch mode, the Iceberg REST
catalog it serves to other engines and the reaper's schedule; each behind the read-only guard, and each that stops
something behind a confirmation.

`Actions` is a mixin of RatuiApp. The work itself runs in thread workers through the controller (`background`);
its result comes back as a typed message. Textual's `@on` registers handlers on message-pump classes only, so the
handlers here go by their names (`on_batch_launched`).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text

from ratui.console.controller import read_only_refusal
from ratui.console.format import short_key
from ratui.engine.errors import error_text
from ratui.messages import (
    BatchLaunched, CancelOutcomes, QuitReady, ReaperPassDone, RunLaunched, ServeToggled, WatchToggled,
)
from ratui.screens.dialogs import CancelRunScreen, ConfirmScreen, ServingScreen
from ratui.screens.run import RunScreen


class Actions:
    """The App's changes and the flows that ask before them (they use its controller, store and compiled project)."""

    # --------------------------------------------------------------------------------------- read-only

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

    # -------------------------------------------------------------------------------------------- runs

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
            self.notify(error.text(), title=f"Cannot run {pipeline.name}",
                        severity="error", timeout=10, markup=False)
            return

        def launch() -> tuple[str, str, bool]:
            return self.controller.start(key, full_refresh=full_refresh, force=force), key, full_refresh

        self.background(launch, RunLaunched, "starting the run", group="launch")

    def on_run_launched(self, message: RunLaunched) -> None:
        run_id, key, full_refresh = message.value
        live = self.store.get(run_id)
        if live is not None:
            live.strategy = self._strategy(key, full_refresh)
        elif full_refresh:  # its events have not arrived yet
            self._forced_full_refresh.add(run_id)
        self.open_run(run_id)

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
                        f"nothing was run.\n{error_text(first.code, where + first.message, first.hint)}",
                        title=f"Cannot run {label}", severity="error", timeout=12, markup=False)
            return
        def launch() -> tuple[Any, str]:  # the first run is queued in SQLite: off the event loop
            return self.controller.start_batch(keys, full_refresh=full_refresh, force=force), label

        self.background(launch, BatchLaunched, f"starting {label}", group="launch")

    def on_batch_launched(self, message: BatchLaunched) -> None:
        batch, label = message.value
        self.notify(f"Running {label}: {len(batch.keys)} pipeline(s) in dependency order.", title="Batch",
                    markup=False, timeout=4)
        self.push_screen(RunScreen(batch=batch.id, origin=self.current_mode))

    # ------------------------------------------------------------------------------------ cancel, quit

    def confirm_cancel(self, run_ids: list[str]) -> None:
        if self.refuse_read_only("cancelling a run"):
            return
        runs = [self.store.get(r) for r in run_ids]
        names = ", ".join(f"{r.pipeline} ({r.run_id})" for r in runs if r is not None) or ", ".join(run_ids)
        body = Text(f"Stop {names}?\n\n")
        into = ", ".join(sorted({r.ref for r in runs if r is not None})) or self.controller.ref
        body.append("The run stops at its next checkpoint and its running Spark job is interrupted. It ends "
                    f"as cancelled, its branch is deleted and {into} is unchanged.", style="dim")
        if any(self.controller.batch_of(r) for r in run_ids):
            body.append("\nThe rest of its batch is not started.", style="dim")

        def done(ok: bool | None) -> None:
            if ok:
                self.background(partial(self._cancel, run_ids), CancelOutcomes, "cancelling", group="cancel")

        self.push_screen(CancelRunScreen(run_ids, body), done)

    def _cancel(self, run_ids: list[str]) -> list[tuple[str, str]]:
        return [(run_id, self.controller.cancel(run_id)) for run_id in run_ids]

    def on_cancel_outcomes(self, message: CancelOutcomes) -> None:
        for run_id, outcome in message.value:
            if outcome == "requested":
                run = self.store.get(run_id)
                into = run.ref if run is not None else self.controller.ref
                self.notify(f"Cancelling run {run_id}: it stops at its next checkpoint; {into} is unchanged.",
                            title="Cancel", timeout=4, markup=False)
            elif outcome == "finished":
                self.notify(f"Run {run_id} had already finished.", severity="warning", markup=False)
            else:
                self.notify(f"Run {run_id} is not running in this console.", severity="warning", markup=False)

    async def action_quit(self) -> None:
        active = self.store.active()
        shell = self.controller.shell_commands()  # the shell's commands this console serves (ratui/warm/hosted.py)
        if not active and not shell:
            self.exit()
            return
        body = Text()
        if active:
            body.append(f"{len(active)} run(s) in flight: {', '.join(r.pipeline for r in active)}.\n\n")
            into = ", ".join(sorted({r.ref for r in active}))
            body.append(f"Quitting cancels them: their branches are deleted and {into} is unchanged.\n\n",
                        style="dim")
        if shell:
            body.append(f"The shell's command(s) running here: {', '.join(shell)}.\n\n")
            body.append("Quitting stops them as Ctrl-C would in their terminal.", style="dim")

        def done(ok: bool | None) -> None:
            if ok:
                self.notify("Stopping what runs…", timeout=3)
                self.background(self.controller.stop_for_quit, QuitReady, "stopping runs to quit", group="quit")

        self.push_screen(ConfirmScreen("Quit ratui?", body, "Stop them and quit", back="Stay"), done)

    def on_quit_ready(self, _message: QuitReady) -> None:
        self.exit()

    # ------------------------------------------------------------------------------------------- watch

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

    def on_watch_toggled(self, message: WatchToggled) -> None:
        self.watch_mode = self._watch_mode(message.value)

    # ------------------------------------------------------------------- the Iceberg REST catalog (ratui serve)

    def action_toggle_serve(self) -> None:
        """Serve the project's catalog to other engines (DuckDB, PyIceberg, Spark, Trino) from this console, or stop.
        On: a dialog gives the URL and the token (shown there only: never in a toast, the status line or a log)."""
        if self.serving in ("starting", "stopping"):
            return
        if not self.serving:
            if self.refuse_read_only("serving the catalog to other engines (they may write to branches)"):
                return
            self.serving = "starting"
            self.background(self.controller.start_serving, ServeToggled, "serving the catalog to other engines",
                            group="serve")
        else:
            self.serving = "stopping"
            self.background(self.controller.stop_serving, ServeToggled, "stopping the catalog's server",
                            group="serve")

    def on_serve_toggled(self, message: ServeToggled) -> None:
        serving = message.value
        self.serving = serving.url if serving is not None else ""
        if serving is not None:
            self.push_screen(ServingScreen(serving.url, serving.token, serving.read_only, serving.moved_from,
                                           serving.ref))
        else:
            self.notify("The Iceberg REST catalog is off: other engines can no longer reach the tables through it.",
                        title="REST catalog", timeout=4, markup=False)

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
                self.notify(error.text(where=True), title="Watch: broken file", severity="error", timeout=10,
                            markup=False)
        elif isinstance(event, w.WatchPlanStarted):
            names = ", ".join(short_key(k, k.split(".")[0]) for k in event.keys)
            self.notify(f"Running {names}.", title="Watch", timeout=3, markup=False)
        elif isinstance(event, w.WatchReloaded):
            notes = "\n".join(event.notes)
            self.notify("ratui.yaml reloaded." + (f"\n{notes}" if notes else ""), title="Watch", timeout=4,
                        markup=False)
        elif isinstance(event, w.WatchFailed):
            self.notify(event.message, title="Watch", severity="error", timeout=10, markup=False)

    # ------------------------------------------------------------------------------------------ reaper

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

    def on_reaper_pass_done(self, message: ReaperPassDone) -> None:
        self.reaper_finished(message.value, scheduled=True)
