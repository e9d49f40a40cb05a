"""`z` on Branches, History and Runs: undo the last run's merge, merge, atomic publish, rollback, branch delete or
landing reset.

The controller plans the undo in a worker (what the journal's newest action is, and what undoing it changes); a
confirmation lists it (each table's rows and snapshot now → after, the landing files whose state changes back) and
`y` applies it in a worker. A refusal (nothing to undo, later commits built on it: RAT-UNDO-001/-002/-003) is a
toast with its code. lazygit's reflog undo is the model: successive `z` walk back through the journal.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.binding import Binding

from ratui.console.format import fmt_time, short_key
from ratui.engine.errors import RatuiError
from ratui.messages import Undone, UndoPlanned
from ratui.screens.base import changes
from ratui.screens.dialogs import ConfirmScreen


KIND_WORD = {"run": "run's merge", "merge": "merge", "publish": "atomic publish", "rollback": "rollback",
             "delete": "branch delete", "landing_reset": "landing reset"}


def undo_binding(screen: str) -> Binding:
    return Binding("z", "undo", "Undo", id=f"{screen}.undo")


def _rows(value: Any) -> str:
    return "?" if value is None else f"{value:,}"


def _snap(value: Any) -> str:
    return "-" if value is None else str(value)[:10]


def _refusal(error: RatuiError) -> str:
    return error.text()


def undo_body(plan: Any, namespace: str | None = None) -> Group:
    """The confirmation's body: what is undone, and what changes."""
    entry = plan.entry
    parts: list = [Text(f"Undo the {KIND_WORD.get(entry.kind, entry.kind)} of {fmt_time(entry.done_at)}:"),
                   Text(f"  {entry.summary}", style="bold")]
    if plan.tables:
        grid = Table(box=None, padding=(0, 1), show_header=True, header_style="bold dim")
        grid.add_column("table", no_wrap=True)
        grid.add_column("rows now → after", no_wrap=True)
        grid.add_column("snapshot now → after", no_wrap=True)
        for t in plan.tables:
            now, after = t.now, t.restored
            grid.add_row(short_key(t.table, namespace),
                         f"{_rows(now.rows) if now.location else 'absent'} → "
                         f"{_rows(after.rows) if after.location else 'absent (dropped)'}",
                         f"{_snap(now.snapshot_id)} → {_snap(after.snapshot_id)}")
        parts.append(grid)
    if plan.ledger:
        parts.append(Text(f"{plan.ledger} landing file row(s) {plan.ledger_what}.", style="yellow"))
    if entry.kind == "delete":
        parts.append(Text(f"Branch {entry.ref} comes back at commit {str(entry.after)[:12]}, as it was deleted.",
                          style="dim"))
    elif entry.kind == "landing_reset":
        parts.append(Text("Only the ledger changes: no table, no commit.", style="dim"))
    else:
        parts.append(Text(f"One new commit on {entry.ref} puts these tables back; the history is kept. No data file "
                          "is deleted.", style="dim"))
    return Group(*parts)


class UndoKeys:
    """A screen mixin: `z` (its binding from `undo_binding`). Handlers by name: a mixin's @on does not register."""

    namespace: str | None = None
    UNDO_ON_REF = False  # History: `z` undoes the newest action on the ref it shows, not on another

    @changes("undoing")
    def action_undo(self) -> None:
        self.load(UndoPlanned, self._plan_undo)  # type: ignore[attr-defined]

    def _plan_undo(self) -> Any:
        try:
            ref = getattr(self, "ref", None) if self.UNDO_ON_REF else None
            return self.app.controller.plan_undo(ref)  # type: ignore[attr-defined]
        except RatuiError as error:
            return error

    def on_undo_planned(self, message: UndoPlanned) -> None:
        message.stop()
        plan = message.value
        app = self.app  # type: ignore[attr-defined]
        if isinstance(plan, RatuiError):
            app.notify(_refusal(plan), title="Nothing undone", severity="warning", timeout=12, markup=False)
            return

        def done(ok: bool | None) -> None:
            if ok:
                self.load(Undone, self._apply_undo, plan)  # type: ignore[attr-defined]

        kind = KIND_WORD.get(plan.entry.kind, plan.entry.kind)
        app.push_screen(ConfirmScreen(f"Undo the last {kind}?", undo_body(plan, self.namespace), "Undo",
                                      back="Keep it"), done)

    def _apply_undo(self, plan: Any) -> Any:
        try:
            return plan, self.app.controller.undo(plan)  # type: ignore[attr-defined]
        except RatuiError as error:
            return error

    def on_undone(self, message: Undone) -> None:
        message.stop()
        app = self.app  # type: ignore[attr-defined]
        if isinstance(message.value, RatuiError):
            app.notify(_refusal(message.value), title="Cannot undo", severity="error", timeout=12, markup=False)
        else:
            plan, done = message.value
            commit = f" (new commit {done['commit'][:12]})" if done.get("commit") else ""
            app.notify(f"Undone: {plan.entry.summary}{commit}", title="Undo", markup=False)
        reload = getattr(self, "reload", None)
        if callable(reload):
            reload()
