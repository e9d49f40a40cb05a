"""Compare: two runs of one pipeline side by side (opened from Runs with `c`): each phase's time, what the write
did (rows, files, schema changes), each quality test's result, what the runs read; B against A in a last column.
The older run is A. What the history does not record is said at the bottom."""

from __future__ import annotations

import textwrap

from rich.console import Group
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Footer, Static

from ratui.console import compare
from ratui.console.format import fmt_ms, fmt_time, glyph, outcome, short_key
from ratui.messages import CompareLoaded
from ratui.screens.base import ConsoleScreen
from ratui.widgets.chrome import NavBar, StatusLine

TONE_STYLE = {compare.BETTER: "green", compare.WORSE: "red", compare.CHANGED: "yellow", compare.SAME: "dim", "": ""}


GAP = 2  # columns between the table's columns
HEAD_ROWS = ("run", "started (UTC)")  # said in the head above the table


def line_of(cells: tuple[str, ...], widths: tuple[int, ...], styles: tuple[str, ...]) -> Text:
    """One row of the side-by-side table: each cell wrapped to its column, the row as tall as its tallest cell."""
    wrapped = [textwrap.wrap(cell, width, break_on_hyphens=False) or [""] for cell, width in zip(cells, widths)]
    height = max(len(w) for w in wrapped)
    out = Text()
    for index in range(height):
        for column, (pieces, width, style) in enumerate(zip(wrapped, widths, styles)):
            piece = pieces[index] if index < len(pieces) else ""
            if column == 0 and index > 0 and cells[0].startswith("  "):
                piece = "    " + piece  # a long label goes on under itself
            out.append(piece.ljust(width), style=style)
            if column < len(widths) - 1:
                out.append(" " * GAP)
        out.append("\n")
    return out


class CompareScreen(ConsoleScreen):
    DEFAULT_CSS = """
    #compare-main {
        height: 1fr;
        padding: 0 1;
    }
    #compare-head {
        height: auto;
        padding: 1 0 1 0;
    }
    #compare-body {
        height: 1fr;
    }
    """
    AUTO_FOCUS = "#compare-body"
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="compare.back"),
        Binding("a", "open_run(0)", "Open A", id="compare.open_a"),
        Binding("b", "open_run(1)", "Open B", id="compare.open_b"),
    ]

    def __init__(self, run_a: str, run_b: str, origin: str = "runs") -> None:
        super().__init__()
        self.run_ids = (run_a, run_b)
        self.origin = origin
        self.comparison: compare.Comparison | None = None

    def compose(self) -> ComposeResult:
        yield NavBar(self.origin)
        with Vertical(id="compare-main"):
            yield Static(Text("comparing runs…", style="dim"), id="compare-head")
            with VerticalScroll(id="compare-body"):
                yield Static(id="compare-table")
        yield StatusLine()
        yield Footer()

    def project_ready(self, compiled) -> None:
        self.load(CompareLoaded, compare.load, self.app.controller.get_run, *self.run_ids)

    @on(CompareLoaded)
    def _loaded(self, message: CompareLoaded) -> None:
        self.comparison = message.value
        self.render_comparison()
        self.app.mark("compare_ready")

    def load_failed(self, kind, error) -> bool:
        if kind is CompareLoaded and isinstance(error, compare.CompareError):
            self.query_one("#compare-head", Static).update(Text(f"Cannot compare: {error}", style="red"))
            return True
        return False

    # ---------------------------------------------------------------------------------------- render

    def render_comparison(self) -> None:
        c = self.comparison
        if c is None:
            return
        namespace = c.pipeline.split(".")[0]
        head = Text()
        head.append("Compare ", style="dim")
        head.append(short_key(c.pipeline, namespace), style="bold")
        for letter, record in (("A", c.a), ("B", c.b)):
            status = outcome(record.get("status"), record.get("warnings") or 0, record.get("reason"),
                             record.get("error_code"))
            icon, style = glyph(status)
            head.append(f"\n{letter} ", style="bold")
            head.append(record["id"])
            head.append(f"  {fmt_time(record.get('started_at') or record.get('queued_at'))}", style="dim")
            head.append(f"  {icon} {status}", style=style)
            head.append(f"  {fmt_ms(record.get('duration_ms'))}", style="dim")
            if letter == "B":
                later = next((r.change for r in c.section("Run").rows if r.label == "started (UTC)"), "")
                if later:
                    head.append(f"  ({later})", style="dim")
        self.query_one("#compare-head", Static).update(head)

        body_widget = self.query_one("#compare-body", VerticalScroll)
        width = max(40, body_widget.scrollable_content_region.width or self.app.size.width - 4)
        rows = [r for section in c.sections for r in section.rows if r.label not in HEAD_ROWS]
        a_width = min(24, max([len(r.a) for r in rows] + [len("A (older)")]))
        b_width = min(24, max([len(r.b) for r in rows] + [len("B (newer)")]))
        change_width = min(24, max([len(r.change) for r in rows] + [len("B against A")]))
        label_width = min(36, max([len(r.label) + 2 for r in rows] + [14]))
        spare = width - (label_width + a_width + b_width + change_width + 3 * GAP)
        if spare < 0:  # narrow: the labels wrap first, then the changes
            label_width = max(14, label_width + spare)
            spare = width - (label_width + a_width + b_width + change_width + 3 * GAP)
            change_width = max(8, change_width + min(0, spare))
        widths = (label_width, a_width, b_width, change_width)
        body = Text(no_wrap=True, overflow="crop")
        body.append_text(line_of(("", "A (older)", "B (newer)", "B against A"), widths, ("", "bold", "bold", "bold")))
        for section in c.sections:
            body.append(f"\n{section.title}\n", style="bold cyan")
            if section.note:
                for piece in textwrap.wrap(section.note, width - 2) or [""]:
                    body.append(f"  {piece}\n", style="dim italic")
            for row in section.rows:
                if row.label in HEAD_ROWS:
                    continue
                styles = ("", "", "bold" if row.a != row.b else "", TONE_STYLE.get(row.tone, ""))
                body.append_text(line_of(("  " + row.label, row.a, row.b, row.change), widths, styles))
        parts: list = [body]
        if c.missing:
            notes = Text("Not in the history\n", style="bold")
            for line in c.missing:
                notes.append(f"  · {line}\n", style="dim")
            parts.append(notes)
        self.query_one("#compare-table", Static).update(Group(*parts))

    def on_resize(self, event) -> None:
        super().on_resize(event)
        self.call_after_refresh(self.render_comparison)

    # --------------------------------------------------------------------------------------- actions

    def action_back(self) -> None:
        self.dismiss()

    def action_open_run(self, which: int) -> None:
        c = self.comparison
        run_id = (c.a["id"], c.b["id"])[which] if c is not None else None
        if run_id:
            self.app.open_run(run_id)
