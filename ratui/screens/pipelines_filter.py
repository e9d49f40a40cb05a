"""The Pipelines screen's name filter (`/` as you type, enter keeps it, esc clears) and the line under the tabs
that says it beside the working ref; folding the whole tree one level ([ and ]).

`PipelineFilter` is a mixin of PipelinesScreen: it rebuilds the screen's tree (`build_tree`) when the filter
changes."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Input, Static

from ratui.engine.vocabulary import MAIN
from ratui.screens.base import close_field, open_field
from ratui.screens.pipelines_tree import EXPAND_ALL_UP_TO, PipelineTree, let_through


def ref_line(ref: str, shown: tuple[str, int, int] | None = None, large: bool = False) -> Text:
    """The working ref; `shown`: (filter, pipelines it matches, pipelines in all) while a filter is on."""
    text = Text()
    if shown is not None:
        what, matched, total = shown
        text.append("filter ", style="bold yellow")
        text.append(what, style="bold reverse yellow")
        text.append(f" {matched:,} of {total:,} · esc clears · ", style="yellow")
    if ref == MAIN:
        text.append("⎇ on main", style="bold cyan")
        hints = " · / filter · [ ] fold" if large and shown is None else ""
        text.append(f" · runs merge into main{hints} · 4 Branches switches · h history · P publish",
                    style="dim")
    else:
        text.append(f" ⎇ on {ref} ", style="bold reverse yellow")
        text.append(f" runs fork from and merge into {ref}; main untouched · P publish", style="dim")
    return text


class PipelineFilter:
    """The filter's state (`filter`, as typed) and keys, and the line that says it."""

    filter: str
    project: Any
    compiled: Any
    app: Any

    def show_ref(self) -> None:
        shown = None
        if self.filter and self.project is not None:
            shown = (self.filter, len(self._matching()), len(self.project.pipelines))
        large = self.project is not None and len(self.project.pipelines) > EXPAND_ALL_UP_TO
        text = ref_line(self.app.controller.ref, shown, large)
        if self.compiled is None and self.project is not None:
            text = Text("as last compiled · checking the project…", style="bold yellow")
        self.query_one("#pipelines-ref", Static).update(text)

    def _matching(self) -> list[str]:
        """The pipelines the filter lets through (every pipeline without a filter)."""
        return let_through(self.project.pipelines if self.project is not None else [], self.filter)

    def action_filter(self) -> None:
        if self.project is not None:
            open_field(self.query_one("#pipelines-filter", Input), self.filter)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "pipelines-filter":
            event.stop()
            if event.value != self.filter and not event.input.has_class("hidden"):
                self._set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "pipelines-filter":
            event.stop()
            close_field(event.input, self.query_one(PipelineTree))

    def action_clear_filter(self) -> None:
        field = self.query_one("#pipelines-filter", Input)
        if not field.has_class("hidden"):
            close_field(field, self.query_one(PipelineTree))
        if self.filter:
            self._set_filter("")

    def _set_filter(self, text: str) -> None:
        self.filter = text
        if self.project is not None:
            self.build_tree()
            self.show_ref()

    def action_fold_all(self) -> None:
        """[: collapse the whole tree one level: every layer, then every namespace."""
        self.query_one(PipelineTree).fold_one_level()

    def action_unfold_all(self) -> None:
        """]: expand the whole tree one level: every namespace, then every layer (filled as they open)."""
        self.query_one(PipelineTree).unfold_one_level()
