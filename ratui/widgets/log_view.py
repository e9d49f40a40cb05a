"""A log drawn a line at a time: the entries of a LogModel (console/logs.py) that a level filter shows, wrapped to
the width (a continued line indented), its header's parts coloured by level, search matches lit (the current one
brightest); it follows the end until scrolled up. The Logs screen shows one."""

from __future__ import annotations

from rich.cells import chop_cells
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ratui.console.logs import LogModel, Match, header_parts, match_spans

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
