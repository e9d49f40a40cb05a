"""What every console screen shares: the frame (tabs, status line, footer) and background loading.

`self.load(DiffLoaded, fn, *args)` runs `fn` in a thread worker (SQLite, files, catalog: never on the event loop);
its result arrives on the event loop as the typed message `DiffLoaded(result)`, handled with `@on(DiffLoaded)`. A
newer load of the same kind supersedes an older one, and a result for a screen that has gone away is dropped with
it. A failure posts `LoadFailed`: the screen's `load_failed(kind, error)` may handle it (return True); otherwise a
coded RatuiError becomes a toast and anything else opens the error screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker

from ratui.engine.errors import RatuiError
from ratui.messages import Loaded

if TYPE_CHECKING:
    from textual.widget import Widget
    from textual.widgets import Input


def changes(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark an action that changes the project (runs, merges, deletes, resets, writes a file): a read-only
    console refuses it with a toast naming `what` before it does anything (RatuiApp.run_action). The controller
    refuses the change itself as well, whatever path reaches it."""

    def mark(action: Callable[..., Any]) -> Callable[..., Any]:
        action.changes = what  # type: ignore[attr-defined]
        return action

    return mark


class Guarded:
    """A handler that raises opens the error screen; the screen's message loop keeps running.

    (Textual stops a message pump whose handler raised; catching here, around Textual's own dispatch, keeps the
    screen alive after the user dismisses the error.)"""

    async def _dispatch_message(self, message) -> None:
        try:
            await super()._dispatch_message(message)
        except Exception as error:  # noqa: BLE001 - everything a handler can raise
            app = self.app
            app.crashes.append(error)
            app.show_error(error, f"handling {type(message).__name__}")


def open_field(field: "Input", value: str) -> None:
    """Show a one-line field kept hidden under a view (a search, a filter), holding `value`, and type into it."""
    field.remove_class("hidden")
    field.value = value
    field.focus()


def close_field(field: "Input", view: "Widget") -> None:
    """Hide the field again and hand the keys back to the view it searches or filters."""
    field.add_class("hidden")
    view.focus()


class LoadFailed(Message):
    def __init__(self, kind: type[Loaded], error: BaseException) -> None:
        super().__init__()
        self.kind = kind
        self.error = error


class Loader:
    def load(self, kind: type[Loaded], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Worker:
        def task() -> None:
            try:
                value = fn(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 - reported by LoadFailed
                self.post_message(LoadFailed(kind, error))
                return
            self.post_message(kind(value))

        return self.run_worker(task, name=kind.__name__, group=kind.__name__, thread=True, exclusive=True,
                               exit_on_error=False)

    def load_failed(self, kind: type[Loaded], error: BaseException) -> bool:
        """A load failed: return True when the screen has dealt with it."""
        return False

    def on_load_failed(self, message: LoadFailed) -> None:  # a mixin: @on registers on widget classes only
        message.stop()
        if self.load_failed(message.kind, message.error):
            return
        error = message.error
        if isinstance(error, RatuiError):
            self.app.notify(f"{error.code} {error.message}", title=error.title, severity="error", timeout=8,
                            markup=False)
        else:
            self.app.show_error(error, f"while loading ({message.kind.__doc__ or message.kind.__name__})")


NARROW = 110  # columns (the App's breakpoint): below it the footer is compact

# keys a narrow footer leaves to `?` (they all stay bound): quit, reload/refresh (screens follow the state on
# their own), paging. What is left fits 80 columns with w, : and ? always on it.
FOOTER_SPARE = {"app.quit", "app.theme", "pipelines.reload", "runs.refresh", "quality.refresh", "branches.refresh",
                "landing.refresh", "reaper.refresh", "schedules.refresh", "runs.next", "runs.prev", "quality.passed",
                "table.schema", "table.history", "table.stats", "table.preview", "query.prev", "query.next",
                "run.search",
                "lineage.deeper", "lineage.shallower", "lineage.find"}  # the line above Lineage's graph says them
# and shorter words for the rest (the help screen keeps the full ones)
FOOTER_SHORT = {"pipelines.run_descendants": "Downstream", "pipelines.run_all": "All", "pipelines.full_refresh": "Full",
                "pipelines.cancel": "Stop", "run.cancel": "Stop", "run.debug": "Debug", "reaper.preview": "Preview",
                "branches.merge": "Merge", "branches.history": "Log", "branches.serve": "REST",
                "history.rollback": "Roll back"}


def is_narrow(width: int) -> bool:
    return width < NARROW


class ConsoleScreen(Guarded, Loader, Screen):
    """A top-level screen (one per mode)."""

    MODE = ""
    # (key, what it does) of the keys the screen's widgets handle themselves (not in BINDINGS): for the help
    HELP_KEYS: tuple[tuple[str, str], ...] = ()

    def on_resize(self, event) -> None:
        self.fit(is_narrow(event.size.width))

    def fit(self, narrow: bool) -> None:
        """The terminal's width crossed the breakpoint (or the screen opened): shorten what must fit. The
        footer drops its padding so the keys everyone needs (w, :, ?) stay on it."""
        from textual.widgets import Footer

        for footer in self.query(Footer):
            footer.compact = narrow
        self.refresh_bindings()

    @property
    def active_bindings(self):
        """The footer's keys: below the breakpoint, the ones in FOOTER_SPARE are left to the help screen."""
        from dataclasses import replace

        active = super().active_bindings
        if not is_narrow(self.app.size.width):
            return active
        out = {}
        for key, ab in active.items():
            if key == self.app.COMMAND_PALETTE_BINDING:  # `^p` alone: the help (?) says what it opens
                ab = ab._replace(binding=replace(ab.binding, description=""))
            elif ab.binding.id in FOOTER_SPARE:
                ab = ab._replace(binding=replace(ab.binding, show=False))
            elif ab.binding.id in FOOTER_SHORT:
                ab = ab._replace(binding=replace(ab.binding, description=FOOTER_SHORT[ab.binding.id]))
            out[key] = ab
        return out

    def on_mount(self) -> None:
        # Textual calls every class's on_mount along the MRO, and a screen's own on_mount calls this one too:
        # subscribe once (twice, every project load, run change and commit was handled twice: two reads each)
        if getattr(self, "_console_mounted", False):
            return
        self._console_mounted = True
        self.fit(is_narrow(self.app.size.width))
        app = self.app
        app.project_loaded.subscribe(self, self._project_loaded)
        app.runs_changed.subscribe(self, self.runs_changed)
        app.state_changed.subscribe(self, self.state_changed)
        app.project_failed.subscribe(self, self.project_error)
        if app.compiled is not None:
            self.call_later(self.project_ready, app.compiled)
        elif app.boot_error is not None:
            self.call_later(self.project_error, app.boot_error)

    def _project_loaded(self, compiled) -> None:
        self.project_ready(compiled)

    def project_ready(self, compiled) -> None:
        """The engine is open and the project compiled (again): load what the screen shows."""

    def project_error(self, error: BaseException) -> None:
        """The project could not be opened (the error screen says why)."""
        for widget in self.query("*"):
            if widget.loading:
                widget.loading = False

    def state_changed(self, item) -> None:
        """Another process committed to the state database (a run started or ended elsewhere, a branch, the
        ledger, a reaper pass): show it without being asked."""

    def runs_changed(self, change) -> None:
        """Live runs changed (coalesced): `change.changed` run ids, `change.ended` runs that just finished."""
