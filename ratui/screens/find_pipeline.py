"""Find a pipeline by name (`/` on Lineage, and `enter` on a "… and N more" node): type part of its name, the list
shows the pipelines that hold it (best first), `↑` / `↓` choose and `enter` takes one; a name that matches nothing
says so and lists the closest names (a typo). Dismisses with the chosen key, or None (escape)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from ratui.console.format import short_key
from ratui.console.find_pipeline import Found, close_names, find
from ratui.messages import CloseNames
from ratui.screens.base import Guarded, Loader

SHOWN = 100  # matches listed at most (the count says how many more; typing more narrows them)


class FindPipelineScreen(Guarded, Loader, ModalScreen[str | None]):
    BINDINGS = [
        Binding("escape", "cancel", "Back", id="find.cancel"),
        Binding("down", "step(1)", "Next", id="find.down", show=False),
        Binding("up", "step(-1)", "Previous", id="find.up", show=False),
        Binding("pagedown", "step(10)", "Page down", id="find.pagedown", show=False),
        Binding("pageup", "step(-10)", "Page up", id="find.pageup", show=False),
    ]

    DEFAULT_CSS = """
    FindPipelineScreen {
        align: center top;
    }
    #find-pipeline {
        width: 80;
        max-width: 100%;
        height: auto;
        max-height: 90%;
        margin-top: 1;
        border: thick $accent;
        background: $surface;
        padding: 0 1;
    }
    #find-title {
        text-style: bold;
    }
    #find-note {
        color: $text-muted;
        height: auto;
    }
    #find-list {
        height: auto;
        max-height: 20;
        border: none;
    }
    """

    def __init__(self, keys: list[str], namespace: str | None, title: str = "Find a pipeline",
                 value: str = "") -> None:
        super().__init__()
        self.keys = list(keys)
        self.namespace = namespace
        self.title_text = title
        self.value = value
        self.found = Found([], 0)

    def compose(self) -> ComposeResult:
        with Vertical(id="find-pipeline"):
            yield Label(Text(self.title_text), id="find-title")
            yield Input(self.value, placeholder="part of a pipeline's name (layer.name, namespace.layer.name)",
                        id="find-input")
            yield Static(id="find-note")
            yield OptionList(id="find-list")

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.cursor_blink = getattr(self.app, "cursor_blink", True)
        field.focus()
        self.show(field.value)

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        self.show(event.value)

    def show(self, text: str) -> None:
        """List what `text` matches; nothing: say so, and look for the closest names in a worker (a typo)."""
        self.found = found = find(text, self.keys, self.namespace, SHOWN)
        self._list(found.matches)
        note = self.query_one("#find-note", Static)
        if found.total:
            more = f" (the first {len(found.matches)}: type more to narrow them)" if found.total > len(found.matches) \
                else ""
            note.update(f"{found.total:,} of {len(self.keys):,} pipelines{more} · ↑ ↓ choose · enter focuses · "
                        "esc back")
        else:
            note.update(Text(f"No pipeline is called '{text.strip()}'.", style="bold"))
            self.load(CloseNames, lambda: (text, close_names(text, self.keys)))

    def _list(self, keys: list[str]) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(self._label(k), id=k) for k in keys])
        if keys:
            options.highlighted = 0

    def _label(self, key: str) -> Text:
        short = short_key(key, self.namespace)
        return Text(short) if short == key else Text.assemble(short, (f"  {key}", "dim"))

    @on(CloseNames)
    def _close(self, message: CloseNames) -> None:
        typed, close = message.value
        if typed != self.query_one(Input).value or self.found.total:
            return  # typed on since
        self.found = Found([], 0, close)
        self._list(close)
        note = Text(f"No pipeline is called '{typed.strip()}'.", style="bold")
        if close:
            note.append(" Did you mean one of these? (enter takes the first)", style="")
        else:
            note.append(" Nothing close either: try part of the name.", style="")
        self.query_one("#find-note", Static).update(note)

    def action_step(self, delta: int) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            current = options.highlighted if options.highlighted is not None else -1
            options.highlighted = max(0, min(options.option_count - 1, current + delta))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is not None and options.option_count:
            self.dismiss(options.get_option_at_index(options.highlighted).id)
        # nothing listed: the note says why; the dialog stays open for another try

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
