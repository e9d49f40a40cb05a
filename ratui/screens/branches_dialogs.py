"""The Branches screen's dialogs: a new branch (its name and the ref it starts from) and the merge's dry run per
table (the change, rows on both sides, how it merges; a conflict cannot be confirmed)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from ratui.console.controller import DiffRow
from ratui.console.format import short_key
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN
from ratui.messages import BranchCreated
from ratui.screens.base import Guarded, Loader
from ratui.screens.branches_diff import CHANGE_STYLE, rows_cell
from ratui.screens.dialogs import MergeScreen

MERGE_ROWS = 8  # tables the merge dialog lists (the diff pane has them all)


def error_lines(error: RatuiError) -> Text:
    """A coded error as the console says it: `CODE message` and its hint."""
    text = Text()
    text.append(f"{error.code} ", style="bold red")
    text.append(error.message, style="red")
    if error.hint:
        text.append(f"\nhint: {error.hint}", style="italic")
    return text



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
                             rows_cell(row.branch if row else None), rows_cell(row.main if row else None), how)
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
        if not preview.conflicts:
            parts += self._how_parts(rows, [t for t in preview.tables if t not in by_append], by_append)
        return Group(*parts)

    def _how_parts(self, rows: dict[str, DiffRow], as_is: list[str], by_append: list[str]) -> list[RenderableType]:
        """The schema changes, then which tables merge by append and which as they are, and what was tested."""
        into, parts = self.preview.into, []

        def names(tables: list[str]) -> str:
            return ", ".join(short_key(t, t.split(".")[0]) for t in tables[:4]) + (" …" if len(tables) > 4 else "")

        schema = [(t, rows[t].schema_changes) for t in sorted(rows) if t in self.preview.tables
                  and rows[t].change == "modified" and rows[t].schema_changes]  # an added table's are all new
        if schema:
            parts.append(Text("Schema changes:", style="bold"))
            for table, changes in schema[:4]:
                parts.append(Text(f"  {short_key(table, table.split('.')[0])}: {', '.join(changes)}", style="yellow"))
        if by_append:
            parts.append(Text(f"By append: {names(by_append)}. {self.ref}'s new files go on top of {into}'s once "
                              "their quality tests pass on the combined rows.", style="cyan"))
        if as_is:
            parts.append(Text(f"As is: {names(as_is)}. {into} gets them as {self.ref} has them: every run merged "
                              f"into {self.ref} only after its quality tests passed, and they do not run again.",
                              style="dim"))
        return parts
