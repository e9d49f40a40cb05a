"""Reaper: its settings, its last reports, a preview (dry run: exactly what would be removed) and run now."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets.data_table import ColumnKey
from textual.widgets import DataTable, Footer, Static

from ratui.console.format import fmt_time
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.messages import ReaperPreviewed, ReaperRan, ReaperReportsLoaded, ReaperSettingsLoaded
from ratui.screens.base import ConsoleScreen, is_narrow, changes
from ratui.screens.dialogs import ConfirmScreen
from ratui.engine.vocabulary import REAPER_TASK_TITLES, format_bytes, orphan_groups

REPORT_COLUMNS = (("started", "STARTED (UTC)"), ("kind", "KIND"), ("found", "FOUND"), ("removed", "REMOVED"),
                  ("freed", "FREED"), ("errors", "ERRORS"))
PREVIEW_COLUMNS = (("task", "TASK"), ("item", "WOULD REMOVE"), ("detail", "DETAIL"))

TASK_TITLES = REAPER_TASK_TITLES
SHOWN_ITEMS = 500  # rows of a task in the preview table (a count says how many more)




def item_detail(task: str, item: dict) -> str:
    """What identifies an item besides its name (no ages: they change by the minute)."""
    if task == "orphan_branches":
        return f"run {item.get('run_id') or '-'}, created {fmt_time(item.get('created_at'))}"
    if task == "stuck_runs":
        return f"{item.get('pipeline', '')}, started {fmt_time(item.get('started_at'))}"
    if task == "run_history":
        return " ".join(str(item[k]) for k in ("pipeline", "status") if item.get(k))
    if task == "snapshots":
        return str(item.get("table", ""))
    if task == "compaction":
        return f"{item.get('table', '')}, {item.get('deleted_percent', 0)}% of {item.get('rows', 0)} rows deleted"
    size = item.get("bytes") or item.get("size")
    return format_bytes(int(size)) if isinstance(size, (int, float)) else ""


def table_folder(item: dict) -> str | None:
    """A dropped table's folder as its files' names begin ("ns/warehouse/layer/name/"): the group line names the
    table, so its files are listed below it by their place in it."""
    parts = str(item.get("table") or "").split(".") if item.get("kind") == "dropped_table" else []
    return f"{parts[0]}/warehouse/{parts[1]}/{parts[2]}/" if len(parts) == 3 else None


def errors_text(report) -> Text:
    text = Text()
    for name, error in report.errors:
        if text:
            text.append("; ")
        text.append(f"{TASK_TITLES.get(name, name)}: {(error or {}).get('code', '?')}", style="red")
    return text or Text("-", style="dim")


class ReaperScreen(ConsoleScreen):
    MODE = "reaper"
    AUTO_FOCUS = "#reaper-reports"
    BINDINGS = [
        Binding("p", "preview", "Preview (dry run)", id="reaper.preview"),
        Binding("x", "run_now", "Run now", id="reaper.run"),
        Binding("ctrl+r", "refresh", "Refresh", id="reaper.refresh"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.reports: list = []
        self.preview = None
        self.busy = False

    def compose(self) -> ComposeResult:
        yield NavBar("reaper")
        with Vertical(id="reaper-main"):
            yield Static(Text("loading…", style="dim"), id="reaper-settings")
            yield Static(Text("Last reports", style="bold"), classes="section")
            table: DataTable = DataTable(id="reaper-reports", cursor_type="row", zebra_stripes=True)
            for key, label in REPORT_COLUMNS:
                table.add_column(label, key=key)
            yield table
            yield Static(Text("Preview: press p for a dry run (removes nothing)", style="dim"),
                         id="reaper-preview-info")
            preview: DataTable = DataTable(id="reaper-preview", cursor_type="row", zebra_stripes=True)
            for key, label in PREVIEW_COLUMNS:
                preview.add_column(label, key=key)
            yield preview
        yield StatusLine()
        yield Footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.app.reaper_changed.subscribe(self, lambda _: self.reload())

    # ------------------------------------------------------------------------------------------ data

    def project_ready(self, compiled) -> None:
        self.load(ReaperSettingsLoaded, self.app.controller.reaper_settings)
        self.reload()

    def reload(self) -> None:
        self.load(ReaperReportsLoaded, self.app.controller.reaper_reports, 20)

    @on(ReaperSettingsLoaded)
    def _settings_loaded(self, message: ReaperSettingsLoaded) -> None:
        self.settings_values = message.value
        self.show_settings()

    def show_settings(self) -> None:
        """The settings as a grid of name/value pairs: three pairs a line, two on a narrow terminal."""
        settings = getattr(self, "settings_values", None)
        if settings is None:
            return
        per_line = 2 if is_narrow(self.app.size.width) else 3
        grid = Table.grid(padding=(0, 1))
        for _ in range(per_line):
            grid.add_column(style="dim", no_wrap=True)
            grid.add_column(style="bold", no_wrap=True, min_width=5)
        items = [(key, str(value)) for key, value in settings.items()]
        for start in range(0, len(items), per_line):
            row = [cell for pair in items[start:start + per_line] for cell in pair]
            grid.add_row(*(row + [""] * (2 * per_line - len(row))))
        schedule = Text(f"schedule: {self.app.reaper_schedule_text()}", style="dim")
        self.query_one("#reaper-settings", Static).update(
            Group(Text("Settings (ratui.yaml reaper:)", style="bold"), grid, schedule))

    def fit(self, narrow: bool) -> None:
        super().fit(narrow)
        self.show_settings()

    @on(ReaperReportsLoaded)
    def _reports_loaded(self, message: ReaperReportsLoaded) -> None:
        reports = message.value
        self.reports = reports
        table = self.query_one("#reaper-reports", DataTable)
        table.clear()
        for report in reports:
            table.add_row(
                fmt_time(report.started_at), Text("dry run", style="dim") if report.dry_run else Text("run"),
                Text(str(report.found), justify="right"), Text(str(report.removed), justify="right"),
                Text(format_bytes(report.bytes_freed), justify="right"), errors_text(report),
                key=str(report.id),
            )
        if not reports:
            table.add_row(Text("no passes yet", style="dim"), "", "", "", "", "", key="none")
        self.app.mark("reaper_ready")

    # --------------------------------------------------------------------------------------- actions

    def action_refresh(self) -> None:
        self.load(ReaperSettingsLoaded, self.app.controller.reaper_settings)
        self.reload()

    def action_preview(self) -> None:
        self.query_one("#reaper-preview-info", Static).update(Text("Preview: running a dry run…", style="yellow"))
        self.load(ReaperPreviewed, self.app.controller.reaper_run, True)

    @on(ReaperPreviewed)
    def _preview_loaded(self, message: ReaperPreviewed) -> None:
        report = message.value
        self.preview = report
        self.fill_items(report, dry_run=True)
        self.query_one("#reaper-main").add_class("-previewed")
        info = Text("Preview (dry run): ", style="bold")
        if report.found:
            info.append(f"{report.found} item(s) would be removed")
            if report.bytes_found:
                info.append(f", {format_bytes(report.bytes_found)}")
            info.append("   x runs it for real", style="dim")
        else:
            info.append("nothing to remove", style="green")
        if report.errors:
            info.append(f"   {len(report.errors)} task(s) failed", style="red")
        self.query_one("#reaper-preview-info", Static).update(info)
        self.reload()

    def fill_items(self, report, *, dry_run: bool) -> None:
        """The items of a pass: what a dry run would remove, or what a real pass removed."""
        table = self.query_one("#reaper-preview", DataTable)
        table.clear()
        column = table.columns.get(ColumnKey("item"))
        if column is not None:
            column.label = Text("WOULD REMOVE" if dry_run else "REMOVED")
        for name, task in report.tasks.items():
            items = task.found if dry_run else task.removed
            if name == "orphan_files":
                self.fill_orphans(table, items)
            else:
                for item in items[:SHOWN_ITEMS]:
                    table.add_row(TASK_TITLES.get(name, name), str(item.get("name", "")), item_detail(name, item),
                                  key=f"{name}\x1f{item.get('name', '')}")
            more = task.count("found" if dry_run else "removed") - min(len(items), SHOWN_ITEMS)
            if more > 0:  # a first pass over a long history: hundreds of thousands of runs
                table.add_row(TASK_TITLES.get(name, name), Text(f"… and {more:,} more", style="dim"),
                              Text("`ratui reap --dry-run --json` lists them all", style="dim"), key=f"{name}\x1fmore")
            if task.error:
                table.add_row(TASK_TITLES.get(name, name), Text(f"error {task.error.get('code', '?')}", style="red"),
                              Text(str(task.error.get("message", ""))[:100], style="red"), key=f"{name}\x1ferror")
        table.refresh()

    @staticmethod
    def fill_orphans(table: DataTable, items: list[dict]) -> None:
        """Unreachable files grouped by what left them: each dropped table, each deleted branch, then plain orphans;
        a line per group with its files and bytes, then its files (SHOWN_ITEMS in all)."""
        title = TASK_TITLES["orphan_files"]
        shown = 0
        for group, members, size in orphan_groups(items):
            table.add_row(title, Text(f"{group}: {len(members)} file(s), {format_bytes(size)}", style="bold"),
                          "", key=f"orphan_files\x1fgroup\x1f{group}")
            for item in members[:max(0, SHOWN_ITEMS - shown)]:
                name = str(item.get("name", ""))
                folder = table_folder(item)
                shown_name = name[len(folder):] if folder and name.startswith(folder) else name
                table.add_row(title, "  " + shown_name, item_detail("orphan_files", item),
                              key=f"orphan_files\x1f{name}")
            shown += len(members)

    @changes("a reaper pass")
    def action_run_now(self) -> None:
        body = Text("Run the reaper now?\n\n")
        if self.preview is not None and self.preview.found:
            body.append(f"The last preview found {self.preview.found} item(s) to remove. ")
        body.append("Removed runs, branches, snapshots and files cannot be brought back; runs still going are "
                    "never touched.", style="dim")

        def done(ok: bool | None) -> None:
            if ok:
                self.query_one("#reaper-preview-info", Static).update(Text("Reaper running…", style="yellow"))
                self.load(ReaperRan, self.app.controller.reaper_run, False)

        self.app.push_screen(ConfirmScreen("Run the reaper?", body, "Run now", back="Not now"), done)

    @on(ReaperRan)
    def _run_loaded(self, message: ReaperRan) -> None:
        report = message.value
        self.preview = None
        self.fill_items(report, dry_run=False)  # what it did remove, under a header that says so
        self.query_one("#reaper-main").add_class("-previewed")
        self.app.reaper_finished(report)
        info = Text("Ran: ", style="bold")
        info.append(f"{report.removed} removed of {report.found} found, {format_bytes(report.bytes_freed)} freed")
        self.query_one("#reaper-preview-info", Static).update(info)
        self.reload()
