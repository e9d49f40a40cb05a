"""Logs: the project's log files (`.ratui/logs/`): Spark's log by default, the console's and the rest on `tab`.

Read from the end (the newest entries, at most a few MB: the info line says what older text is left out) in a
thread worker; a level filter (l: everything, ERROR, WARN and above, INFO and above), `/` search with `n` / `N`,
and `f` to follow the file as it grows (its size polled each second in a worker; a truncated or replaced file is
read again). Lines wrap to the width; an entry's stack trace stays with it and is filtered with it.
"""

from __future__ import annotations

from pathlib import Path

from rich.cells import chop_cells
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Input, Static

from ratui.console.logs import (
    FILTERS, LEVELS, LogChunk, LogFile, LogFileInfo, LogModel, Match, describe, find_matches, header_parts,
    list_logs, match_spans,
)
from ratui.engine.vocabulary import format_bytes
from ratui.messages import LogPolled, LogRead
from ratui.screens.base import ConsoleScreen, close_field, open_field
from ratui.widgets.chrome import NavBar, StatusLine

POLL_SECONDS = 1.0
INDENT = 2  # the rows that continue a line too long for one
LEVEL_STYLE = {"ERROR": "bold red", "WARN": "yellow", "INFO": "green", "DEBUG": "dim", "TRACE": "dim", "": ""}
MATCH_STYLE = Style(reverse=True)
CURRENT_STYLE = Style(color="black", bgcolor="yellow", bold=True)


