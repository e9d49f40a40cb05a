"""Run detail, live: phases with state and duration as they happen, rows, branch, log tail, phase profile.

Opened when a run starts from the console (following a batch from one run to the next) and from the runs list.
A run this console started is fed by engine events; any other run is read from the history, and re-read every
second while another process is still running it.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Input, Label, RichLog, Static

from ratui.console.logs import match_spans
from ratui.console.format import OUTCOME_WORDS, fmt_count, fmt_ms, fmt_time, glyph, on_ref, short_key
from ratui.console.live import LiveRun
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.widgets.panes import Pane, toggle_maximize
from ratui.widgets.run_view import DiffSummary, PhaseTable, QualitySummary
from ratui.messages import RunRecordLoaded
from ratui.screens.base import ConsoleScreen, close_field, is_narrow, open_field

LEVEL_STYLE = {"error": "red", "warning": "yellow", "debug": "dim", "info": ""}
MATCH_STYLE = "reverse"
CURRENT_STYLE = "bold black on yellow"


class RunLog(RichLog):
    """The run's log; it wraps its lines again when its width changes (a narrow terminal stacks the panes)."""

    _width = 0

    def on_resize(self, event) -> None:
        if event.size.width != self._width:
            self._width = event.size.width
            relog = getattr(self.screen, "relog", None)
            if relog is not None:
                self.call_after_refresh(relog)


