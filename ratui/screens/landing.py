"""Landing: the landing-file ledger (every file per zone and consuming pipeline, with its state), and reset.

A ledger of any size opens at once: the rows are read in a worker, PAGE of them shown (skipped and unloaded ones
first), and the counts come from one grouped query."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Footer

from ratui.console.format import fmt_count, short_key
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.messages import LandingLoaded, LandingReset
from ratui.screens.base import changes
from ratui.screens.table_screen import TableScreen
from ratui.screens.dialogs import ConfirmScreen

COLUMNS = (("zone", "ZONE"), ("file", "FILE"), ("pipeline", "PIPELINE"), ("state", "STATE"), ("bytes", "BYTES"),
           ("attempts", "ATTEMPTS"), ("run", "LOADED BY"), ("error", "LAST ERROR"))

PAGE = 1_000  # the rows shown of a ledger (skipped and unloaded first): a zone of 100,000 files opens at once

STATE_STYLE = {"loaded": ("✔", "green"), "unloaded": ("·", "yellow"), "skipped": ("✘", "red")}


def state_cell(state: str) -> Text:
    icon, style = STATE_STYLE.get(state, ("?", "dim"))
    return Text(f"{icon} {state}", style=style)


def row_key(f) -> str:
    return "\x1f".join((f.zone, f.pipeline, f.file))  # the pipeline's key names its namespace


class LandingScreen(TableScreen):
    MODE = "landing"
    COLUMNS = COLUMNS
    AUTO_FOCUS = "#landing-table"
    BINDINGS = [
        # u/U, not r: r means run everywhere else
        Binding("u", "reset_file", "Reset file", id="landing.reset_file"),
        Binding("U", "reset_zone", "Reset zone", id="landing.reset_zone", key_display="U"),
        Binding("ctrl+r", "refresh", "Refresh", id="landing.refresh"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, object] = {}
        self.summary = None  # the ledger's counts (LedgerSummary), from the last load

    def compose(self) -> ComposeResult:
        yield NavBar("landing")
        with Vertical(id="landing-main"):
            yield self.info_widget()
            yield self.table_widget()
        yield StatusLine()
        yield Footer()

    # ------------------------------------------------------------------------------------------ data

    def reload(self) -> None:
        self.load(LandingLoaded, self.app.controller.landing_page, PAGE)

    @on(LandingLoaded)
    def _files_loaded(self, message: LandingLoaded) -> None:
        files, summary = message.value
        self.summary = summary
        self.files = {row_key(f): f for f in files}
        self.refill((row_key(f), [
            f.zone if f.namespace == self.namespace else f"{f.namespace}.{f.zone}", f.file,
            short_key(f.pipeline, self.namespace), state_cell(f.state),
            Text(fmt_count(f.size), justify="right"), Text(str(f.attempts), justify="right"),
            f.run_id or "-", Text((f.last_error or "").splitlines()[0][:80] if f.last_error else "", style="red"),
        ]) for f in files)
        info = Text()
        if not files:
            info.append("no landing files recorded yet — a run of a pipeline that reads a landing zone records them",
                        style="dim")
        else:
            info.append(f"{summary.files} file(s) in {summary.zones} zone(s)", style="bold")
            for state in ("loaded", "unloaded", "skipped"):
                if summary.state(state):
                    info.append(f"   {summary.state(state)} {state}", style=STATE_STYLE[state][1])
            if summary.files > len(files):  # skipped and unloaded ones first
                info.append(f"   showing {len(files):,}", style="dim")
        self.set_info(info)
        self.app.mark("landing_ready")

    def selected(self):
        key = self.cursor_key()
        return self.files.get(key) if key is not None else None

    def runs_changed(self, change) -> None:
        if change.ended:  # a finished run may have loaded (or failed on) landing files
            self.reload_now_or_later()

    # --------------------------------------------------------------------------------------- actions

    @changes("resetting a landing file")
    def action_reset_file(self) -> None:
        f = self.selected()
        if f is None:
            return
        body = Text(f"Reset {f.file} in zone {f.zone} for {short_key(f.pipeline, self.namespace)}?\n\n")
        body.append("It becomes unloaded with no attempts: the pipeline's next run loads it again.", style="dim")
        self.app.push_screen(ConfirmScreen("Reset landing file?", body, "Reset", back="Keep it"),
                             lambda ok: ok and self._reset(f"{f.namespace}.{f.zone}", f.file, f.pipeline))

    @changes("resetting a landing zone")
    def action_reset_zone(self) -> None:
        f = self.selected()
        if f is None:
            return
        count = self.summary.zone(f.namespace, f.zone) if self.summary is not None else 0
        body = Text(f"Reset every file of zone {f.zone} ({count} row(s), every pipeline)?\n\n")
        body.append("They become unloaded with no attempts: the next runs load them all again.", style="dim")
        self.app.push_screen(ConfirmScreen("Reset landing zone?", body, "Reset zone", back="Keep it"),
                             lambda ok: ok and self._reset(f"{f.namespace}.{f.zone}", None, None))

    def _reset(self, zone: str, file: str | None, pipeline: str | None) -> None:
        self.load(LandingReset, self.app.controller.landing_reset, zone, file, pipeline)

    @on(LandingReset)
    def _reset_loaded(self, message: LandingReset) -> None:
        count = message.value
        self.app.notify(f"{count} landing file row(s) reset to unloaded.", title="Landing", timeout=3, markup=False)
        self.reload()
