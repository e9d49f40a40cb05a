"""What every console screen shares: the frame (tabs, status line, footer) and background loading.

`self.load("name", fn, *args)` runs `fn` in a thread worker (SQLite, files, catalog: never on the event loop);
its result arrives on the event loop in `loaded_name(result)`. A newer load of the same name supersedes an older
one, and a result for a screen that has gone away is dropped with it. A coded RatuiError becomes a toast; anything
else opens the error screen.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from textual.screen import Screen
from textual.worker import Worker, WorkerState

from ratui.engine.errors import RatuiError


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


class Loader:
    def load(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Worker:
        return self.run_worker(partial(fn, *args, **kwargs), name=name, group=name, thread=True, exclusive=True,
                               exit_on_error=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        handler = getattr(self, f"loaded_{worker.name.replace('-', '_')}", None)
        if handler is None and event.state != WorkerState.ERROR:
            return
        event.stop()
        if event.state == WorkerState.SUCCESS and handler is not None:
            handler(worker.result)
        elif event.state == WorkerState.ERROR:
            failed = getattr(self, f"failed_{worker.name.replace('-', '_')}", None)
            if failed is not None and failed(worker.error):
                return
            if isinstance(worker.error, RatuiError):
                self.app.notify(f"{worker.error.code} {worker.error.message}", title=worker.error.title,
                                severity="error", timeout=8, markup=False)
            else:
                self.app.show_error(worker.error, f"while loading {worker.name}")


class ConsoleScreen(Guarded, Loader, Screen):
    """A top-level screen (one per mode)."""

    MODE = ""

    def on_mount(self) -> None:
        app = self.app
        app.project_loaded.subscribe(self, self._project_loaded)
        app.runs_changed.subscribe(self, self.runs_changed)
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

    def runs_changed(self, change) -> None:
        """Live runs changed (coalesced): `change.changed` run ids, `change.ended` runs that just finished."""
