"""Branches: every ref (main, your branches, runs' and publishes' branches) with its head, creation time, age and
run; the selected ref's diff against main; create, switch to, merge, delete, and its history.

The working ref (`⎇`) is where the console's runs go: `s` (or enter) on main or a branch of yours switches to it, and
the Pipelines screen says so. `n` creates a branch from the selected ref; `m` merges the selected branch into the ref
it came from after a dry run per table; `l` opens the ref's commit history (rollback from there)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Input, Label, Static

from ratui.console.controller import BranchRow, DiffRow, TableState, ref_kind
from ratui.console.format import fmt_age, fmt_time, short_key
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN
from ratui.messages import (
    BranchCreated, BranchDeleted, BranchMerged, BranchesLoaded, DeleteChecked, DiffLoaded, MergeDryRun, RefSwitched,
)
from ratui.screens.base import Guarded, Loader, is_narrow, changes
from ratui.screens.dialogs import ConfirmScreen, MergeScreen
from ratui.screens.table_screen import TableScreen
from ratui.widgets.chrome import NavBar, StatusLine
from ratui.screens.undo import UndoKeys, undo_binding

CHANGE_STYLE = {"added": "green", "modified": "yellow", "dropped": "red", "table": ""}
WORKING = "⎇"  # marks the working ref

AGE_TICK = 15.0  # seconds
MERGE_ROWS = 8  # tables the merge dialog lists (the diff pane has them all)


def error_lines(error: RatuiError) -> Text:
    """A coded error as the console says it: `CODE message` and its hint."""
    text = Text()
    text.append(f"{error.code} ", style="bold red")
    text.append(error.message, style="red")
    if error.hint:
        text.append(f"\nhint: {error.hint}", style="italic")
    return text


def notify_error(app, error: RatuiError, title: str) -> None:
    app.notify(error.text(), title=title, severity="error", timeout=10, markup=False)


def pair(branch: TableState | None, main: TableState | None, what: str) -> Text:
    """One measure of a table on both sides of a diff: `12,010 / 12,000` (`-` where the table is absent)."""

    def one(state: TableState | None) -> str:
        if state is None:
            return "-"
        value = getattr(state, what)
        if value is None:
            return "?" if state.snapshot_id is not None else "0"
        return str(value)[:10] if what == "snapshot_id" else f"{value:,}"

    return Text(f"{one(branch)} / {one(main)}", justify="right" if what != "snapshot_id" else "left")


def as_changed(row: DiffRow) -> tuple[str, tuple[str, ...]]:
    """The change and schema changes as whoever changed the table made them: a table main added since the fork is
    "added" (by main), not "dropped" (from the branch's side, as the engine puts it)."""
    if row.changed_on != "right":
        return row.change, row.schema_changes
    change = {"added": "dropped", "dropped": "added"}.get(row.change, row.change)
    schema = []
    for item in row.schema_changes:
        if item.startswith("+ "):
            schema.append("- " + item[2:].split(" ", 1)[0])
        elif item.startswith("- "):
            schema.append("+ " + item[2:])
        elif " renamed to " in item:
            old, new = item[2:].split(" renamed to ", 1)
            schema.append(f"~ {new} renamed to {old}")
        elif " -> " in item:
            head, after = item.rsplit(" -> ", 1)
            column, before = head[2:].rsplit(" ", 1)
            schema.append(f"~ {column} {after} -> {before}")
        else:
            schema.append(item)
    return change, tuple(schema)


def changed_by(row: DiffRow, ref: str, against: str) -> Text:
    """Who changed the table since the fork: the branch, the other side, or both (a conflict, unless each side only
    appended: then it merges by append)."""
    if row.by_append:
        return Text("⇉ both appended: merges", style="green")
    if row.conflict or row.changed_on == "both":
        return Text(f"✘ both: {against} changed too", style="red")
    if row.changed_on == "left":
        return Text(ref if len(ref) <= 10 else "branch", style="cyan")
    if row.changed_on == "right":
        return Text(against, style="magenta")
    return Text("-", style="dim")


class NewBranchScreen(Guarded, Loader, ModalScreen[str | None]):
    """`n`: a new branch: its name, and the ref (or past state "ref@HASH") it starts from. The engine's answer (the
    branch, or an error with its code and hint) shows here; the dialog closes once the branch exists."""

    BINDINGS = [Binding("escape", "cancel", "Back", id="new_branch.cancel")]
    DEFAULT_CSS = """
    NewBranchScreen { align: center middle; }
    #new-branch { width: 76; max-width: 100%; height: auto; border: round $accent; padding: 0 1;
                  background: $surface; }
    #new-branch Input { margin: 0 0 1 0; }
    #new-branch-error { height: auto; }
    #new-branch-buttons { height: auto; align-horizontal: right; }
    #new-branch-buttons Button { margin-left: 1; }
    """

    def __init__(self, from_ref: str) -> None:
        super().__init__()
        self.from_ref = from_ref

    def compose(self) -> ComposeResult:
        with Vertical(id="new-branch"):
            yield Label(Text("New branch", style="bold"))
            yield Label(Text("name", style="dim"))
            yield Input(placeholder="e.g. dev, fix-revenue", id="new-branch-name")
            yield Label(Text("from (a ref, or a past state ref@HASH)", style="dim"))
            yield Input(value=self.from_ref, id="new-branch-from")
            yield Static("", id="new-branch-error")
            with Horizontal(id="new-branch-buttons"):
                yield Button("Create (enter)", id="create", variant="primary")
                yield Button("Back (esc)", id="back")

    def on_mount(self) -> None:
        for field in self.query(Input):
            field.cursor_blink = getattr(self.app, "cursor_blink", True)
        self.query_one("#new-branch-name", Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "new-branch-name" and not self.query_one("#new-branch-from", Input).value.strip():
            self.query_one("#new-branch-from", Input).focus()
            return
        self.create()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "create":
            self.create()
        else:
            self.dismiss(None)

    def create(self) -> None:
        name = self.query_one("#new-branch-name", Input).value.strip()
        source = self.query_one("#new-branch-from", Input).value.strip() or MAIN
        error = self.query_one("#new-branch-error", Static)
        if not name:
            error.update(Text("Type the new branch's name.", style="red"))
            self.query_one("#new-branch-name", Input).focus()
            return
        error.update(Text(f"creating {name} from {source}…", style="yellow"))
        self.load(BranchCreated, self.app.controller.create_branch, name, source)

    @on(BranchCreated)
    def _created(self, message: BranchCreated) -> None:
        self.dismiss(message.value.name)

    def load_failed(self, kind, error: BaseException) -> bool:
        if isinstance(error, RatuiError):
            self.query_one("#new-branch-error", Static).update(error_lines(error))
            return True
        return False

    def action_cancel(self) -> None:
        self.dismiss(None)


class MergeDryRunScreen(MergeScreen):
    """Merge a branch into the ref it came from: the dry run per table first (the change, rows on both sides, who
    changed it); a conflict says nothing will change and the merge cannot be confirmed."""

    def __init__(self, ref: str, preview, rows: list[DiffRow]) -> None:
        self.rows = rows
        super().__init__(ref, preview)
        self.title_text = f"Merge {ref} into {preview.into}?"

    def _body(self) -> RenderableType:
        preview = self.preview
        into = preview.into
        parts: list[RenderableType] = [Text(f"Dry run of {self.ref} into {into}:", style="bold")]
        rows = {r.table: r for r in self.rows}
        tables = sorted(set(preview.tables) | set(preview.conflicts))
        by_append = list(getattr(preview, "by_append", []) or [])
        reasons = dict(getattr(preview, "reasons", {}) or {})
        if tables:
            grid = Table(box=None, padding=(0, 1), show_header=True, header_style="bold dim", expand=False)
            grid.add_column("table", no_wrap=True, overflow="ellipsis", max_width=30)
            grid.add_column("change", no_wrap=True)
            grid.add_column("branch rows", justify="right", no_wrap=True)
            grid.add_column(f"{into[:8]} rows", justify="right", no_wrap=True)
            grid.add_column("merges", no_wrap=True)
            for table in tables[:MERGE_ROWS]:
                row = rows.get(table)
                conflict = table in preview.conflicts
                change = row.change if row is not None else "modified"
                how = (Text("conflict ✘", style="red") if conflict else
                       Text("by append", style="cyan") if table in by_append else Text("as is", style="dim"))
                grid.add_row(Text(short_key(table, table.split(".")[0]), style="red" if conflict else ""),
                             Text(change, style="red" if conflict else CHANGE_STYLE.get(change, "")),
                             _rows(row.branch if row else None), _rows(row.main if row else None), how)
            parts.append(grid)
            if len(tables) > MERGE_ROWS:
                parts.append(Text(f"… and {len(tables) - MERGE_ROWS} more (the diff on Branches lists them all)",
                                  style="dim"))
        if preview.conflicts:
            parts.append(Text(f"✘ {len(preview.conflicts)} conflict(s): {into} changed "
                              f"{', '.join(short_key(t, t.split('.')[0]) for t in preview.conflicts[:3])}"
                              f"{' …' if len(preview.conflicts) > 3 else ''} since {self.ref} forked. The merge "
                              "would fail (RAT-CAT-003): nothing will change.", style="red"))
            for table in preview.conflicts[:2]:
                if reasons.get(table):
                    parts.append(Text(f"  {short_key(table, table.split('.')[0])}: {reasons[table]}", style="red"))
        elif preview.tables:
            parts.append(Text(f"{len(preview.tables)} table(s) would be applied to {into} in one commit.",
                              style="green"))
        else:
            parts.append(Text("No table changes: the merge records nothing.", style="dim"))
        if by_append and not preview.conflicts:
            parts.append(Text(f"By append: both sides only appended to {len(by_append)} table(s); {self.ref}'s new "
                              f"files go on top of {into}'s once their quality tests pass on the combined rows.",
                              style="cyan"))
        parts.append(Text("Tables merged as is skip the quality gate: the target gets the branch's tables as they "
                          "are, tested or not.", style="yellow"))
        return Group(*parts)


def _rows(state: TableState | None) -> Text:
    if state is None or state.snapshot_id is None:
        return Text("-", style="dim")
    return Text(f"{state.rows:,}" if state.rows is not None else "?")


class BranchesScreen(UndoKeys, TableScreen):
    MODE = "branches"
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
        Binding("i", "app.toggle_serve", "Serve REST catalog", id="branches.serve", show=False),  # in ? and the palette
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
        if ref == MAIN:
            diff.add_columns("TABLE", "SNAPSHOT (#sequence id · rows)")
            for row in rows:
                diff.add_row(row.table, row.main.describe() if row.main else Text("-", style="dim"), key=row.table)
        else:
            sides = f"{ref if len(ref) <= 10 else 'branch'}/main"
            columns = ["TABLE", "CHANGE", "CHANGED BY", f"ROWS {sides}", "FILES"]
            diff.add_columns(*columns, *([] if narrow else [f"SNAPSHOT {sides}"]), "SCHEMA")
            for row in rows:
                change, changes = as_changed(row)
                schema = "; ".join(changes) if changes else "-"
                cells = [short_key(row.table, self.namespace),
                         Text(change, style=CHANGE_STYLE.get(change, "")), changed_by(row, ref, MAIN),
                         pair(row.branch, row.main, "rows"), pair(row.branch, row.main, "files")]
                if not narrow:
                    cells.append(pair(row.branch, row.main, "snapshot_id"))
                cells.append(Text(schema, style="dim" if schema == "-" else "yellow"))
                diff.add_row(*cells, key=row.table)
        title = self.query_one("#diff-title", Label)
        if ref == MAIN:
            title.update(f"Tables on main ({len(rows)})")
        else:
            conflicts = sum(1 for r in rows if r.conflict)
            appended = sum(1 for r in rows if r.by_append)
            mine = sum(1 for r in rows if r.changed_on == "left")
            theirs = sum(1 for r in rows if r.changed_on == "right")
            parts = [f"{mine} changed on {ref}" if mine else "", f"{theirs} on main" if theirs else "",
                     f"{conflicts} in conflict" if conflicts else "",
                     f"{appended} appended on both (merge by append)" if appended else ""]
            said = ", ".join(p for p in parts if p)
            title.update(f"Diff of {ref} against main: {len(rows)} table(s) differ" + (f" ({said})" if said else "")
                         + ("" if rows else " · l: its history"))
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
    def action_new(self) -> None:
        source = self.cursor_key() or MAIN

        def done(name: str | None) -> None:
            if name:
                self._select_after = name
                self.notify(f"Created branch {name} from {source}. s switches the console to it.",
                            title="Branches", markup=False)
                self.reload()

        self.app.push_screen(NewBranchScreen(source), done)

    def action_switch(self) -> None:
        ref = self.cursor_key()
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
    def action_merge(self) -> None:
        ref = self.branch_picked("Pick a branch to merge into main.", "warning")
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