class RunScreen(ConsoleScreen):
    DEFAULT_CSS = """
    #run-search {
        margin-top: 1;
    }
    """
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="run.back"),
        Binding("slash", "search", "Search log", id="run.search", key_display="/"),
        Binding("n", "next_match(1)", "Next match", id="run.next", show=False),
        Binding("N", "next_match(-1)", "Previous match", id="run.prev", show=False, key_display="N"),
        Binding("c", "cancel", "Cancel run", id="run.cancel"),
        Binding("q", "quality", "Quality", id="run.quality"),
        Binding("v", "toggle_debug", "Debug log", id="run.debug"),
        Binding("R", "rerun", "Re-run", id="run.rerun", key_display="R"),
        Binding("F", "toggle_follow", "Follow batch", id="run.follow", show=False),
        Binding("m", "maximize", "Maximize pane", id="run.maximize", show=False),
    ]
    HELP_KEYS = (("tab", "The sections (phases, quality, data diff) / the log: the one focused scrolls"),
                 ("↑ ↓ PgUp PgDn Home End", "Scroll the focused pane"))

    def __init__(self, run_id: str | None = None, *, batch: str | None = None, origin: str = "") -> None:
        super().__init__()
        self.run_id = run_id
        self.batch = batch
        self.follow = batch is not None
        self.origin = origin
        self.run: LiveRun | None = None
        self.frame = 0
        self.show_debug = False
        self.logged = 0  # log entries already written to the RichLog
        # `/` search in the log: the text, its matches ((entry index, start, end) in the written line), the current
        # one, and the RichLog line (counted from the first ever written: it drops old ones) of each entry written
        self.search = ""
        self.matches: list[tuple[int, int, int]] = []
        self.current: int | None = None
        self.line_of: dict[int, int] = {}
        self._ticker = None
        self._poller = None

    def compose(self) -> ComposeResult:
        yield NavBar(self.origin or "")
        with Vertical(id="run-main"):
            yield Static(Text("loading run…", style="dim"), id="run-head")
            # first thing under the head: what went wrong, at any size (hidden while nothing did)
            yield Static(id="run-error", classes="hidden")
            with Horizontal(id="run-body"):
                with Pane(id="run-left"):
                    yield Label("Phases", classes="section")
                    yield PhaseTable(id="run-phases")
                    yield Label("Quality", classes="section")
                    yield QualitySummary(id="run-quality")
                    # shown once the run has a data diff (engine/run/data_diff.py)
                    yield Label("Data diff", classes="section hidden", id="run-diff-label")
                    yield DiffSummary(id="run-diff", classes="hidden")
                    yield Label("Batch", classes="section hidden", id="run-batch-label")
                    yield Static(id="run-batch", classes="hidden")
                with Vertical(id="run-right"):
                    yield Label("Log", classes="section", id="run-log-label")
                    yield Input(placeholder="search the log (enter finds, esc closes)", id="run-search",
                                classes="hidden", compact=True)
                    yield RunLog(id="run-log", max_lines=2000, wrap=True, markup=False, highlight=False,
                                 auto_scroll=True, min_width=20)
        yield StatusLine()
        yield Footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#run-search", Input).cursor_blink = self.app.cursor_blink
        self.show_search()

    def on_descendant_focus(self, event) -> None:
        """The pane that has the keys gets the room (below the breakpoint the panes are stacked: app.tcss)."""
        on_log = self.query_one("#run-right").has_focus_within
        self.query_one("#run-body").set_class(on_log, "-log-focused")
        self.show_search()

    # ------------------------------------------------------------------------------------------ data

    def project_ready(self, compiled) -> None:
        self.resolve()

    def resolve(self) -> None:
        """Pick the run to show: the live one if this console has it, else read it from the history."""
        store = self.app.store
        if self.batch is not None and self.follow:
            batch_runs = store.in_batch(self.batch)
            if batch_runs:
                newest = batch_runs[-1]
                if newest.run_id != self.run_id:
                    self.switch_to(newest.run_id)
                    return
        if self.run_id is None:
            self.query_one("#run-head", Static).update(Text("waiting for the first run of the batch…",
                                                            style="dim"))
            return
        live = store.get(self.run_id)
        if live is not None:
            self.run = live
            self.render_run()
        else:
            self.load(RunRecordLoaded, self.app.controller.get_run, self.run_id)

    def switch_to(self, run_id: str) -> None:
        self.run_id = run_id
        self.run = None
        self.logged = 0
        self.query_one("#run-log", RichLog).clear()
        self.resolve()

    @on(RunRecordLoaded)
    def _history_loaded(self, message: RunRecordLoaded) -> None:
        record = message.value
        if record is None:
            self.query_one("#run-head", Static).update(Text(f"no run '{self.run_id}' in the history", style="red"))
            return
        live = self.app.store.get(record["id"])
        if live is not None:  # it started (here) while we were reading
            self.run = live
        else:
            same = self.run is not None and not self.run.live and self.run.run_id == record["id"]
            self.run = LiveRun.from_history(record)
            self.run_id = record["id"]
            if not same:  # a re-read of the same run only appends its new log lines
                self.logged = 0
                self.query_one("#run-log", RichLog).clear()
            if not self.run.finished and self._poller is None:  # another process is running it: poll
                self._poller = self.set_interval(1.0, lambda: self.load(RunRecordLoaded, self.app.controller.get_run,
                                                                        self.run_id))
            elif self.run.finished and self._poller is not None:
                self._poller.stop()
                self._poller = None
        self.render_run()

    def runs_changed(self, change) -> None:
        if self.batch is not None and self.follow:
            self.resolve()
            return
        if self.run_id in change.changed:
            if self.run is None or not self.run.live:
                self.run = self.app.store.get(self.run_id)
            self.render_run()

    # ---------------------------------------------------------------------------------------- render

    def render_run(self) -> None:
        run = self.run
        if run is None:
            return
        now = self.app.clock()
        self.query_one("#run-head", Static).update(self.header(run, now))
        self.query_one(PhaseTable).show(run, now, self.frame)
        self.query_one(QualitySummary).show(run)
        self.query_one(DiffSummary).show(run)
        for widget in (self.query_one("#run-diff-label"), self.query_one(DiffSummary)):
            widget.set_class(not run.diff, "hidden")
        self.show_batch()
        error = self.query_one("#run-error", Static)
        error.set_class(not run.error, "hidden")
        if run.error:
            e = run.error
            text = Text()
            text.append(f"error[{e.get('code')}] ", style="bold red")
            if e.get("file"):
                where = e["file"]
                root = str(self.app.root) + "/"
                where = where[len(root):] if where.startswith(root) else where
                text.append(f"{where}{':' + str(e['line']) if e.get('line') else ''}: ", style="red")
            text.append(f"{on_ref(e.get('message') or '', run.ref)}\n", style="red")
            if e.get("hint"):
                text.append(f"  hint: {on_ref(e['hint'], run.ref)}", style="italic")
            error.update(text)
        else:
            error.update("")
        self.write_logs()
        active = not run.finished and run.live
        if active and self._ticker is None:
            self._ticker = self.set_interval(0.125, self.tick)
        elif not active and self._ticker is not None:
            self._ticker.stop()
            self._ticker = None

    def header(self, run: LiveRun, now: float) -> Text:
        icon, style = glyph(run.status)
        if run.status == "success" and run.warnings:
            icon, style = glyph("warned")
        text = Text()
        text.append(f"{run.pipeline}", style="bold")
        text.append("   ")
        text.append(f"{icon} {run.status}", style=f"bold {style}")
        if run.warnings:
            text.append(f"  ({run.warnings} quality warning{'s' if run.warnings != 1 else ''})", style="yellow")
        if self.batch is not None:
            runs = self.app.store.in_batch(self.batch)
            batch = self.app.controller.batches.get(self.batch)
            total = len(batch.keys) if batch else len(runs)
            text.append(f"   batch {len(runs)}/{total}" + (" · following" if self.follow else ""), style="dim")
        text.append("\n")
        # below the breakpoint a run on its own branch says the branch alone: its name (run-ID) holds the run's id,
        # and the line keeps strategy and trigger within 80 columns
        own_branch = run.branch == f"run-{run.run_id}" and is_narrow(self.app.size.width)
        fields = [
            *([("branch", run.branch)] if own_branch else [("run", run.run_id), ("branch", run.branch or "-")]),
            *([("into", run.ref)] if run.ref != "main" else []),
            ("strategy", run.strategy or "-"),
            ("trigger", run.trigger or "-"),
            *([("python", run.isolation)] if run.isolation else []),
        ]
        for name, value in fields:
            text.append(f"{name} ", style="dim")
            text.append(f"{value}   ")
        text.append("\n")
        elapsed = run.elapsed_ms(now)
        text.append("rows written ", style="dim")
        text.append(f"{fmt_count(run.rows_written) if run.finished else '…'}   ")
        text.append("time ", style="dim")
        text.append(f"{fmt_ms(elapsed)}   ")
        if run.started_at:
            text.append("started ", style="dim")
            text.append(fmt_time(run.started_at))
        if run.status == "skipped":
            if run.reason:
                text.append("\nskipped: ", style="dim")
                text.append(run.reason, style="yellow" if run.outcome == "upstream" else "")
        elif run.reason or run.run_type:  # what the run does (vocabulary.RUN_TYPES), and why it ran
            text.append("\n")
            if run.run_type:
                text.append("type ", style="dim")
                text.append(f"{run.run_type}   ")
            if run.reason:
                text.append("why ", style="dim")
                text.append(run.reason)
        return text

    def write_logs(self) -> None:
        run = self.run
        log = self.query_one("#run-log", RichLog)
        entries = list(run.logs)
        if self.logged == 0:
            self.line_of.clear()
            self.matches = []
        for index, entry in enumerate(entries[self.logged:], start=self.logged):
            if entry.level == "debug" and not self.show_debug:
                continue
            line = Text(f"{entry.at} ", style="dim")
            line.append(f"{entry.level:<7} ", style=LEVEL_STYLE.get(entry.level, "") or "dim")
            line.append(entry.message, style=LEVEL_STYLE.get(entry.level, ""))
            if self.search:
                for start, end in match_spans(line.plain, self.search):
                    self.matches.append((index, start, end))
                    current = self.current is not None and len(self.matches) - 1 == self.current
                    line.stylize(CURRENT_STYLE if current else MATCH_STYLE, start, end)
            self.line_of[index] = getattr(log, "_start_line", 0) + len(log.lines)
            log.write(line)
        self.logged = len(entries)
        if self.current is not None and self.current >= len(self.matches):  # fewer lines shown (debug hidden)
            self.current = len(self.matches) - 1 if self.matches else None
        if self.search:
            self.show_search()

    def show_batch(self) -> None:
        """A batch's overview: every pipeline of it in order, with its state (waiting, running, how it ended)."""
        if self.batch is None:
            return
        batch = self.app.controller.batches.get(self.batch)
        runs = {r.pipeline: r for r in self.app.store.in_batch(self.batch)}
        keys = batch.keys if batch is not None else list(runs)
        table = Table.grid(padding=(0, 1))
        for key in keys:
            run = runs.get(key)
            if run is None:
                state = "not started" if batch is not None and batch.done else "waiting"
                table.add_row(Text("·", style="dim"), Text(short_key(key, key.split(".")[0])),
                              Text(state, style="dim"), "")
                continue
            word = OUTCOME_WORDS.get(run.outcome, run.outcome) if run.finished else (run.current_phase or run.status)
            icon, style = glyph("warned" if run.outcome == "warned" else run.status)
            table.add_row(Text(icon, style=style), Text(short_key(key, key.split(".")[0]),
                                                       style="bold" if run.run_id == self.run_id else ""),
                          Text(word, style=style), Text(fmt_ms(run.elapsed_ms(self.app.clock())), style="dim"))
        self.query_one("#run-batch-label", Label).remove_class("hidden")
        widget = self.query_one("#run-batch", Static)
        widget.remove_class("hidden")
        widget.update(table)

    def tick(self) -> None:
        self.frame += 1
        run = self.run
        if run is not None:
            now = self.app.clock()
            self.query_one(PhaseTable).show(run, now, self.frame)
            if self.frame % 4 == 0:
                self.query_one("#run-head", Static).update(self.header(run, now))
                self.show_batch()

    # --------------------------------------------------------------------------------------- actions

    def action_back(self) -> None:
        field = self.query_one("#run-search", Input)
        if not field.has_class("hidden"):  # esc closes the search field first, then clears the search
            field.add_class("hidden")
            self.query_one("#run-log", RichLog).focus()
            return
        if self.search and not field.has_focus:
            self.find("")
            return
        self.dismiss()

    def action_cancel(self) -> None:
        if self.run is None or self.run.finished:
            self.notify("This run has finished: nothing to cancel.", severity="warning")
            return
        self.app.confirm_cancel([self.run.run_id])

    def action_rerun(self) -> None:
        """Run this run's pipeline again (forced: even when nothing changed), and follow the new run."""
        if self.run is None:
            return
        if not self.run.finished:
            self.notify("This run is still going: cancel it first (c), or wait for it.", severity="warning")
            return
        self.app.run_pipeline(self.run.pipeline, force=True)

    def action_quality(self) -> None:
        if self.run_id:
            self.app.open_quality(self.run_id)

    def relog(self) -> None:
        """The log's lines were wrapped for its old width: write them again for the new one."""
        if self.run is not None:
            self.logged = 0
            self.query_one("#run-log", RichLog).clear()
            self.write_logs()
            if self.current is not None:
                self.call_after_refresh(self.scroll_to_match)

    # ----------------------------------------------------------------------------------------- search

    def action_search(self) -> None:
        open_field(self.query_one("#run-search", Input), self.search)

    @on(Input.Submitted, "#run-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        close_field(self.query_one("#run-search", Input), self.query_one("#run-log", RichLog))
        self.find(event.value.strip())

    def find(self, text: str) -> None:
        """Light every match of `text` in the log (case-insensitive) and go to the first; while a search is on,
        the log stays where the match is instead of following new lines."""
        self.search = text
        self.current = 0 if text else None  # the first match found is lit as the current one
        log = self.query_one("#run-log", RichLog)
        log.auto_scroll = not text
        self.matches = []
        if self.run is not None:
            self.logged = 0
            log.clear()
            self.write_logs()
        if not self.matches:
            self.current = None
        self.show_search()
        if self.current is not None:
            self.call_after_refresh(self.scroll_to_match)
        elif not text:
            log.scroll_end(animate=False)

    def action_next_match(self, step: int) -> None:
        if self.query_one("#run-search", Input).has_focus:
            return
        if not self.matches:
            self.notify(f"No match for '{self.search}' in the log." if self.search else
                        "Search the log first: / and the text to find.", title="Search", timeout=2, markup=False)
            return
        self.current = ((self.current or 0) + step) % len(self.matches)
        log = self.query_one("#run-log", RichLog)
        self.logged = 0
        log.clear()
        self.write_logs()
        self.show_search()
        self.call_after_refresh(self.scroll_to_match)

    def scroll_to_match(self) -> None:
        if self.current is None or self.current >= len(self.matches):
            return
        log = self.query_one("#run-log", RichLog)
        entry = self.matches[self.current][0]
        line = self.line_of.get(entry, 0) - getattr(log, "_start_line", 0)
        height = log.scrollable_content_region.height
        if not log.scroll_y <= line < log.scroll_y + height:
            log.scroll_to(y=max(0, line - height // 3), animate=False)

    def show_search(self) -> None:
        label = self.query_one("#run-log-label", Label)
        if not self.search:
            text = Text("Log")
            on_log = self.query_one("#run-right").has_focus_within
            text.append(("   tab: the phases, quality and data diff" if on_log else "   tab: the log")
                        + " · m: maximize", style="dim")
            label.update(text)
            return
        text = Text("Log   ")
        text.append(f"/{self.search}", style="bold")
        if self.matches:
            text.append(f"  {(self.current or 0) + 1}/{len(self.matches)} matches", style="")
            text.append(" (n / N, esc clears)", style="dim")
        else:
            text.append("  no match", style="yellow")
        label.update(text)

    def action_toggle_debug(self) -> None:
        self.show_debug = not self.show_debug
        self.logged = 0
        self.query_one("#run-log", RichLog).clear()
        if self.run is not None:
            self.write_logs()
        self.notify("Debug lines (compiled SQL) " + ("shown" if self.show_debug else "hidden"), timeout=2)

    def action_maximize(self) -> None:
        toggle_maximize(self)

    def action_toggle_follow(self) -> None:
        if self.batch is None:
            return
        self.follow = not self.follow
        if self.follow:
            self.resolve()
        elif self.run:
            self.render_run()
