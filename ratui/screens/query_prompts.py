"""The Query screen's prompts: a line to type in a box, for where to export a result and for a past state to read
("main@HASH", "main at 2026-03-01 10:00")."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from ratui.screens.base import Guarded


def prompt_css(screen: str, box: str) -> str:
    """A prompt's look: a box of 76 columns in the middle of the screen, its hint dimmed (ids: box, box-hint)."""
    return f"""
    {screen} {{ align: center middle; }}
    #{box} {{ width: 76; max-width: 100%; height: auto; border: round $accent; padding: 0 1; background: $surface; }}
    #{box}-hint {{ color: $text-muted; }}
    """


class LinePrompt(Guarded, ModalScreen[str | None]):
    """One line to type in a box, under a heading and over a hint: enter answers with what was typed (None when
    nothing was), escape goes back (None)."""

    def __init__(self, box: str, heading: str, field: Input, hint: str) -> None:
        super().__init__()
        self.box, self.heading, self.field, self.hint = box, heading, field, hint

    def compose(self) -> ComposeResult:
        with Vertical(id=self.box):
            yield Label(Text(self.heading, style="bold"))
            yield self.field
            yield Static(self.hint, id=f"{self.box}-hint")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ExportScreen(LinePrompt):
    """Where to export the result: a path inside the project, .csv or .parquet."""

    BINDINGS = [Binding("escape", "cancel", "Back", id="export.cancel")]
    DEFAULT_CSS = prompt_css("ExportScreen", "export")

    def __init__(self, default: str) -> None:
        super().__init__("export", "Export the whole result", Input(value=default, id="export-input"),
                         "A path inside the project ending in .csv (with a header) or .parquet; enter exports, "
                         "escape goes back. An existing file is never overwritten.")
        self.default = default



class RefPromptScreen(LinePrompt):
    """A ref to read: a branch, a past state "main@HASH", or "main at 2026-03-01 10:00" (UTC unless it names a zone)."""

    BINDINGS = [Binding("escape", "cancel", "Back", id="ref_prompt.cancel")]
    DEFAULT_CSS = prompt_css("RefPromptScreen", "ref-prompt")

    def __init__(self, current: str) -> None:
        super().__init__("ref-prompt", "Read a past state",
                         Input(placeholder=f"{current.partition('@')[0]} at 2026-03-01 10:00", id="ref-prompt-input"),
                         "ref@HASH (a commit of History or `ratui log`), ref at TIME (its state then; UTC unless "
                         "a zone is given), or at TIME for the current ref. enter reads it, escape goes back.")
        self.current = current

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.cursor_blink = getattr(self.app, "cursor_blink", True)
        field.focus()
