"""Branches: every ref with its head, creation time, age and run; its diff against main; delete and merge."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Label

from ratui.console.controller import BranchRow, DiffRow
from ratui.engine.vocabulary import MAIN
from ratui.console.format import fmt_age, fmt_time
from ratui.engine.errors import RatuiError
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.messages import BranchDeleted, BranchMerged, BranchesLoaded, DeleteChecked, DiffLoaded, MergePreviewed
from ratui.screens.table_screen import TableScreen
from ratui.screens.dialogs import ConfirmScreen, MergeScreen

CHANGE_STYLE = {"added": "green", "modified": "yellow", "dropped": "red", "table": ""}


AGE_TICK = 15.0  # seconds


class BranchesScreen(TableScreen):
    MODE = "branches"
    COLUMNS = (("ref", "REF"), ("head", "HEAD"), ("created", "CREATED (UTC)"), ("age", "AGE"), ("run", "RUN"),
               ("tables", "TABLES"))
    AUTO_FOCUS = "#branches-table"
    BINDINGS = [
        Binding("m", "merge", "Merge into main", id="branches.merge"),
        Binding("d", "delete", "Delete", id="branches.delete"),
        Binding("o", "open_run", "Open run", id="branches.open_run"),
        Binding("ctrl+r", "refresh", "Refresh", id="branches.refresh"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[str, BranchRow] = {}

    def compose(self) -> ComposeResult:
        yield NavBar("branches")
        with Vertical(id="branches-main"):
            yield self.info_widget()
            yield self.table_widget()
            with Vertical(id="branches-detail"):
                yield Label("", id="diff-title", classes="section")
                yield DataTable(id="diff-table", cursor_type="row", zebra_stripes=True)
        yield StatusLine()
        yield Footer()

    # ------------------------------------------------------------------------------------------ data

    def reload(self) -> None:
        self.load(BranchesLoaded, self.app.controller.branches)

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(AGE_TICK, self._tick)  # AGE keeps counting while the screen is open

    def _tick(self) -> None:
        if self.is_current and self.app.compiled is not None:
            self.reload()

    def runs_changed(self, change) -> None:
        # a run creates its branch, then merges and deletes it: refresh (at most once a second) while in view
        self.reload_soon(1.0)

    @on(BranchesLoaded)
    def _refs_loaded(self, message: BranchesLoaded) -> None:
        refs = message.value
        self.refs = {r.name: r for r in refs}
        now = self.app.now()
        self.refill((ref.name, [Text(ref.name, style="bold" if ref.name == MAIN else ""), ref.head[:12],
                                fmt_time(ref.created_at), fmt_age(ref.created_at, now), ref.run_id or "-",
                                Text(str(ref.tables), justify="right")]) for ref in refs)
        others = len(refs) - 1
        info = Text()
        info.append(f"{len(refs)} ref(s)", style="bold")
        info.append(f"   main + {others} branch(es)" if others else "   only main: every run merges and deletes its "
                    "branch, so a branch left here is a run in flight or one that died", style="dim")
        self.set_info(info)
        self.show_diff()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "branches-table":
            event.stop()
            self.show_diff()

    def show_diff(self) -> None:
        ref = self.cursor_key()
        title = self.query_one("#diff-title", Label)
        if ref is None:
            title.update("")
            return
        title.update("Tables on main" if ref == MAIN else f"Diff of {ref} against main (loading…)")
        self.load(DiffLoaded, self._diff, ref)

    def _diff(self, ref: str) -> tuple[str, list[DiffRow]]:
        return ref, self.app.controller.diff(ref)

    @on(DiffLoaded)
    def _diff_loaded(self, message: DiffLoaded) -> None:
        result = message.value
        ref, rows = result
        if ref != self.cursor_key():
            return
        diff = self.query_one("#diff-table", DataTable)
        diff.clear(columns=True)
        if ref == MAIN:
            diff.add_columns("TABLE", "SNAPSHOT (#sequence id · rows)")
            for row in rows:
                diff.add_row(row.table, row.main.describe() if row.main else Text("-", style="dim"), key=row.table)
        else:
            diff.add_columns("TABLE", "CHANGE", "ON BRANCH (snapshot · rows)", "ON MAIN (snapshot · rows)",
                             "CONFLICT")
            for row in rows:
                diff.add_row(row.table, Text(row.change, style=CHANGE_STYLE.get(row.change, "")),
                             row.branch.describe() if row.branch else Text("-", style="dim"),
                             row.main.describe() if row.main else Text("-", style="dim"),
                             Text("✘ main changed too", style="red") if row.conflict else Text("-", style="dim"),
                             key=row.table)
        title = self.query_one("#diff-title", Label)
        if ref == MAIN:
            title.update(f"Tables on main ({len(rows)})")
        else:
            conflicts = sum(1 for r in rows if r.conflict)
            title.update(f"Diff of {ref} against main: {len(rows)} table(s) changed"
                         + (f", {conflicts} in conflict" if conflicts else ""))
        self.app.mark("branches_ready")

    def load_failed(self, kind, error: BaseException) -> bool:
        if kind is DiffLoaded and isinstance(error, RatuiError) and error.code == "RAT-CAT-002":  # deleted meanwhile
            self.reload()
            return True
        return False

    # --------------------------------------------------------------------------------------- actions

    def action_delete(self) -> None:
        ref = self.cursor_key()
        if ref is None:
            return
        if ref == MAIN:
            self.notify("main is the production ref: it cannot be deleted (RAT-CAT-004).", severity="error")
            return
        self.load(DeleteChecked, lambda r: (r, self.app.controller.live_run_of(r)), ref)

    @on(DeleteChecked)
    def _delete_checked(self, message: DeleteChecked) -> None:
        ref, live = message.value
        if live is not None:
            self.refuse(ref, live, "delete")
            return
        row = self.refs.get(ref)
        if row is None:
            return
        body = Text(f"Delete branch {ref} (head {row.head[:12]}, {row.tables} table(s))?\n\n")
        body.append("Its table pointers go; its commits are kept for audit; no data file is deleted. "
                    "main is not touched.", style="dim")

        def done(ok: bool | None) -> None:
            if ok:
                self.load(BranchDeleted, self._delete, ref)

        self.app.push_screen(ConfirmScreen(f"Delete branch {ref}?", body, "Delete branch", back="Keep it"), done)

    def refuse(self, ref: str, live: dict, what: str) -> None:
        self.notify(f"Run {live['id']} of {live['pipeline']} is still {live['status']} on {ref}: it merges "
                    f"(after its quality gate) or deletes the branch itself. Cancel the run to {what} it.",
                    title=f"Cannot {what} {ref}", severity="error", timeout=8, markup=False)

    def _delete(self, ref: str) -> str:
        self.app.controller.delete_branch(ref)
        return ref

    @on(BranchDeleted)
    def _deleted_loaded(self, message: BranchDeleted) -> None:
        ref = message.value
        self.notify(f"Deleted branch {ref}.", title="Branches")
        self.reload()

    def action_merge(self) -> None:
        ref = self.cursor_key()
        if ref is None:
            return
        if ref == MAIN:
            self.notify("Pick a branch to merge into main.", severity="warning")
            return
        self.load(MergePreviewed, self._preview, ref)

    def _preview(self, ref: str):
        live = self.app.controller.live_run_of(ref)
        return ref, (None if live else self.app.controller.merge_preview(ref)), live

    @on(MergePreviewed)
    def _preview_loaded(self, message: MergePreviewed) -> None:
        ref, preview, live = message.value
        if live is not None:
            self.refuse(ref, live, "merge")
            return

        def done(ok: bool | None) -> None:
            if ok:
                self.load(BranchMerged, self._merge, ref)

        self.app.push_screen(MergeScreen(ref, preview), done)

    def _merge(self, ref: str):
        return ref, self.app.controller.merge(ref)

    @on(BranchMerged)
    def _merged_loaded(self, message: BranchMerged) -> None:
        result = message.value
        ref, merged = result
        tables = ", ".join(merged.tables) or "no table changes"
        self.notify(f"Merged {ref} into main: {tables}.", title="Branches")
        self.reload()

    def action_open_run(self) -> None:
        ref = self.cursor_key()
        row = self.refs.get(ref or "")
        if row and row.run_id:
            self.app.open_run(row.run_id)
        else:
            self.notify("This ref does not belong to a run.", severity="warning")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "branches-table":
            event.stop()
            self.action_open_run()