class LogView(ScrollView, can_focus=True):
    """The entries of a LogModel that the level filter shows, wrapped to the width, drawn a line at a time (the
    Line API: a big log costs only the lines on screen); search matches lit, the current one brightest."""

    DEFAULT_CSS = """
    LogView {
        height: 1fr;
        background: $surface;
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.model: LogModel = LogModel()
        self.entries_shown: list[int] = []  # entry indices shown, in order
        self.rows: list[tuple[int, int, int, int]] = []  # (entry, line, start, end) per screen row
        self.first_row: dict[tuple[int, int], int] = {}  # (entry, line) -> its first row
        self.query_text = ""
        self.current: Match | None = None
        self.pinned = True  # at the end, following it
        self._wrap_width = 0

    # --------------------------------------------------------------------------------------- content

    def show(self, model: LogModel, visible: list[int]) -> None:
        self.model = model
        self.entries_shown = visible
        self._rebuild()

    def append(self, visible: list[int], first_changed: int) -> None:
        """Entries from `first_changed` on are new or grew: lay out only them again."""
        self.entries_shown = visible
        cut = next((i for i, e in enumerate(visible) if e >= first_changed), len(visible))
        if cut < len(visible) and (visible[cut], 0) in self.first_row:
            start_row = self.first_row[(visible[cut], 0)]
            for entry, line, _s, _e in self.rows[start_row:]:
                self.first_row.pop((entry, line), None)
            del self.rows[start_row:]
        self._layout(visible[cut:])
        self._update_size()

    def _rebuild(self) -> None:
        self.rows = []
        self.first_row = {}
        self._layout(self.entries_shown)
        self._update_size()

    def _layout(self, entries: list[int]) -> None:
        """Rows for these entries: a line longer than the width goes on over rows indented by INDENT."""
        width = max(10 + INDENT, self._width())
        self._wrap_width = width
        rows, first_row, model = self.rows, self.first_row, self.model.entries
        rest = width - INDENT
        for index in entries:
            for number, line in enumerate(model[index].lines):
                first_row[(index, number)] = len(rows)
                size = len(line)
                if size <= width and (size * 2 <= width or line.isascii()):
                    rows.append((index, number, 0, size))
                elif line.isascii():
                    start, room = 0, width
                    while size - start > room:  # break after a space in the second half of the row, if any
                        space = line.rfind(" ", start + room // 2, start + room)
                        end = space + 1 if space > start else start + room
                        rows.append((index, number, start, end))
                        start, room = end, rest
                    rows.append((index, number, start, size))
                else:
                    head = chop_cells(line, width)[0]
                    rows.append((index, number, 0, len(head)))
                    start = len(head)
                    for piece in chop_cells(line[start:], rest):
                        rows.append((index, number, start, start + len(piece)))
                        start += len(piece)

    def _width(self) -> int:
        return self.scrollable_content_region.width or self.size.width or 80

    def _update_size(self) -> None:
        self.virtual_size = Size(self._wrap_width, len(self.rows))
        self.refresh()

    def on_resize(self, _event) -> None:
        if self._width() == self._wrap_width or not self.rows:
            if self.pinned:  # taller or shorter (the search field came or went): still at the end
                self.pin_end()
            return
        if self.rows:
            anchor = self.rows[min(len(self.rows) - 1, int(self.scroll_y))]
            pinned = self.pinned
            self._rebuild()
            if pinned:
                self.pin_end()
            else:
                self.scroll_to(y=self.row_of(anchor[0], anchor[1], anchor[2]), animate=False, immediate=True)

    def pin_end(self) -> None:
        """Show the end and stay there as lines arrive or the layout changes, until scrolled up."""
        self.pinned = True
        self.scroll_end(animate=False, immediate=True)
        self.call_after_refresh(self._to_end)

    def _to_end(self) -> None:
        if self.pinned:
            self.scroll_end(animate=False, immediate=True)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new < old and new < self.max_scroll_y:
            self.pinned = False
        elif new >= self.max_scroll_y:
            self.pinned = True

    def is_at_end(self) -> bool:
        return self.pinned or self.scroll_y >= self.max_scroll_y

    def row_of(self, entry: int, line: int, column: int = 0) -> int:
        """The screen row showing character `column` of that line."""
        row = self.first_row.get((entry, line), 0)
        while row + 1 < len(self.rows) and self.rows[row + 1][:2] == (entry, line) and self.rows[row + 1][2] <= column:
            row += 1
        return row

    def scroll_to_match(self, match: Match) -> None:
        row = self.row_of(match.entry, match.line, match.start)
        top, height = int(self.scroll_y), self.scrollable_content_region.height
        if not top <= row < top + height:
            self.scroll_to(y=max(0, row - height // 3), animate=False, immediate=True)
        self.refresh()

    # ---------------------------------------------------------------------------------------- drawing

    def render_line(self, y: int) -> Strip:
        row_index = int(self.scroll_y) + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if row_index >= len(self.rows):
            return Strip.blank(width, base)
        entry_index, number, start, end = self.rows[row_index]
        entry = self.model.entries[entry_index]
        line = entry.lines[number]
        indent = INDENT if start > 0 else 0  # the rest of a line too long for one row
        text = Text(" " * indent + line[start:end], no_wrap=True, end="", style=base)
        if number == 0:
            parts = header_parts(line)
            for span, style in ((parts.at, "dim"), (parts.level, LEVEL_STYLE.get(entry.level, "")),
                                (parts.source, "bold")):
                if span is not None and style:
                    text.stylize(style, indent + max(0, span[0] - start), indent + max(0, span[1] - start))
            if parts.at is None and parts.level is None:
                text.stylize(LEVEL_STYLE.get(entry.level, ""))
        else:  # the rest of a message, a stack trace (its frames quieter)
            frame = line.lstrip().startswith(("at ", "... "))
            text.stylize(("red dim" if frame else "red") if entry.level == "ERROR" else "dim")
        if self.query_text:
            current = self.current
            for s, e in match_spans(line, self.query_text):
                if e <= start or s >= end:
                    continue
                lit = CURRENT_STYLE if (current is not None and current.entry == entry_index
                                        and current.line == number and current.start == s) else MATCH_STYLE
                text.stylize(lit, indent + max(0, s - start), indent + min(end, e) - start)
        return Strip(list(text.render(self.app.console)), text.cell_len).crop_extend(0, width, base)


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

    def _go(self) -> None:
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
        self._go()

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
        self._go()

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


# ----------------------------------------------------------------------------------- worker functions


def read_log(log_dir: Path, name: str) -> tuple[list[LogFileInfo], LogFile, LogChunk, LogModel]:
    """(In a worker) the files there are, and the newest part of `name` parsed into entries."""
    files = list_logs(log_dir)
    logfile = LogFile(Path(log_dir) / name)
    chunk = logfile.read()
    model = LogModel()
    model.extend(chunk.lines)
    model.trim()
    return files, logfile, chunk, model


def poll_log(logfile: LogFile, log_dir: Path) -> tuple[LogFile, LogChunk | None, list[LogFileInfo]]:
    """(In a worker) what the followed file gained since the last read."""
    return logfile, logfile.poll(), list_logs(log_dir)
