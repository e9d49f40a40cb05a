"""Branches: every ref (main, your branches, runs' and publishes' branches) with its head, creation time, age and
run; the selected ref's diff against main; create, switch to, merge, delete, and its history.

The working ref (`⎇`) is where the console's runs go: `s` (or enter) on main or a branch of yours switches to it, and
the Pipelines screen says so. `n` creates a branch from the selected ref; `m` merges the selected branch into the ref
it came from after a dry run per table; `l` opens the ref's commit history (rollback from there).

The diff's cells are in branches_diff.py, the new-branch and merge dialogs in branches_dialogs.py."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Label

from ratui.console.controller import BranchRow, DiffRow, ref_kind
from ratui.console.format import fmt_age, fmt_time
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN
from ratui.messages import (
    BranchDeleted, BranchMerged, BranchesLoaded, DeleteChecked, DiffLoaded, MergeDryRun, RefSwitched,
)
from ratui.screens.base import changes, is_narrow
from ratui.screens.branches_diff import diff_cells, diff_columns, diff_title
from ratui.screens.branches_dialogs import MergeDryRunScreen, NewBranchScreen
from ratui.screens.dialogs import ConfirmScreen
from ratui.screens.table_screen import TableScreen
from ratui.screens.undo import UndoKeys, undo_binding
from ratui.widgets.chrome import NavBar, StatusLine

WORKING = "⎇"  # marks the working ref

AGE_TICK = 15.0  # seconds


def notify_error(app, error: RatuiError, title: str) -> None:
    app.notify(error.text(), title=title, severity="error", timeout=10, markup=False)



class BranchesScreen(UndoKeys, TableScreen):
    MODE = "branches"
    HELP_KEYS = (("enter", "Switch to it (a run's branch: open its run)"),)
    COLUMNS = (("ref", "REF"), ("head", "HEAD"), ("created", "CREATED (UTC)"), ("age", "AGE"), ("run", "RUN"),
               ("tables", "TABLES"))
    AUTO_FOCUS = "#branches-table"
    BINDINGS = [
        Binding("n", "new", "New", id="branches.new"),
        Binding("s", "switch", "Switch", id="branches.switch"),
        Binding("m", "merge", "Merge", id="branches.merge"),
        Binding("d", "delete", "Delete", id="branches.delete"),
        Binding("l", "history", "History", id="branches.history"),
        Binding("o", "open_run", "Open run", id="branches.open_run", show=False),  # and enter on a run's branch
        Binding("i", "app.toggle_serve", "REST catalog", id="branches.serve"),  # serve it, or stop
        Binding("ctrl+r", "refresh", "Refresh", id="branches.refresh"),
        undo_binding("branches"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[str, BranchRow] = {}
        self._select_after: str | None = None  # a ref to put the cursor on once the list has it (a new branch)

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

    @property
    def working(self) -> str:
        return self.app.controller.ref

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
        working = self.working
        self.refill((ref.name, [self.ref_label(ref.name, working), ref.head[:12], fmt_time(ref.created_at),
                                fmt_age(ref.created_at, now), self.run_label(ref),
                                Text(str(ref.tables), justify="right")]) for ref in refs)
        if self._select_after in self.refs:
            self.table.move_cursor(row=self.table.get_row_index(self._select_after), animate=False)
            self._select_after = None
        kinds = [r.kind for r in refs]
        info = Text()
        info.append(f"{len(refs)} ref(s)", style="bold")
        mine, machine = kinds.count("branch"), kinds.count("run") + kinds.count("publish")
        if mine or machine:
            info.append(f"   main + {mine} of yours" + (f" + {machine} of runs/publishes" if machine else ""),
                        style="dim")
        else:
            info.append("   only main: n creates a branch of yours", style="dim")
        info.append("   ")
        info.append(f"{WORKING} working on {working}", style="bold cyan" if working != MAIN else "cyan")
        self.set_info(info)
        self.show_diff()

    @staticmethod
    def ref_label(name: str, working: str) -> Text:
        """The ref's name; the working ref's lit (the line above the list names it too)."""
        return Text(name, style="bold reverse cyan" if name == working else "bold" if name == MAIN else "")

    @staticmethod
    def run_label(ref: BranchRow) -> Text | str:
        if ref.run_id:
            return ref.run_id
        kind = ref.kind
        if kind == "run":
            return ref.name[4:]
        return Text("publish" if kind == "publish" else "-", style="dim")

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
        ref, rows = message.value
        if ref != self.cursor_key():
            return
        narrow = is_narrow(self.app.size.width)
        diff = self.query_one("#diff-table", DataTable)
        diff.clear(columns=True)
        diff.add_columns(*diff_columns(ref, narrow))
        for row in rows:
            diff.add_row(*diff_cells(row, ref, self.namespace, narrow), key=row.table)
        self.query_one("#diff-title", Label).update(diff_title(ref, rows))
        self.app.mark("branches_ready")

    def load_failed(self, kind, error: BaseException) -> bool:
        if kind is DiffLoaded and isinstance(error, RatuiError) and error.code == "RAT-CAT-002":  # deleted meanwhile
            self.reload()
            return True
        if isinstance(error, RatuiError) and kind in (RefSwitched, BranchMerged, BranchDeleted, MergeDryRun):
            verb = {RefSwitched: "switch", BranchMerged: "merge", BranchDeleted: "delete", MergeDryRun: "merge"}[kind]
            notify_error(self.app, error, f"Cannot {verb}")
            self.reload()
            return True
        return False

    # --------------------------------------------------------------------------------------- actions

    @changes("creating a branch")
    def action_new(self, source: str | None = None) -> None:
        """A branch from `source` (the palette's: the working ref), else from the ref under the cursor."""
        source = source or self.cursor_key() or MAIN

        def done(name: str | None) -> None:
            if name:
                self._select_after = name
                self.notify(f"Created branch {name} from {source}. s switches the console to it.",
                            title="Branches", markup=False)
                self.reload()

        self.app.push_screen(NewBranchScreen(source), done)

    def action_switch(self, ref: str | None = None) -> None:
        ref = ref or self.cursor_key()
        if ref is None:
            return
        kind = ref_kind(ref)
        if kind in ("run", "publish"):
            owner = "a run" if kind == "run" else "an atomic publish"
            self.notify(f"{ref} belongs to {owner}: the console works on main or a branch of yours "
                        "(n creates one, here from the selected ref).", title="Cannot switch", severity="warning",
                        timeout=6, markup=False)
            return
        if ref == self.working:
            self.notify(f"The console already works on {ref}.", title="Branches", timeout=3, markup=False)
            return
        self.load(RefSwitched, self.app.controller.switch_ref, ref)

    @on(RefSwitched)
    def _switched(self, message: RefSwitched) -> None:
        ref = message.value
        if ref == MAIN:
            self.notify("Working on main: runs from Pipelines merge into main.", title="Working ref", markup=False)
        else:
            self.notify(f"Working on {ref}: runs from Pipelines fork from {ref} and merge into it; main is "
                        "untouched. m merges it when it is ready.", title="Working ref", markup=False)
        self.reload()

    def branch_picked(self, on_main: str, severity: str) -> str | None:
        """The branch under the cursor, for a delete or a merge; main says `on_main` instead (neither applies to
        it) and gives None, as does an empty table."""
        ref = self.cursor_key()
        if ref == MAIN:
            self.notify(on_main, severity=severity)
            return None
        return ref

    @changes("deleting a branch")
    def action_delete(self) -> None:
        ref = self.branch_picked("main is the production ref: it cannot be deleted (RAT-CAT-004).", "error")
        if ref is not None:
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
        if self.app.controller.catalog_server():
            body.append("Nessie deletes the branch: its commits are no longer reachable by its name, and Nessie's "
                        "garbage collection may drop them. No data file is deleted now. main is not touched.",
                        style="dim")
        else:
            body.append("Its table pointers go; its commits are kept for audit; no data file is deleted. "
                        "main is not touched.", style="dim")
        if ref == self.working:
            body.append(f"\nThe console works on {ref}: it goes back to main.", style="yellow")

        def done(ok: bool | None) -> None:
            if ok:
                self.load(BranchDeleted, self._delete, ref)

        self.app.push_screen(ConfirmScreen(f"Delete branch {ref}?", body, "Delete branch", back="Keep it"), done)

    def refuse(self, ref: str, live: dict, what: str) -> None:
        self.notify(f"Run {live['id']} of {live['pipeline']} is still {live['status']} on {ref}: it merges "
                    f"(after its quality gate) or deletes the branch itself. Cancel the run to {what} it.",
                    title=f"Cannot {what} {ref}", severity="error", timeout=8, markup=False)

    def _delete(self, ref: str) -> tuple[str, bool]:
        return ref, bool(self.app.controller.delete_branch(ref))

    @on(BranchDeleted)
    def _deleted_loaded(self, message: BranchDeleted) -> None:
        ref, was_working = message.value
        self.notify(f"Deleted branch {ref}." + (" The console works on main again." if was_working else ""),
                    title="Branches", markup=False)
        self.reload()

    @changes("merging a branch")
    def action_merge(self, ref: str | None = None) -> None:
        """Merge `ref` (the palette's), else the branch under the cursor: a dry run first."""
        ref = ref or self.branch_picked("Pick a branch to merge into main.", "warning")
        if ref is not None:
            self.load(MergeDryRun, self._preview, ref)

    def _preview(self, ref: str):
        controller = self.app.controller
        live = controller.live_run_of(ref)
        if live:
            return ref, None, [], live
        preview = controller.merge_preview(ref)
        rows = controller.diff(ref) if preview.into == MAIN else controller.diff(ref, preview.into)
        return ref, preview, rows, None

    @on(MergeDryRun)
    def _preview_loaded(self, message: MergeDryRun) -> None:
        ref, preview, rows, live = message.value
        if live is not None:
            self.refuse(ref, live, "merge")
            return

        def done(ok: bool | None) -> None:
            if ok:
                self.load(BranchMerged, self._merge, ref, preview.into)

        self.app.push_screen(MergeDryRunScreen(ref, preview, rows), done)

    def _merge(self, ref: str, into: str):
        return ref, self.app.controller.merge(ref, into)

    @on(BranchMerged)
    def _merged_loaded(self, message: BranchMerged) -> None:
        ref, merged = message.value
        tables = ", ".join(merged.tables) or "no table changes"
        commit = f" (commit {merged.commit.hash[:12]})" if merged.commit is not None else ""
        appended = getattr(merged, "by_append", None) or []
        how = f"; by append: {', '.join(appended)}" if appended else ""
        self.notify(f"Merged {ref} into {merged.into}: {tables}{commit}{how}.", title="Branches", markup=False)
        self.reload()

    def action_history(self) -> None:
        ref = self.cursor_key()
        if ref is None:
            return
        from ratui.screens.history import HistoryScreen

        self.app.push_screen(HistoryScreen(ref, origin="branches"))

    def action_open_run(self) -> None:
        ref = self.cursor_key()
        row = self.refs.get(ref or "")
        if row and row.run_id:
            self.app.open_run(row.run_id)
        else:
            self.notify("This ref does not belong to a run.", severity="warning")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter: a run's branch opens its run; main or a branch of yours becomes the working ref."""
        if event.data_table.id == "branches-table":
            event.stop()
            row = self.refs.get(self.cursor_key() or "")
            if row is not None and row.run_id:
                self.action_open_run()
            else:
                self.action_switch()
