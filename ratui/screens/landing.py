"""Landing: the landing-file ledger (every file per zone and consuming pipeline, with its state), and reset."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Static

from ratui.console.format import fmt_count, short_key
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.screens.base import ConsoleScreen
from ratui.screens.dialogs import ConfirmScreen

COLUMNS = (("zone", "ZONE"), ("file", "FILE"), ("pipeline", "PIPELINE"), ("state", "STATE"), ("bytes", "BYTES"),
           ("attempts", "ATTEMPTS"), ("run", "LOADED BY"), ("error", "LAST ERROR"))

STATE_STYLE = {"loaded": ("✔", "green"), "unloaded": ("·", "yellow"), "skipped": ("✘", "red")}


def state_cell(state: str) -> Text:
    icon, style = STATE_STYLE.get(state, ("?", "dim"))
    return Text(f"{icon} {state}", style=style)


def row_key(f) -> str:
    return "\x1f".join((f.zone, f.pipeline, f.file))


class LandingScreen(ConsoleScreen):
    MODE = "landing"
    AUTO_FOCUS = "#landing-table"
    BINDINGS = [
        Binding("r", "reset_file", "Reset file", id="landing.reset_file"),
        Binding("R", "reset_zone", "Reset zone", id="landing.reset_zone", key_display="R"),
        Binding("ctrl+r", "refresh", "Refresh", id="landing.refresh"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, object] = {}
        self.namespace: str | None = None
        self._stale = False

    def compose(self) -> ComposeResult:
        yield NavBar("landing")
        with Vertical(id="landing-main"):
            yield Static(Text("loading…", style="dim"), id="landing-info")
            table: DataTable = DataTable(id="landing-table", cursor_type="row", zebra_stripes=True)
            for key, label in COLUMNS:
                table.add_column(label, key=key)
            yield table
        yield StatusLine()
        yield Footer()

    # ------------------------------------------------------------------------------------------ data

    def project_ready(self, compiled) -> None:
        self.namespace = compiled.settings.namespace
        self.reload()

    def reload(self) -> None:
        self.load("files", self.app.controller.landing_files)

    def loaded_files(self, files: list) -> None:
        table = self.query_one("#landing-table", DataTable)
        selected = self.selected_key()
        table.clear()
        self.files = {}
        for f in files:
            key = row_key(f)
            self.files[key] = f
            table.add_row(
                f.zone, f.file, short_key(f.pipeline, self.namespace), state_cell(f.state),
                Text(fmt_count(f.size), justify="right"), Text(str(f.attempts), justify="right"),
                f.run_id or "-", Text((f.last_error or "").splitlines()[0][:80] if f.last_error else "", style="red"),
                key=key,
            )
        if selected is not None and selected in table.rows:
            table.move_cursor(row=table.get_row_index(selected), animate=False)
        info = Text()
        if not files:
            info.append("no landing files recorded yet — a run of a pipeline that reads a landing zone records them",
                        style="dim")
        else:
            counts: dict[str, int] = {}
            for f in files:
                counts[f.state] = counts.get(f.state, 0) + 1
            zones = len({f.zone for f in files})
            info.append(f"{len(files)} file(s) in {zones} zone(s)", style="bold")
            for state in ("loaded", "unloaded", "skipped"):
                if counts.get(state):
                    info.append(f"   {counts[state]} {state}", style=STATE_STYLE[state][1])
        self.query_one("#landing-info", Static).update(info)
        self.app.mark("landing_ready")

    def selected_key(self) -> str | None:
        table = self.query_one("#landing-table", DataTable)
        if not table.row_count or table.cursor_row is None or table.cursor_row >= table.row_count:
            return None
        return table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value

    def selected(self):
        key = self.selected_key()
        return self.files.get(key) if key is not None else None

    def runs_changed(self, change) -> None:
        if change.ended:  # a finished run may have loaded (or failed on) landing files
            if self.is_current:
                self.reload()
            else:
                self._stale = True

    def on_screen_resume(self) -> None:
        if self._stale:
            self._stale = False
            self.reload()

    # --------------------------------------------------------------------------------------- actions

    def action_refresh(self) -> None:
        self.reload()

    def action_reset_file(self) -> None:
        f = self.selected()
        if f is None:
            return
        body = Text(f"Reset {f.file} in zone {f.zone} for {short_key(f.pipeline, self.namespace)}?\n\n")
        body.append("It becomes unloaded with no attempts: the pipeline's next run loads it again.", style="dim")
        self.app.push_screen(ConfirmScreen("Reset landing file?", body, "Reset"),
                             lambda ok: ok and self._reset(f.zone, f.file, f.pipeline))

    def action_reset_zone(self) -> None:
        f = self.selected()
        if f is None:
            return
        count = sum(1 for other in self.files.values() if other.zone == f.zone)
        body = Text(f"Reset every file of zone {f.zone} ({count} row(s), every pipeline)?\n\n")
        body.append("They become unloaded with no attempts: the next runs load them all again.", style="dim")
        self.app.push_screen(ConfirmScreen("Reset landing zone?", body, "Reset zone"),
                             lambda ok: ok and self._reset(f.zone, None, None))

    def _reset(self, zone: str, file: str | None, pipeline: str | None) -> None:
        self.load("reset", self.app.controller.landing_reset, zone, file, pipeline)

    def loaded_reset(self, count: int) -> None:
        self.app.notify(f"{count} landing file row(s) reset to unloaded.", title="Landing", timeout=3, markup=False)
        self.reload()
