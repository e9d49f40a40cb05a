"""Logs: the project's log files (`.ratui/logs/`): Spark's log by default, the console's and the rest on `tab`.

Read from the end (the newest entries, at most a few MB: the info line says what older text is left out) in a
thread worker; a level filter (l: everything, ERROR, WARN and above, INFO and above), `/` search with `n` / `N`,
and `f` to follow the file as it grows (its size polled each second in a worker; a truncated or replaced file is
read again). Lines wrap to the width; an entry's stack trace stays with it and is filtered with it.

The log itself is drawn by widgets/log_view.py; reading and following the files is console/logs.py's (in workers).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Footer, Input, Static

from ratui.console.logs import (
    FILTERS, LEVELS, LogChunk, LogFile, LogFileInfo, LogModel, Match, describe, find_matches, poll_log, read_log,
)
from ratui.engine.vocabulary import format_bytes
from ratui.messages import LogPolled, LogRead
from ratui.screens.base import ConsoleScreen, close_field, open_field
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.widgets.log_view import LEVEL_STYLE, LogView

POLL_SECONDS = 1.0


class SparkLogScreen(ConsoleScreen):
    MODE = "logs"
    AUTO_FOCUS = "#logs-view"
    DEFAULT_CSS = """
    #logs-main {
        height: 1fr;
    }
    #logs-info {
        height: auto;
        padding: 0 1;
    }
    #logs-search {
        dock: top;
    }
    #logs-empty {
        height: 1fr;
        padding: 1 2;
    }
    """
    BINDINGS = [
        Binding("l", "cycle_level", "Level", id="logs.level"),
        Binding("slash", "search", "Search", id="logs.search", key_display="/"),
        Binding("n", "next_match(1)", "Next match", id="logs.next", show=False),
        Binding("N", "next_match(-1)", "Previous match", id="logs.prev", show=False, key_display="N"),
        Binding("f", "toggle_follow", "Follow", id="logs.follow"),
        Binding("o", "next_file(1)", "Other file", id="logs.file"),
        Binding("tab", "next_file(1)", "Next file", id="logs.next_file", show=False),
        Binding("shift+tab", "next_file(-1)", "Previous file", id="logs.prev_file", show=False),
        Binding("G", "end", "End", id="logs.end", show=False, key_display="G"),
        Binding("g", "start", "Start", id="logs.start", show=False),
        Binding("escape", "clear_search", "Clear search", id="logs.clear", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.files: list[LogFileInfo] = []
        self.name_shown = "spark.log"
        self.logfile: LogFile | None = None
        self.chunk: LogChunk | None = None  # the last reset read (what is left out, a note)
        self.model = LogModel()
        self.min_level: str | None = None
        self.following = False
        self.query_text = ""
        self.matches: list[Match] = []
        self.current: int | None = None
        self._polling = False
        self._poller = None

    def compose(self) -> ComposeResult:
        yield NavBar("logs")
        with Vertical(id="logs-main"):
            yield Input(placeholder="search (case-insensitive; enter finds, esc closes)", id="logs-search",
                        classes="hidden", compact=True)
            yield Static(Text("reading the log…", style="dim"), id="logs-info")
            yield LogView(id="logs-view")
            yield Static(id="logs-empty", classes="hidden")
        yield StatusLine()
        yield Footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#logs-search", Input).cursor_blink = self.app.cursor_blink
        self._poller = self.set_interval(POLL_SECONDS, self._poll, name="logs-follow")
        self.read()

    @property
    def view(self) -> LogView:
        return self.query_one("#logs-view", LogView)

    def log_dir(self) -> Path:
        settings = getattr(self.app.controller, "settings", None)
        return settings.log_dir if settings is not None else self.app.root / ".ratui" / "logs"

    # ------------------------------------------------------------------------------------------ data

    def read(self) -> None:
        """Read the shown file afresh (its newest part), with the list of files there are."""
        self.load(LogRead, read_log, self.log_dir(), self.name_shown)

    @on(LogRead)
    def _read(self, message: LogRead) -> None:
        files, logfile, chunk, model = message.value
        if logfile.path.name != self.name_shown:
            return  # another file was chosen meanwhile
        self.files = files
        self.logfile = logfile
        self.chunk = chunk
        self.model = model
        self._polling = False
        self.show_entries(to_end=True)

    def _poll(self) -> None:
        if self.following and self.is_current and not self._polling and self.logfile is not None:
            self._polling = True
            self.load(LogPolled, poll_log, self.logfile, self.log_dir())

    def on_screen_resume(self) -> None:
        if self.logfile is not None and not self._polling:  # what the file gained while another screen was shown
            self._polling = True
            self.load(LogPolled, poll_log, self.logfile, self.log_dir())

    @on(LogPolled)
    def _polled(self, message: LogPolled) -> None:
        logfile, chunk, files = message.value
        self._polling = False
        if logfile is not self.logfile:
            return
        self.files = files
        if chunk is None:
            self.show_info()
            return
        if chunk.reset:
            self.chunk = chunk
            self.model = LogModel()
            self.model.extend(chunk.lines)
            self.model.trim()
            if chunk.note in ("truncated", "replaced", "removed"):
                self.notify(f"{logfile.path.name} was {chunk.note}: reading it again.", title="Logs", timeout=3,
                            markup=False)
            self.show_entries(to_end=True)
            return
        view = self.view
        at_end = view.is_at_end()
        if chunk.replaces_partial:
            self.model.drop_last_line()
        first_changed = self.model.extend(chunk.lines)
        if self.model.trim():
            self.show_entries(to_end=at_end)
            return
        view.append(self.model.visible(self.min_level), first_changed)
        if self.query_text:
            self._find(keep=True)
        self.show_empty()
        if at_end:
            view.pin_end()
        self.show_info()

    def load_failed(self, kind, error) -> bool:
        if kind is LogPolled:
            self._polling = False
            return True
        if kind is LogRead:
            self.query_one("#logs-info", Static).update(Text(f"{self.name_shown} could not be read: {error}",
                                                             style="red"))
            return True
        return False

    # ---------------------------------------------------------------------------------------- render

    def show_entries(self, to_end: bool = False) -> None:
        view = self.view
        view.show(self.model, self.model.visible(self.min_level))
        self._find(keep=True)
        self.show_empty()
        if to_end:
            view.pin_end()
        self.show_info()

    def show_empty(self) -> None:
        """Say what a missing or empty file is and when it appears, or that the filter hides everything."""
        view, empty = self.view, self.query_one("#logs-empty", Static)
        chunk, name = self.chunk, self.name_shown
        what, when = describe(name)
        text: Text | None = None
        if chunk is not None and chunk.error:
            text = Text(f"{name} could not be read: {chunk.error}", style="red")
        elif chunk is not None and not chunk.exists:
            text = Text(when + "\n\n", style="bold")
            text.append(f".ratui/logs/{name}: {what}.", style="dim")
        elif chunk is not None and not self.model.entries:
            text = Text(f"{name} is empty" + (" so far." if name != "spark.log" else
                                              ": Spark started and has logged no warning or error yet."),
                        style="bold")
            text.append(f"\n\n.ratui/logs/{name}: {what}.", style="dim")
        elif chunk is not None and not view.entries_shown:
            text = Text(f"No entries at {self.min_level} or above in what is shown; l shows more.", style="dim")
        if text is None:
            empty.add_class("hidden")
            view.remove_class("hidden")
        else:
            empty.update(text)
            empty.remove_class("hidden")
            view.add_class("hidden")

    def show_info(self) -> None:
        text = Text()
        name = self.name_shown
        text.append(name, style="bold")
        info = next((f for f in self.files if f.name == name), None)
        if info is not None and info.size is not None:
            text.append(f"  {format_bytes(info.size)}", style="dim")
        others = [f.name for f in self.files if f.name != name and f.size is not None]
        if others:
            text.append("   other files: ", style="dim")
            text.append(" · ".join(others))
            text.append(" (tab)", style="dim")
        text.append("\n")
        text.append("level ", style="dim")
        level_word = {None: "all", "ERROR": "ERROR only"}.get(self.min_level, f"{self.min_level} and above")
        text.append(level_word, style="bold cyan")
        text.append(" (l)  ", style="dim")
        counts = self.model.level_counts()
        for level in (*LEVELS, ""):
            if level in counts:
                text.append(f" {level or 'other'} ", style=LEVEL_STYLE.get(level, "") or "dim")
                text.append(f"{counts[level]:,} ")
        if not counts:
            text.append(" no entries", style="dim")
        text.append("   ")
        text.append("following" if self.following else "not following", style="green" if self.following else "dim")
        text.append(" (f)", style="dim")
        notes = []
        chunk = self.chunk
        if chunk is not None and (chunk.skipped_bytes or self.model.dropped):
            left_out = []
            if chunk.skipped_bytes:
                left_out.append(f"the first {format_bytes(chunk.skipped_bytes)} of the file")
            if self.model.dropped:
                left_out.append(f"{self.model.dropped:,} more entries")
            notes.append(Text(f"older entries not shown ({' and '.join(left_out)})", style="yellow"))
        if self.query_text:
            found = Text("/", style="dim")
            found.append(self.query_text, style="bold")
            if self.matches:
                found.append(f"  {(self.current or 0) + 1}/{len(self.matches)} matches", style="bold")
                found.append(" (n / N)", style="dim")
            else:
                found.append("  no match" + (" at this level" if self.min_level else ""), style="yellow")
            notes.append(found)
        if notes:
            text.append("\n")
            text.append(Text("   ").join(notes))
        self.query_one("#logs-info", Static).update(text)

    # ---------------------------------------------------------------------------------------- search

    def _find(self, keep: bool = False) -> None:
        """Find the query in what the filter shows; keep the current match when it is still there (`keep`),
        else start from the first match at or below the top of the view (the last one when none is)."""
        view = self.view
        old = self.matches[self.current] if (keep and self.current is not None and self.current < len(self.matches)) \
            else None
        self.matches = find_matches(self.model.entries, view.entries_shown, self.query_text) if self.query_text else []
        self.current = None
        if self.matches:
            if old is not None and old in self.matches:
                self.current = self.matches.index(old)
            elif keep and old is not None:
                self.current = next((i for i, m in enumerate(self.matches)
                                     if (m.entry, m.line) >= (old.entry, old.line)), len(self.matches) - 1)
            else:
                top = int(view.scroll_y)
                self.current = next((i for i, m in enumerate(self.matches)
                                     if view.row_of(m.entry, m.line, m.start) >= top), len(self.matches) - 1)
        view.query_text = self.query_text
        view.current = self.matches[self.current] if self.current is not None else None
        view.refresh()

    def _show_current_match(self) -> None:
        view = self.view
        if self.current is not None:
            view.current = self.matches[self.current]
            view.scroll_to_match(view.current)
        self.show_info()

    def action_search(self) -> None:
        open_field(self.query_one("#logs-search", Input), self.query_text)

    @on(Input.Submitted, "#logs-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        close_field(self.query_one("#logs-search", Input), self.view)
        self.query_text = event.value.strip()
        self._find()
        self._show_current_match()

    def action_next_match(self, step: int) -> None:
        if self.query_one("#logs-search", Input).has_focus:
            return
        if not self.matches:
            if self.query_text:
                self.notify(f"No match for '{self.query_text}'.", title="Search", severity="warning", timeout=2,
                            markup=False)
            else:
                self.notify("Search first: / and the text to find.", title="Search", timeout=2, markup=False)
            return
        self.current = ((self.current or 0) + step) % len(self.matches)
        self._show_current_match()

    def action_clear_search(self) -> None:
        field = self.query_one("#logs-search", Input)
        if not field.has_class("hidden"):
            field.add_class("hidden")
            self.view.focus()
            return
        if self.query_text:
            self.query_text = ""
            self._find()
            self.show_info()

    # ------------------------------------------------------------------------------------- the rest

    def action_cycle_level(self) -> None:
        index = FILTERS.index(self.min_level)
        self.min_level = FILTERS[(index + 1) % len(FILTERS)]
        view = self.view
        at_end = view.is_at_end()
        anchor = view.rows[int(view.scroll_y)] if view.rows and int(view.scroll_y) < len(view.rows) else None
        view.show(self.model, self.model.visible(self.min_level))
        self._find(keep=True)
        self.show_empty()
        if at_end or anchor is None:
            view.pin_end()
        else:  # keep the place: the first shown entry at or after the one that was at the top
            entry = next((e for e in view.entries_shown if e >= anchor[0]), None)
            if entry is None:
                view.pin_end()
            else:
                view.scroll_to(y=view.row_of(entry, 0), animate=False, immediate=True)
        self.show_info()

    def action_toggle_follow(self) -> None:
        self.following = not self.following
        if self.following:
            self.view.pin_end()
            self._poll()
        self.show_info()

    def action_next_file(self, step: int) -> None:
        if self.query_one("#logs-search", Input).has_focus:
            return
        names = [f.name for f in self.files if f.size is not None or f.name == self.name_shown] or ["spark.log"]
        if self.name_shown not in names:
            names.insert(0, self.name_shown)
        index = names.index(self.name_shown)
        self.name_shown = names[(index + step) % len(names)]
        self.logfile = None
        self.matches, self.current = [], None
        self.read()

    def action_end(self) -> None:
        self.view.pin_end()

    def action_start(self) -> None:
        view = self.view
        view.pinned = False
        view.scroll_home(animate=False, immediate=True)
