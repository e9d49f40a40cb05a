"""`z` in the console: undo the last rollback from History and the last branch delete from Branches, each after a
confirmation that lists what changes (n changes nothing, y puts the state back); a refusal is a toast with its code.
Real project state without Spark (test_branch_workflow's project); snapshots of the dialog with a stub controller
(real hashes, snapshot ids and times are random)."""

from __future__ import annotations

import pytest

from ratui.engine.ops.branches import TableState
from ratui.engine.ops.undo import TableUndo, UndoPlan
from ratui.engine.state.journal import Entry
from ratui.screens.branches import BranchesScreen
from ratui.screens.dialogs import ConfirmScreen
from ratui.screens.history import HistoryScreen

from .conftest import flat, make_app, run, screen_text, settle, wait_for
from .test_branch_workflow import (  # noqa: F401 - the fixture: main with three runs' commits
    NS, ORDERS, SIZE, SMALL, StubWorkflow, engine_of, goto, project, snap,
)


def test_z_undoes_a_rollback_from_history_and_a_branch_delete_from_branches(project):  # noqa: F811
    root, first = project
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            engine = engine_of(app)
            before = dict(engine.table_pointers("main"))
            engine.rollback(engine.plan_rollback("main", first.hash, ORDERS))
            assert engine.table_pointers("main")[ORDERS] == first.pointers[ORDERS]

            await pilot.press("4")
            await settle(pilot)
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 10)
            await settle(pilot)
            await pilot.press("z")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            text = flat(screen_text(app))
            assert "Undo the last rollback?" in text and f"rollback {ORDERS} to {first.hash[:12]}" in text
            assert "silver.clean_orders 5 → 8" in text and "One new commit on main" in text
            await pilot.press("n")
            await settle(pilot)
            assert engine.table_pointers("main")[ORDERS] == first.pointers[ORDERS]
            await pilot.press("z")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Undone: rollback" in n for n in app.notices), 10)
            await settle(pilot)
            assert engine.table_pointers("main") == before  # clean_orders back at 8 rows, the same metadata file
            table = app.screen.query_one("#history-table")
            assert str(table.get_row_at(0)[1]) == "undo"  # the undo is a commit of its own

            # nothing older to undo: a toast with the code, no dialog
            await pilot.press("z")
            await wait_for(pilot, lambda: any("RAT-UNDO-001" in n for n in app.notices), 10)
            assert not isinstance(app.screen, ConfirmScreen)

            # Branches: a deleted branch comes back
            engine.create_branch("dev")
            head = engine.state.catalog.get_ref("dev").head
            engine.delete_branch("dev")
            await pilot.press("escape")
            await settle(pilot)
            assert isinstance(app.screen, BranchesScreen)
            await pilot.press("z")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            text = flat(screen_text(app))
            assert "Undo the last branch delete?" in text and f"Branch dev comes back at commit {head[:12]}" in text
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Undone: delete branch dev" in n for n in app.notices), 10)
            await settle(pilot)
            assert engine.state.catalog.get_ref("dev").head == head
            goto(app, "dev")  # the list has it again
            assert engine.table_pointers("dev") == engine.table_pointers("main")

            # Runs: z too; both undone, nothing is left
            app.notices.clear()
            await pilot.press("2")
            await settle(pilot)
            await pilot.press("z")
            await wait_for(pilot, lambda: any("RAT-UNDO-001" in n for n in app.notices), 10)
            assert not app.crashes

    run(go())


class StubUndo(StubWorkflow):
    """StubWorkflow's refs and history, and a fixed undo of a publish."""

    def plan_undo(self, ref=None):
        entry = Entry(7, "2026-03-01T11:40:00.000Z", "publish", "main", "publish 2 pipeline(s) into main",
                      "a1b2000000000002", "d00d000000000004", {"tables": [f"{NS}.gold.daily_revenue", ORDERS]})
        return UndoPlan(entry, "undo publish on main: publish 2 pipeline(s) into main", [
            TableUndo(f"{NS}.gold.daily_revenue", TableState("x", 1203958812, 90), TableState(None)),
            TableUndo(ORDERS, TableState("y", 9911223344, 12010), TableState("z", 5512093311, 12000)),
        ], 3, "loadable again (the publish had loaded them)")


@pytest.mark.parametrize("size", [(120, 40), SMALL], ids=["large", "80x24"])
def test_undo_dialog_snapshot(snap_compare, seeded, size):
    assert snap(snap_compare, make_app(seeded, controller=StubUndo(seeded)), ("4",), ("z",), size=size)

