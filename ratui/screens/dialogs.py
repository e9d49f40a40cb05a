"""Modal screens: confirmation, merge preview, jump-to-screen, help, the REST catalog's address and the error
screen."""

from __future__ import annotations

import traceback as tb_mod
from typing import Iterable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static

from ratui.console import screen_specs
from ratui.engine.errors import RatuiError
from ratui.screens.base import Guarded


class ConfirmScreen(Guarded, ModalScreen[bool]):
    """Ask before doing something that cannot be undone. `y` confirms, `n` or escape backs out. Both buttons say
    what they do (`confirm`, `back`): never "Cancel" beside "Cancel run"."""

    BINDINGS = [
        Binding("y", "confirm", "Yes", id="confirm.yes"),
        Binding("n,escape", "cancel", "No", id="confirm.no"),
        Binding("down", "scroll_body(1)", "Scroll down", id="confirm.down", show=False),  # a long body (the bar)
        Binding("up", "scroll_body(-1)", "Scroll up", id="confirm.up", show=False),
        Binding("pagedown", "scroll_body(1, True)", "Page down", id="confirm.page_down", show=False),
        Binding("pageup", "scroll_body(-1, True)", "Page up", id="confirm.page_up", show=False),
    ]

    def __init__(self, title: str, body: RenderableType, confirm: str = "Yes", *, danger: bool = True,
                 back: str = "Go back") -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.confirm_label = confirm
        self.back_label = back
        self.danger = danger

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(Text(self.title_text), id="dialog-title")
            with VerticalScroll(id="dialog-scroll", can_focus=False):  # a long body scrolls; the buttons stay
                yield Static(self.body, id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.confirm_label} (y)", id="confirm",
                             variant="error" if self.danger else "primary")
                yield Button(f"{self.back_label} (n)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_scroll_body(self, step: int, page: bool = False) -> None:
        scroll = self.query_one("#dialog-scroll", VerticalScroll)
        size = max(1, scroll.size.height - 1) if page else 1
        scroll.scroll_to(y=scroll.scroll_y + step * size, animate=False)

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


class CancelRunScreen(ConfirmScreen):
    """Stop runs? Closes by itself when they all end first (nothing is left to stop)."""

    def __init__(self, run_ids: list[str], body: RenderableType) -> None:
        self.run_ids = list(run_ids)
        super().__init__("Stop this run?" if len(run_ids) == 1 else f"Stop these {len(run_ids)} runs?", body,
                         "Stop the run" if len(run_ids) == 1 else "Stop the runs",
                         back="Keep it running" if len(run_ids) == 1 else "Keep them running")


class MergeScreen(ConfirmScreen):
    """Merge a branch into main: shows the dry run first (tables that would change, conflicts)."""

    def __init__(self, ref: str, preview) -> None:
        self.ref = ref
        self.preview = preview
        super().__init__(f"Merge {ref} into main?", self._body(), "Merge", danger=False, back="Don't merge")

    def _body(self) -> RenderableType:
        preview = self.preview
        parts: list[RenderableType] = [Text("Dry run:", style="bold")]
        if preview.conflicts:
            parts.append(Text(f"✘ {len(preview.conflicts)} conflict(s): main changed these tables since "
                              f"{self.ref} forked", style="red"))
            for table in preview.conflicts:
                parts.append(Text(f"    {table}", style="red"))
            parts.append(Text("The merge would fail (RAT-CAT-003) and change nothing.", style="red"))
        clean = [t for t in preview.tables if t not in preview.conflicts]
        by_append = set(getattr(preview, "by_append", []) or [])
        if clean:
            parts.append(Text(f"{len(clean)} table(s) would be applied to main:"))
            for table in clean:
                parts.append(Text(f"    {table}" + ("  by append" if table in by_append else ""),
                                  style="cyan" if table in by_append else "green"))
        elif not preview.conflicts:
            parts.append(Text("No table changes: the merge records nothing.", style="dim"))
        parts.append(Text("A manual merge skips the quality gate: main gets the branch's tables as they are, "
                          "tested or not.", style="yellow"))
        return Group(*parts)

    def compose(self) -> ComposeResult:
        yield from super().compose()

    def on_mount(self) -> None:
        super().on_mount()
        if self.preview.conflicts:
            self.query_one("#confirm", Button).disabled = True

    def action_confirm(self) -> None:
        if not self.preview.conflicts:
            self.dismiss(True)


# what `:` suggests before the project's pipelines: every screen console/screen_specs.py declares, help and quit
JUMP_WORDS = [*(spec.mode for spec in screen_specs.SCREENS), "help", "quit"]


class JumpScreen(Guarded, ModalScreen[str | None]):
    """`:` — type a screen's name (pipelines, runs, quality, branches...), a pipeline's name, a run id, or `quit`."""

    BINDINGS = [Binding("escape", "cancel", "Back", id="jump.cancel")]

    def __init__(self, names: list[str] | None = None) -> None:
        super().__init__()
        self.names = JUMP_WORDS + list(names or [])  # screens, help and quit, then the project's pipelines

    def compose(self) -> ComposeResult:
        with Vertical(id="jump"):
            yield Input(placeholder="a screen · a pipeline · a run id · help · quit",
                        suggester=SuggestFromList(self.names, case_sensitive=False), id="jump-input")

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.cursor_blink = getattr(self.app, "cursor_blink", True)
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(Guarded, ModalScreen[None]):
    """Every key, per screen, generated from the bindings themselves."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help.close")]

    def __init__(self, sections: Iterable[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = list(sections)

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog"):
            yield Label("ratui keys", id="dialog-title")
            with VerticalScroll(id="help-body"):
                yield Static(self._render_sections())
            yield Label("ctrl+p: command palette (run, cancel, open screen, theme) · esc: close", id="help-foot")

    def _render_sections(self) -> RenderableType:
        tables = []
        for title, keys in self.sections:
            table = Table(box=None, padding=(0, 1), show_header=False, title=title, title_justify="left",
                          title_style="bold")
            table.add_column(style="bold cyan", min_width=10)
            table.add_column()
            for key, description in keys:
                table.add_row(key, description)
            tables.append(table)
        return Group(*tables)

    def action_close(self) -> None:
        self.dismiss(None)


class ServingScreen(Guarded, ModalScreen[None]):
    """The Iceberg REST catalog this console serves: its URL, its token, and how DuckDB and PyIceberg reach it. The
    token is shown here only (never in a toast, the status line or a log); `c` copies it (the terminal's clipboard)."""

    BINDINGS = [
        Binding("escape,enter,q", "close", "Close", id="serving.close"),
        Binding("c", "copy", "Copy token", id="serving.copy"),
    ]

    def __init__(self, url: str, token: str, read_only: Iterable[str], moved_from: Iterable[str] = (),
                 ref: str = "main") -> None:
        super().__init__()
        self.url = url
        self.ref = ref  # the console's working ref: `url` is its
        self.token = token
        self.read_only = list(read_only)
        self.moved_from = list(moved_from)

    def compose(self) -> ComposeResult:
        base = self.url.rsplit("/", 1)[0]
        body = Text()
        body.append("URI    ", style="bold")
        body.append(f"{self.url}")
        body.append(f"  ({self.ref}, the ref this console works on)\n", style="dim")
        body.append("token  ", style="bold")
        body.append(f"{self.token}\n\n")
        body.append(f"Another ref: {base}/REF (a slash as %2F; a past state REF@COMMIT, read only). ")
        body.append("Read-only to outside writers: " + (", ".join(self.read_only) or "none") + ".\n\n")
        body.append("PyIceberg  ", style="bold")
        body.append(f"RestCatalog('ratui', uri='{self.url}', token=TOKEN)\n")
        body.append("DuckDB     ", style="bold")
        body.append(f"CREATE SECRET (TYPE ICEBERG, TOKEN 'TOKEN'); ATTACH '{self.ref}' AS lake (TYPE ICEBERG, "
                    f"ENDPOINT '{self.url}')\n\n")
        for old in self.moved_from:
            body.append(f"Tables were written when this project lived at {old}: other engines read their files "
                        f"there and will not find them. Link that folder to this one (ln -s), or serve from there."
                        "\n\n", style="yellow")
        body.append("It serves until you toggle it off (palette, or i on Branches) or quit.", style="dim")
        with Vertical(id="dialog", classes="dialog"):
            yield Label("Iceberg REST catalog", id="dialog-title")
            yield Static(body, id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button("Copy token (c)", id="copy", variant="primary")
                yield Button("Close (esc)", id="close")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "copy":
            self.action_copy()
        else:
            self.dismiss(None)

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.token)
        self.notify("Token copied to the clipboard.", timeout=3)

    def action_close(self) -> None:
        self.dismiss(None)


class ErrorScreen(ModalScreen[None]):
    """Shown instead of crashing: what failed, where the traceback went, and the console keeps running."""

    BINDINGS = [
        Binding("escape,enter", "close", "Back to the console", id="error.close"),
        Binding("t", "toggle_trace", "Traceback", id="error.trace"),
        Binding("q", "app.quit", "Quit", id="error.quit"),
    ]

    def __init__(self, error: BaseException, context: str = "", log_file: str | None = None) -> None:
        super().__init__()
        self.error = error
        self.context = context
        self.log_file = log_file

    def compose(self) -> ComposeResult:
        error = self.error
        with Vertical(id="error", classes="dialog"):
            if isinstance(error, RatuiError):
                yield Label(Text(f"error[{error.code}] {error.title}"), id="dialog-title")
                body = Text()
                if self.context:
                    body.append(self.context + "\n", style="bold")
                body.append(error.message + "\n")
                if error.location:
                    location = error.location
                    root = str(getattr(self.app, "root", "")) + "/"
                    if location.startswith(root):
                        location = location[len(root):]
                    body.append(f"at {location}\n", style="dim")
                body.append(f"hint: {error.hint}", style="italic")
                yield Static(body, id="error-body")
            else:
                yield Label("Something went wrong — the console is still running", id="dialog-title")
                body = Text()
                if self.context:
                    body.append(self.context + "\n", style="bold")
                body.append(f"{type(error).__name__}: {error}\n", style="red")
                if self.log_file:
                    body.append(f"The traceback is in {self.log_file}. ", style="dim")
                body.append("Press t to show it here.", style="dim")
                yield Static(body, id="error-body")
                trace = "".join(tb_mod.format_exception(type(error), error, error.__traceback__))
                with VerticalScroll(id="error-trace", classes="hidden"):
                    yield Static(Text(trace), markup=False)
            yield Label("esc: back to the console · q: quit", id="help-foot")

    def action_toggle_trace(self) -> None:
        for trace in self.query("#error-trace"):
            trace.toggle_class("hidden")

    def action_close(self) -> None:
        self.dismiss(None)
