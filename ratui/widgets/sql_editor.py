"""The Query screen's SQL editor: a highlighted TextArea whose tab completes table names.

Tab after the start of a name (`sil`, `silver.cl`) completes it from the tables at the query's ref: one match is
written in full, several are completed as far as they agree and listed (`Completions`). Tab anywhere else moves
the focus on, as everywhere in the console. Escape leaves the editor (unless a query is running: then the
screen's escape stops it).
"""

from __future__ import annotations

import re

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

_WORD = re.compile(r"[A-Za-z_][\w.]*$")


class SqlEditor(TextArea):
    # the footer says how to leave while the editor has the keys (`:` and the screen keys type here till then); the
    # key itself is handled in _on_key, before the text area sees it
    BINDINGS = [Binding("escape", "leave", "Leave editor", id="query.leave_editor", key_display="esc")]

    class Completions(Message):
        """Several tables complete what was typed: `names` (the screen shows them)."""

        def __init__(self, names: list[str]) -> None:
            super().__init__()
            self.names = names

    class Leave(Message):
        """Escape with nothing to stop: the screen takes the focus back (so its keys work again)."""

    def __init__(self, text: str = "", **kwargs) -> None:
        try:
            super().__init__(text, language="sql", tab_behavior="focus", show_line_numbers=True,
                             soft_wrap=False, **kwargs)
        except Exception:  # no SQL grammar installed: the editor works unhighlighted
            super().__init__(text, tab_behavior="focus", show_line_numbers=True, soft_wrap=False, **kwargs)
        self.complete_from: list[str] = []  # table names at the query's ref (`layer.name`)

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "tab" and self.complete():
            event.stop()
            event.prevent_default()
            return
        if event.key == "escape" and not getattr(self.screen, "running", False):
            event.stop()
            event.prevent_default()
            self.post_message(self.Leave())
            return
        await super()._on_key(event)

    def action_leave(self) -> None:
        self.post_message(self.Leave())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave" and getattr(self.screen, "running", False):
            return False  # escape stops the query then (the screen's Stop)
        return super().check_action(action, parameters)

    def prefix(self) -> str:
        """The name being typed just before the cursor ('' when none)."""
        row, column = self.cursor_location
        line = self.document.get_line(row)[:column]
        match = _WORD.search(line)
        return match.group(0) if match else ""

    def complete(self) -> bool:
        """Complete the name before the cursor; False when there is nothing to complete (tab moves on)."""
        from ratui.console.data import table_completions

        typed = self.prefix()
        if not typed or self.selection.start != self.selection.end:
            return False
        names = table_completions(typed, self.complete_from, "")
        names = [n for n in names if n.lower().startswith(typed.lower())] or names
        if not names:
            return False
        common = names[0] if len(names) == 1 else _common_prefix(names)
        if len(common) > len(typed):
            row, column = self.cursor_location
            self.replace(common, (row, column - len(typed)), (row, column))
        if len(names) > 1:
            self.post_message(self.Completions(names))
        return True


def _common_prefix(names: list[str]) -> str:
    first, last = min(names), max(names)
    size = 0
    while size < min(len(first), len(last)) and first[size].lower() == last[size].lower():
        size += 1
    return first[:size]
