"""Schedules (0): the project's schedules with their next fire (UTC and the schedule's own time zone), their last fire
and what it did, paused or enabled, catch-up; above them, which runner (`ratui up`) holds the lease. `p` pauses or
resumes the highlighted schedule (persisted, as `ratui schedule pause|resume NAME`); enter lists its recent fires.

Everything is read in a worker through the controller (console/schedules.py); the list follows the state database
(a pause from the shell, a fire of the runner), runs that end, and the clock (next fires move on)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Label, Static

from ratui.console import schedules as words
from ratui.messages import ScheduleFiresLoaded, SchedulePaused, SchedulesLoaded
from ratui.screens.base import Guarded, changes
from ratui.screens.table_screen import TableScreen
from ratui.widgets.chrome import NavBar, StatusLine

COLUMNS = (("name", "SCHEDULE"), ("state", "STATE"), ("next_utc", "NEXT FIRE (UTC)"), ("next_local", "IN ITS ZONE"),
           ("last", "LAST FIRE (UTC)"), ("did", "WHAT IT DID"), ("cron", "CRON · TIME ZONE"), ("select", "SELECT"),
           ("catch_up", "CATCH-UP"))

STATE_STYLE = {"enabled": ("●", "green"), "paused": ("⏸", "yellow"), "disabled": ("○", "dim")}
ACTION_STYLE = {"run": "green", "skipped": "yellow", "paused": "yellow", "dropped": "red"}

REFRESH_SECONDS = 30.0  # next fires move on with the clock; the state database's changes come at once


def state_cell(row: words.ScheduleRow) -> Text:
    icon, style = STATE_STYLE[row.state]
    return Text(f"{icon} {row.state}", style=style)


def did_cell(fire: dict | None) -> Text:
    if fire is None:
        return Text("never fired", style="dim")
    return Text(words.why(fire), style=ACTION_STYLE.get(fire.get("action") or "", ""))


class SchedulesScreen(TableScreen):
    MODE = "schedules"
    COLUMNS = COLUMNS
    AUTO_FOCUS = "#schedules-table"
    HELP_KEYS = (("enter", "Recent fires of the schedule"),)
    BINDINGS = [
        Binding("p", "toggle_pause", "Pause/resume", id="schedules.pause"),
        Binding("ctrl+r", "refresh", "Refresh", id="schedules.refresh"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.data: words.Schedules | None = None

    def compose(self) -> ComposeResult:
        yield NavBar("schedules")
        with Vertical(id="schedules-main"):
            yield self.info_widget()
            yield self.table_widget()
            yield Static(id="schedules-detail")
            yield Static("\n".join(words.HOW_TO_DECLARE), id="schedules-empty", classes="hidden", markup=False)
        yield StatusLine()
        yield Footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(REFRESH_SECONDS, self._tick, name="schedules-refresh")

    def _tick(self) -> None:
        if self.is_current and self.app.compiled is not None:
            self.reload()

    # ------------------------------------------------------------------------------------------ data

    def reload(self) -> None:
        self.load(SchedulesLoaded, self.app.controller.schedules, self.app.compiled)

    def runs_changed(self, change) -> None:
        if change.ended:  # a scheduled run that ended: its schedule's last fire and what follows
            self.reload_soon()

    @on(SchedulesLoaded)
    def _loaded(self, message: SchedulesLoaded) -> None:
        data = self.data = message.value
        self.refill((row.name, [
            Text(row.name, style="bold"), state_cell(row), words.utc_text(row.next_utc),
            words.zone_text(row.next_utc, row.timezone),
            words.utc_text(row.last_fire.get("fire_at")) if row.last_fire else "-", did_cell(row.last_fire),
            f"{row.cron} · {row.timezone}", row.select, row.catch_up + (" · atomic" if row.atomic else ""),
        ]) for row in data.rows)
        empty = not data.rows
        self.table.set_class(empty, "hidden")
        self.query_one("#schedules-detail", Static).set_class(empty, "hidden")
        self.query_one("#schedules-empty", Static).set_class(not empty, "hidden")
        lease = data.lease
        style = "green" if lease is not None and not lease.expired else "yellow"
        self.set_info(Text(words.lease_text(lease), style=style))
        self.show_detail()
        self.app.mark("schedules_ready")

    def show_detail(self) -> None:
        """Under the table, the highlighted schedule whole (at 80 columns the table's right columns are off screen)
        and its last fire with why."""
        row = self.selected()
        if row is None:
            return
        text = Text(words.definition_text(row))
        fire = row.last_fire
        text.append("\nlast fire: ", style="dim")
        if fire is None:
            text.append("never", style="dim")
        else:
            at = fire.get("fire_at")
            text.append(f"{words.utc_text(at)} UTC ({words.local_text(at, row.timezone)}), ")
            text.append_text(did_cell(fire))
        text.append("   enter: its recent fires · p: " + ("resume" if row.paused else "pause"), style="dim")
        self.query_one("#schedules-detail", Static).update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail()

    def selected(self) -> words.ScheduleRow | None:
        key = self.cursor_key()
        return next((row for row in self.data.rows if row.name == key), None) if self.data and key else None

    # --------------------------------------------------------------------------------------- actions

    @changes("pausing or resuming a schedule")
    def action_toggle_pause(self) -> None:
        row = self.selected()
        if row is not None:
            self.load(SchedulePaused, self._pause, row.name, not row.paused)

    def _pause(self, name: str, paused: bool) -> tuple[str, bool]:
        return name, self.app.controller.pause_schedule(name, paused, self.app.compiled)

    @on(SchedulePaused)
    def _paused(self, message: SchedulePaused) -> None:
        name, paused = message.value
        said = "paused: its fires are recorded and not run" if paused else "resumed: it fires from its next fire on"
        self.app.notify(f"Schedule {name} {said}.", title="Schedules", timeout=4, markup=False)
        self.reload()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.selected()
        if row is not None:
            self.load(ScheduleFiresLoaded, self._fires, row.name, row.timezone)

    def _fires(self, name: str, zone: str) -> tuple[str, str, list[dict]]:
        return name, zone, self.app.controller.schedule_fires(name, words.RECENT_FIRES)

    @on(ScheduleFiresLoaded)
    def _fires_loaded(self, message: ScheduleFiresLoaded) -> None:
        name, zone, fires = message.value
        self.app.push_screen(FiresScreen(name, zone, fires))


class FiresScreen(Guarded, ModalScreen[None]):
    """The newest fires the runner decided for one schedule: when (UTC and its zone), what it did and why, and the
    invocation of its runs (Runs, `/` and its id, finds them)."""

    BINDINGS = [Binding("escape,enter,q", "close", "Close", id="fires.close")]

    def __init__(self, name: str, zone: str, fires: list[dict]) -> None:
        super().__init__()
        self.schedule, self.zone, self.fires = name, zone, fires

    def compose(self) -> ComposeResult:
        with Vertical(id="fires", classes="dialog"):
            yield Label(f"Recent fires of {self.schedule}", id="dialog-title")
            table: DataTable = DataTable(id="fires-table", cursor_type="row", zebra_stripes=True)
            for label in ("FIRE (UTC)", f"IN {self.zone}", "ACTION", "INVOCATION", "REASON"):
                table.add_column(label)
            for utc, local, action, reason, invocation in words.fire_rows(self.schedule, self.fires, self.zone):
                table.add_row(utc, local, Text(action, style=ACTION_STYLE.get(action, "")), invocation, reason)
            yield table
            if not self.fires:
                yield Static(Text("no fires yet: `ratui up` records each fire before it runs it", style="dim"))
            yield Label("esc: close", id="help-foot")

    def action_close(self) -> None:
        self.dismiss(None)
